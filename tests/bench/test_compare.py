"""optigate.bench.compare: four verdicts, intervals that contain their estimates, blocks whose drift
widens intervals, Holm's control across levels, failed sides, and the two-level bootstrap beneath."""

from __future__ import annotations

import json
import math
from statistics import NormalDist

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from optigate import stats
from optigate.bench.compare import (
    DEFAULT_MARGIN_PCT,
    MIN_REQUESTS,
    Delta,
    compare_blocks,
    compare_levels,
    compare_runs,
    holm_verdicts,
    margin_for,
    workload_difference,
)
from optigate.bench.core.metrics import RunSamples
from tests.fixtures.explicit_runs import block
from tests.fixtures.simulated_blocks import Shape, simulated_block

FAST = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])


positive = st.floats(min_value=0.5, max_value=5000, allow_nan=False, allow_infinity=False)
samples = st.lists(positive, min_size=MIN_REQUESTS, max_size=40)
gaps = st.lists(st.lists(st.floats(min_value=0.1, max_value=200), min_size=1, max_size=6), min_size=1, max_size=40)


@FAST
@given(st.lists(samples, min_size=1, max_size=3), st.lists(samples, min_size=1, max_size=3), st.integers(0, 2**16))
def test_every_interval_contains_its_estimate(base, cand, seed):
    deltas = compare_blocks([block(2, b) for b in base], [block(2, c) for c in cand], seed=seed)
    judged = [d for d in deltas if math.isfinite(d.low)]
    assert judged
    for d in judged:
        assert d.low <= d.delta <= d.high, d


@FAST
@given(samples, gaps, st.floats(min_value=-0.029, max_value=0.029), st.integers(0, 2**16))
def test_a_change_inside_the_margin_is_never_better_or_worse(ttft, itl, change, seed):
    """Every latency scaled by (1 + change), |change| < 3 %: percentiles scale alike, so each estimate
    lies inside the margin, so none is better or worse, however narrow its interval."""
    itl = (itl * len(ttft))[: len(ttft)]
    scaled = [[g * (1 + change) for g in request] for request in itl]
    deltas = compare_blocks([block(1, ttft, itl)], [block(1, [t * (1 + change) for t in ttft], scaled)], seed=seed)
    latency = [d for d in deltas if d.metric != "output_tokens_per_s"]
    assert latency and all(abs(d.relative) < DEFAULT_MARGIN_PCT / 100 for d in latency)
    assert not [d for d in deltas if d.verdict in ("better", "worse")]


@FAST
@given(st.lists(samples, min_size=1, max_size=3), st.lists(samples, min_size=1, max_size=3), st.integers(0, 2**16))
def test_no_estimate_inside_the_margin_is_labelled(base, cand, seed):
    deltas = compare_blocks([block(2, b) for b in base], [block(2, c) for c in cand], seed=seed)
    for d in deltas:
        if math.isfinite(d.relative) and abs(d.relative) <= d.margin_pct / 100:
            assert d.verdict in ("equivalent", "inconclusive"), d


@pytest.mark.slow
def test_the_four_words():
    rng = stats.generator(3)

    def side(median: float, runs: int = 3) -> list[RunSamples]:
        return [block(1, list(rng.lognormal(np.log(median), 0.05, 200))) for _ in range(runs)]

    # Equivalence within ±3 % must beat the assumed 2 % run-to-run drift at Holm's confidence: many runs.
    base = side(150, 12)
    same = compare_blocks(base, side(150, 12))
    faster = compare_blocks(base, side(120))
    slower = compare_blocks(base, side(180))
    few = compare_runs(block(1, [150.0] * 3), block(1, [120.0] * 3))
    p50 = {name: next(d for d in deltas if d.metric == "ttft_ms" and d.statistic == "p50") for name, deltas in
           (("same", same), ("faster", faster), ("slower", slower), ("few", few))}  # fmt: skip
    assert p50["same"].verdict == "equivalent"
    assert p50["faster"].verdict == "better" and p50["faster"].high < 0 and p50["faster"].relative < -0.03
    assert p50["slower"].verdict == "worse" and p50["slower"].low > 0 and p50["slower"].relative > 0.03
    assert p50["few"].verdict == "inconclusive" and "fewer than" in p50["few"].note  # 3 requests decide nothing
    # One run a side cannot show run-to-run drift, so its interval assumes it: never equivalent at ±3 %.
    alone = next(d for d in compare_runs(base[0], side(150, 1)[0]) if d.metric == "ttft_ms" and d.statistic == "p50")
    assert alone.verdict == "inconclusive" and alone.high - alone.low > 2 * 0.02 * alone.baseline


