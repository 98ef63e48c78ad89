"""The gate's checks at the team's SLO: goodput per level and capacity per side (only when a latency budget is set).

The SLO is gate.benchmark's ``p99_ttft_ms_budget`` and ``p99_itl_ms_budget`` (:func:`gate_slo`); without either
budget there is no SLO, and the verdict has neither check nor figure, as before they existed.

- ``goodput`` (percentage points, per level): the candidate's share of requests that met the SLO
  (:mod:`optigate.bench.goodput`: TTFT within the TTFT budget, time per output token within the ITL budget, a
  failed request never) minus the baseline's, each side the mean of its blocks' shares, with a 95 % percentile
  interval of the two-level replicates (blocks, then requests inside them). "Not worse": passes when the lower end
  is at least ``-max_goodput_loss_pct``, fails when the upper end is below it, else inconclusive. A side without
  per-request outcomes (a result written before they were recorded) fails closed: goodput unknown.
- **Capacity per side** (:func:`side_capacity`): at each level the SLO *holds* when the upper end of the 95 %
  interval of p99 TTFT and of p99 ITL is within its budget, *fails* when the lower end of either is over it, and is
  *uncertain* in between (counted as not holding): the rule of the candidate's ``p99_ttft``/``p99_itl`` checks,
  applied to each side. A side's capacity is the highest level up to which the SLO holds at every level, with
  an estimate interpolated where the point p99s cross the budget between that level and the next
  (:func:`level_status`). optigate.bench.capacity's search judges its runs with the same judge on the same kind of
  interval, with two differences that belong to a search on short runs of one side: a failed request counts
  there as a TTFT over budget (here the error_rate check judges failures), and an interval's upper end is never
  below the order-statistic bound of the p99 (its first levels have few requests; the gate's levels have hundreds).
- ``capacity`` (run-wide, listed before every other check): "capacity not lower". Fails when the candidate fails
  the SLO at a level where the baseline holds it at that level and every one below ("carries less within the SLO:
  holds up to c=16, the baseline up to c=64"); inconclusive when it is only uncertain there; passes otherwise.
  It fails only where a candidate's p99 check fails too, so it never rejects what the latency checks approve: it
  says *why* in the terms a platform owner asks about, the load one instance carries within the SLO.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from optigate import stats
from optigate.bench.core.metrics import RunSamples
from optigate.bench.goodput import Slo, goodput, goodput_difference
from optigate.config.models import BenchmarkGate
from optigate.gate.decision.checks import check_seed, failed, latency_check
from optigate.gate.decision.wording import CheckName, ci, points
from optigate.judge import Check, Direction, Outcome, classify, overall

HOLDS, FAILS, UNCERTAIN = "holds", "fails", "uncertain"
#: The latency checks that make up the SLO, and the budget of each.
_BUDGETS = ((CheckName.P99_TTFT, "p99_ttft_ms_budget"), (CheckName.P99_ITL, "p99_itl_ms_budget"))


def gate_slo(thresholds: BenchmarkGate) -> Slo | None:
    """The team's SLO from its latency budgets; None when neither is set."""
    if thresholds.p99_ttft_ms_budget is None and thresholds.p99_itl_ms_budget is None:
        return None
    return Slo(p99_ttft_ms=thresholds.p99_ttft_ms_budget, p99_itl_ms=thresholds.p99_itl_ms_budget)


# --------------------------------------------------------------------------- goodput


def side_goodput(blocks: Sequence[RunSamples], slo: Slo) -> dict[str, Any]:
    """A side's goodput at one level: share and rate the mean of its blocks' (each over its own window), the
    counts summed; share and rate None when a block has no per-request outcomes."""
    each = [goodput(block, slo) for block in blocks]
    known = all(g.share is not None for g in each)
    return {
        "share": float(np.mean([g.share for g in each])) if known else None,
        "rate_per_s": float(np.mean([g.rate_per_s for g in each])) if known else None,
        "met": sum(g.met for g in each),
        "requests": sum(g.requests for g in each),
    }


