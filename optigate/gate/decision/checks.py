# Over 400 lines: one function per gate check; the checks share their interval and budget helpers.
"""The gate's checks: one function per check, each returning a :class:`Check`.

Checks, evaluated at every concurrency level both benchmarks measured (``concurrency`` on the
check), each a :class:`Check` whose ``measured``, ``threshold`` and interval are in the unit named
below. A check has one of three outcomes, as a canary judge's: ``pass``, ``fail`` or
``inconclusive``, read by the one judge (:func:`optigate.judge.classify`): a check with an interval
passes when the interval lies wholly on the right side of its threshold, fails when it lies wholly on
the wrong side, and is inconclusive when it straddles the threshold (the data cannot tell); a figure
without an interval (an error rate, a count) passes or fails. Missing evidence still fails closed.
The checks' names, order and words are :class:`~optigate.gate.decision.wording.CheckName` and its
:data:`~optigate.gate.decision.wording.WORDS`.

Each side is measured in one or more interleaved **blocks** per level (the baseline twin, then the
candidate, A B A B ...). Intervals resample blocks, then requests (or one-second buckets) inside
them (:func:`optigate.stats.two_level_percentile_replicates`, ``two_level_mean_replicates``), so
drift from run to run widens an interval instead of deciding; every interval contains its estimate.

- ``p99_ttft`` (ms, when ``p99_ttft_ms_budget`` is set): passes only when the *upper* end of a
  95 % two-level percentile-bootstrap interval of the candidate's pooled p99 TTFT is within the
  budget, fails when the *lower* end is over it, and is inconclusive in between: a p99 just under
  the budget on too few or too noisy samples never passes.
- ``p99_itl`` (ms, when ``p99_itl_ms_budget`` is set): the same for per-token ITL, resampling whole
  requests inside the blocks (a request's gaps are correlated; resampling them one by one would
  make the interval too narrow).
- ``throughput_gain`` (%): candidate vs baseline output tokens/s, each side the mean of its blocks'
  throughput; the interval (normal, on the SE of two-level replicates: blocks, then one-second
  buckets, never below the SE of `bench compare`'s assumed run-to-run drift) of the relative gain,
  computed by :func:`optigate.bench.throughput.throughput_difference`; passes when its *lower* end
  reaches ``min_throughput_gain_pct``, fails when its *upper* end is below it, and is inconclusive
  in between. Fewer than ``MIN_THROUGHPUT_BUCKETS`` one-second buckets on a side (its blocks
  pooled), or a block without a whole bucket, give no usable interval and fail.
- ``error_rate`` (fraction): candidate failed requests / measured requests ≤ ``max_error_rate``.
- ``tokens_per_chunk_gain`` (%, only when the change enables speculative decoding): the gain of
  the candidate's mean tokens per streamed chunk over the baseline's (a client-side proxy for the
  acceptance rate); passes when the lower end of a bootstrap interval on the candidate mean
  reaches ``min_tokens_per_chunk_gain_pct``, fails when the upper end is below it, else
  inconclusive. Below roughly 40 % acceptance, drafting and verifying costs more than it saves and
  speculation makes decoding slower.
- ``quality`` (the evaluation's status): passes only when the quality evaluation passed; an
  ``unresolved`` evaluation (the data cannot resolve the tolerance) is inconclusive with its
  reasons; a failed, unrecognised or missing one fails ("no quality evidence").
- ``shadow_traffic`` and ``shadow_error_rate`` (only when the candidate ran as a shadow variant on
  the live endpoint): the shadow must have received at least ``min_shadow_requests`` mirrored
  requests in the window (fewer cannot tell anything and fail closed), and its 5XX share of them
  must stay within ``max_error_rate``. The two variants' p99 ModelLatency is reported beside them;
  it is one figure per window without an interval, so the benchmark's intervals judge latency.
- ``goodput`` and ``capacity`` (only when a latency budget is set): the share of requests within the SLO not
  worse than the baseline's, and the candidate holding the SLO wherever the baseline does
  (:mod:`optigate.gate.decision.slo_checks`).
- ``coverage``: every concurrency level of ``thresholds.concurrency`` must have been measured by
  both benchmarks; an unmeasured level is missing evidence and fails.

Fail closed: a benchmark (baseline or candidate) with zero successful requests at a level fails
every latency check at that level (``p99_ttft``, ``p99_itl``, ``throughput_gain``,
``tokens_per_chunk_gain``), with ``measured`` None.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from statistics import NormalDist
from typing import Any

import numpy as np

from optigate import stats
from optigate.bench.core.metrics import RunSamples, merge
from optigate.bench.throughput import MIN_THROUGHPUT_BUCKETS, assumed_drift_se, throughput_difference
from optigate.config.models import BenchmarkGate
from optigate.gate.decision.wording import CheckName, ci, error_text, ms, pct
from optigate.jsonsafe import json_safe
from optigate.judge import EVALUATION_WORDS, Check, Direction, Outcome, classify, estimate_only

CONFIDENCE = stats.CONFIDENCE
#: Every check's order, as a list: an index is part of each check's seed.
_ORDER = list(CheckName)
#: The quality evaluation's status words, read back to outcomes.
_EVALUATION_OUTCOMES = {word: outcome for outcome, word in EVALUATION_WORDS.items()}


def check_dict(check: Check) -> dict[str, Any]:
    """A check as the gate's report writes it ("adapter" only on an adapter's own check)."""
    written = {
        "name": str(check.name),
        "concurrency": check.concurrency,
        "passed": check.passed,
        "outcome": check.outcome.value,
        "measured": check.measured,
        "threshold": check.threshold,
        "ci_low": check.low,
        "ci_high": check.high,
        "detail": check.detail,
    }
    if check.adapter is not None:
        written["adapter"] = check.adapter
    return json_safe(written)


def failed(name: CheckName, threshold: float | str | None, detail: str, level: int | None = None) -> Check:
    """A check that failed without a figure (missing evidence fails closed)."""
    return Check(name, Outcome.FAIL, None, threshold, detail, concurrency=level)


def sort_key(check: Check) -> tuple[bool, bool, int, int, bool, str]:
    """Capacity at the SLO first (the reason a platform owner reads first), then per-level checks by level, then
    the run-wide ones; within each, in CheckName's order, a check on all traffic before the same check per adapter
    (by name)."""
    order = _ORDER.index(CheckName(check.name))
    first = check.name == CheckName.CAPACITY
    return (
        not first,
        check.concurrency is None,
        check.concurrency or 0,
        order,
        check.adapter is not None,
        check.adapter or "",
    )


# --------------------------------------------------------------------------- coverage


def coverage_checks(
    levels: list[int], base_runs: Mapping[int, Sequence[RunSamples]], cand_runs: Mapping[int, Sequence[RunSamples]]
) -> list[Check]:
    """A failing check per gate level that either benchmark did not measure, and one when none is common."""
    checks = []
    sides = (("baseline", base_runs), ("candidate", cand_runs))
    for level in levels:
        missing = " and ".join(label for label, runs in sides if level not in runs)
        if missing:
            detail = f"concurrency {level} is in the gate's levels but the {missing} benchmark did not measure it"
            checks.append(failed(CheckName.COVERAGE, level, detail, level))
    if not set(base_runs) & set(cand_runs):
        checks.append(failed(CheckName.COVERAGE, None, "no concurrency level was measured by both benchmarks"))
    return checks


def schedule_checks(results: Mapping[str, Mapping[str, Any]]) -> list[Check]:
    """An inconclusive check per replayed run that its client could not keep on the recorded schedule (the run
    carries `refused`, optigate.bench.core.schedule.judge_schedule): the client, not the server, shaped its load, so its
    figures prove nothing either way. `results`: each side's benchmark result by label."""
    checks = []
    for label, result in results.items():
        for run in result.get("runs") or []:
            if not run.get("refused"):
                continue
            level, block = int(run["concurrency"]), int(run.get("block") or 0)
            schedule = run.get("schedule") or {}
            detail = f"the {label}'s replay (block {block}) cannot be judged: {run['refused']}"
            checks.append(
                Check(CheckName.SCHEDULE, Outcome.INCONCLUSIVE, schedule.get("p99_lag_ms"), schedule.get("bound_ms"),
                      detail, concurrency=level)
            )  # fmt: skip
    return checks


