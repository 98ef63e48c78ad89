"""The gate's checks: one function per check, each returning a :class:`Check`.

Checks, evaluated at every concurrency level both benchmarks measured (``concurrency`` on the
check), each a :class:`Check` whose ``measured``, ``threshold`` and interval are in the unit named
below. A check has one of three outcomes, as a canary judge's: ``pass``, ``fail`` or
``inconclusive``. A check with an interval passes when the interval lies wholly on the right side
of its threshold, fails when it lies wholly on the wrong side, and is inconclusive when it straddles
the threshold (the data cannot tell). Missing evidence still fails closed.

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
  computed by :func:`optigate.bench.compare.throughput_difference`; passes when its *lower* end
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
- ``coverage``: every concurrency level of ``thresholds.concurrency`` must have been measured by
  both benchmarks; an unmeasured level is missing evidence and fails.

Fail closed: a benchmark (baseline or candidate) with zero successful requests at a level fails
every latency check at that level (``p99_ttft``, ``p99_itl``, ``throughput_gain``,
``tokens_per_chunk_gain``), with ``measured`` None.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any

import numpy as np

from optigate import stats
from optigate.bench.compare import MIN_THROUGHPUT_BUCKETS, assumed_drift_se, throughput_difference
from optigate.bench.metrics import RunSamples, merge
from optigate.config.models import BenchmarkGate
from optigate.gate.decision.wording import error_text, ms, pct

CONFIDENCE = stats.CONFIDENCE
#: Replicates per interval; each caller keeps its own count until the verdicts issue calibrates them.
REPLICATES = 1000
#: The order checks are listed in (within a concurrency level); also part of each check's seed.
CHECK_ORDER = (
    "coverage",
    "p99_ttft",
    "p99_itl",
    "throughput_gain",
    "error_rate",
    "tokens_per_chunk_gain",
    "shadow_traffic",
    "shadow_error_rate",
    "quality",
)


PASS, FAIL, INCONCLUSIVE = "pass", "fail", "inconclusive"


@dataclass(frozen=True)
class Check:
    """One check's result: ``passed``, or not (``inconclusive`` when the evidence straddles the
    threshold rather than contradicting it; see :attr:`outcome`)."""

    name: str
    measured: float | str | None
    threshold: float | str | None
    passed: bool
    detail: str
    ci_low: float | None = None
    ci_high: float | None = None
    concurrency: int | None = None
    inconclusive: bool = False

    def __post_init__(self) -> None:
        if self.passed and self.inconclusive:
            raise ValueError(f"check {self.name}: passed and inconclusive at once")

    @property
    def outcome(self) -> str:
        """``pass``, ``fail`` or ``inconclusive``."""
        return PASS if self.passed else INCONCLUSIVE if self.inconclusive else FAIL

    def to_dict(self) -> dict[str, Any]:
        return json_safe(
            {
                "name": self.name,
                "concurrency": self.concurrency,
                "passed": self.passed,
                "outcome": self.outcome,
                "measured": self.measured,
                "threshold": self.threshold,
                "ci_low": self.ci_low,
                "ci_high": self.ci_high,
                "detail": self.detail,
            }
        )


def json_safe(value: Any) -> Any:
    """JSON-safe: non-finite floats become None, numpy scalars plain Python, tuples lists."""
    if isinstance(value, Mapping):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return float(value) if math.isfinite(value) else None
    return value


def sort_key(check: Check) -> tuple[bool, int, int]:
    """Per-level checks by level, then the run-wide ones; within each, in CHECK_ORDER."""
    return (check.concurrency is None, check.concurrency or 0, CHECK_ORDER.index(check.name))


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
            checks.append(Check("coverage", None, level, False, detail, concurrency=level))
    if not set(base_runs) & set(cand_runs):
        checks.append(Check("coverage", None, None, False, "no concurrency level was measured by both benchmarks"))
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
) -> list[Check]:
    """The checks at one level both benchmarks measured (each side in one or more blocks), in CHECK_ORDER.

    Fail closed: when either benchmark had no successful request here, every latency check
    fails with ``measured`` None and says which.
    """
    base, cand = pool(base_blocks), pool(cand_blocks)
    empty = no_success(base, cand)

    def closed(name: str, threshold: float) -> Check:
        return Check(name, None, threshold, False, empty or "", concurrency=level)

    checks: list[Check] = []
    ttft_budget, itl_budget = thresholds.p99_ttft_ms_budget, thresholds.p99_itl_ms_budget
    if ttft_budget is not None:
        ttft = "p99_ttft", "TTFT", [b.ttft_ms for b in cand_blocks], None, ttft_budget, level, seed
        checks.append(closed("p99_ttft", ttft_budget) if empty else latency_check(*ttft))
    if itl_budget is not None:
        itl_blocks, itl_counts = [b.itl_ms for b in cand_blocks], [b.itl_counts for b in cand_blocks]
        itl = "p99_itl", "ITL", itl_blocks, itl_counts, itl_budget, level, seed
        checks.append(closed("p99_itl", itl_budget) if empty else latency_check(*itl))
    minimum = thresholds.min_throughput_gain_pct
    gain = level, base_blocks, cand_blocks, minimum, seed
    checks.append(closed("throughput_gain", minimum) if empty else throughput_check(*gain))
    checks.append(error_check(level, cand, thresholds.max_error_rate))
    if method is not None:
        minimum = thresholds.min_tokens_per_chunk_gain_pct
        speculation = level, base, cand, minimum, method, seed
        checks.append(closed("tokens_per_chunk_gain", minimum) if empty else tokens_per_chunk_check(*speculation))
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


def check_seed(seed: int, level: int, check: str) -> list[int]:
    """Each check's own stream: its interval does not depend on which other checks ran."""
    return [seed, level, CHECK_ORDER.index(check)]