def test_drift_between_blocks_widens_the_interval_instead_of_deciding():
    """Three blocks a side whose levels drift by up to ±10 % from run to run: pooled as one block the
    sides look about 9 % apart; as blocks the interval takes the drift in and the verdict is not better."""
    rng = stats.generator(7)

    def side(factors):
        return [block(1, list(150 * f * rng.lognormal(0, 0.05, 60))) for f in factors]

    base, cand = side([1.10, 0.94, 1.10]), side([0.90, 1.06, 0.90])
    pooled = [RunSamples(1, ttft_ms=[v for b in s for v in b.ttft_ms]) for s in (base, cand)]
    for run in pooled:
        run.queue_ms = [0.0] * len(run.ttft_ms)
    as_one = next(d for d in compare_runs(pooled[0], pooled[1]) if d.metric == "ttft_ms" and d.statistic == "p50")
    as_blocks = next(d for d in compare_blocks(base, cand) if d.metric == "ttft_ms" and d.statistic == "p50")
    assert as_one.verdict == "better"
    assert as_blocks.verdict != "better" and (as_blocks.high - as_blocks.low) > 2 * (as_one.high - as_one.low)
    # Every block of one side slower than or as slow as every block of the other (1.08/1.0/1.08 vs
    # 0.92/1.0/0.92) is a difference, not drift: since the rule asks for an interval that excludes no
    # change and an estimate beyond the margin (not a whole interval beyond it), that case is better.
    apart = compare_blocks(side([1.08, 1.0, 1.08]), side([0.92, 1.0, 0.92]))
    assert next(d for d in apart if d.metric == "ttft_ms" and d.statistic == "p50").verdict == "better"


def test_holm_covers_every_level_compared():
    shape = Shape()
    base = {
        level: [simulated_block(level, 32, shape, tokens=16, seed=[1, level, b]) for b in range(2)]
        for level in (1, 4, 8)
    }
    cand = {
        level: [simulated_block(level, 32, shape, tokens=16, seed=[2, level, b]) for b in range(2)]
        for level in (1, 4, 8)
    }
    one = compare_blocks(base[4], cand[4])
    every = compare_levels(base, cand)
    assert {d.concurrency for d in every} == {1, 4, 8} and len(every) == 3 * len(one)
    # A family of 39 asks more of each delta than one of 13: wider intervals around the same estimates.
    at_four = [d for d in every if d.concurrency == 4]
    for alone, together in zip(one, at_four, strict=True):
        assert alone.delta == together.delta
        if math.isfinite(alone.low):
            assert together.confidence >= alone.confidence > 0.95


def test_holm_steps_down_and_the_verdict_is_read_off_the_interval():
    from optigate.bench.compare import _Raw

    raws = [
        _Raw("ttft_ms", "p50", 1, 100.0, 80.0, 1.0, True, 3.0),  # 20 SEs from no change
        _Raw("ttft_ms", "p90", 1, 100.0, 95.1, 2.0, True, 3.0),  # 2.45 SEs: Bonferroni (2.50) would not
        _Raw("ttft_ms", "p99", 1, 100.0, 100.5, 0.5, True, 3.0),  # well inside the margin
        _Raw("e2e_ms", "p50", 1, 100.0, 96.0, 2.0, True, 3.0),  # 2 SEs: Holm stops here
    ]
    first, second, third, fourth = holm_verdicts(raws)
    assert first.verdict == "better" and first.confidence == pytest.approx(1 - 0.05 / 4)
    assert second.verdict == "better" and second.confidence == pytest.approx(1 - 0.05 / 3)
    assert fourth.verdict == "inconclusive" and fourth.confidence == pytest.approx(1 - 0.05 / 2)
    # The estimate is beyond the margin, but the interval shown still holds "no change": not better.
    assert fourth.relative < -0.03 and fourth.low < 0 < fourth.high
    assert third.verdict == "equivalent" and third.confidence == pytest.approx(1 - 0.05 / 2)
    assert -3 < third.low < third.high < 3


