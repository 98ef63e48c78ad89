"""Throughput of two sides measured in blocks: one-second buckets, the two-level bootstrap SE of
their difference and the assumed run-to-run drift it is never below. One rule for `bench compare`
(:mod:`optigate.bench.compare`, whose docstring explains the blocks and the drift floor), the gate's
throughput check and the plots."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from optigate import stats
from optigate.bench.core.metrics import RunSamples

THROUGHPUT = "output_tokens_per_s"
#: Run-to-run drift (sigma, percent of the baseline) a side's mean over its blocks is assumed to carry
#: at least: the SE of a delta is never below this much drift's (see "Blocks" in optigate.bench.compare).
RUN_TO_RUN_DRIFT_PCT = 2.0
#: One-second buckets a side needs (its blocks pooled, one in every block) for a throughput interval.
MIN_THROUGHPUT_BUCKETS = 5


def throughput_buckets(run: RunSamples, seconds: float = 1.0) -> np.ndarray:
    """Output tokens per second in the whole one-second buckets of the measurement window."""
    bounds = run.window()
    if bounds is None:
        return np.array([])
    start, end = bounds
    count = int((end - start) // seconds)
    if count < 1:
        return np.array([])
    edges = start + np.arange(count + 1) * seconds
    times = np.array([t for t, _ in run.token_arrivals])
    tokens = np.array([k for _, k in run.token_arrivals], dtype=float)
    histogram, _ = np.histogram(times, bins=edges, weights=tokens)
    return histogram / seconds


@dataclass(frozen=True)
class ThroughputDifference:
    """Output tokens/s of each side (the mean of its blocks'), the SE of their difference, and each
    side's two-level replicates (for a ratio's spread: the gate judges a relative gain)."""

    baseline: float
    candidate: float
    se: float  # NaN: no interval (see short)
    short: str = ""  # which side had too few one-second buckets
    baseline_replicates: np.ndarray | None = None
    candidate_replicates: np.ndarray | None = None


def throughput_difference(
    base: Sequence[RunSamples],
    cand: Sequence[RunSamples],
    *,
    rng: stats.SeedLike = 0,
    replicates: int = stats.SE_REPLICATES,
) -> ThroughputDifference:
    """Each side's throughput and the two-level bootstrap SE of the difference (blocks, then one-second
    buckets inside them): one rule for `bench compare` and the gate's throughput check. A side needs
    :data:`MIN_THROUGHPUT_BUCKETS` buckets, its blocks pooled, and one in every block; else no SE.
    The SE is the bootstrap's alone: :func:`assumed_drift_se` is the floor callers apply."""
    draw = stats.generator(rng)
    sides: list[tuple[float, np.ndarray | None]] = []
    short = []
    for name, blocks in (("baseline", base), ("candidate", cand)):
        points = [float(block.to_result(include_samples=False)[THROUGHPUT]) for block in blocks]
        buckets = [throughput_buckets(block) for block in blocks]
        if sum(len(b) for b in buckets) < MIN_THROUGHPUT_BUCKETS or any(not len(b) for b in buckets):
            empty = " (a block has none)" if any(not len(b) for b in buckets) else ""
            short.append(f"{name} {sum(len(b) for b in buckets)}{empty}")
            sides.append((float(np.mean(points)), None))
            continue
        sides.append(stats.two_level_mean_replicates(points, buckets, replicates=replicates, rng=draw))
    (base_point, base_reps), (cand_point, cand_reps) = sides
    if base_reps is None or cand_reps is None:
        return ThroughputDifference(base_point, cand_point, math.nan, ", ".join(short))
    se = float(np.std(cand_reps - base_reps, ddof=1))
    return ThroughputDifference(base_point, cand_point, se, "", base_reps, cand_reps)


def assumed_drift_se(baseline: float, baseline_blocks: int, candidate_blocks: int) -> float:
    """The SE of a difference that carries only the assumed run-to-run drift (see "Blocks" in
    :mod:`optigate.bench.compare`)."""
    drift = RUN_TO_RUN_DRIFT_PCT / 100 * abs(baseline)
    return drift * math.sqrt(1 / baseline_blocks + 1 / candidate_blocks)
