"""Executed: a candidate faster at low load that carries less within the SLO is rejected for that reason.

The gate's definition runs in moto's Step Functions executor with the project's handlers in-process and two
emulator processes: the baseline twin serves a steady 60 ms first token at any load; the candidate serves a
30 ms first token and a faster decode, but each request in flight adds 40 ms to the next one's first token
(`ttft_ms_per_active_stream`): at 8 streams about 310 ms, over the 200 ms budget the baseline keeps. The gate
benchmarks both levels, 1 and 8 (the rehearsal's one-level shortcut is not applied)."""

from __future__ import annotations

import pytest

from optigate.emulator.process import emulator_process
from optigate.rehearse.gate_handlers import evaluation_writer, lambda_handlers
from optigate.rehearse.gate_run import GateRun
from optigate.rehearse.harness import REGION, GateHarness
from optigate.rehearse.rehearsal import host_compensated_decide
from optigate.rehearse.scenario import Scenario
from tests.fixtures.gate_thresholds import THRESHOLDS
from tests.fixtures.once import once

# Both tests read one executed gate (two minutes): the slow tier (tests/tiers.py).
pytestmark = pytest.mark.slow

BASELINE = {"ttft_ms": {"mean": 60, "jitter": 2}, "itl_ms": {"mean": 8, "jitter": 0.3}}
CANDIDATE = {
    "ttft_ms": {"mean": 30, "jitter": 1},
    "itl_ms": {"mean": 5, "jitter": 0.2},
    "ttft_ms_per_active_stream": 40.0,
}
SLO = {**THRESHOLDS, "concurrency": [1, 8], "p99_ttft_ms_budget": 200.0, "p99_itl_ms_budget": 60.0}


@pytest.fixture(scope="module")
def result(gate_synth, tmp_path_factory):
    return once(tmp_path_factory, "capacity_gate-result", lambda: _run(gate_synth, tmp_path_factory))


def _run(gate_synth, tmp_path_factory):
    template = gate_synth(False, tmp_path_factory.mktemp("capacity-gate"), thresholds=SLO, levels=(1, 8), shards=1)
    allowance: dict[str, float] = {}
    with (
        emulator_process({"default": BASELINE}) as baseline_url,
        emulator_process({"default": CANDIDATE}) as candidate_url,
    ):
        # The decision with each budget raised by what the busy host added to the baseline (as `optigate rehearse`
        # does): the candidate's slowdown under load is its own, the host's stalls are both sides'.
        handlers = lambda_handlers(baseline_url, candidate_url, decide=host_compensated_decide(BASELINE, allowance))
        scenario = Scenario(on_processing_job=evaluation_writer("pass"))
        with GateHarness(lambda_handlers=handlers, scenario=scenario, region=REGION) as harness:
            run = GateRun(template, harness, {"requests_per_stream": 16, "max_new_tokens": 16})
            outcome = run.execute()
    outcome["host_allowance_ms"] = allowance
    return outcome


def test_faster_at_low_load_but_carrying_less_within_the_slo_is_rejected_with_that_reason(result):
    report = result["report"]
    assert result["execution"]["status"] == "FAILED" and result["execution"]["error"] == "CandidateRejected", report
    assert report["outcome"] == "REJECTED"
    # Both levels measured; at c=1 the candidate is the faster one.
    levels = {level["concurrency"]: level for level in report["levels"]}
    assert sorted(levels) == [1, 8]
    assert levels[1]["candidate"]["p50_ttft_ms"] < levels[1]["baseline"]["p50_ttft_ms"]
    assert levels[1]["candidate"]["p50_tpot_ms"] < levels[1]["baseline"]["p50_tpot_ms"]
    # The first reason is the capacity at the SLO, in those words.
    first = report["reasons"][0]
    assert first.startswith("capacity fails: carries less within the SLO (p99 TTFT ≤ "), report["reasons"]
    assert "holds it up to c=1, the baseline up to c=8, every level measured; it fails the SLO at c=8" in first
    failed = {(c["name"], c["concurrency"]) for c in report["checks"] if c["outcome"] == "fail"}
    assert {("capacity", None), ("p99_ttft", 8), ("goodput", 8)} <= failed
    assert ("p99_ttft", 1) not in failed and ("goodput", 1) not in failed
    capacity = report["capacity"]
    assert capacity["baseline"]["holds_up_to"] == 8 and capacity["candidate"]["holds_up_to"] == 1
    assert 1 <= capacity["candidate"]["estimate"] < 8 and capacity["ratio"] < 1
    assert [p["ModelApprovalStatus"] for p in result["packages"]] == ["Rejected"]


def test_the_report_carries_goodput_capacity_and_the_pareto_plot(result):
    files = result["report_files"]
    assert any(key.endswith("/pareto_throughput_vs_p99_ttft.png") for key in files), files
    goodput = {level["concurrency"]: level["goodput"] for level in result["report"]["levels"]}
    assert goodput[8]["baseline"]["share"] > 0.9 and goodput[8]["candidate"]["share"] < 0.5
