"""The gate's decision on an adapter team's benchmarks: each latency check per adapter too, Holm across the
adapters, a slow adapter rejects (named), an adapter with too few samples is inconclusive, never a pass."""

from __future__ import annotations

import json

import pytest

from optigate import stats
from optigate.bench.core.load import ComponentSchedule, ComponentShare
from optigate.bench.core.metrics import RequestRecord, RunSamples
from optigate.gate import GateInputs, decide, render_html, render_json
from optigate.gate.decision.adapters import MIN_ADAPTER_REQUESTS
from optigate.stats import holm_levels
from tests.fixtures.synthetic_runs import PASS, THRESHOLDS, itl_for_gain

TOKENS = 32
FAST = {"ttft_ms": 150.0, "itl_ms": 15.0}


def labelled_run(
    concurrency: int, shapes: dict[str, dict], weights: dict[str, float], requests: int, seed: int
) -> dict:
    """A closed loop whose requests go to adapters in the schedule's order, each adapter with its own latency."""
    rng = stats.generator(seed)
    mix = tuple(ComponentShare(f"ic-{name}", name, weight) for name, weight in weights.items())
    schedule = ComponentSchedule(mix, seed=0)
    records, clocks = [], [worker * 0.013 for worker in range(concurrency)]
    for index in range(requests):
        adapter = schedule[index].adapter
        shape = shapes[adapter]
        worker = index % concurrency
        sent = clocks[worker]
        first = sent + shape["ttft_ms"] / 1000 * rng.lognormal(0, 0.25)
        chunks, now = [(first, 1)], first
        for _ in range(TOKENS - 1):
            now += shape["itl_ms"] / 1000 * rng.lognormal(0, 0.15)
            chunks.append((now, 1))
        records.append(RequestRecord(sent, sent, first, now, chunks, TOKENS, adapter=adapter))
        clocks[worker] = now
    return RunSamples.from_records(concurrency, records).to_result()


def benchmark(shapes: dict[str, dict], weights: dict[str, float], seed: int, requests: int = 240) -> dict:
    return {"runs": [labelled_run(4, shapes, weights, requests, seed)]}


def inputs(baseline: dict, candidate: dict) -> GateInputs:
    return GateInputs(
        team="support",
        environment="dev",
        change={"quantization": "fp8"},
        thresholds=THRESHOLDS,
        baseline_benchmark=baseline,
        candidate_benchmark=candidate,
        evaluation=PASS,
    )


WEIGHTS = {"base": 1.0, "reply": 1.0, "summarize": 1.0}
BASELINE_SHAPES = dict.fromkeys(WEIGHTS, FAST)
FASTER = {"ttft_ms": 120.0, "itl_ms": itl_for_gain(0.30)}
MIX = tuple(ComponentShare(f"ic-{name}", name, weight) for name, weight in WEIGHTS.items())


def test_a_faster_candidate_on_every_adapter_is_approved_with_a_check_per_adapter():
    verdict = decide(
        inputs(benchmark(BASELINE_SHAPES, WEIGHTS, 1), benchmark(dict.fromkeys(WEIGHTS, FASTER), WEIGHTS, 2))
    )
    assert verdict.outcome == "APPROVED", verdict.reasons
    per_adapter = [(c.name, c.adapter) for c in verdict.checks if c.adapter is not None]
    assert per_adapter == [("p99_ttft", a) for a in sorted(WEIGHTS)] + [("p99_itl", a) for a in sorted(WEIGHTS)]
    written = json.loads(render_json(verdict))
    assert {c.get("adapter") for c in written["checks"]} == {None, *WEIGHTS}
    level = written["levels"][0]
    assert set(level["adapters"]) == set(WEIGHTS)
    sent = [c.adapter for c in ComponentSchedule(MIX, seed=0).first(240)]
    assert level["adapters"]["reply"]["candidate"]["requests"] == sent.count("reply")
    assert level["adapters"]["reply"]["baseline"]["requests"] == sent.count("reply")


def test_one_slower_adapter_rejects_and_the_verdict_names_it():
    slow = {**FASTER, "itl_ms": 60.0}  # over the 40 ms ITL budget on this adapter alone
    candidate = benchmark({**dict.fromkeys(WEIGHTS, FASTER), "reply": slow}, WEIGHTS, 2)
    verdict = decide(inputs(benchmark(BASELINE_SHAPES, WEIGHTS, 1), candidate))
    assert verdict.outcome == "REJECTED"
    [failed] = [c for c in verdict.failed if c.adapter is not None]
    assert (failed.name, failed.adapter, failed.concurrency) == ("p99_itl", "reply", 4)
    assert "p99_itl[reply]@c4" in verdict.summary
    assert any(r.startswith("p99_itl for adapter reply at concurrency 4 fails") for r in verdict.reasons)
    others = [c for c in verdict.checks if c.name == "p99_itl" and c.adapter in ("base", "summarize")]
    assert all(c.passed for c in others)
    page = render_html(verdict)
    assert "p99_itl [adapter reply]" in page  # the check's line names the adapter
    assert all(f"<td>{side} · {a}</td>" in page for side in ("baseline", "candidate") for a in WEIGHTS)