def latency_check(
    name: str,
    label: str,
    blocks: Sequence[list[float]],
    counts: Sequence[list[int]] | None,
    budget: float,
    level: int,
    seed: int,
) -> Check:
    """p99 of the pooled blocks within the budget: passes when the upper end of its interval is, fails
    when the lower end is over it, else inconclusive. The interval resamples blocks, then units inside
    them: requests when every block's counts add up to its samples, else one sample each."""
    samples = sum(len(block) for block in blocks)
    if not samples:
        return Check(name, None, budget, False, f"no {label} samples from the candidate", concurrency=level)
    clustered = counts is not None and all(
        len(c) > 0 and sum(c) == len(block) for c, block in zip(counts, blocks, strict=True)
    )
    point, replicates = stats.two_level_percentile_replicates(
        blocks, [99], counts=counts if clustered else None, replicates=REPLICATES, rng=check_seed(seed, level, name)
    )
    p99 = float(point[0])
    low, high = stats.percentile_interval(replicates[:, 0], CONFIDENCE)
    low, high = min(low, p99), max(high, p99)  # an interval always contains its estimate
    passed, failed = high <= budget, low > budget
    blocks_text = f", {len(blocks)} blocks" if len(blocks) > 1 else ""
    detail = (
        f"candidate p99 {label} {ms(p99)} (95 % CI {ms(low)} to {ms(high)}, {samples} samples{blocks_text}) "
        f"vs budget {ms(budget)}"
    )
    if failed:
        detail += ": over the budget, the whole interval"
    elif not passed:
        detail += ": the interval straddles the budget (cannot tell)"
    return Check(name, p99, budget, passed, detail, low, high, level, inconclusive=not passed and not failed)


def mean_throughput(blocks: Sequence[RunSamples]) -> float:
    """A side's output tokens/s at one level: the mean of its blocks' (each over its own window)."""
    return float(np.mean([block.to_result(include_samples=False)["output_tokens_per_s"] for block in blocks]))


def throughput_check(
    level: int,
    base_blocks: Sequence[RunSamples],
    cand_blocks: Sequence[RunSamples],
    minimum_pct: float,
    seed: int,
) -> Check:
    """Relative output-throughput gain: the lower end of its interval must reach the minimum.

    Each side's figure and two-level replicates come from `bench compare`'s own rule
    (``throughput_difference``); the interval is on the spread of the ratio's replicates, never below
    the assumed run-to-run drift on the ratio's scale."""
    name = "throughput_gain"
    difference = throughput_difference(
        base_blocks, cand_blocks, rng=check_seed(seed, level, name), replicates=REPLICATES
    )
    if difference.short:
        detail = (
            f"measurement window too short for a throughput interval ({difference.short} one-second buckets, "
            f"at least {MIN_THROUGHPUT_BUCKETS} a side needed, one in every block)"
        )
        return Check(name, None, minimum_pct, False, detail, concurrency=level)
    base_mean, cand_mean = difference.baseline, difference.candidate
    base_reps, cand_reps = difference.baseline_replicates, difference.candidate_replicates
    if not base_mean > 0 or base_reps is None or cand_reps is None or not (base_reps > 0).all():
        return Check(name, None, minimum_pct, False, "no baseline throughput to compare with", concurrency=level)
    gain = 100 * (cand_mean / base_mean - 1)
    # The spread of the ratio's replicates (the baseline's noise scaled by the ratio), never below
    # the assumed run-to-run drift's on the same scale: (c/b) x 2 % x sqrt(1/n_b + 1/n_c).
    spread = float(np.std(100 * (cand_reps / base_reps - 1), ddof=1))
    drift = 100 * (cand_mean / base_mean) * assumed_drift_se(1.0, len(base_blocks), len(cand_blocks))
    half = NormalDist().inv_cdf(1 - (1 - CONFIDENCE) / 2) * max(spread, drift)
    low, high = gain - half, gain + half
    several = len(base_blocks) + len(cand_blocks) > 2
    blocks_text = f", {len(base_blocks)} and {len(cand_blocks)} blocks" if several else ""
    detail = (
        f"output throughput {cand_mean:,.1f} vs {base_mean:,.1f} tokens/s{blocks_text}: gain {pct(gain)} "
        f"(95 % CI {pct(low)} to {pct(high)}) vs minimum {pct(minimum_pct)}"
    )
    return _gain_check(name, gain, low, high, minimum_pct, detail, level)


