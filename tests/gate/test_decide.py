"""The gate's decision on synthetic benchmark results (deterministic RNG): intervals that must
clear their thresholds, fail-closed cases, costs by hand, readable reasons, and the reports."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
from pydantic import ValidationError

from optigate.config.models import BenchmarkGate
from optigate.gate import GateInputs, decide, render_html, render_json
from optigate.gate.decision import cost_per_million, speculative_method
from tests.fixtures.synthetic_runs import PASS, THRESHOLDS, bench, itl_for_gain, speculation, synthetic_run


@pytest.fixture(scope="module")
def baseline() -> dict:
    return bench(synthetic_run(4, seed=1))


@pytest.fixture(scope="module")
def faster() -> dict:
    return bench(synthetic_run(4, itl_ms=itl_for_gain(0.30), ttft_ms=120.0, seed=2))


def inputs(baseline: dict, candidate: dict, **overrides) -> GateInputs:
    values = {
        "team": "chat",
        "environment": "dev",
        "change": {"quantization": "fp8", "container_version": "0.36.0"},
        "thresholds": THRESHOLDS,
        "baseline_benchmark": baseline,
        "candidate_benchmark": candidate,
        "evaluation": PASS,
        "price_per_hour_usd": 1.212,
        "instance_count": 2,
    }
    values.update(overrides)
    return GateInputs(**values)


def check(verdict, name: str, concurrency: int | None = 4):
    [found] = [c for c in verdict.checks if c.name == name and c.concurrency == concurrency]
    return found


# --------------------------------------------------------------------------- approval


def test_a_faster_candidate_with_quality_evidence_is_approved(baseline, faster):
    verdict = decide(inputs(baseline, faster))
    assert verdict.approved, verdict.reasons
    assert verdict.reasons == ()
    # With a latency budget, goodput per level and capacity (listed first) join the checks.
    assert [(c.name, c.concurrency) for c in verdict.checks] == [
        ("capacity", None),
        ("p99_ttft", 4),
        ("p99_itl", 4),
        ("throughput_gain", 4),
        ("error_rate", 4),
        ("goodput", 4),
        ("quality", None),
    ]
    gain = check(verdict, "throughput_gain")
    assert 30 < gain.measured < 50 and gain.low >= 10 and gain.low <= gain.measured <= gain.high
    assert verdict.summary == "APPROVED chat/dev: all 7 checks pass"


def test_budgets_unset_means_no_latency_checks(baseline, faster):
    thresholds = {k: v for k, v in THRESHOLDS.items() if not k.endswith("budget")}
    verdict = decide(inputs(baseline, faster, thresholds=thresholds))
    assert {c.name for c in verdict.checks} == {"throughput_gain", "error_rate", "quality"}
    assert verdict.approved


# -------------------------------------------------------------------------- latency: the interval must clear the budget


def test_p99_ttft_just_under_the_budget_with_an_interval_across_it_is_inconclusive(baseline):
    # A heavy tail on 120 requests: the p99 point estimate is very uncertain.
    candidate = bench(synthetic_run(4, itl_ms=itl_for_gain(0.30), tail_prob=0.03, tail_ms=400, seed=3))
    p99 = candidate["runs"][0]["ttft_ms"]["p99"]
    budget = p99 * 1.01
    verdict = decide(inputs(baseline, candidate, thresholds={**THRESHOLDS, "p99_ttft_ms_budget": budget}))
    ttft = check(verdict, "p99_ttft")
    assert ttft.measured == pytest.approx(p99) and ttft.low < ttft.measured < budget < ttft.high
    assert ttft.outcome == "inconclusive" and not ttft.passed
    assert verdict.outcome == "INCONCLUSIVE" and not verdict.approved and verdict.failed == ()
    # Capacity cannot tell either (the candidate's SLO is uncertain where the baseline's holds), nor can goodput
    # (one slow request in 120 is within two points of none).
    capacity, reason, goodput = verdict.reasons
    assert capacity.startswith("capacity is inconclusive: may carry less within the SLO")
    assert reason.startswith("p99_ttft at concurrency 4 is inconclusive: candidate p99 TTFT ")
    assert f"{p99:,.1f} ms" in reason and f"{ttft.high:,.1f} ms" in reason and f"budget {budget:,.1f} ms" in reason
    assert goodput.startswith("goodput at concurrency 4 is inconclusive: share of requests within the SLO")
    assert verdict.summary.startswith(
        "INCONCLUSIVE chat/dev: 3 of 7 checks cannot tell (capacity, p99_ttft@c4, goodput@c4); none fails."
    )
    # The same data clears a budget above the whole interval, and fails one below it.
    relaxed = decide(inputs(baseline, candidate, thresholds={**THRESHOLDS, "p99_ttft_ms_budget": ttft.high + 1}))
    assert check(relaxed, "p99_ttft").outcome == "pass" and relaxed.outcome == "APPROVED"
    strict = decide(inputs(baseline, candidate, thresholds={**THRESHOLDS, "p99_ttft_ms_budget": ttft.low - 1}))
    assert check(strict, "p99_ttft").outcome == "fail" and strict.outcome == "REJECTED"
    assert strict.reasons[0].startswith("p99_ttft at concurrency 4 fails: candidate p99 TTFT is ")


def test_p99_itl_uses_a_cluster_bootstrap_over_requests(baseline, faster):
    run = faster["runs"][0]
    itl = check(decide(inputs(baseline, faster)), "p99_itl")
    assert itl.measured == pytest.approx(run["itl_ms"]["p99"])
    assert itl.low <= itl.measured <= itl.high <= THRESHOLDS["p99_itl_ms_budget"]
    straddled = decide(inputs(baseline, faster, thresholds={**THRESHOLDS, "p99_itl_ms_budget": itl.low}))
    assert check(straddled, "p99_itl").outcome == "inconclusive"
    tight = decide(inputs(baseline, faster, thresholds={**THRESHOLDS, "p99_itl_ms_budget": itl.low * 0.99}))
    assert check(tight, "p99_itl").outcome == "fail"
    assert "p99_itl at concurrency 4 fails: candidate p99 ITL is" in tight.reasons[0]


# --------------------------------------------------------------------------- throughput


@pytest.mark.parametrize("gain, approved", [(0.30, True), (0.0, False)])
def test_throughput_gain_against_a_ten_percent_minimum(baseline, gain, approved):
    candidate = bench(synthetic_run(4, itl_ms=itl_for_gain(gain), seed=4))
    verdict = decide(inputs(baseline, candidate))
    result = check(verdict, "throughput_gain")
    assert result.measured == pytest.approx(100 * gain, abs=3)
    assert result.passed is approved and verdict.approved is approved
    assert result.outcome == ("pass" if approved else "fail")  # no gain: the whole interval is under +10 %
    assert verdict.outcome == ("APPROVED" if approved else "REJECTED")
    base_tput = baseline["runs"][0]["output_tokens_per_s"]
    cand_tput = candidate["runs"][0]["output_tokens_per_s"]
    assert result.measured == pytest.approx(100 * (cand_tput / base_tput - 1))
    if not approved:
        [reason] = verdict.reasons
        assert reason.startswith("throughput_gain at concurrency 4 fails: output throughput gain is +")
        assert (
            f"{result.measured:+.1f} %" in reason and "+10.0 % minimum" in reason and f"{result.low:+.1f} %" in reason
        )


def test_a_gain_whose_interval_straddles_the_minimum_is_inconclusive(baseline):
    candidate = bench(synthetic_run(4, itl_ms=itl_for_gain(0.12), seed=5))
    verdict = decide(inputs(baseline, candidate))
    result = check(verdict, "throughput_gain")
    assert result.high > result.measured > 10 > result.low and not result.passed
    assert result.outcome == "inconclusive" and "straddles the minimum" in result.detail
    assert verdict.outcome == "INCONCLUSIVE" and not verdict.approved


def test_a_window_too_short_for_a_throughput_interval_fails_closed():
    short_base, short_cand = (
        bench(synthetic_run(4, requests=8, seed=1)),
        bench(synthetic_run(4, requests=8, itl_ms=5, seed=2)),
    )
    verdict = decide(inputs(short_base, short_cand))
    result = check(verdict, "throughput_gain")
    assert result.measured is None and not result.passed
    assert any(
        r.startswith("throughput_gain at concurrency 4 fails closed: measurement window too short")
        for r in verdict.reasons
    )


# --------------------------------------------------------------------------- errors


def test_errors_above_the_maximum_rate_fail(baseline):
    candidate = bench(synthetic_run(4, itl_ms=itl_for_gain(0.30), error_every=20, seed=6))
    verdict = decide(inputs(baseline, candidate))
    errors = check(verdict, "error_rate")
    assert errors.measured == pytest.approx(6 / 120) and errors.threshold == 0.01 and not errors.passed
    assert "6 of 120 candidate requests failed" in errors.detail and "ModelError 6" in errors.detail
    reason, goodput = verdict.reasons  # failed requests never meet the SLO: 95 % vs 100 % cannot tell at 2 points
    assert goodput.startswith("goodput at concurrency 4 is inconclusive: share of requests within the SLO")
    assert "candidate 95.0% of 120, baseline 100.0% of 120: -5.0 points" in goodput
    assert (
        reason == "error_rate at concurrency 4 fails: 6 of 120 candidate requests failed (ModelError 6), "
        "an error rate of 5.00%, above the 1.00% maximum."
    )
    assert check(
        decide(inputs(baseline, candidate, thresholds={**THRESHOLDS, "max_error_rate": 0.05})), "error_rate"
    ).passed


# --------------------------------------------------------------------------- speculative decoding


@pytest.mark.parametrize("sizes, passed", [((1,) * 9 + (2,), False), ((2,), True)])
def test_tokens_per_chunk_gain_only_with_speculative_decoding(baseline, sizes, passed):
    candidate = bench(synthetic_run(4, itl_ms=itl_for_gain(0.30), tokens_per_chunk=sizes, seed=7))
    change = {"speculative_decoding": "ngram"}
    verdict = decide(inputs(baseline, candidate, change=change, speculation=speculation("client", draft_tokens=1)))
    result = check(verdict, "tokens_per_chunk_gain")
    mean = np.mean(candidate["runs"][0]["samples"]["tokens_per_chunk"])
    assert result.measured == pytest.approx(100 * (mean - 1))
    assert result.passed is passed and verdict.approved is passed
    assert "ngram" in result.detail
    if not passed:
        assert 5 < result.measured < 15
        # The client's acceptance (one draft, ~10 % accepted) fails beside it.
        assert check(verdict, "speculative_acceptance").outcome == "fail"
        [reason] = [r for r in verdict.reasons if r.startswith("tokens_per_chunk_gain")]
        assert reason.startswith("tokens_per_chunk_gain at concurrency 4 fails: mean tokens-per-chunk gain is +")
        assert "+20.0 % minimum" in reason and "slows decoding" in reason
    else:
        assert result.measured == pytest.approx(100) and result.low >= 20
    # Without speculative decoding in the change there is no such check.
    plain = decide(inputs(baseline, candidate, change={"quantization": "fp8"}))
    assert all(c.name != "tokens_per_chunk_gain" for c in plain.checks)


@pytest.mark.parametrize(
    "acceptance, outcome",
    [(0.55, "APPROVED"), (0.31, "REJECTED"), (None, "INCONCLUSIVE")],
)
def test_the_servers_acceptance_decides_a_speculative_candidate_that_is_faster(baseline, acceptance, outcome):
    """Faster, more tokens per chunk, quality passing: the candidate's own server's acceptance still decides
    (below the 40 % break-even it loses; unpublished, it cannot pass)."""
    candidate = bench(synthetic_run(4, itl_ms=itl_for_gain(0.30), tokens_per_chunk=(2,), seed=7))
    published = {"spec_acceptance": acceptance} if acceptance is not None else {"missing": {"spec_acceptance": "x"}}
    figures = {"baseline": {}, "candidate": published}
    change, server = {"speculative_decoding": "eagle3"}, speculation("server")
    verdict = decide(inputs(baseline, candidate, change=change, server_metrics=figures, speculation=server))
    assert verdict.outcome == outcome
    result = check(verdict, "speculative_acceptance", None)
    assert result.measured == acceptance
    assert [c.name for c in verdict.checks if not c.passed] == ([] if outcome == "APPROVED" else [result.name])
    # A decision whose plan named no evidence of acceptance cannot approve speculation (fail closed).
    unplanned = decide(inputs(baseline, candidate, change=change))
    assert unplanned.outcome == "INCONCLUSIVE"
    assert "names no evidence" in check(unplanned, "speculative_acceptance", None).detail


@pytest.mark.parametrize(
    "sizes, break_even, outcome",
    [((3,), 0.4, "pass"), ((1,) * 9 + (2,), 0.4, "fail"), ((2,), 0.3, "pass"), ((2,), 0.5, "fail")],
)
def test_on_lmi_the_clients_tokens_per_step_decide_acceptance_against_the_levels_break_even(
    baseline, sizes, break_even, outcome
):
    """LMI publishes no server series: a streamed chunk is one engine step, so (tokens per step on the candidate / on
    the baseline - 1) / k is the share of k drafts accepted. Three drafts: 3 tokens a step is 67 %, 2 is 33 %."""
    candidate = bench(synthetic_run(4, itl_ms=itl_for_gain(0.30), tokens_per_chunk=sizes, seed=7))
    plan = speculation("client", draft_tokens=3 if sizes != (1,) * 9 + (2,) else 1, break_even=break_even)
    verdict = decide(inputs(baseline, candidate, change={"speculative_decoding": "eagle"}, speculation=plan))
    result = check(verdict, "speculative_acceptance")
    assert result.outcome == outcome and result.threshold == break_even
    assert result.low <= result.measured <= result.high and result.baseline == pytest.approx(1.0)
    expected = {(3,): 2 / 3, (2,): 1 / 3}.get(sizes, 0.1)  # one step in ten carries a second token
    assert result.measured == pytest.approx(expected, abs=0.035)
    if outcome == "fail":
        [reason] = [r for r in verdict.reasons if r.startswith("speculative_acceptance")]
        assert "at concurrency 4 fails" in reason and "tokens per decode step" in reason
        assert f"break-even {break_even:.0%}" in reason


@pytest.mark.parametrize(
    "plan, words",
    [
        (speculation(None, why_none="lmi 0.34.0 in rolling-batch mode publishes no acceptance"), "rolling-batch"),
        (speculation("client", assumed="async messages: read through 0.36.0"), "assumed surfaces alone"),
    ],
)
def test_acceptance_is_never_decided_without_evidence_or_on_assumed_surfaces_alone(baseline, plan, words):
    candidate = bench(synthetic_run(4, itl_ms=itl_for_gain(0.30), tokens_per_chunk=(3,), seed=7))
    verdict = decide(inputs(baseline, candidate, change={"speculative_decoding": "eagle"}, speculation=plan))
    assert verdict.outcome == "INCONCLUSIVE"
    [result] = [c for c in verdict.checks if c.name == "speculative_acceptance"]
    assert result.outcome == "inconclusive" and words in result.detail


def test_speculative_method_reads_the_change():
    assert speculative_method({}) is None
    assert speculative_method({"speculative_decoding": False}) is None
    assert speculative_method({"speculative_decoding": "none"}) is None
    assert speculative_method({"speculative_decoding": True}) == "enabled"
    assert speculative_method({"speculative_decoding": "eagle3"}) == "eagle3"
    assert speculative_method({"speculative_decoding": {"method": "suffix", "num_speculative_tokens": 4}}) == "suffix"


# --------------------------------------------------------------------------- quality


@pytest.mark.parametrize(
    "evaluation, expected",
    [
        (
            {"status": "fail", "reasons": ["exact_match on category=math: drops by 6.0% (tolerance 1.0%)"]},
            "quality fails: quality evaluation failed: exact_match on category=math: "
            "drops by 6.0% (tolerance 1.0%) (required: status pass).",
        ),
        (
            {
                "status": "unresolved",
                "reasons": [
                    "f1 on the whole dataset: cannot resolve 1.0% with 40 records; at least 100 records are needed"
                ],
            },
            (
                "quality is inconclusive: quality evaluation unresolved: "
                "f1 on the whole dataset: cannot resolve 1.0% with 40 records; "
                "at least 100 records are needed; status pass."
            ),
        ),
        (None, "quality fails: no quality evidence: the evaluation did not run (required: status pass)."),
    ],
)
def test_quality_passes_only_on_a_passing_evaluation(baseline, faster, evaluation, expected):
    verdict = decide(inputs(baseline, faster, evaluation=evaluation))
    quality = check(verdict, "quality", None)
    assert not quality.passed and not verdict.approved
    assert list(verdict.reasons) == [expected]
    assert quality.measured == (evaluation or {}).get("status")
    # Unresolved cannot tell: never a pass, never promoted by itself; a failed or missing evaluation rejects.
    unresolved = evaluation is not None and evaluation["status"] == "unresolved"
    assert verdict.outcome == ("INCONCLUSIVE" if unresolved else "REJECTED")


# --------------------------------------------------------------------------- fail closed


def test_zero_successful_requests_fails_every_latency_check_at_that_level(baseline):
    candidate = bench(synthetic_run(4, all_fail=True, requests=40, seed=8))
    verdict = decide(inputs(baseline, candidate, change={"speculative_decoding": True}))
    for name in ("p99_ttft", "p99_itl", "throughput_gain", "tokens_per_chunk_gain"):
        result = check(verdict, name)
        assert result.measured is None and not result.passed
        assert "the candidate had no successful requests (40 sent; ModelError 40)" in result.detail
    assert check(verdict, "error_rate").measured == 1.0
    assert (
        "p99_ttft at concurrency 4 fails closed: the candidate had no successful requests (40 sent; ModelError 40); "
        "budget 600.0 ms on the upper end of the 95 % interval." in verdict.reasons
    )
    assert not verdict.approved
    assert verdict.cost_per_million_output_tokens[0]["candidate"] is None


def test_a_baseline_without_successful_requests_also_fails_closed(faster):
    broken = bench(synthetic_run(4, all_fail=True, requests=40, seed=9))
    verdict = decide(inputs(broken, faster))
    assert not check(verdict, "throughput_gain").passed and check(verdict, "throughput_gain").measured is None
    assert "the baseline had no successful requests" in check(verdict, "p99_ttft").detail
    assert not verdict.approved


def test_a_gate_level_neither_benchmark_measured_fails(baseline, faster):
    verdict = decide(inputs(baseline, faster, thresholds={**THRESHOLDS, "concurrency": [4, 16]}))
    coverage = check(verdict, "coverage", 16)
    assert not coverage.passed
    assert verdict.reasons == (
        "coverage at concurrency 16 fails: concurrency 16 is in the gate's "
        "levels but the baseline and candidate benchmark did not measure it.",
    )
    nothing = decide(inputs(bench(), bench()))
    assert not nothing.approved
    assert [(c.name, c.concurrency) for c in nothing.checks] == [("coverage", 4), ("coverage", None), ("quality", None)]
    assert "no concurrency level was measured by both benchmarks" in nothing.reasons[1]
    with pytest.raises(ValidationError, match="concurrency"):  # no level at all: refused, as the config refuses it
        decide(inputs(bench(), bench(), thresholds={**THRESHOLDS, "concurrency": []}))


def test_every_level_both_measured_is_judged(baseline, faster):
    base2 = bench(baseline["runs"][0], synthetic_run(1, seed=11))
    cand2 = bench(faster["runs"][0], synthetic_run(1, itl_ms=itl_for_gain(0.30), seed=12), synthetic_run(2, seed=13))
    verdict = decide(inputs(base2, cand2, thresholds={**THRESHOLDS, "concurrency": [1]}))
    assert sorted({c.concurrency for c in verdict.checks if c.concurrency}) == [1, 4]  # 2: candidate only
    assert [lvl["concurrency"] for lvl in verdict.levels] == [1, 4]


# --------------------------------------------------------------------------- cost and prediction


def test_cost_per_million_output_tokens_by_hand(baseline, faster):
    verdict = decide(inputs(baseline, faster, price_per_hour_usd=1.212, instance_count=2))
    [cost] = verdict.cost_per_million_output_tokens
    base_tput = baseline["runs"][0]["output_tokens_per_s"]
    cand_tput = faster["runs"][0]["output_tokens_per_s"]
    assert cost["baseline"] == pytest.approx(1.212 * 2 / 3600 / base_tput * 1_000_000)
    assert cost["candidate"] == pytest.approx(1.212 * 2 / 3600 / cand_tput * 1_000_000)
    assert cost["candidate"] < cost["baseline"]
    assert cost_per_million(3.6, 1, 1000.0) == pytest.approx(1.0)  # $0.001/s over 1,000 tokens/s: $1 per million
    unpriced = decide(inputs(baseline, faster, price_per_hour_usd=None))
    assert unpriced.cost_per_million_output_tokens[0]["baseline"] is None
    assert unpriced.cost_per_million_output_tokens[0]["candidate"] is None


def test_prediction_vs_measurement(baseline, faster):
    cand1 = synthetic_run(1, itl_ms=itl_for_gain(0.30), seed=14)
    verdict = decide(
        inputs(
            bench(baseline["runs"][0], synthetic_run(1, seed=15)),
            bench(faster["runs"][0], cand1),
            prediction={
                "decode_tpot_ms_batch1": 6.0,
                "cost_per_million_output_tokens": 0.5,
                "prefill_ms": 40.0,
                "kv_capacity_tokens": 120_000,
            },
        )
    )
    comparison = verdict.prediction_vs_measurement
    tpot = comparison["decode_tpot_ms_batch1"]
    assert tpot["measured"] == pytest.approx(cand1["tpot_ms"]["p50"]) and tpot["ratio"] == pytest.approx(
        tpot["measured"] / 6.0
    )
    assert comparison["prefill_ms"]["measured"] == pytest.approx(cand1["ttft_ms"]["p50"])
    cost = comparison["cost_per_million_output_tokens"]
    cheapest = min(c["candidate"] for c in verdict.cost_per_million_output_tokens)
    assert cost["measured"] == pytest.approx(cheapest) and "concurrency 4" in cost["measured_as"]
    assert comparison["kv_capacity_tokens"]["predicted"] == 120_000
    assert decide(inputs(baseline, faster)).prediction_vs_measurement is None


# --------------------------------------------------------------------------- inputs and output


def test_thresholds_are_the_config_model_and_refuse_typos(baseline, faster):
    assert inputs(baseline, faster, thresholds={}).gate_thresholds() == BenchmarkGate()
    assert inputs(baseline, faster).gate_thresholds() == BenchmarkGate(**THRESHOLDS)
    with pytest.raises(ValidationError, match="p99_ttft_budget"):  # a misspelt budget must not switch a check off
        decide(inputs(baseline, faster, thresholds={"p99_ttft_budget": 300}))
    with pytest.raises(ValidationError, match=r"p99_ttft_ms_budget\n  Input should be greater than 0"):
        decide(inputs(baseline, faster, thresholds={"p99_ttft_ms_budget": 0}))
    decided = decide(inputs(baseline, faster)).thresholds
    assert decided == {
        # The benchmark's own settings and the managed cross-check's are no thresholds.
        **BenchmarkGate(**THRESHOLDS).model_dump(
            exclude={
                "prompt_tokens",
                "max_new_tokens",
                "blocks",
                "cross_check",
                "cross_check_tolerance",
                "cross_check_tokenizer",
                "requests_per_stream",
                "max_rounds",
                "min_rounds",
                "max_minutes",
            }
        ),
        "speculative_decoding": None,
    }


def test_inputs_from_dict(baseline, faster):
    data = {
        "team": "chat",
        "environment": "dev",
        "change": None,
        "thresholds": THRESHOLDS,
        "baseline_benchmark": baseline,
        "candidate_benchmark": faster,
        "evaluation": PASS,
        "price_per_hour_usd": 1.0,
        "instance_count": None,
        "prediction": None,
    }
    parsed = GateInputs.from_dict(data)
    assert parsed.instance_count == 1 and parsed.change == {}
    with pytest.raises(ValueError, match="missing candidate_benchmark"):
        GateInputs.from_dict({**data, "candidate_benchmark": None})
    with pytest.raises(ValueError, match="unknown key"):
        GateInputs.from_dict({**data, "bucket": "x"})
    with pytest.raises(dataclasses.FrozenInstanceError):
        parsed.team = "other"


def test_results_without_samples_or_with_unmerged_shards_are_refused(baseline, faster):
    summary_only = bench({k: v for k, v in faster["runs"][0].items() if k != "samples"})
    with pytest.raises(ValueError, match="no raw samples"):
        decide(inputs(baseline, summary_only))
    with pytest.raises(ValueError, match="merge shards"):
        decide(inputs(baseline, bench(faster["runs"][0], faster["runs"][0])))


def test_verdict_serialises_with_a_stable_key_order(baseline):
    candidate = bench(synthetic_run(4, itl_ms=itl_for_gain(0.0), error_every=20, seed=16))
    verdict = decide(inputs(baseline, candidate, evaluation=None))
    text = render_json(verdict)
    data = json.loads(text)
    assert list(data) == [
        "format_version",
        "team",
        "environment",
        "approved",
        "outcome",
        "summary",
        "reasons",
        "checks",
        "cost_per_million_output_tokens",
        "cost_basis",
        "prediction_vs_measurement",
        "levels",
        "change",
        "thresholds",
        "deltas",
        "shadow",
        "cross_check",
        "capacity",
        "server_metrics",
        "traffic",
        "adapter_check",
        "rounds",
    ]
    assert list(data["checks"][0]) == [
        "name",
        "concurrency",
        "passed",
        "outcome",
        "measured",
        "threshold",
        "ci_low",
        "ci_high",
        "detail",
    ]
    assert data["approved"] is False and len(data["reasons"]) == 4  # the fourth: goodput cannot tell
    assert data["summary"] == "REJECTED chat/dev: 3 of 7 checks fail (throughput_gain@c4, error_rate@c4, quality)"
    assert text == render_json(decide(inputs(baseline, candidate, evaluation=None)))  # deterministic


def test_html_report_is_self_contained(baseline):
    candidate = bench(synthetic_run(4, itl_ms=itl_for_gain(0.0), seed=17))
    verdict = decide(inputs(baseline, candidate, team="chat<script>", prediction={"decode_tpot_ms_batch1": 6.0}))
    page = render_html(verdict, [("ttft_cdf.png", b"\x89PNG ttft"), ("itl_cdf.png", b"\x89PNG itl")])
    assert page.startswith("<!doctype html>") and "<script>" not in page and "chat&lt;script&gt;" in page
    assert page.count('<img src="data:image/png;base64,') == 2 and 'src="ttft_cdf.png' not in page
    for text in (
        "throughput_gain",
        "p99_ttft",
        "FAIL",
        "Why it was rejected",
        "Cost per million output tokens",
        "Planner prediction vs measurement",
        "$",
    ):
        assert text in page
    assert "http" not in page.replace("http-equiv", "")  # nothing fetched from elsewhere


def test_any_failed_check_rejects_even_beside_an_inconclusive_one(baseline):
    candidate = bench(synthetic_run(4, itl_ms=itl_for_gain(0.12), error_every=20, seed=5))
    verdict = decide(inputs(baseline, candidate))
    outcomes = {c.name: c.outcome for c in verdict.checks}
    assert outcomes["throughput_gain"] == "inconclusive" and outcomes["error_rate"] == "fail"
    assert verdict.outcome == "REJECTED" and not verdict.approved
    assert verdict.summary.startswith("REJECTED chat/dev: 1 of 7 checks fail (error_rate@c4)")
    # All are reasons: what failed and what could not tell (the throughput gain, and goodput with 6 failed requests).
    assert len(verdict.reasons) == 3 and sum("is inconclusive" in r for r in verdict.reasons) == 2


def test_an_inconclusive_report_says_so(baseline):
    candidate = bench(synthetic_run(4, itl_ms=itl_for_gain(0.12), seed=5))
    verdict = decide(inputs(baseline, candidate))
    data = json.loads(render_json(verdict))
    assert data["outcome"] == "INCONCLUSIVE" and data["approved"] is False
    assert [c["outcome"] for c in data["checks"] if c["name"] == "throughput_gain"] == ["inconclusive"]
    page = render_html(verdict)
    assert '<p class="banner inconclusive">INCONCLUSIVE chat/dev' in page
    assert "What it could not tell" in page and '<span class="unsure">INCONCLUSIVE</span>' in page
    assert "FAIL</span>" not in page


# --------------------------------------------------------------------------- interleaved blocks


def blocks(*runs: dict) -> dict:
    """Runs of one side at one level as its blocks 0, 1, ... (as the decide handler tags them)."""
    return bench(*({**run, "block": index} for index, run in enumerate(runs)))


def test_blocks_are_pooled_for_figures_and_resampled_for_intervals():
    base_runs = [synthetic_run(4, seed=seed) for seed in (1, 3, 5)]
    steady = [synthetic_run(4, itl_ms=itl_for_gain(0.30), ttft_ms=120.0, seed=seed) for seed in (2, 4, 6)]
    verdict = decide(inputs(blocks(*base_runs), blocks(*steady)))
    assert verdict.outcome == "APPROVED", verdict.reasons
    gain = check(verdict, "throughput_gain")
    assert "3 and 3 blocks" in gain.detail and gain.low <= gain.measured <= gain.high
    # The figure is the mean of the blocks' throughput; the latency figures pool every block's samples.
    [level] = verdict.levels
    mean = np.mean([run["output_tokens_per_s"] for run in base_runs])
    assert level["baseline"]["output_tokens_per_s"] == pytest.approx(mean)
    assert level["baseline"]["requests"] == sum(run["requests"] for run in base_runs)
    assert {d["concurrency"] for d in verdict.deltas} == {4}
    # A candidate block that drifted (a busy neighbour) widens the interval instead of deciding.
    drifted = [*steady[:2], synthetic_run(4, itl_ms=itl_for_gain(-0.10), ttft_ms=120.0, seed=6)]
    wide = check(decide(inputs(blocks(*base_runs), blocks(*drifted))), "throughput_gain")
    assert wide.high - wide.low > 2 * (gain.high - gain.low)
    # The p99 budget checks judge the blocks pooled (their intervals resample blocks, then requests).
    assert "3 blocks" in check(verdict, "p99_itl").detail


def test_a_block_measured_twice_is_refused_and_a_run_without_block_is_block_zero(baseline, faster):
    run = faster["runs"][0]
    with pytest.raises(ValueError, match="block 1; merge shards"):
        decide(inputs(baseline, bench({**run, "block": 1}, {**run, "block": 1})))
    with pytest.raises(ValueError, match="block 0; merge shards"):
        decide(inputs(baseline, bench(run, {**run, "block": 0})))
    assert decide(inputs(baseline, bench(run, {**run, "block": 1}))).checks
