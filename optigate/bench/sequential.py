"""Two sides compared round by round, readable after every round: the anytime-valid form of `bench compare`
(`bench compare --rounds`, `bench --against`; the gate's own looks are optigate.gate.decision.looks).

**Rounds.** A round is one block of the twin (baseline) and one of the candidate at one level, run one after the
other, so the two share the host's state of that moment. For each figure (a latency percentile of a block, or its
output tokens/s) a round gives the log of the candidate's figure over the twin's: pairing in time cancels the drift
between rounds, and rounds are independent of one another. A round with a side that has no figure (no successful
request) gives none, and the figure's comparison cannot tell (fail closed). With an SLO, a block's goodput share
(its requests within the SLO) is one more figure, higher is better, compared as a difference in points (candidate
minus twin: a share of 0 has no log); its margin is in points too. A figure equal in every round (both sides always
within the SLO) has no spread to bound it by, and cannot be told.

**Intervals.** The mean of a figure's round logs has the anytime-valid interval of
:func:`optigate.stats.t_confidence_sequence`, shown as a percent change of the candidate over the twin. It holds at
every look, so the comparison may be read after each round and stopped when decided.

**Multiplicity.** As in :mod:`optigate.bench.compare`: Holm's step-down over every figure of every level, on each
figure's anytime-valid p-value of "no change" (:func:`optigate.stats.t_sequence_p_value`, a valid p-value at any
round a rule stops at), keeps the chance of any false better or worse at FAMILY_ALPHA; each interval is shown at the
confidence Holm tested it at, and its word is read off it by the one judge (:func:`optigate.judge.compare_change`,
the margin in percent of the twin).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass

import numpy as np

from optigate import stats
from optigate.bench.compare import (
    DEFAULT_MARGIN_PCT,
    FAMILY_ALPHA,
    GOODPUT,
    METRICS,
    QUANTILES,
    MarginLike,
    margin_for,
)
from optigate.bench.core.metrics import RunSamples
from optigate.bench.goodput import Slo, goodput
from optigate.bench.throughput import THROUGHPUT
from optigate.jsonsafe import json_safe
from optigate.judge import Direction, Outcome, compare_change


@dataclass(frozen=True)
class RoundDelta:
    """One figure at one level after `rounds` rounds: the candidate's change over the twin (percent), its anytime
    interval at `confidence`, the p-value Holm read, and the word."""

    metric: str
    statistic: str  # p50 | p90 | p99 | mean
    concurrency: int
    rounds: int  # rounds with a figure on both sides
    change_pct: float  # NaN: no figure; goodput_share: a difference in points (low and high too)
    low_pct: float
    high_pct: float
    lower_is_better: bool
    verdict: Outcome
    margin_pct: float
    confidence: float
    p_value: float

    @property
    def decided(self) -> bool:
        """Better, worse or equivalent: more rounds would not be spent on this figure."""
        return self.verdict is not Outcome.INCONCLUSIVE

    def to_dict(self) -> dict[str, object]:
        return {**json_safe(asdict(self)), "verdict": str(self.verdict)}


def _percentile(metric: str, q: float) -> Callable[[RunSamples], float]:
    def figure(block: RunSamples) -> float:
        values = getattr(block, metric)
        return float(np.percentile(values, q)) if len(values) else math.nan

    return figure


def _throughput(block: RunSamples) -> float:
    return float(block.to_result(include_samples=False)[THROUGHPUT])


#: Every figure a round compares: (metric, statistic, lower is better, the block's figure).
FIGURES: tuple[tuple[str, str, bool, Callable[[RunSamples], float]], ...] = (
    *((metric, f"p{q}", True, _percentile(metric, q)) for metric in METRICS for q in QUANTILES),
    (THROUGHPUT, "mean", False, _throughput),
)


def round_logs(
    twin: Sequence[RunSamples], candidate: Sequence[RunSamples], figure: Callable[[RunSamples], float]
) -> list[float]:
    """log(candidate / twin) of one figure, round by round (the i-th block of each side); NaN where a side has no
    positive figure. Rounds are counted while both sides have a block."""
    logs = []
    for twin_block, candidate_block in zip(twin, candidate, strict=False):
        base, cand = figure(twin_block), figure(candidate_block)
        usable = all(math.isfinite(value) and value > 0 for value in (base, cand))
        logs.append(math.log(cand / base) if usable else math.nan)
    return logs


def round_points(
    twin: Sequence[RunSamples], candidate: Sequence[RunSamples], figure: Callable[[RunSamples], float]
) -> list[float]:
    """100 x (candidate - twin) of a share, round by round; NaN where a side has none."""
    return [
        100 * (figure(c) - figure(t)) if math.isfinite(figure(c)) and math.isfinite(figure(t)) else math.nan
        for t, c in zip(twin, candidate, strict=False)
    ]


def _goodput_share(slo: Slo) -> Callable[[RunSamples], float]:
    def figure(block: RunSamples) -> float:
        share = goodput(block, slo).share
        return math.nan if share is None else share

    return figure


def compare_rounds(
    twin: Mapping[int, Sequence[RunSamples]],
    candidate: Mapping[int, Sequence[RunSamples]],
    *,
    margin_pct: MarginLike = DEFAULT_MARGIN_PCT,
    alpha: float = FAMILY_ALPHA,
    slo: Slo | None = None,
) -> list[RoundDelta]:
    """Every figure at every level both sides measured, after the rounds so far (Holm over all of them); with `slo`
    each level's goodput share too."""
    figures = [*FIGURES, *([(GOODPUT, "share", False, _goodput_share(slo))] if slo is not None else [])]
    entries = []
    for level in sorted(set(twin) & set(candidate)):
        for metric, statistic, lower_is_better, figure in figures:
            per_round = round_points if metric == GOODPUT else round_logs
            logs = per_round(twin[level], candidate[level], figure)
            entries.append((metric, statistic, level, lower_is_better, logs, stats.t_sequence_p_value(logs)))
    # Holm over every figure: the confidence each interval is shown at (optigate.stats.holm_levels).
    keys = [f"c{level} {metric} {statistic}" for metric, statistic, level, *_ in entries]
    p_values = {key: entry[5] for key, entry in zip(keys, entries, strict=True)}
    tested = {key: confidence for key, confidence, _ in stats.holm_levels(p_values, alpha=alpha)}
    deltas = []
    for index, (metric, statistic, level, lower_is_better, logs, p_value) in enumerate(entries):
        confidence = tested[keys[index]]
        _, low, high = stats.t_confidence_sequence(logs, confidence=confidence)
        point = float(np.mean(logs)) if logs else math.nan
        change = (point, low, high) if metric == GOODPUT else (_pct(point), _pct(low), _pct(high))
        margin = margin_for(margin_pct, metric)
        direction = Direction.AT_MOST if lower_is_better else Direction.AT_LEAST
        verdict = compare_change(stats.Interval(*change), margin, direction)
        rounds = sum(math.isfinite(value) for value in logs)
        deltas.append(
            RoundDelta(metric, statistic, level, rounds, *change, lower_is_better, verdict, margin, confidence, p_value)
        )
    return deltas


def _pct(log_ratio: float) -> float:
    """A log ratio as a percent change (infinite ends stay infinite, NaN stays NaN)."""
    if math.isnan(log_ratio):
        return math.nan
    if math.isinf(log_ratio):
        return math.inf if log_ratio > 0 else -100.0
    return 100 * math.expm1(log_ratio)