def test_an_adapter_with_too_few_samples_is_inconclusive_never_a_pass():
    weights = {"base": 1.0, "reply": 1.0, "rare": 0.02}  # ~2 of 240 requests: too few for a p99
    shapes = dict.fromkeys(weights, FASTER)
    verdict = decide(inputs(benchmark(dict.fromkeys(weights, FAST), weights, 1), benchmark(shapes, weights, 2)))
    assert verdict.outcome == "INCONCLUSIVE", verdict.reasons
    rare = [c for c in verdict.checks if c.adapter == "rare"]
    assert rare and all(c.inconclusive and c.measured is None for c in rare)
    assert f"fewer than the {MIN_ADAPTER_REQUESTS}" in rare[0].detail
    assert not [c for c in verdict.checks if c.adapter != "rare" and not c.passed]


def test_an_adapter_whose_requests_all_failed_fails_closed():
    candidate = benchmark(dict.fromkeys(WEIGHTS, FASTER), WEIGHTS, 2)
    reply = candidate["runs"][0]["adapters"]["reply"]
    reply["samples"].update(ttft_ms=[], itl_ms=[], itl_counts=[], completions=[])
    verdict = decide(inputs(benchmark(BASELINE_SHAPES, WEIGHTS, 1), candidate))
    failed = [c for c in verdict.failed if c.adapter == "reply"]
    assert verdict.outcome == "REJECTED" and {c.name for c in failed} == {"p99_ttft", "p99_itl"}


def test_unlabelled_results_get_no_adapter_checks_or_keys():
    plain = {"base": 1.0}
    baseline, candidate = benchmark({"base": FAST}, plain, 1), benchmark({"base": FASTER}, plain, 2)
    for side in (baseline, candidate):
        del side["runs"][0]["adapters"]
    written = json.loads(render_json(decide(inputs(baseline, candidate))))
    assert all("adapter" not in c for c in written["checks"]) and "adapters" not in written["levels"][0]


def test_holm_steps_down_and_keeps_the_level_where_it_stopped():
    levels = holm_levels({"a": 0.001, "b": 0.01, "c": 0.5, "d": 0.9})
    assert [member for member, _, _ in levels] == ["a", "b", "c", "d"]
    confidences = [confidence for _, confidence, _ in levels]
    assert confidences[:3] == pytest.approx([1 - 0.05 / 4, 1 - 0.05 / 3, 1 - 0.05 / 2])
    assert confidences[3] == confidences[2]  # stopped at c: d is shown at c's level


def _adapter_evaluation(**statuses: str) -> dict:
    """An adapter team's verdict.json (optigate.evaluate.adapter_verdicts): each adapter's own verdict, and the
    overall one over them (fail > unresolved > pass)."""
    reasons = {"fail": ["exact_match dropped 0.08, beyond the 0.05 tolerated"], "unresolved": ["too few records"]}
    worst = next((word for word in ("fail", "unresolved") if word in statuses.values()), "pass")
    return {
        "status": worst,
        "passed": worst == "pass",
        "reasons": [f"adapter {name}: {r}" for name, status in statuses.items() for r in reasons.get(status, [])],
        "adapters": {
            name: {"status": s, "passed": s == "pass", "reasons": reasons.get(s, [])} for name, s in statuses.items()
        },
    }


def test_the_quality_check_is_each_adapters_and_the_one_that_lost_quality_is_named():
    fast = benchmark({"base": FAST, "reply": FAST, "summarize": FAST}, WEIGHTS, seed=1)
    evaluation = _adapter_evaluation(reply="pass", summarize="fail")
    verdict = decide(GateInputs(**{**inputs(fast, fast).__dict__, "evaluation": evaluation}))
    quality = [c for c in verdict.checks if c.name == "quality"]
    assert [(c.adapter, c.outcome.value) for c in quality] == [("reply", "pass"), ("summarize", "fail")]
    assert "quality[summarize]" in verdict.summary and "quality[reply]" not in verdict.summary
    (reason,) = [r for r in verdict.reasons if r.startswith("quality")]
    assert reason.startswith("quality for adapter summarize fails: quality evaluation failed: exact_match dropped")
    written = [c for c in json.loads(render_json(verdict))["checks"] if c["name"] == "quality"]
    assert [c.get("adapter") for c in written] == ["reply", "summarize"]


@pytest.mark.parametrize(
    ("evaluation", "outcome"),
    [
        # An adapter the evaluation expected has no verdict of its own: the run-wide check keeps it undecided.
        (
            {**_adapter_evaluation(reply="pass"), "status": "unresolved", "reasons": ["adapter summarize: no verdict"]},
            "inconclusive",
        ),
        # An entry that is no verdict fails closed, and so does an overall status the adapters' do not reach.
        ({**_adapter_evaluation(reply="pass"), "adapters": {"reply": "pass"}}, "fail"),
        ({**_adapter_evaluation(reply="pass"), "status": "fail"}, "fail"),
    ],
)
def test_the_quality_checks_per_adapter_are_never_more_lenient_than_the_evaluation(evaluation, outcome):
    from optigate.gate.decision.adapters import quality_checks

    checks = quality_checks(evaluation)
    assert min((c.outcome.value for c in checks), key=["fail", "inconclusive", "pass"].index) == outcome
    assert quality_checks(None)[0].outcome.value == "fail" and quality_checks(PASS)[0].adapter is None
