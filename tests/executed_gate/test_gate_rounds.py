"""The gate in rounds, executed (moto's Step Functions, the emulators): a clear change stops at the first look, a
change on its threshold runs to the budget and ends INCONCLUSIVE with what the rounds cost and the interval they
reached, and a failure inside the loop goes to the cleanup like any other."""

from __future__ import annotations

import json

import pytest

from optigate.emulator.process import emulator_process
from tests.fixtures.gate_thresholds import THRESHOLDS
from tests.fixtures.once import folder_of_run, once

pytestmark = pytest.mark.slow

#: Looks after rounds 3 and 4: two looks, each at 97.5 %. Three rounds of 20 requests a stream are the least whose
#: pooled one-second buckets give a throughput interval (tests/executed_gate/conftest.py's fixed size).
ROUNDS = {"min_rounds": 3, "max_rounds": 4}
#: A 0 % minimum gain: a candidate like its baseline sits on it (no budget decides), a faster one clears it.
AT_LEAST_AS_FAST = {**THRESHOLDS, "min_throughput_gain_pct": 0.0}


@pytest.fixture(scope="module")
def template(tmp_path_factory, gate_synth):
    return once(
        tmp_path_factory,
        "gate-rounds",
        lambda: gate_synth(
            False, folder_of_run(tmp_path_factory, "gate-rounds"), thresholds=AT_LEAST_AS_FAST, **ROUNDS
        ),
    )


@pytest.fixture(scope="module")
def twins():
    """Two emulators of the same server: a candidate that changes nothing."""
    behaviour = {"default": {"ttft_ms": 60, "itl_ms": 8}}
    with emulator_process(behaviour) as baseline_url, emulator_process(behaviour) as candidate_url:
        yield baseline_url, candidate_url


def _run(template, emulators, gate_handlers, *, crash_decide: bool = False, short: bool = False) -> dict:
    from optigate.rehearse.gate_handlers import evaluation_writer
    from optigate.rehearse.gate_run import GateRun
    from optigate.rehearse.harness import GateHarness
    from optigate.rehearse.scenario import Scenario

    scenario = Scenario(on_processing_job=evaluation_writer("pass"))
    handlers = gate_handlers(emulators, crash_decide)
    with GateHarness(lambda_handlers=handlers, scenario=scenario, region="us-east-1") as harness:
        return GateRun(template, harness, {"requests_per_stream": 4} if short else {}).execute()


def _rounds_benchmarked(result: dict) -> list[str]:
    """Each benchmark run's side and round, in order (`baseline-b0`, `candidate-b0`, ...)."""
    runs = dict.fromkeys(b["run_id"] for b in result["benchmarked"])
    return [f"{run.rsplit('-', 3)[1]}-{run.rsplit('-', 3)[3]}" for run in runs]


def test_a_clear_change_stops_at_the_first_look(template, emulators, gate_handlers, nothing_left):
    result = _run(template, emulators, gate_handlers)
    report = result["report"]
    assert result["execution"]["status"] == "SUCCEEDED", json.dumps(report, default=str)[:3000]
    assert _rounds_benchmarked(result) == [f"{side}-b{r}" for r in range(3) for side in ("baseline", "candidate")]
    assert result["states"].count("JudgeRound") == 1  # no look before the third round, none after the first
    rounds = report["rounds"]
    assert (rounds["done"], rounds["reason"], rounds["looks"]) == (3, "decided", 2)
    assert rounds["confidence"] == pytest.approx(0.975)
    assert "after 3 rounds (97.5 % intervals): all" in rounds["why"]
    # What the decision cost: both endpoints, one instance each, at the plan's $0.98 an hour.
    assert rounds["benchmark_minutes"] > 0
    assert rounds["endpoint_minutes"] == pytest.approx(2 * rounds["benchmark_minutes"])
    assert rounds["usd"] == pytest.approx(rounds["endpoint_minutes"] / 60 * 0.98)
    gain = next(c for c in report["checks"] if c["name"] == "throughput_gain")
    assert gain["outcome"] == "pass" and "97.5 % CI" in gain["detail"], gain
    nothing_left(result)


def test_a_change_on_its_threshold_runs_to_the_budget_and_ends_inconclusive(
    template, twins, gate_handlers, nothing_left
):
    result = _run(template, twins, gate_handlers)
    report = result["report"]
    assert result["execution"]["status"] == "FAILED", json.dumps(report, default=str)[:3000]
    assert "VerdictInconclusive" in result["states"]
    assert report["outcome"] == "INCONCLUSIVE"
    assert _rounds_benchmarked(result)[-2:] == ["baseline-b3", "candidate-b3"]  # every round of the budget
    assert result["states"].count("JudgeRound") == 2
    rounds = report["rounds"]
    assert (rounds["done"], rounds["reason"]) == (4, "budget")
    assert "the budget of 4 rounds is spent; still undecided: throughput_gain" in rounds["why"]
    assert rounds["usd"] > 0
    gain = next(c for c in report["checks"] if c["name"] == "throughput_gain")
    assert gain["outcome"] == "inconclusive" and gain["ci_low"] < 0 < gain["ci_high"], gain
    # The path: each look's intervals, as each wrote them, and its plot beside the report.
    assert [look["rounds"] for look in rounds["path"]] == [3, 4]
    assert [look["outcome"] for look in rounds["path"]] == ["INCONCLUSIVE", "INCONCLUSIVE"]
    assert any(key.endswith("/rounds_path.png") for key in result["report_files"])
    assert "<h2>Rounds</h2><p><b>4 of at most 4 rounds</b>" in result["report_html"].decode()
    nothing_left(result)


def test_a_look_that_fails_ends_through_the_cleanup(template, emulators, gate_handlers, nothing_left):
    result = _run(template, emulators, gate_handlers, crash_decide=True, short=True)  # it fails whatever it measured
    assert result["execution"]["status"] == "FAILED"
    entered = result["states"]
    assert "JudgeRound" in entered and "DecideVerdict" not in entered
    assert entered.index("DeleteEndpoint") > entered.index("JudgeRound")
    assert "GateFailed" in entered
    nothing_left(result)
