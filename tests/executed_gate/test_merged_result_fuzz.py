"""Property: any mutant of a real merged fleet result gives the gate's decision a verdict or fails it closed, never a
bug (#29).

Each example mutates one side's merged result (values replaced by null, NaN, strings, lists or objects; keys removed;
lists emptied; the file cut short: `tests.fixtures.merged_result_mutants`) and runs what the decision runs on it
(gate_decide's `verdict_for`, the report's JSON) beside the other side's real file. It must either give a verdict or
fail closed: INCONCLUSIVE with only `inputs` checks, each naming the S3 object and where in it; never an exception
or a hang (stopped after 30 s of CPU time). A mutant that touched only summary fields (no verdict reads them) and is
read must give the unmutated pair's verdict.

`SUITE_SETTINGS`' `max_examples` examples (tests/fixtures/json_mutants.py), derandomized and without an example
database, so every CI run tries the same mutants; `benchmarks/fuzz_inputs.py` runs many more (`--mutants`) with a
seed of choice.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given

from tests.fixtures import merged_result_mutants
from tests.fixtures.json_mutants import SUITE_SETTINGS
from tests.fixtures.merged_result_mutants import Mutant, check_mutant, mutants, originals


@pytest.mark.fuzz
@SUITE_SETTINGS
@given(mutants())
def test_a_mutated_merged_result_is_decided_or_fails_closed_never_a_bug(mutant: Mutant):
    outcome = check_mutant("", mutant)
    assert outcome.kind in ("read", "refused"), f"{outcome.kind}: {outcome.detail}\n{mutant}"
    if outcome.kind == "refused":
        # Each reason names the object it read (an S3 URI), and the summary is not a verdict.
        reasons = outcome.detail.removeprefix("✗ ").split(" | ")
        assert all("s3://" in reason for reason in reasons), outcome.detail


def test_the_checker_reports_a_bug_a_changed_verdict_and_a_hang(monkeypatch):
    """The property above can fail: each of its failures, seeded, is reported as such."""
    from optigate.gate import decision

    module = merged_result_mutants.decide_module()
    unchanged = Mutant("baseline", originals()["baseline"], ("unchanged",), summary_only=True)
    assert check_mutant("", unchanged).kind == "read"

    data = json.loads(originals()["candidate"])
    data["runs"][0]["ttft_ms"]["p50"] += 1.0  # a summary figure: no verdict reads it
    summary = Mutant("candidate", json.dumps(data).encode(), ("p50 + 1",), summary_only=True)
    assert check_mutant("", summary).kind == "read"

    cut = Mutant("candidate", originals()["candidate"][:5000], ("cut at byte 5000",), summary_only=False)
    refused = check_mutant("", cut)
    assert refused.kind == "refused" and "s3://fleet-results/benchmarks/candidate/result.json" in refused.detail

    slower = json.loads(originals()["candidate"])
    slower["runs"][0]["samples"]["ttft_ms"] = [value * 100 for value in slower["runs"][0]["samples"]["ttft_ms"]]
    claimed = Mutant("candidate", json.dumps(slower).encode(), ("TTFT samples x100, claimed a summary",), True)
    assert check_mutant("", claimed).kind == "verdict_changed", "a p99 TTFT of 2.7 s is over the 2 s budget"

    def crash(*args, **kwargs):
        raise ZeroDivisionError("division by zero")

    monkeypatch.setattr(module, "decide", crash)
    assert check_mutant("", unchanged).kind == "unexpected"
    monkeypatch.undo()

    def spin(*args, **kwargs):
        while True:
            pass

    monkeypatch.setattr(module, "decide", spin)
    monkeypatch.setattr(merged_result_mutants, "HANG_SECONDS", 0.3)
    assert check_mutant("", unchanged).kind == "slow"
    assert decision.decide is not spin  # the module's own reference was patched, not the package's