# --------------------------------------------------------------------------- per level


def pool(blocks: Sequence[RunSamples]) -> RunSamples:
    """A side's blocks at one level as one run for its samples and counts (requests, errors, latency
    samples, tokens per chunk). Not for throughput or windows: the blocks ran one after the other."""
    pooled = merge(list(blocks))
    pooled.concurrency = blocks[0].concurrency
    return pooled


def level_checks(
    level: int,
    base_blocks: Sequence[RunSamples],
    cand_blocks: Sequence[RunSamples],
    thresholds: BenchmarkGate,
    method: str | None,
    seed: int,
    confidence: float = CONFIDENCE,
) -> list[Check]:
    """The checks at one level both benchmarks measured (each side in one or more blocks), in CheckName's order,
    their intervals at `confidence`.

    Fail closed: when either benchmark had no successful request here, every latency check
    fails with ``measured`` None and says which.
    """
    base, cand = pool(base_blocks), pool(cand_blocks)
    empty = no_success(base, cand)

    def closed(name: CheckName, threshold: float) -> Check:
        return failed(name, threshold, empty or "", level)

    checks: list[Check] = []
    ttft_budget, itl_budget = thresholds.p99_ttft_ms_budget, thresholds.p99_itl_ms_budget
    if ttft_budget is not None:
        ttft = CheckName.P99_TTFT, "TTFT", [b.ttft_ms for b in cand_blocks], None, ttft_budget, level, seed
        checks.append(closed(CheckName.P99_TTFT, ttft_budget) if empty else latency_check(*ttft, confidence))
    if itl_budget is not None:
        itl_blocks, itl_counts = [b.itl_ms for b in cand_blocks], [b.itl_counts for b in cand_blocks]
        itl = CheckName.P99_ITL, "ITL", itl_blocks, itl_counts, itl_budget, level, seed
        checks.append(closed(CheckName.P99_ITL, itl_budget) if empty else latency_check(*itl, confidence))
    minimum = thresholds.min_throughput_gain_pct
    gain = level, base_blocks, cand_blocks, minimum, seed, confidence
    checks.append(closed(CheckName.THROUGHPUT_GAIN, minimum) if empty else throughput_check(*gain))
    checks.append(error_check(level, cand, thresholds.max_error_rate))
    if method is not None:
        minimum = thresholds.min_tokens_per_chunk_gain_pct
        speculation = level, base, cand, minimum, method, seed, confidence
        checks.append(
            closed(CheckName.TOKENS_PER_CHUNK_GAIN, minimum) if empty else tokens_per_chunk_check(*speculation)
        )
    return checks