def test_a_clear_change_inside_the_margin_is_not_labelled():
    """Significant (20 SEs from no change) but 2 % of the baseline: a real change too small to matter."""
    from optigate.bench.compare import _Raw

    [small] = holm_verdicts([_Raw("ttft_ms", "p50", 1, 100.0, 98.0, 0.1, True, 3.0)])
    assert small.high < 0 and small.verdict == "equivalent"
    [straddling] = holm_verdicts([_Raw("ttft_ms", "p50", 1, 100.0, 97.5, 0.4, True, 3.0)])
    assert straddling.high < 0 and straddling.low < -3 and straddling.verdict == "inconclusive"


def test_throughput_interval_needs_buckets_and_comes_from_blocks():
    short = [block(1, [150.0] * 12, [[10.0] * 3] * 12)]  # a window of about 2 s: too few one-second buckets
    delta = next(d for d in compare_blocks(short, short) if d.metric == "output_tokens_per_s")
    assert delta.verdict == "inconclusive" and not math.isfinite(delta.low) and "buckets" in delta.note
    rng = stats.generator(5)
    long = [block(1, list(rng.lognormal(np.log(150), 0.2, 40)), [list(rng.lognormal(np.log(15), 0.2, 30))] * 40)]
    delta = next(d for d in compare_blocks(long, long) if d.metric == "output_tokens_per_s")
    assert delta.low < 0 < delta.high and delta.high - delta.low > 0  # never [x, x]


def test_a_failed_side_is_failed_not_a_number_and_json_has_no_nan():
    good = block(1, [150.0] * 20)
    failed = RunSamples(1, queue_ms=[0.0] * 20, errors={"ModelError": 20})
    candidate_failed = compare_runs(good, failed)
    assert all(d.verdict == "worse" and "candidate failed" in d.note for d in candidate_failed)
    baseline_failed = compare_runs(failed, good)
    assert all(d.verdict == "inconclusive" and "baseline failed" in d.note for d in baseline_failed)
    text = json.dumps([d.to_dict() for d in candidate_failed + baseline_failed], allow_nan=False)
    assert '"candidate": null' in text


def test_delta_keeps_the_fields_the_gate_and_reports_read():
    d = Delta("itl_ms", "p99", 16, 20.0, 18.0, -2.0, -3.0, -1.0)
    assert d.relative == pytest.approx(-0.1) and d.verdict == "inconclusive" and d.lower_is_better
    assert {"metric", "statistic", "concurrency", "baseline", "candidate", "delta", "low", "high"} <= d.to_dict().keys()
    assert d.to_dict()["relative"] == pytest.approx(-0.1) and d.to_dict()["verdict"] == "inconclusive"
    assert margin_for({"itl_ms": 5.0}, "itl_ms") == 5.0 and margin_for({"default": 2.0}, "ttft_ms") == 2.0


def test_blocks_of_one_level_must_share_a_concurrency():
    with pytest.raises(ValueError, match="share a concurrency"):
        compare_blocks([block(1, [1.0] * 10)], [block(2, [1.0] * 10)])
    with pytest.raises(ValueError, match="at least one block"):
        compare_blocks([], [block(1, [1.0] * 10)])


