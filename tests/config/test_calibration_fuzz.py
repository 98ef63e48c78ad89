"""Property: any mutant of a real config/calibration.yaml is planned with or refused naming its line, never a bug.

Each example changes a real calibration file (tests/fixtures/calibrations, written by `optigate plan --calibrate`'s
writer; values replaced, keys removed or renamed, the file cut short: `tests.fixtures.calibration_mutants`) and runs
`optigate plan chat --json` with it in place. It must give a plan, or be refused with exit 2 and issues that each
name calibration.yaml and its line; never "unexpected …; this is a bug", an exception or a hang. A mutant that
touched only what no expected figure reads (format_version, a calibration's instance_type, measured and bound TPOT,
source) and is read must give the unmutated file's expected figures.

`SUITE_SETTINGS`' `max_examples` examples (tests/fixtures/json_mutants.py), derandomized and without an example
database; `benchmarks/fuzz_inputs.py` runs many more (`--mutants`).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
import yaml
from hypothesis import given

from tests.fixtures import calibration_mutants
from tests.fixtures.calibration_mutants import Mutant, check_mutant, mutants, originals
from tests.fixtures.json_mutants import SUITE_SETTINGS

_WORKDIR = tempfile.TemporaryDirectory(prefix="optigate-fuzz-calibration-")


@pytest.mark.fuzz
@SUITE_SETTINGS
@given(mutants())
def test_a_mutated_calibration_file_is_planned_with_or_refused_at_its_line_never_a_bug(mutant: Mutant):
    outcome = check_mutant(_WORKDIR.name, mutant)
    assert outcome.kind in ("read", "refused"), f"{outcome.kind}: {outcome.detail}\n{mutant}"


def _changed(change) -> bytes:
    data = yaml.safe_load(originals()["calibration.yaml"])
    change(data)
    return yaml.safe_dump(data, sort_keys=False).encode()


@pytest.mark.slow
def test_the_checker_reports_a_bug_a_changed_plan_an_issue_without_a_line_and_a_hang(monkeypatch):
    """The property above can fail: each of its failures, seeded, is reported as such."""
    workdir = Path(_WORKDIR.name)
    unchanged = Mutant("calibration.yaml", originals()["calibration.yaml"], ("unchanged",), summary_only=True)
    assert check_mutant(workdir, unchanged).kind == "read"

    summary = Mutant(
        "calibration.yaml",
        _changed(lambda data: data["calibrations"][1].update(source="elsewhere.json", measured_tpot_ms=35.0)),
        ("source, measured",),
        summary_only=True,
    )
    assert check_mutant(workdir, summary).kind == "read"

    slower = _changed(lambda data: data["calibrations"][1].update(bandwidth_efficiency=0.45))
    claimed = Mutant("calibration.yaml", slower, ("efficiency halved, claimed a summary",), summary_only=True)
    assert check_mutant(workdir, claimed).kind == "verdict_changed", "half the efficiency is another plan"

    newer = Mutant("calibration.yaml", b"format_version: 9\ncalibrations: []\n", ("version 9",), summary_only=False)
    refused = check_mutant(workdir, newer)
    assert refused.kind == "refused" and "format version 9" in refused.detail

    from optigate.config import reader

    monkeypatch.setattr(reader.ConfigIssue, "text", lambda self, **_: f"somewhere: {self.message}")
    assert check_mutant(workdir, newer).kind == "no_line"
    monkeypatch.undo()

    def crash(*args, **kwargs):
        raise ZeroDivisionError("division by zero")

    monkeypatch.setattr("optigate.plan.planner.efficiency_for", crash)
    assert check_mutant(workdir, unchanged).kind == "unexpected"
    monkeypatch.undo()

    def spin(*args, **kwargs):
        while True:
            pass

    monkeypatch.setattr("optigate.config.loader.load_calibrations", spin)
    monkeypatch.setattr(calibration_mutants, "HANG_SECONDS", 0.3)
    assert check_mutant(workdir, unchanged).kind == "slow"