def no_success(base: RunSamples, cand: RunSamples) -> str | None:
    """Which benchmark had no successful request (the fail-closed detail), or None."""
    runs = (("the baseline", base), ("the candidate", cand))
    empty = [
        f"{label} had no successful requests ({run.requests} sent{error_text(run)})"
        for label, run in runs
        if not run.completions
    ]
    return " and ".join(empty) if empty else None


def check_seed(seed: int, level: int, check: CheckName) -> list[int]:
    """Each check's own stream: its interval does not depend on which other checks ran."""
    return [seed, level, _ORDER.index(check)]


def latency_check(
    name: CheckName,
    label: str,
    blocks: Sequence[list[float]],
    counts: Sequence[list[int]] | None,
    budget: float,
    level: int,
    seed: int,
    confidence: float = CONFIDENCE,
) -> Check:
    """p99 of the pooled blocks within the budget: passes when the upper end of its interval is, fails
    when the lower end is over it, else inconclusive. The interval resamples blocks, then units inside
    them: requests when every block's counts add up to its samples, else one sample each."""
    samples = sum(len(block) for block in blocks)
    if not samples:
        return failed(name, budget, f"no {label} samples from the candidate", level)
    p99, replicates = pooled_p99(blocks, counts, check_seed(seed, level, name), stats.replicates_for(confidence))
    low, high = stats.percentile_interval(replicates, confidence)
    low, high = min(low, p99), max(high, p99)  # an interval always contains its estimate
    outcome = classify(stats.Interval(p99, low, high), budget, Direction.AT_MOST)
    blocks_text = f", {len(blocks)} blocks" if len(blocks) > 1 else ""
    detail = (
        f"candidate p99 {label} {ms(p99)} ({ci(confidence)} {ms(low)} to {ms(high)}, {samples} samples{blocks_text}) "
        f"vs budget {ms(budget)}"
    )
    if outcome is Outcome.FAIL:
        detail += ": over the budget, the whole interval"
    elif outcome is Outcome.INCONCLUSIVE:
        detail += ": the interval straddles the budget (cannot tell)"
    return Check(name, outcome, p99, budget, detail, low, high, level)