def _gain_check(
    name: str, gain: float, low: float, high: float, minimum_pct: float, detail: str, level: int, why: str = ""
) -> Check:
    """A gain whose interval must reach the minimum: wholly at or above passes, wholly below fails,
    straddling it is inconclusive."""
    passed, failed = low >= minimum_pct, high < minimum_pct
    if failed:
        detail += f": below the minimum, the whole interval{why}"
    elif not passed:
        detail += ": the interval straddles the minimum (cannot tell)"
    return Check(name, gain, minimum_pct, passed, detail, low, high, level, inconclusive=not passed and not failed)


def error_check(level: int, cand: RunSamples, maximum: float) -> Check:
    """Failed candidate requests over measured requests, at most the maximum."""
    name = "error_rate"
    if not cand.requests:
        return Check(name, None, maximum, False, "no measured candidate requests", concurrency=level)
    failed = sum(cand.errors.values())
    rate = failed / cand.requests
    passed = rate <= maximum
    detail = f"{failed} of {cand.requests} candidate requests failed"
    if cand.errors:
        detail += f" ({error_text(cand)[2:]})"
    return Check(name, rate, maximum, passed, detail, concurrency=level)


def tokens_per_chunk_check(
    level: int, base: RunSamples, cand: RunSamples, minimum_pct: float, method: str, seed: int
) -> Check:
    """Speculative decoding's gain in mean tokens per chunk: the lower end of its interval must reach the minimum."""
    name = "tokens_per_chunk_gain"
    base_mean = float(np.mean(base.tokens_per_chunk)) if base.tokens_per_chunk else 0.0
    if not base_mean > 0 or not cand.tokens_per_chunk:
        return Check(name, None, minimum_pct, False, "no tokens-per-chunk samples to compare", concurrency=level)
    mean, low, high = stats.bootstrap_mean(
        cand.tokens_per_chunk, replicates=REPLICATES, confidence=CONFIDENCE, rng=check_seed(seed, level, name)
    )
    gain, gain_low, gain_high = (100 * (value / base_mean - 1) for value in (mean, low, high))
    detail = (
        f"speculative decoding ({method}): mean tokens per chunk {mean:.2f} vs {base_mean:.2f} baseline, "
        f"gain {pct(gain)} (95 % CI {pct(gain_low)} to {pct(gain_high)}) vs minimum {pct(minimum_pct)}"
    )
    why = "; too few drafted tokens are accepted: below ~40 % acceptance speculation makes decoding slower"
    return _gain_check(name, gain, gain_low, gain_high, minimum_pct, detail, level, why)


# --------------------------------------------------------------------------- run-wide


def quality_check(evaluation: Mapping[str, Any] | None) -> Check:
    """Passes only on a passing quality evaluation; unresolved is inconclusive; failed or missing evidence fails."""
    name = "quality"
    if evaluation is None:
        return Check(name, None, "pass", False, "no quality evidence: the evaluation did not run")
    status = str(evaluation.get("status", "")).lower() or None
    reasons = "; ".join(str(r) for r in evaluation.get("reasons") or [])
    if status == "pass":
        return Check(name, status, "pass", True, "quality evaluation passed: every metric within its tolerance")
    if status == "unresolved":
        because = f": {reasons}" if reasons else " (the data cannot tell)"
        return Check(name, status, "pass", False, f"quality evaluation unresolved{because}", inconclusive=True)
    if status == "fail":
        detail = "quality evaluation failed" + (f": {reasons}" if reasons else "")
    else:
        detail = f"quality evaluation has no recognised status ({evaluation.get('status')!r}): fails closed"
    return Check(name, status, "pass", False, detail)


def shadow_checks(shadow: Mapping[str, Any], thresholds: BenchmarkGate) -> list[Check]:
    """Enough mirrored live requests reached the shadow, and few enough of them failed with 5XX."""
    window = f"{shadow.get('window_minutes', '?')} min window"
    side = shadow.get("shadow") or {}
    invocations = side.get("invocations")
    minimum, maximum = thresholds.min_shadow_requests, thresholds.max_error_rate
    if not invocations or invocations < minimum:
        seen = 0 if not invocations else int(invocations)
        detail = f"{seen} live requests mirrored to the shadow in the {window}: too few to judge it"
        traffic = Check("shadow_traffic", seen, minimum, False, detail)
        return [traffic, Check("shadow_error_rate", None, maximum, False, "no mirrored traffic to measure")]
    detail = f"{int(invocations)} live requests mirrored to the shadow in the {window}"
    traffic = Check("shadow_traffic", int(invocations), minimum, True, detail)
    errors = side.get("errors_5xx") or 0
    rate = errors / invocations
    detail = f"{int(errors)} of {int(invocations)} mirrored requests failed with 5XX"
    return [traffic, Check("shadow_error_rate", rate, maximum, rate <= maximum, detail)]
