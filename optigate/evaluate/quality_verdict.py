"""Baseline vs candidate on the same records: per metric and per slice, both values, the
delta, a paired-bootstrap 95 % interval, and a verdict that says when the data cannot tell.

Rules (for a higher-is-better metric with tolerance t, e.g. 1 % absolute; refusal rate is
lower-is-better with its own tolerance, default 0):

- **fail** when the measured drop exceeds t. Damage hides in slices, so this applies to every
  slice (categories, the long-context slice) as well as to the whole dataset.
- **pass** when even the pessimistic end of the interval stays within t. The interval is never
  narrower than one record's weight (1/n): with identical answers a bootstrap interval collapses
  to zero, but n records cannot tell a change smaller than 1/n.
- **unresolved** otherwise: the data is too small (or too noisy) to tell whether the drop is
  within t; the verdict says so and how many records would be needed, instead of passing.

These are the one judge's rule (:func:`optigate.judge.classify`) on the interval from the pessimistic
end to the estimate: its optimistic half is never credited, so a measured drop beyond t fails even
when the noisy interval reaches back inside it. "unresolved" is the evaluation's word for the judge's
INCONCLUSIVE (:data:`optigate.judge.EVALUATION_WORDS`).

The candidate passes only when no check fails and the whole-dataset checks pass; slices too
small to resolve are listed as warnings. No records (or no scores) is **unresolved**, never a pass.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from optigate import stats
from optigate.config.models import EvaluationGate
from optigate.judge import EVALUATION_WORDS, Check, Direction, Outcome, classify, estimate_only

ALL = "all"
LONG_CONTEXT = "long_context"
#: The config's defaults (a frozen model, so one shared instance is safe as a default).
DEFAULT_THRESHOLDS = EvaluationGate()


#: Slack on the tolerance: a drop of exactly t, in floating point, is within it.
SLACK = 1e-12


def status(check: Check) -> str:
    """The evaluation's word for a check's outcome: pass, fail or unresolved."""
    return EVALUATION_WORDS[check.outcome]


def check_dict(check: Check) -> dict[str, Any]:
    """A check as verdict.json writes it."""
    return {
        "metric": check.name,
        "slice": check.slice,
        "n": check.n,
        "baseline": check.baseline,
        "candidate": check.candidate,
        "delta": check.measured,
        "low": check.low,
        "high": check.high,
        "tolerance": check.threshold,
        "higher_is_better": check.higher_is_better,
        "status": status(check),
        "note": check.detail,
    }


@dataclass
class Verdict:
    status: str
    checks: list[Check]
    reasons: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return self.status == "pass"

    def to_dict(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "passed": self.passed,
            "reasons": self.reasons,
            "warnings": self.warnings,
            "checks": [check_dict(c) for c in self.checks],
        }


def metric_check(
    metric: str,
    slice_name: str,
    baseline: np.ndarray,
    candidate: np.ndarray,
    tolerance: float,
    higher_is_better: bool,
    rng: np.random.Generator,
) -> Check:
    n = len(baseline)
    # Records resampled with both of their scores: the interval of the mean per-record delta.
    mean_delta, low, high = stats.paired_mean_difference(
        baseline, candidate, replicates=stats.PAIRED_REPLICATES, rng=rng
    )
    granularity = 1.0 / n
    moves = "drops" if higher_is_better else "rises"

    def check(outcome: Outcome, note: str) -> Check:
        base, cand = float(baseline.mean()), float(candidate.mean())
        return Check(metric, outcome, mean_delta, tolerance, note, low, high, slice=slice_name, n=n, baseline=base,
                     candidate=cand, higher_is_better=higher_is_better)  # fmt: skip

    # The interval judged runs from the pessimistic end (never narrower than one record's weight) to
    # the estimate; the threshold is the tolerated change on the harmful side.
    if higher_is_better:
        direction, threshold = Direction.AT_LEAST, -tolerance - SLACK
        judged = stats.Interval(mean_delta, min(low, mean_delta - granularity), mean_delta)
    else:
        direction, threshold = Direction.AT_MOST, tolerance + SLACK
        judged = stats.Interval(mean_delta, mean_delta, max(high, mean_delta + granularity))
    if tolerance == 0:
        # "Not increased": discrete events, judged on the counts themselves (the estimate alone).
        outcome = classify(estimate_only(mean_delta), threshold, direction)
        failed = outcome is Outcome.FAIL
        return check(outcome, f"{moves} by {abs(mean_delta):.1%} (no change allowed)" if failed else "")
    outcome = classify(judged, threshold, direction)
    if outcome is Outcome.FAIL:
        note = f"{moves} by {abs(mean_delta):.1%} (tolerance {tolerance:.1%})"
    elif outcome is Outcome.PASS:
        note = ""
    else:
        needed = math.ceil(1 / tolerance) if tolerance > 0 else None
        width = max(high - low, granularity)
        note = (
            f"cannot resolve {tolerance:.1%} with {n} records: interval [{low:+.1%}, {high:+.1%}], "
            f"one record moves the mean by {granularity:.1%}"
        )
        if needed and n < needed:
            note += f"; at least {needed} records are needed"
        elif width > tolerance:
            note += "; more records or less noise are needed"
    return check(outcome, note)


def slices_of(records: list[dict[str, Any]], thresholds: EvaluationGate) -> dict[str, list[int]]:
    """Indexes of the records in each slice: all, each category, and the long-context slice."""
    slices: dict[str, list[int]] = {ALL: list(range(len(records)))}
    for index, record in enumerate(records):
        category = record.get("category")
        if category:
            slices.setdefault(f"category={category}", []).append(index)
        if record.get("prompt_tokens", 0) > thresholds.long_context_prompt_tokens:
            slices.setdefault(LONG_CONTEXT, []).append(index)
    return slices


def compare(
    records: list[dict[str, Any]],
    baseline: list[dict[str, float]],
    candidate: list[dict[str, float]],
    thresholds: EvaluationGate = DEFAULT_THRESHOLDS,
    *,
    lower_is_better: tuple[str, ...] = ("refusal",),
    seed: int = 0,
) -> Verdict:
    """`baseline[i]` and `candidate[i]` are the scores of `records[i]` (same record, both models)."""
    if not (len(records) == len(baseline) == len(candidate)):
        raise ValueError("records, baseline and candidate scores must align")
    rng = stats.generator(seed)  # one generator for every check, in order: reproducible as a whole
    metrics = sorted({m for scores in baseline for m in scores})
    checks: list[Check] = []
    for slice_name, indexes in slices_of(records, thresholds).items():
        for metric in metrics:
            rows = [i for i in indexes if metric in baseline[i] and metric in candidate[i]]
            if not rows:
                continue
            base = np.array([baseline[i][metric] for i in rows], dtype=float)
            cand = np.array([candidate[i][metric] for i in rows], dtype=float)
            lower = metric in lower_is_better
            tolerance = thresholds.max_refusal_rate_increase if lower else thresholds.max_metric_drop_abs
            checks.append(metric_check(metric, slice_name, base, cand, tolerance, not lower, rng))
    if not any(c.slice == ALL for c in checks):
        # Zero records, or records without a score both models got: nothing was measured, so nothing passes.
        what = f"no scored records ({len(records)} in the dataset)" if records else "no records"
        needed = math.ceil(1 / thresholds.max_metric_drop_abs) if thresholds.max_metric_drop_abs > 0 else 1
        return Verdict(
            EVALUATION_WORDS[Outcome.INCONCLUSIVE],
            checks,
            [f"{what}: cannot resolve {thresholds.max_metric_drop_abs:.1%}; at least {needed} records are needed"],
        )
    failures = [c for c in checks if c.outcome is Outcome.FAIL]
    overall_unresolved = [c for c in checks if c.slice == ALL and c.inconclusive]
    reasons = [f"{c.name} on {c.slice}: {c.detail}" for c in failures]
    unresolved_by_slice: dict[str, list[Check]] = {}
    for c in checks:
        if c.inconclusive and c.slice != ALL:
            unresolved_by_slice.setdefault(str(c.slice), []).append(c)
    warnings = [
        f"{name}: {group[0].n} records cannot resolve {group[0].threshold:.1%} ({', '.join(c.name for c in group)}); "
        "a drop there would have to exceed the tolerance to fail"
        for name, group in unresolved_by_slice.items()
    ]
    if failures:
        outcome = Outcome.FAIL
    elif overall_unresolved:
        outcome = Outcome.INCONCLUSIVE
        reasons = [f"{c.name} on the whole dataset: {c.detail}" for c in overall_unresolved]
    else:
        outcome = Outcome.PASS
    return Verdict(EVALUATION_WORDS[outcome], checks, reasons, warnings)