def pooled_p99(
    blocks: Sequence[list[float]],
    counts: Sequence[list[int]] | None,
    rng: stats.SeedLike,
    replicates: int = stats.REPLICATES,
) -> tuple[float, np.ndarray]:
    """The pooled p99 of a side's blocks and its two-level replicates (blocks, then units inside them:
    requests when every block's counts add up to its samples, else one sample each)."""
    clustered = counts is not None and all(
        len(c) > 0 and sum(c) == len(block) for c, block in zip(counts, blocks, strict=True)
    )
    point, drawn = stats.two_level_percentile_replicates(
        blocks, [99], counts=counts if clustered else None, replicates=replicates, rng=rng
    )
    return float(point[0]), drawn[:, 0]


def mean_throughput(blocks: Sequence[RunSamples]) -> float:
    """A side's output tokens/s at one level: the mean of its blocks' (each over its own window)."""
    return float(np.mean([block.to_result(include_samples=False)["output_tokens_per_s"] for block in blocks]))


def throughput_check(
    level: int,
    base_blocks: Sequence[RunSamples],
    cand_blocks: Sequence[RunSamples],
    minimum_pct: float,
    seed: int,
    confidence: float = CONFIDENCE,
) -> Check:
    """Relative output-throughput gain: the lower end of its interval must reach the minimum.

    Each side's figure and two-level replicates come from `bench compare`'s own rule
    (``throughput_difference``); the interval is on the spread of the ratio's replicates, never below
    the assumed run-to-run drift on the ratio's scale."""
    name = CheckName.THROUGHPUT_GAIN
    difference = throughput_difference(
        base_blocks, cand_blocks, rng=check_seed(seed, level, name), replicates=stats.REPLICATES
    )
    if difference.short:
        detail = (
            f"measurement window too short for a throughput interval ({difference.short} one-second buckets, "
            f"at least {MIN_THROUGHPUT_BUCKETS} a side needed, one in every block)"
        )
        return failed(name, minimum_pct, detail, level)
    base_mean, cand_mean = difference.baseline, difference.candidate
    base_reps, cand_reps = difference.baseline_replicates, difference.candidate_replicates
    if not base_mean > 0 or base_reps is None or cand_reps is None or not (base_reps > 0).all():
        return failed(name, minimum_pct, "no baseline throughput to compare with", level)
    gain = 100 * (cand_mean / base_mean - 1)
    # The spread of the ratio's replicates (the baseline's noise scaled by the ratio), never below
    # the assumed run-to-run drift's on the same scale: (c/b) x 2 % x sqrt(1/n_b + 1/n_c).
    spread = float(np.std(100 * (cand_reps / base_reps - 1), ddof=1))
    drift = 100 * (cand_mean / base_mean) * assumed_drift_se(1.0, len(base_blocks), len(cand_blocks))
    half = NormalDist().inv_cdf(1 - (1 - confidence) / 2) * max(spread, drift)
    low, high = gain - half, gain + half
    several = len(base_blocks) + len(cand_blocks) > 2
    blocks_text = f", {len(base_blocks)} and {len(cand_blocks)} blocks" if several else ""
    detail = (
        f"output throughput {cand_mean:,.1f} vs {base_mean:,.1f} tokens/s{blocks_text}: gain {pct(gain)} "
        f"({ci(confidence)} {pct(low)} to {pct(high)}) vs minimum {pct(minimum_pct)}"
    )
    return _gain_check(name, gain, low, high, minimum_pct, detail, level)


def _gain_check(
    name: CheckName, gain: float, low: float, high: float, minimum_pct: float, detail: str, level: int, why: str = ""
) -> Check:
    """A gain whose interval must reach the minimum: wholly at or above passes, wholly below fails,
    straddling it is inconclusive."""
    outcome = classify(stats.Interval(gain, low, high), minimum_pct, Direction.AT_LEAST)
    if outcome is Outcome.FAIL:
        detail += f": below the minimum, the whole interval{why}"
    elif outcome is Outcome.INCONCLUSIVE:
        detail += ": the interval straddles the minimum (cannot tell)"
    return Check(name, outcome, gain, minimum_pct, detail, low, high, level)


def error_check(level: int, cand: RunSamples, maximum: float) -> Check:
    """Failed candidate requests over measured requests, at most the maximum."""
    name = CheckName.ERROR_RATE
    if not cand.requests:
        return failed(name, maximum, "no measured candidate requests", level)
    errors = sum(cand.errors.values())
    rate = errors / cand.requests
    detail = f"{errors} of {cand.requests} candidate requests failed"
    if cand.errors:
        detail += f" ({error_text(cand)[2:]})"
    return Check(
        name, classify(estimate_only(rate), maximum, Direction.AT_MOST), rate, maximum, detail, concurrency=level
    )


