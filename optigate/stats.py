# Over 400 lines: the one home of optigate's statistics (bootstrap and sequential intervals), one idea per function.
"""Resampling, intervals and percentiles: the one home of optigate's statistics.

Every interval optigate reports is computed here: a percentile-bootstrap interval (below), or an anytime-valid
confidence sequence for a figure looked at after every round (at the end). Bootstrap intervals serve
a benchmark delta (`optigate.bench.compare`), a gate check (`optigate.gate.decision`) or a quality
comparison (`optigate.evaluate.quality_verdict`). The functions are pure: numpy arrays (or sequences) in,
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
  the difference of a statistic between them;
- two levels (:func:`two_level_percentile_replicates`, :func:`two_level_mean_replicates`): a side
  measured in several blocks (runs, e.g. interleaved A B A B) is resampled by drawing blocks with
  replacement, then units (requests, or one-second buckets) inside each drawn block. Drift from
  block to block then shows in the replicates instead of passing for a difference between sides.
  With few blocks the scheme counts within-block noise about twice (it is in the spread of the
  block statistics too), so it errs wide: on the side of "cannot tell".

Anytime-valid intervals (:func:`t_confidence_sequence`): a figure measured once a *round* (one interleaved
twin block and candidate block) can be looked at after every round and the look still holds its confidence,
whatever rule decides when to stop. The construction, and why:

- the unit is a round: its figure (e.g. the log of the candidate's p99 ITL over the twin's in that round) pairs the
  two sides in time, so drift between rounds cancels, and rounds are independent of one another;
- a round's figure is an aggregate of a block's requests, close to Gaussian by the central limit theorem, with an
  unknown spread that changes from host to host. The interval is Lai's (1976) confidence sequence for a Gaussian
  mean with unknown variance in the form Wang & Ramdas give it (arXiv 2310.03722, Gaussian mixture over the
  standardised effect, right-Haar mixture over the scale): a test martingale in the scale-invariant filtration,
  so Ville's inequality bounds the chance that it *ever* excludes the true mean by 1 - confidence. It is exact for
  Gaussian figures at every round count from two, where the time-uniform central-limit sequences (Waudby-Smith et
  al.) hold only as the count grows, and rounds are few;
- the figures' Gaussian fit and the coverage at every look are checked by simulation and on the emulator
  (benchmarks/verdict_calibration.py).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import NamedTuple

import numpy as np

#: Two-sided confidence of every interval unless a caller asks for another.
CONFIDENCE = 0.95
# Replicate counts, one per kind of interval. Each is the count its verdicts were tested and
# calibrated at: a seeded verdict depends on it, so none changes without recalibrating.
#: A percentile interval (its ends are tail percentiles of the replicates): the default, and every
#: gate check's count (a replicate of a two-level resample weighs every request of a level).
REPLICATES = 1000
#: Replicates in each tail of a percentile interval above CONFIDENCE (a gate's look, which spends a share of the
#: confidence: optigate.gate.decision.looks): 25, as many as the default count leaves in each tail at CONFIDENCE.
TAIL_REPLICATES = 25
#: A normal interval (`bench compare`): only the replicates' standard deviation is used, and it
#: settles within a few hundred, where a percentile interval at Holm's levels would need tens of thousands.
SE_REPLICATES = 400
#: The quality evaluation's paired interval of a mean over records: a replicate is one mean of a few
#: hundred records, cheap enough for twice the default and steadier ends at the tolerance it resolves.
PAIRED_REPLICATES = 2000
#: The default seed: results are reproducible unless a caller passes its own seed or generator.
SEED = 0
#: The confidence sequence's mixture: the prior variance of the standardised effect (mean / spread of a round's figure).
#: A larger value narrows the sequence at its first rounds and widens it later; 5 keeps the sum of its half-widths
#: over rounds 4 to 10, the rounds a gate can afford, within 1 % of the least any prior gives (tests/stats).
SEQUENCE_PRIOR = 5.0
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


def replicates_for(confidence: float) -> int:
    """Replicates of a percentile interval at `confidence`: REPLICATES up to CONFIDENCE (the count every verdict was
    calibrated at), beyond it enough for TAIL_REPLICATES in each tail."""
    if not 0 < confidence < 1:
        raise ValueError(f"confidence {confidence!r}: expected between 0 and 1")
    return max(REPLICATES, math.ceil(2 * TAIL_REPLICATES / (1 - confidence)))


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


def two_level_weights(
    sizes: Sequence[int] | np.ndarray, *, replicates: int = REPLICATES, rng: SeedLike = SEED
) -> np.ndarray:
    """Multiplicities of a two-level resample: shape ``(replicates, sum(sizes))``, int32.

    Block b holds ``sizes[b]`` units (consecutive columns). Each replicate draws as many blocks as
    there are, with replacement; a block drawn k times brings k independent resamples of its
    units, i.e. ``k * sizes[b]`` units drawn uniformly from it. Every block must hold a unit.
    """
    counts = np.asarray(sizes, dtype=int)
    if not len(counts) or (counts < 1).any():
        raise ValueError(f"every block needs at least one unit, got sizes {counts.tolist()}")
    draw = generator(rng)
    picks = draw.multinomial(len(counts), np.full(len(counts), 1 / len(counts)), size=replicates)
    out = np.empty((replicates, int(counts.sum())), dtype=np.int32)
    start = 0
    for block, size in enumerate(counts):
        out[:, start : start + size] = draw.multinomial(picks[:, block] * size, np.full(size, 1 / size))
        start += size
    return out


def unit_weighted_percentiles(
    sorted_values: np.ndarray, sorted_units: np.ndarray, unit_weights: np.ndarray, q: Sequence[float]
) -> np.ndarray:
    """Percentiles (numpy's linear interpolation) of resamples given as multiplicities of units.

    ``sorted_values`` ascending, ``sorted_units[i]`` the unit value i belongs to, ``unit_weights``
    one row per resample and one integer column per unit: row r stands for the sample in which
    every value of unit u occurs ``unit_weights[r, u]`` times. Returns shape ``(rows, len(q))``;
    a row of zero total weight gives NaN.

    Exact, without expanding each row to one weight per value: the values are cut into bins of
    equal count, a matrix product gives each row's weight per bin, and only the bin holding a
    wanted rank is opened value by value.
    """
    values = np.asarray(sorted_values, dtype=float)
    units = np.asarray(sorted_units, dtype=int)
    weights = np.asarray(unit_weights)
    n, rows = len(values), len(weights)
    bins = max(1, min(n, int(np.sqrt(n) * 2)))
    edges = np.linspace(0, n, bins + 1).astype(int)
    bin_of_value = np.repeat(np.arange(bins), np.diff(edges))
    per_bin = np.zeros((weights.shape[1], bins))
    np.add.at(per_bin, (units, bin_of_value), 1.0)
    cumulative_bins = np.cumsum(weights.astype(float) @ per_bin, axis=1)  # exact: integer sums far below 2**53
    total = cumulative_bins[:, -1]
    width = int(np.diff(edges).max())
    offsets = np.arange(width)
    row_index = np.arange(rows)

    def at_rank(rank: np.ndarray) -> np.ndarray:
        """The value at 0-based ``rank`` of each row's expanded sample."""
        chosen = np.minimum((cumulative_bins <= rank[:, None]).sum(axis=1), bins - 1)
        before = np.where(chosen > 0, cumulative_bins[row_index, chosen - 1], 0.0)
        positions = edges[chosen][:, None] + offsets[None, :]
        inside = positions < edges[chosen + 1][:, None]
        positions = np.minimum(positions, n - 1)
        inner = np.cumsum(np.where(inside, weights[row_index[:, None], units[positions]], 0), axis=1)
        step = np.minimum((inner <= (rank - before)[:, None]).sum(axis=1), width - 1)
        return values[np.minimum(edges[chosen] + step, n - 1)]

    out = np.full((rows, len(q)), np.nan)
    valid = total > 0
    for column, quantile in enumerate(q):
        position = np.maximum(total - 1, 0) * quantile / 100
        low = np.floor(position)
        value_low, value_high = at_rank(low), at_rank(np.minimum(low + 1, np.maximum(total - 1, 0)))
        out[:, column] = np.where(valid, value_low + (value_high - value_low) * (position - low), np.nan)
    return out


def two_level_percentile_replicates(
    blocks: Sequence[ArrayLike],
    q: Sequence[float],
    *,
    counts: Sequence[Sequence[int]] | None = None,
    replicates: int = REPLICATES,
    rng: SeedLike = SEED,
) -> tuple[np.ndarray, np.ndarray]:
    """The q-th percentiles of the pooled blocks, and their two-level replicates.

    Returns ``(point, replicates)``: ``point`` of shape ``(len(q),)`` is numpy's percentile of every
    block's values together; ``replicates`` of shape ``(replicates, len(q))`` resample blocks, then
    units inside them (:func:`two_level_weights`). Without ``counts`` a unit is one value; with
    ``counts`` (values per request, in order, for each block, e.g. ITL gaps) a unit is a request
    and brings all of its values. Empty blocks are left out; no values at all raises ValueError.
    """
    datas = [np.asarray(block, dtype=float) for block in blocks]
    if counts is None:
        units = [np.ones(len(data), dtype=int) for data in datas]
    else:
        units = [np.asarray(c, dtype=int) for c in counts]
    kept = [(data, unit) for data, unit in zip(datas, units, strict=True) if len(data)]
    if not kept:
        raise ValueError("no samples")
    for data, unit in kept:
        if int(unit.sum()) != len(data) or (unit < 0).any():
            raise ValueError(f"unit sizes add up to {int(unit.sum())}, not to the {len(data)} values of a block")
    values = np.concatenate([data for data, _ in kept])
    point = np.percentile(values, list(q))
    # Requests with no value (one token, no gap) carry no weight but keep their place among the units.
    unit_of_value = np.repeat(np.arange(sum(len(u) for _, u in kept)), np.concatenate([u for _, u in kept]))
    order = np.argsort(values, kind="stable")
    weights = two_level_weights([len(u) for _, u in kept], replicates=replicates, rng=rng)
    rows = max(1, _BLOCK_VALUES // (8 * int(np.sqrt(len(values)) + weights.shape[1])))
    out = [
        unit_weighted_percentiles(values[order], unit_of_value[order], weights[start : start + rows], q)
        for start in range(0, replicates, rows)
    ]
    return point, np.concatenate(out)


def two_level_mean_replicates(
    block_points: Sequence[float],
    block_units: Sequence[ArrayLike],
    *,
    replicates: int = REPLICATES,
    rng: SeedLike = SEED,
) -> tuple[float, np.ndarray]:
    """The mean of per-block figures and its two-level replicates.

    Block b's figure is ``block_points[b]`` (e.g. tokens in the window / the window); its units
    (e.g. tokens in each one-second bucket) scale it: a resample of the units moves the figure by
    the ratio of their resampled mean to their mean. Blocks are drawn with replacement, each draw
    with its own resample of units. Returns ``(mean of block_points, replicates)``.
    """
    points = np.asarray(block_points, dtype=float)
    if not len(points) or len(points) != len(block_units):
        raise ValueError("one figure and one series of units per block, at least one block")
    draw = generator(rng)
    nblocks = len(points)
    picks = draw.integers(0, nblocks, (replicates, nblocks))
    scaled = np.empty((nblocks, replicates, nblocks))
    for block, units in enumerate(block_units):
        data = _samples(units)
        centre = data.mean()
        means = data[draw.integers(0, len(data), (replicates * nblocks, len(data)))].mean(axis=1)
        ratio = means / centre if centre else np.ones_like(means)
        scaled[block] = points[block] * ratio.reshape(replicates, nblocks)
    chosen = scaled[picks, np.arange(replicates)[:, None], np.arange(nblocks)[None, :]]
    return float(points.mean()), chosen.mean(axis=1)


def sequence_half_width(rounds: int, *, confidence: float = CONFIDENCE, prior: float = SEQUENCE_PRIOR) -> float:
    """The confidence sequence's half-width after `rounds` rounds, in units of the rounds' standard deviation
    (infinite when the rounds are too few for any bound at this confidence).

    The mixture's likelihood ratio against a mean m is a function of the t statistic of the rounds about m alone:
    ``(1 + n g)^(-1/2) * ((1 + t^2 / v) / (1 + t^2 / (v (1 + n g))))^(n / 2)`` with ``v = n - 1`` and ``g`` the
    prior. m stays in the sequence while the ratio is below ``1 / (1 - confidence)``, i.e. while ``|t|`` is below
    the root of that equation, solved here in closed form.
    """
    if rounds < 2:
        return math.inf
    alpha = 1 - confidence
    a = 1 + rounds * prior
    k = (math.sqrt(a) / alpha) ** (2 / rounds)
    if k >= a:
        return math.inf
    t_squared = (rounds - 1) * (k - 1) / (1 - k / a)
    return math.sqrt(t_squared / rounds)


def holm_levels(p_values: Mapping[str, float], *, alpha: float = 1 - CONFIDENCE) -> list[tuple[str, float, float]]:
    """Holm's step-down: ``(member, confidence of its interval, p-value)`` in the order tested (smallest
    p first); after the first step that does not reject, every later member keeps that step's confidence."""
    order = sorted(p_values, key=lambda member: (p_values[member], member))
    m, stopped, out = len(order), None, []
    for step, member in enumerate(order):
        tail = alpha / (m - step)
        confidence = 1 - tail if stopped is None else stopped
        if stopped is None and not p_values[member] < tail:
            stopped = confidence
        out.append((member, confidence, p_values[member]))
    return out


def _mixture_ratio(t_squared: float, rounds: int, prior: float) -> float:
    """The confidence sequence's likelihood ratio after `rounds` rounds whose t statistic about a mean is t."""
    a = 1 + rounds * prior
    v = rounds - 1
    return float(a**-0.5 * ((1 + t_squared / v) / (1 + t_squared / (v * a))) ** (rounds / 2))


def t_sequence_p_value(rounds: ArrayLike, *, null: float = 0.0, prior: float = SEQUENCE_PRIOR) -> float:
    """The anytime-valid p-value of "the rounds' mean is `null`" after the last round: one over the largest
    likelihood ratio any look reached (capped at 1). A valid p-value at any round a rule stops at, so Holm's
    step-down may read it; it is at most 1 - c exactly when `t_confidence_sequence` at confidence c excludes `null`.
    Missing figures give 1 (no evidence); so do rounds without spread, as that sequence claims nothing of them."""
    data = np.asarray(rounds, dtype=float)
    if data.ndim != 1 or not len(data) or not np.isfinite(data).all():
        return 1.0
    largest = 1.0
    for n in range(2, len(data) + 1):
        prefix = data[:n]
        spread = float(prefix.std(ddof=1))
        if spread == 0:
            continue
        t = (float(prefix.mean()) - null) * math.sqrt(n) / spread
        largest = max(largest, _mixture_ratio(t * t, n, prior))
    return min(1.0, 1.0 / largest)


def t_confidence_sequence(
    rounds: ArrayLike, *, confidence: float = CONFIDENCE, prior: float = SEQUENCE_PRIOR
) -> Interval:
    """The mean of per-round figures and its anytime-valid interval after the last round (see the module's notes).

    The interval is the intersection of the sequence's intervals after every round so far, so it only narrows
    from look to look. It cannot tell (infinite ends) before two rounds, or while the rounds have no spread (a
    Gaussian figure never repeats exactly: identical rounds mean the figure is not one, and no interval is
    claimed); its ends are NaN when the intersection is empty (the figures are not what the sequence assumes).
    """
    data = np.asarray(rounds, dtype=float)
    if data.ndim != 1:
        raise ValueError(f"expected one figure per round, got shape {data.shape}")
    if not len(data) or not np.isfinite(data).all():
        return Interval(float("nan"), float("nan"), float("nan"))
    low, high = -math.inf, math.inf
    for n in range(2, len(data) + 1):
        prefix = data[:n]
        spread = float(prefix.std(ddof=1))
        if spread == 0:
            continue
        half = spread * sequence_half_width(n, confidence=confidence, prior=prior)
        centre = float(prefix.mean())
        low, high = max(low, centre - half), min(high, centre + half)
    if low > high:
        return Interval(float(data.mean()), float("nan"), float("nan"))
    return Interval(float(data.mean()), low, high)


def _samples(values: ArrayLike) -> np.ndarray:
    data = np.asarray(values, dtype=float)
    if data.ndim != 1 or not len(data):
        raise ValueError("no samples" if not data.size else f"expected one series of samples, got shape {data.shape}")
    return data