def test_workload_difference_names_what_differs():
    load = {"prompt_tokens": 16, "max_new_tokens": 10, "schema": "inputs", "mode": "closed", "rate": None}
    a = {"load": load, "runs": [{"concurrency": 1}, {"concurrency": 4}]}
    b = {"load": {**load, "schema": "messages"}, "runs": [{"concurrency": 1}]}
    assert workload_difference([("a", a), ("a2", a)]) is None
    assert (
        workload_difference([("a", a), ("b", b)]) == "b differs from a: schema inputs vs messages, levels [1, 4] vs [1]"
    )
    assert workload_difference([("a", a), ("old", {"runs": []})]) == "old records no workload"


def test_two_sides_that_replayed_different_captures_are_not_compared():
    """A captured workload's shape can agree (same counts, same length percentiles) while its requests differ: the
    recorded digest decides."""
    from optigate.bench.core.workload import Workload, WorkloadRequest, digest, shape

    def captured(prompt: str) -> dict:
        workload = Workload((WorkloadRequest({"inputs": prompt}, 8, 3, offset_s=0.0),), "replay", "capture.jsonl")
        return {"load": {"workload": {**shape(workload), "digest": digest(workload)}}, "runs": [{"concurrency": 1}]}

    one, other = captured("the same length"), captured("another of it")
    assert workload_difference([("a", one), ("a2", captured("the same length"))]) is None
    assert workload_difference([("a", one), ("b", other)]) == (
        "b differs from a: different requests (workload digests differ)"
    )
    # A result with a captured workload against one without: not like with like either.
    synthetic = {"load": {"mode": "closed"}, "runs": [{"concurrency": 1}]}
    assert "different requests" in workload_difference([("a", one), ("c", synthetic)])


# --------------------------------------------------------------------------- the two-level bootstrap


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.floats(min_value=-1e3, max_value=1e3), min_size=1, max_size=60),
    st.integers(1, 8),
    st.lists(st.floats(min_value=0, max_value=100), min_size=1, max_size=4),
    st.integers(0, 2**16),
)
def test_unit_weighted_percentiles_equal_numpy_on_the_expanded_sample(values, units, q, seed):
    rng = stats.generator(seed)
    ordered = np.sort(np.asarray(values))
    owner = rng.integers(0, units, len(ordered))
    weights = rng.integers(0, 4, (5, units))
    got = stats.unit_weighted_percentiles(ordered, owner, weights, q)
    for row, w in enumerate(weights):
        expanded = np.repeat(ordered, w[owner])
        expected = np.percentile(expanded, q) if len(expanded) else np.full(len(q), np.nan)
        np.testing.assert_allclose(got[row], expected, rtol=1e-9, atol=1e-9)


def test_two_level_weights_draw_blocks_then_units():
    weights = stats.two_level_weights([3, 5, 2], replicates=2000, rng=1)
    assert weights.shape == (2000, 10)
    # A block drawn k times brings k resamples of its units: its column total is a multiple of its size.
    per_block = np.stack([weights[:, :3].sum(1) / 3, weights[:, 3:8].sum(1) / 5, weights[:, 8:].sum(1) / 2], axis=1)
    assert np.allclose(per_block, per_block.round()) and (per_block.sum(axis=1) == 3).all()
    assert per_block.mean(axis=0) == pytest.approx([1, 1, 1], abs=0.08)
    with pytest.raises(ValueError):
        stats.two_level_weights([3, 0])


def test_two_level_replicates_see_drift_between_blocks():
    rng = stats.generator(2)
    steady = [rng.normal(100, 5, 200) for _ in range(3)]
    drifting = [rng.normal(mean, 5, 200) for mean in (90, 100, 110)]
    _, calm = stats.two_level_percentile_replicates(steady, [50])
    point, wide = stats.two_level_percentile_replicates(drifting, [50])
    assert point[0] == pytest.approx(np.percentile(np.concatenate(drifting), 50))
    assert wide.std() > 5 * calm.std()
    mean, replicates = stats.two_level_mean_replicates([10.0, 12.0], [rng.normal(10, 1, 20), rng.normal(12, 1, 20)])
    assert mean == 11.0 and 10 < replicates.mean() < 12 and replicates.std() > 0


