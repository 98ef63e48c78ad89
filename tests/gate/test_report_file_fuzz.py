"""Property: any mutant of a real gate report is read or refused in one line by both of its readers, never a bug
(issue 29).

Each example mutates one of the committed reports (tests/fixtures/gate_reports: values replaced by null, NaN,
strings, lists or objects; keys removed; lists emptied; the file cut short: `tests.fixtures.gate_report_mutants`)
and runs `optigate advise <team> --from-report` and `optigate plan <team file> --calibrate` on it. Each must give
its answer or refuse with exit 2 and one line; never "unexpected …; this is a bug", an exception, or a hang
(stopped after 30 s of CPU time). A mutant that touched only fields neither reader reads and is read must give the
unmutated report's verdicts.

`SUITE_SETTINGS`' `max_examples` examples (tests/fixtures/json_mutants.py), derandomized and without an example
database, so every CI run tries the same mutants; `benchmarks/fuzz_inputs.py` runs many more (`--mutants`) with a
seed of choice.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest
from hypothesis import given

from tests.fixtures import gate_report_mutants
from tests.fixtures.gate_report_mutants import Mutant, check_mutant, mutants, originals
from tests.fixtures.json_mutants import SUITE_SETTINGS

_WORKDIR = tempfile.TemporaryDirectory(prefix="optigate-fuzz-reports-")


@pytest.mark.fuzz
@SUITE_SETTINGS
@given(mutants())
def test_a_mutated_report_is_read_or_refused_in_one_line_never_a_bug(mutant: Mutant):
    outcome = check_mutant(_WORKDIR.name, mutant)
    assert outcome.kind in ("read", "refused"), f"{outcome.kind}: {outcome.detail}\n{mutant}"
    if outcome.kind == "refused":
        assert "\n" not in outcome.detail and outcome.detail.startswith("✗ "), outcome.detail


@pytest.mark.slow
def test_the_checker_reports_a_bug_a_changed_verdict_and_a_hang(monkeypatch):
    """The property above can fail: each of its failures, seeded, is reported as such."""
    from optigate.advise import from_report

    workdir = Path(_WORKDIR.name)
    source = "research-rejected"
    unchanged = Mutant(source, originals()[source], ("unchanged",), summary_only=True)
    assert check_mutant(workdir, unchanged).kind == "read"

    data = json.loads(originals()[source])
    data["deltas"][0]["delta"] += 1.0  # a section no reader reads
    summary = Mutant(source, json.dumps(data).encode(), ("delta + 1",), summary_only=True)
    assert check_mutant(workdir, summary).kind == "read"

    data = json.loads(originals()[source])
    data["change"] = {"max_batch_size": 32}  # another step: advise places it elsewhere
    claimed = Mutant(source, json.dumps(data).encode(), ("change, claimed a summary",), summary_only=True)
    assert check_mutant(workdir, claimed).kind == "verdict_changed"

    broken = Mutant(source, originals()[source][:100], ("cut at byte 100",), summary_only=False)
    assert check_mutant(workdir, broken).kind == "refused"

    def crash(*args, **kwargs):
        raise ZeroDivisionError("division by zero")

    monkeypatch.setattr(from_report, "read", crash)
    assert check_mutant(workdir, unchanged).kind == "unexpected"
    monkeypatch.undo()

    def spin(*args, **kwargs):
        while True:
            pass

    monkeypatch.setattr(from_report, "read", spin)
    monkeypatch.setattr(gate_report_mutants, "HANG_SECONDS", 0.3)
    assert check_mutant(workdir, unchanged).kind == "slow"