def tokens_per_chunk_check(
    level: int,
    base: RunSamples,
    cand: RunSamples,
    minimum_pct: float,
    method: str,
    seed: int,
    confidence: float = CONFIDENCE,
) -> Check:
    """Speculative decoding's gain in mean tokens per chunk: the lower end of its interval must reach the minimum."""
    name = CheckName.TOKENS_PER_CHUNK_GAIN
    base_mean = float(np.mean(base.tokens_per_chunk)) if base.tokens_per_chunk else 0.0
    if not base_mean > 0 or not cand.tokens_per_chunk:
        return failed(name, minimum_pct, "no tokens-per-chunk samples to compare", level)
    mean, low, high = stats.bootstrap_mean(
        cand.tokens_per_chunk,
        replicates=stats.replicates_for(confidence),
        confidence=confidence,
        rng=check_seed(seed, level, name),
    )
    gain, gain_low, gain_high = (100 * (value / base_mean - 1) for value in (mean, low, high))
    detail = (
        f"speculative decoding ({method}): mean tokens per chunk {mean:.2f} vs {base_mean:.2f} baseline, "
        f"gain {pct(gain)} ({ci(confidence)} {pct(gain_low)} to {pct(gain_high)}) vs minimum {pct(minimum_pct)}"
    )
    why = "; too few drafted tokens are accepted: below ~40 % acceptance speculation makes decoding slower"
    return _gain_check(name, gain, gain_low, gain_high, minimum_pct, detail, level, why)


# --------------------------------------------------------------------------- run-wide


def quality_check(evaluation: Mapping[str, Any] | None) -> Check:
    """Passes only on a passing quality evaluation; unresolved is inconclusive; failed or missing evidence fails."""
    name, required = CheckName.QUALITY, EVALUATION_WORDS[Outcome.PASS]
    if evaluation is None:
        return failed(name, required, "no quality evidence: the evaluation did not run")
    status = str(evaluation.get("status", "")).lower() or None
    reasons = "; ".join(str(r) for r in evaluation.get("reasons") or [])
    outcome = _EVALUATION_OUTCOMES.get(status or "")
    if outcome is Outcome.PASS:
        detail = "quality evaluation passed: every metric within its tolerance"
    elif outcome is Outcome.INCONCLUSIVE:
        detail = f"quality evaluation {status}" + (f": {reasons}" if reasons else " (the data cannot tell)")
    elif outcome is Outcome.FAIL:
        detail = "quality evaluation failed" + (f": {reasons}" if reasons else "")
    else:
        outcome = Outcome.FAIL
        detail = f"quality evaluation has no recognised status ({evaluation.get('status')!r}): fails closed"
    return Check(name, outcome, status, required, detail)


def shadow_checks(shadow: Mapping[str, Any], thresholds: BenchmarkGate) -> list[Check]:
    """Enough mirrored live requests reached the shadow, and few enough of them failed with 5XX."""
    window = f"{shadow.get('window_minutes', '?')} min window"
    side = shadow.get("shadow") or {}
    invocations = side.get("invocations")
    minimum, maximum = thresholds.min_shadow_requests, thresholds.max_error_rate
    # None, or too few: fails closed.
    if not invocations or classify(estimate_only(invocations), minimum, Direction.AT_LEAST) is not Outcome.PASS:
        seen = 0 if not invocations else int(invocations)
        detail = f"{seen} live requests mirrored to the shadow in the {window}: too few to judge it"
        traffic = Check(CheckName.SHADOW_TRAFFIC, Outcome.FAIL, seen, minimum, detail)
        return [traffic, failed(CheckName.SHADOW_ERROR_RATE, maximum, "no mirrored traffic to measure")]
    detail = f"{int(invocations)} live requests mirrored to the shadow in the {window}"
    traffic = Check(CheckName.SHADOW_TRAFFIC, Outcome.PASS, int(invocations), minimum, detail)
    errors = side.get("errors_5xx") or 0
    rate = errors / invocations
    detail = f"{int(errors)} of {int(invocations)} mirrored requests failed with 5XX"
    outcome = classify(estimate_only(rate), maximum, Direction.AT_MOST)
    return [traffic, Check(CheckName.SHADOW_ERROR_RATE, outcome, rate, maximum, detail)]