def test_a_tail_percentile_needs_requests_beyond_it():
    """p99 of 100 requests is about their maximum: its bootstrap redraws the same top values and
    understates the spread, so it is not judged; with 600 requests (6 beyond p99) it is."""
    rng = stats.generator(11)
    few = compare_runs(block(1, list(rng.lognormal(5, 0.1, 100))), block(1, list(rng.lognormal(5.5, 0.1, 100))))
    p99 = next(d for d in few if d.metric == "ttft_ms" and d.statistic == "p99")
    p50 = next(d for d in few if d.metric == "ttft_ms" and d.statistic == "p50")
    assert p99.verdict == "inconclusive" and "p99 needs 500 requests a side" in p99.note and p50.verdict == "worse"
    many = compare_runs(block(1, list(rng.lognormal(5, 0.1, 600))), block(1, list(rng.lognormal(5.5, 0.1, 600))))
    assert next(d for d in many if d.metric == "ttft_ms" and d.statistic == "p99").verdict == "worse"


def test_blocks_that_happen_to_agree_still_carry_the_assumed_drift():
    """Three identical blocks a side show no drift at all; the interval still assumes 2 % per block."""
    from optigate.bench.throughput import RUN_TO_RUN_DRIFT_PCT, assumed_drift_se

    rng = stats.generator(11)
    one = block(1, list(rng.lognormal(np.log(150), 0.01, 400)))
    deltas = compare_blocks([one] * 3, [one] * 3)
    judged = [d for d in deltas if math.isfinite(d.low)]
    assert judged
    for d in judged:
        z = NormalDist().inv_cdf(0.5 + d.confidence / 2)
        floor = assumed_drift_se(d.baseline, 3, 3)
        assert floor == pytest.approx(RUN_TO_RUN_DRIFT_PCT / 100 * d.baseline * math.sqrt(2 / 3))
        assert (d.high - d.low) / 2 >= z * floor * (1 - 1e-9), d


def test_the_gate_reads_throughput_from_bench_compares_rule():
    """One rule for the throughput difference (blocks, buckets, too-short windows): the gate's gain is
    bench compare's delta as a share of the baseline, and its interval the spread of the ratio's
    replicates, never below the assumed drift on the ratio's scale."""
    from optigate.bench.throughput import THROUGHPUT, assumed_drift_se, throughput_difference
    from optigate.gate.decision.checks import throughput_check
    from optigate.stats import REPLICATES

    def width(base, cand):
        difference = throughput_difference(base, cand, rng=[0, 4, 3], replicates=REPLICATES)
        ratio = difference.candidate / difference.baseline
        spread = float(np.std(100 * (difference.candidate_replicates / difference.baseline_replicates - 1), ddof=1))
        return spread, 100 * ratio * assumed_drift_se(1.0, len(base), len(cand))

    drifting = [simulated_block(4, 32, Shape(drift=0.1), tokens=64, seed=[1, b]) for b in range(3)]
    faster = [simulated_block(4, 32, Shape(itl_ms=12.0, drift=0.1), tokens=64, seed=[2, b]) for b in range(3)]
    steady = [simulated_block(4, 32, Shape(drift=0.0), tokens=64, seed=[3, 0])] * 3
    for base, cand, binding in ((drifting, faster, "spread"), (steady, steady, "drift")):
        spread, drift = width(base, cand)
        assert (spread > drift) == (binding == "spread")  # each case exercises one side of the max
        check = throughput_check(4, base, cand, 5.0, seed=0)
        delta = next(d for d in compare_blocks(base, cand) if d.metric == THROUGHPUT)
        assert check.measured == pytest.approx(100 * delta.relative)
        assert check.high - check.low == pytest.approx(2 * 1.959964 * max(spread, drift), rel=1e-4)
    short = [block(1, [150.0] * 12, [[10.0] * 3] * 12)]  # about 2 s: too few one-second buckets for both
    assert not throughput_check(1, short, short, 5.0, seed=0).passed
    assert "buckets" in next(d for d in compare_blocks(short, short) if d.metric == THROUGHPUT).note
