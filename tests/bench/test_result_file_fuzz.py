"""Property: any mutant of a real `optigate bench --json` result is read or refused in one line, never a bug (#29).

Each example mutates one side of a real result pair (values replaced by null, NaN, strings, lists or objects;
keys removed; lists emptied; the file cut short: `tests.fixtures.bench_result_mutants`) and runs `optigate bench
compare` on it with the other side's real file. It must either give a verdict or refuse with exit 2 and one line;
never "unexpected …; this is a bug", an exception, or a hang (stopped after 30 s of CPU time). A mutant that
touched only summary fields (no verdict reads them) and is read must give the unmutated pair's verdicts.

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

from tests.fixtures import bench_result_mutants
from tests.fixtures.bench_result_mutants import Mutant, check_mutant, mutants, originals
from tests.fixtures.json_mutants import SUITE_SETTINGS

_WORKDIR = tempfile.TemporaryDirectory(prefix="optigate-fuzz-results-")


@pytest.mark.fuzz
@SUITE_SETTINGS
@given(mutants())
def test_a_mutated_result_is_read_or_refused_in_one_line_never_a_bug(mutant: Mutant):
    outcome = check_mutant(_WORKDIR.name, mutant)
    assert outcome.kind in ("read", "refused"), f"{outcome.kind}: {outcome.detail}\n{mutant}"
    if outcome.kind == "refused":
        assert "\n" not in outcome.detail and outcome.detail.startswith("✗ "), outcome.detail


def test_the_checker_reports_a_bug_a_changed_verdict_and_a_hang(monkeypatch):
    """The property above can fail: each of its failures, seeded, is reported as such."""
    from optigate.bench import compare

    workdir = Path(_WORKDIR.name)
    unchanged = Mutant("baseline", originals()["baseline"], ("unchanged",), summary_only=True)
    assert check_mutant(workdir, unchanged).kind == "read"

    data = json.loads(originals()["baseline"])
    data["runs"][0]["ttft_ms"]["p50"] += 1.0  # a summary figure: no verdict reads it
    summary = Mutant("baseline", json.dumps(data).encode(), ("p50 + 1",), summary_only=True)
    assert check_mutant(workdir, summary).kind == "read"

    slower = json.loads(originals()["candidate"])
    slower["runs"][0]["samples"]["ttft_ms"] = [value * 3 for value in slower["runs"][0]["samples"]["ttft_ms"]]
    claimed = Mutant("candidate", json.dumps(slower).encode(), ("TTFT samples x3, claimed a summary",), True)
    assert check_mutant(workdir, claimed).kind == "verdict_changed", "a candidate 3x slower is no longer better"

    def crash(*args, **kwargs):
        raise ZeroDivisionError("division by zero")

    monkeypatch.setattr(compare, "compare_levels", crash)
    assert check_mutant(workdir, unchanged).kind == "unexpected"
    monkeypatch.undo()

    def spin(*args, **kwargs):
        while True:
            pass

    monkeypatch.setattr(compare, "compare_levels", spin)
    monkeypatch.setattr(bench_result_mutants, "HANG_SECONDS", 0.3)
    assert check_mutant(workdir, unchanged).kind == "slow"