def goodput_check(
    level: int,
    base_blocks: Sequence[RunSamples],
    cand_blocks: Sequence[RunSamples],
    slo: Slo,
    max_loss_pts: float,
    seed: int,
    empty: str | None = None,
    confidence: float = stats.CONFIDENCE,
) -> Check:
    """Candidate minus baseline goodput share, in points: not worse than ``-max_loss_pts`` (see the module
    docstring); `empty` (a side without a successful request) fails it closed like every latency check."""
    name, threshold = CheckName.GOODPUT, -float(max_loss_pts)
    if empty:
        return failed(name, threshold, empty, level)
    difference = goodput_difference(
        base_blocks, cand_blocks, slo, rng=check_seed(seed, level, name), replicates=stats.replicates_for(confidence)
    )
    base_reps, cand_reps = difference.baseline_replicates, difference.candidate_replicates
    if difference.missing or base_reps is None or cand_reps is None:
        return failed(name, threshold, f"goodput unknown: the {difference.missing}", level)
    estimate = 100 * (difference.candidate - difference.baseline)
    low, high = stats.percentile_interval(100 * (cand_reps - base_reps), confidence)
    low, high = min(low, estimate), max(high, estimate)  # an interval always contains its estimate
    outcome = classify(stats.Interval(estimate, low, high), threshold, Direction.AT_LEAST)
    base_n, cand_n = sum(b.requests for b in base_blocks), sum(b.requests for b in cand_blocks)
    detail = (
        f"share of requests within the SLO ({slo.text()}): candidate {difference.candidate:.1%} of {cand_n}, "
        f"baseline {difference.baseline:.1%} of {base_n}: {points(estimate)} ({ci(confidence)} {points(low)} to "
        f"{points(high)}) vs at most {max_loss_pts:g} points lower"
    )
    if outcome is Outcome.FAIL:
        detail += ": fewer requests within the SLO, the whole interval"
    elif outcome is Outcome.INCONCLUSIVE:
        detail += ": the interval straddles the limit (cannot tell)"
    return Check(
        name,
        outcome,
        estimate,
        threshold,
        detail,
        low,
        high,
        level,
        baseline=difference.baseline,
        candidate=difference.candidate,
        higher_is_better=True,
    )


# --------------------------------------------------------------------------- capacity


def slo_checks(
    level: int, blocks: Sequence[RunSamples], thresholds: BenchmarkGate, seed: int, confidence: float = stats.CONFIDENCE
) -> list[Check]:
    """The p99 TTFT and p99 ITL checks of one side's blocks at one level (those with a budget): the
    candidate's own latency checks, the same rule and seeds, applied to either side."""
    checks = []
    for name, key in _BUDGETS:
        budget = getattr(thresholds, key)
        if budget is None:
            continue
        label = "TTFT" if name == CheckName.P99_TTFT else "ITL"
        series = [b.ttft_ms for b in blocks] if name == CheckName.P99_TTFT else [b.itl_ms for b in blocks]
        counts = None if name == CheckName.P99_TTFT else [b.itl_counts for b in blocks]
        checks.append(latency_check(name, label, series, counts, budget, level, seed, confidence))
    return checks


def level_status(checks: Sequence[Check]) -> str:
    """Whether the SLO holds at a level, from its p99 checks: any failing fails, any inconclusive is uncertain."""
    return {Outcome.FAIL: FAILS, Outcome.INCONCLUSIVE: UNCERTAIN, Outcome.PASS: HOLDS}[
        overall(check.outcome for check in checks)
    ]


@dataclass(frozen=True)
class SideCapacity:
    """One side's capacity at the SLO over the gate's levels (see the module docstring)."""

    statuses: dict[int, str]  # level -> holds | fails | uncertain
    p99: dict[int, dict[str, float | None]]  # level -> {"p99_ttft_ms", "p99_itl_ms"} point estimates
    holds_up_to: int | None  # None: not even at the lowest level
    estimate: float | None  # where the point p99s cross the budget; the top level when it holds at every one
    at_least: bool  # holds at every level: the capacity is at least the top level, the gate cannot say more

    def text(self) -> str:
        """How far the SLO holds: "up to c=16", "up to c=64, every level measured", "at no level (c=1 fails)"."""
        if self.holds_up_to is None:
            lowest = min(self.statuses)
            return f"at no level (c={lowest} {self.statuses[lowest]})"
        if self.at_least:
            return f"up to c={self.holds_up_to}, every level measured"
        return f"up to c={self.holds_up_to}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "holds_up_to": self.holds_up_to,
            "estimate": self.estimate,
            "at_least": self.at_least,
            "levels": [
                {"concurrency": level, "slo": status, **self.p99[level]} for level, status in self.statuses.items()
            ],
            "text": self.text(),
        }


def side_capacity(per_level: Mapping[int, Sequence[Check]], thresholds: BenchmarkGate) -> SideCapacity:
    """A side's capacity from its p99 checks at each level (:func:`slo_checks`)."""
    levels = sorted(per_level)
    statuses = {level: level_status(per_level[level]) for level in levels}
    p99 = {
        level: {
            key.removesuffix("_budget"): next(
                (c.measured for c in per_level[level] if c.name == name and isinstance(c.measured, float | int)), None
            )
            for name, key in _BUDGETS
        }
        for level in levels
    }
    holding = 0
    while holding < len(levels) and statuses[levels[holding]] == HOLDS:
        holding += 1
    if holding == 0:
        return SideCapacity(statuses, p99, None, None, False)
    top = levels[holding - 1]
    if holding == len(levels):
        return SideCapacity(statuses, p99, top, float(top), True)
    return SideCapacity(statuses, p99, top, _crossing(top, levels[holding], p99, thresholds), False)


