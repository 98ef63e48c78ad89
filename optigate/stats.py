"""Resampling, intervals and percentiles: the one home of optigate's statistics.

Every interval optigate reports is a percentile-bootstrap interval computed here, whether it is
a benchmark delta (`optigate.bench.compare`), a gate check (`optigate.gate.decision`) or a quality
comparison (`optigate.evaluate.compare`). The functions are pure: numpy arrays (or sequences) in,
floats or arrays out, randomness only through the ``rng`` argument, so a seed reproduces a result.

Statistics are *vectorised*: a callable that maps a 2-D array holding one resample per row to
one value per row (shape ``(rows,)``) or several (shape ``(rows, k)``), e.g. :func:`mean` or
:func:`percentiles`. One-sample resamples are drawn as blocks of rows; cluster resamples have
unequal lengths and are passed one at a time as a single row.

Resampling schemes:

- one sample (:func:`resample_replicates`): values resampled one by one with replacement, for
  independent samples (one TTFT per request, one throughput per one-second bucket);
- cluster (:func:`cluster_replicates`): whole requests resampled with replacement, given how many
  consecutive values each request contributed. The inter-token gaps of one request are correlated,
  so resampling them one by one would make the interval too narrow;
- paired (:func:`paired_mean_difference`): records resampled with both of their scores, so the
  interval is of the mean per-record difference and the pairing is never broken;
- two samples (:func:`two_sample_difference`): each sample resampled on its own, the interval of
  the difference of a statistic between them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple

import numpy as np

#: Two-sided confidence of every interval unless a caller asks for another.
CONFIDENCE = 0.95
#: Bootstrap replicates unless a caller asks for another count.
REPLICATES = 1000
#: The default seed: results are reproducible unless a caller passes its own seed or generator.
SEED = 0
#: Values drawn per block of one-sample resamples (bounds memory for long series).
_BLOCK_VALUES = 4_000_000

#: A seed (an int or a sequence of ints, e.g. ``[seed, level, check]``) or a generator to draw from.
SeedLike = int | Sequence[int] | np.random.Generator
#: Maps (rows, n) resamples to (rows,) or (rows, k) values.
Statistic = Callable[[np.ndarray], np.ndarray]
ArrayLike = Sequence[float] | np.ndarray


class Interval(NamedTuple):
    """A point estimate and the two ends of its interval (a tuple: ``point, low, high = ...``)."""

    point: float
    low: float
    high: float


def generator(seed: SeedLike = SEED) -> np.random.Generator:
    """A numpy Generator from a seed; a Generator is returned as it is, so draws continue on it."""
    return np.random.default_rng(seed)


def mean(rows: np.ndarray) -> np.ndarray:
    """The mean of each resample (a vectorised statistic)."""
    return rows.mean(axis=1)


def percentiles(q: float | Sequence[float]) -> Statistic:
    """The q-th percentile(s) of each resample (linear interpolation, numpy's default).

    A single q gives one value per resample; a sequence gives ``len(q)`` values per resample.
    """
    return lambda rows: np.percentile(rows, q, axis=1).T


def percentile_interval(replicates: np.ndarray, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """The equal-tailed percentile interval of bootstrap replicates (NaN replicates ignored)."""
    tail = (1 - confidence) / 2 * 100
    low, high = np.nanpercentile(np.asarray(replicates, dtype=float), [tail, 100 - tail])
    return float(low), float(high)


def resample_replicates(
    values: ArrayLike, statistic: Statistic, *, replicates: int = REPLICATES, rng: SeedLike = SEED
) -> np.ndarray:
    """The statistic of ``replicates`` one-sample resamples of ``values`` (one row each)."""
    data = _samples(values)
    draw = generator(rng)
    block = max(1, _BLOCK_VALUES // len(data))
    out = []
    for start in range(0, replicates, block):
        rows = min(block, replicates - start)
        out.append(np.asarray(statistic(data[draw.integers(0, len(data), (rows, len(data)))])))
    return np.concatenate(out)


def cluster_resample(values: np.ndarray, counts: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One resample of whole clusters: ``counts[i]`` consecutive values belong to cluster i.

    As many clusters as there are are drawn with replacement; each brings all of its values, in
    order. The result's length varies (clusters differ in size) and may be zero.
    """
    starts = np.concatenate(([0], np.cumsum(counts)[:-1]))
    chosen = rng.integers(0, len(counts), len(counts))
    lengths = counts[chosen]
    total = int(lengths.sum())
    if total == 0:
        return values[:0]
    offsets = np.repeat(starts[chosen] - np.concatenate(([0], np.cumsum(lengths)[:-1])), lengths)
    return values[np.arange(total) + offsets]


def cluster_replicates(
    values: ArrayLike,
    counts: Sequence[int] | np.ndarray,
    statistic: Statistic,
    *,
    replicates: int = REPLICATES,
    rng: SeedLike = SEED,
) -> np.ndarray:
    """The statistic of ``replicates`` cluster resamples (see :func:`cluster_resample`).

    A resample that drew only empty clusters has no statistic: its row is NaN, which
    :func:`percentile_interval` ignores. Raises ValueError when the counts do not add up to the
    number of values.
    """
    data = _samples(values)
    sizes = np.asarray(counts, dtype=int)
    if not len(sizes) or int(sizes.sum()) != len(data):
        raise ValueError(f"cluster sizes add up to {int(sizes.sum())}, not to the {len(data)} values")
    draw = generator(rng)
    results: list[np.ndarray | None] = []
    for _ in range(replicates):
        sample = cluster_resample(data, sizes, draw)
        results.append(np.asarray(statistic(sample[None, :]))[0] if len(sample) else None)
    shape = np.shape(next((r for r in results if r is not None), np.nan))
    return np.array([np.full(shape, np.nan) if r is None else r for r in results], dtype=float)


def bootstrap_percentile(
    values: ArrayLike,
    q: float,
    *,
    counts: Sequence[int] | np.ndarray | None = None,
    replicates: int = REPLICATES,
    confidence: float = CONFIDENCE,
    rng: SeedLike = SEED,
) -> Interval:
    """The q-th percentile and its percentile-bootstrap interval.

    Without ``counts`` the values are resampled one by one; with ``counts`` (values per cluster,
    in order, e.g. ITL gaps per request) whole clusters are resampled.
    """
    data = _samples(values)
    statistic = percentiles(q)
    if counts is None:
        stats = resample_replicates(data, statistic, replicates=replicates, rng=rng)
    else:
        stats = cluster_replicates(data, counts, statistic, replicates=replicates, rng=rng)
    return Interval(float(np.percentile(data, q)), *percentile_interval(stats, confidence))


def bootstrap_mean(
    values: ArrayLike, *, replicates: int = REPLICATES, confidence: float = CONFIDENCE, rng: SeedLike = SEED
) -> Interval:
    """The mean and its percentile-bootstrap interval (values resampled one by one)."""
    data = _samples(values)
    stats = resample_replicates(data, mean, replicates=replicates, rng=rng)
    return Interval(float(data.mean()), *percentile_interval(stats, confidence))


def paired_mean_difference(
    baseline: ArrayLike,
    candidate: ArrayLike,
    *,
    replicates: int = REPLICATES,
    confidence: float = CONFIDENCE,
    rng: SeedLike = SEED,
) -> Interval:
    """Mean of ``candidate[i] - baseline[i]`` and its interval, resampling pairs (i) together."""
    base, cand = _samples(baseline), _samples(candidate)
    if len(base) != len(cand):
        raise ValueError(f"paired samples differ in length: {len(base)} baseline, {len(cand)} candidate")
    differences = cand - base
    stats = resample_replicates(differences, mean, replicates=replicates, rng=rng)
    return Interval(float(differences.mean()), *percentile_interval(stats, confidence))


def two_sample_difference(
    baseline: ArrayLike,
    candidate: ArrayLike,
    statistic: Statistic,
    *,
    baseline_counts: Sequence[int] | np.ndarray | None = None,
    candidate_counts: Sequence[int] | np.ndarray | None = None,
    replicates: int = REPLICATES,
    confidence: float = CONFIDENCE,
    rng: SeedLike = SEED,
) -> list[Interval]:
    """``statistic(candidate) - statistic(baseline)`` with its interval, one per value of the statistic.

    Each sample is resampled on its own (the baseline's replicates are drawn first, then the
    candidate's, from the same generator), whole clusters when its counts are given. The interval
    is of the replicate-by-replicate differences.
    """
    draw = generator(rng)
    sides = []
    for values, counts in ((baseline, baseline_counts), (candidate, candidate_counts)):
        data = _samples(values)
        if counts is None:
            boot = resample_replicates(data, statistic, replicates=replicates, rng=draw)
        else:
            boot = cluster_replicates(data, counts, statistic, replicates=replicates, rng=draw)
        point = np.asarray(statistic(data[None, :]), dtype=float)[0]
        sides.append((np.atleast_1d(point), boot.reshape(replicates, -1)))
    (base_point, base_boot), (cand_point, cand_boot) = sides
    differences = cand_boot - base_boot
    return [
        Interval(float(cand_point[i] - base_point[i]), *percentile_interval(differences[:, i], confidence))
        for i in range(differences.shape[1])
    ]


def _samples(values: ArrayLike) -> np.ndarray:
    data = np.asarray(values, dtype=float)
    if data.ndim != 1 or not len(data):
        raise ValueError("no samples" if not data.size else f"expected one series of samples, got shape {data.shape}")
    return data
