"""The one judge: an interval against a threshold gives an :class:`Outcome`, for `bench compare`, the
gate's checks and the quality evaluation alike (pure: stdlib and :mod:`optigate.stats`).

**The rule** (:func:`classify`). A threshold has a good side (:class:`Direction`: a budget or a maximum
is met *at most*, a minimum *at least*). The outcome is PASS when the whole interval lies on the good
side, touching the threshold included; FAIL when the whole interval lies strictly on the wrong side;
INCONCLUSIVE when it straddles the threshold (the data cannot tell), and when any end or the threshold
is NaN: missing evidence never passes. A figure without an interval (an error rate, a count) is judged
as the interval of its estimate alone, so it passes or fails. A canary judge works so: Netflix
Kayenta's classifier is one rule, and every metric's verdict is read from it.

**The comparison of two sides** (:func:`compare_change`, `bench compare`'s four words) is the same rule
read three times: BETTER or WORSE when the interval of the difference fails "no change" in that
direction and its estimate fails the practical margin in the same direction (Kayenta: the interval
excludes no change *and* the effect passes a threshold); EQUIVALENT when the interval passes the
margin on both sides; else INCONCLUSIVE.

**Words.** :class:`Outcome`'s values are the words every report writes. Where a consumer spells an
outcome its own way, :data:`EVALUATION_WORDS` says so in one table: the quality evaluation's
verdict.json has said "unresolved" for INCONCLUSIVE since its first version, and the gate reads it.

**One check** (:class:`Check`): one figure judged against a threshold, a gate check at a level or a
quality metric on a slice; each consumer writes it in its own report shape.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum

from optigate.stats import Interval


class Outcome(StrEnum):
    """What the data show. A requirement (:func:`classify`) is PASS, FAIL or INCONCLUSIVE; a comparison
    of two sides (:func:`compare_change`) is BETTER, WORSE, EQUIVALENT or INCONCLUSIVE."""

    PASS = "pass"
    FAIL = "fail"
    INCONCLUSIVE = "inconclusive"
    BETTER = "better"
    WORSE = "worse"
    EQUIVALENT = "equivalent"


class Direction(StrEnum):
    """The good side of a threshold."""

    AT_MOST = "at most"  # a budget or a maximum: lower is better (latency, error rates)
    AT_LEAST = "at least"  # a minimum: higher is better (gains, quality scores)

    @property
    def opposite(self) -> Direction:
        return Direction.AT_LEAST if self is Direction.AT_MOST else Direction.AT_MOST


#: The quality evaluation's word for each outcome (its verdict.json, its exit codes and the gate's
#: quality check read these); every other report writes an outcome's value.
EVALUATION_WORDS: Mapping[Outcome, str] = {
    Outcome.PASS: "pass",
    Outcome.FAIL: "fail",
    Outcome.INCONCLUSIVE: "unresolved",
}


def classify(interval: Interval, threshold: float, direction: Direction) -> Outcome:
    """PASS when the whole interval is on the good side of the threshold (touching it counts), FAIL
    when the whole interval is strictly on the wrong side, else INCONCLUSIVE (NaN included)."""
    _, low, high = interval
    if any(math.isnan(value) for value in (low, high, threshold)):
        return Outcome.INCONCLUSIVE
    if direction is Direction.AT_MOST:
        passed, failed = high <= threshold, low > threshold
    else:
        passed, failed = low >= threshold, high < threshold
    return Outcome.PASS if passed else Outcome.FAIL if failed else Outcome.INCONCLUSIVE


def overall(outcomes: Iterable[Outcome]) -> Outcome:
    """Several requirements at once: FAIL when any fails or there is none (no evidence never passes), else
    INCONCLUSIVE when any cannot tell, else PASS. The gate's verdict and a level's SLO are read so."""
    found = set(outcomes)
    if not found or Outcome.FAIL in found:
        return Outcome.FAIL
    return Outcome.INCONCLUSIVE if Outcome.INCONCLUSIVE in found else Outcome.PASS


def estimate_only(value: float) -> Interval:
    """The interval of an estimate judged without one: the estimate at both ends."""
    return Interval(value, value, value)


def compare_change(difference: Interval, margin: float, direction: Direction) -> Outcome:
    """BETTER, WORSE, EQUIVALENT or INCONCLUSIVE for ``candidate - baseline``; ``margin`` (>= 0, in
    the difference's unit) is the smallest change that matters, ``direction`` the metric's good side."""
    estimate = estimate_only(difference.point)
    for outcome, side in ((Outcome.WORSE, direction), (Outcome.BETTER, direction.opposite)):
        # ``side`` AT_MOST: a rise is judged (no change is at most 0, the margin +margin); AT_LEAST a fall.
        bound = margin if side is Direction.AT_MOST else -margin
        shown = classify(difference, 0.0, side) is Outcome.FAIL
        if shown and classify(estimate, bound, side) is Outcome.FAIL:
            return outcome
    within = (
        classify(difference, margin, Direction.AT_MOST) is Outcome.PASS
        and classify(difference, -margin, Direction.AT_LEAST) is Outcome.PASS
    )
    return Outcome.EQUIVALENT if within else Outcome.INCONCLUSIVE


@dataclass(frozen=True)
class Check:
    """One figure judged against a threshold: a gate check (at a concurrency level, or run-wide) or a
    quality metric on one slice of the evaluation's records."""

    name: str  # the gate's check (a CheckName) or the evaluation's metric
    outcome: Outcome  # PASS, FAIL or INCONCLUSIVE
    measured: float | str | None  # the estimate (the evaluation's: candidate - baseline); None: no evidence
    threshold: float | str | None  # what it is held to (the evaluation's: the tolerated change)
    detail: str = ""  # what was measured and, unless it passed, why not
    low: float | None = None  # the interval's ends; None when judged without one
    high: float | None = None
    concurrency: int | None = None  # the gate's level (None: a run-wide check)
    slice: str | None = None  # the evaluation's slice of records
    n: int | None = None  # the evaluation's records in the slice
    baseline: float | None = None  # each side's figure, when the check compares two sides
    candidate: float | None = None
    higher_is_better: bool | None = None
    adapter: str | None = None  # the gate's adapter (an inference component's traffic); None: all traffic

    @property
    def passed(self) -> bool:
        return self.outcome is Outcome.PASS

    @property
    def inconclusive(self) -> bool:
        return self.outcome is Outcome.INCONCLUSIVE