def _crossing(
    below: int, above: int, p99: Mapping[int, Mapping[str, float | None]], thresholds: BenchmarkGate
) -> float:
    """Where the point p99s reach their budgets between a holding level and the next (linear); the next level
    when its point p99s are within the budgets (only its interval could not confirm them)."""
    crossings = [float(above)]
    for _, key in _BUDGETS:
        budget, metric = getattr(thresholds, key), key.removesuffix("_budget")
        low, high = p99[below][metric], p99[above][metric]
        if budget is None or low is None or high is None or not high > budget or not high > low:
            continue
        share = min(1.0, max(0.0, (budget - low) / (high - low)))
        crossings.append(below + share * (above - below))
    return min(crossings)


def capacity_check(baseline: SideCapacity, candidate: SideCapacity, slo: Slo) -> Check:
    """Capacity not lower: the candidate must hold the SLO at every level where the baseline holds it."""
    name = CheckName.CAPACITY
    limit = baseline.holds_up_to
    measured = candidate.holds_up_to or 0
    if limit is None:
        detail = f"the baseline holds the SLO ({slo.text()}) {baseline.text()}: no load it carries to compare with"
        return Check(name, Outcome.PASS, measured, 0, detail)
    levels = [level for level in candidate.statuses if level <= limit]
    failing = [level for level in levels if candidate.statuses[level] == FAILS]
    unsure = [level for level in levels if candidate.statuses[level] == UNCERTAIN]
    sides = f"holds it {candidate.text()}, the baseline {baseline.text()}"
    if failing:
        where = ", ".join(f"c={level}" for level in failing)
        detail = f"carries less within the SLO ({slo.text()}): {sides}; it fails the SLO at {where}"
        return Check(name, Outcome.FAIL, measured, limit, detail)
    if unsure:
        where = ", ".join(f"c={level}" for level in unsure)
        detail = (
            f"may carry less within the SLO ({slo.text()}): {sides}; at {where} its p99 intervals straddle the "
            "budgets (cannot tell)"
        )
        return Check(name, Outcome.INCONCLUSIVE, measured, limit, detail)
    detail = f"carries at least the baseline's load within the SLO ({slo.text()}): {sides}"
    return Check(name, Outcome.PASS, measured, limit, detail)


def capacity_summary(
    baseline: SideCapacity, candidate: SideCapacity, slo: Slo, instance_count: int, peak_concurrency: float | None
) -> dict[str, Any]:
    """Both sides' capacity, side by side, with a headline: how much more (or less) load the candidate carries
    within the SLO, and with today's peak (concurrent streams) how many instances fewer (or more) that needs."""
    base_est, cand_est = baseline.estimate, candidate.estimate
    ratio = cand_est / base_est if base_est and cand_est is not None else None
    instances = None
    if peak_concurrency and base_est and cand_est and not (baseline.at_least or candidate.at_least):
        # capacity per instance: the benchmarked endpoint's estimate over its instances
        need = [math.ceil(float(peak_concurrency) / (est / instance_count)) for est in (base_est, cand_est)]
        instances = {"baseline": need[0], "candidate": need[1], "fewer": need[0] - need[1]}
    return {
        "slo": {"p99_ttft_ms": slo.p99_ttft_ms, "p99_itl_ms": slo.p99_itl_ms, "text": slo.text()},
        "baseline": baseline.to_dict(),
        "candidate": candidate.to_dict(),
        "ratio": ratio,
        "instance_count": instance_count,
        "peak_concurrency": peak_concurrency,
        "instances_at_peak": instances,
        "headline": _headline(baseline, candidate, ratio, instances, peak_concurrency),
    }


def _headline(
    baseline: SideCapacity,
    candidate: SideCapacity,
    ratio: float | None,
    instances: Mapping[str, int] | None,
    peak: float | None,
) -> str:
    if baseline.at_least and candidate.at_least:
        return (
            f"both sides hold the SLO at every level measured (up to c={baseline.holds_up_to}): the gate's levels "
            "cannot tell which carries more"
        )
    if ratio is None:
        return f"the candidate holds the SLO {candidate.text()}; the baseline {baseline.text()}"
    bound = " at least" if candidate.at_least else " at most" if baseline.at_least else ""
    note = "; a side holding it at every level counts its top one" if bound else ""
    sentence = (
        f"carries{bound} {ratio:.2g}× the baseline's load within the SLO (c≈{candidate.estimate:.3g} vs "
        f"c≈{baseline.estimate:.3g} per endpoint{note})"
    )
    if instances and peak:
        fewer = instances["fewer"]
        change = f"{fewer} fewer" if fewer >= 0 else f"{-fewer} more"
        sentence += f": {change} instances at today's peak of {peak:g} streams"
    return sentence
