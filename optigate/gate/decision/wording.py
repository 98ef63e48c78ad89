"""The gate's checks by name, in order, each with its words: the unit of its figures, the threshold it
applies and the sentence of its failure. A new check is one :class:`CheckName` member and one
:data:`WORDS` entry here, and one function in :mod:`.checks`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from optigate.bench.core.metrics import RunSamples
from optigate.judge import Check


class CheckName(StrEnum):
    """The gate's checks, in the order they are listed within a level; the order is also part of each
    check's seed (:func:`optigate.gate.decision.checks.check_seed`), so a new check goes last."""

    COVERAGE = "coverage"
    P99_TTFT = "p99_ttft"
    P99_ITL = "p99_itl"
    THROUGHPUT_GAIN = "throughput_gain"
    ERROR_RATE = "error_rate"
    TOKENS_PER_CHUNK_GAIN = "tokens_per_chunk_gain"
    SHADOW_TRAFFIC = "shadow_traffic"
    SHADOW_ERROR_RATE = "shadow_error_rate"
    QUALITY = "quality"
    # At the team's SLO, only when a latency budget is set (optigate.gate.decision.slo_checks).
    GOODPUT = "goodput"
    CAPACITY = "capacity"
    # The candidate's server's own acceptance, only when the change speculates (optigate.gate.server_metrics).
    SPECULATIVE_ACCEPTANCE = "speculative_acceptance"
    # A replay whose client fell behind the recorded schedule (optigate.bench.core.schedule.judge_schedule).
    SCHEDULE = "schedule"
    # A file the decision reads (a merged benchmark result, a shard of one, the evaluation's verdict) that failed its
    # schema: the verdict is this check alone, inconclusive (optigate.gate.decision.verdict.unreadable_verdict).
    INPUTS = "inputs"


# Typed Any: they word a check's figures, typed float | str | None, where the check says a number.
def ms(value: Any) -> str:
    return f"{value:,.1f} ms"


def pct(value: Any) -> str:
    return f"{value:+.1f} %"


def ci(confidence: float) -> str:
    """An interval's confidence as a check's detail says it: "95 % CI", or "99.4 % CI" at a gate's look
    (optigate.gate.decision.looks)."""
    return f"{100 * confidence:.3g} % CI"


def points(value: Any) -> str:
    """A difference of two shares, in percentage points."""
    return f"{value:+.1f} points"


def error_text(run: RunSamples) -> str:
    """``"; ModelError 3, Timeout 1"`` for a run with errors, else empty."""
    return "; " + ", ".join(f"{name} {count}" for name, count in sorted(run.errors.items())) if run.errors else ""


def label(check: Check) -> str:
    """``name``, ``name@c<level>`` or ``name[adapter]@c<level>``: a check's short name in the summary."""
    name = check.name if check.adapter is None else f"{check.name}[{check.adapter}]"
    return name if check.concurrency is None else f"{name}@c{check.concurrency}"


#: The sentence of a failed check, given the check and where it ran ("" or " at concurrency 4").
Failure = Callable[[Check, str], str]


@dataclass(frozen=True)
class Words:
    """How the verdict words one check."""

    threshold: Callable[[Check], str]  # the threshold as the verdict states it
    failure: Failure  # the reason it failed (an inconclusive check's reason is common to all)
    unit: str | None = None  # how the report shows its figures: "ms", "%" or "fraction"


def _budget(check: Check) -> str:
    return f"budget {ms(check.threshold)} on the upper end of the 95 % interval"


def _minimum(check: Check) -> str:
    return f"minimum {pct(check.threshold)} on the lower end of the 95 % interval"


def _maximum(check: Check) -> str:
    return f"maximum {check.threshold:.2%}"


def _closed_without_figure(failure: Failure) -> Failure:
    """A figure's failure; a check that has no figure failed closed (missing evidence)."""

    def sentence(check: Check, where: str) -> str:
        if check.measured is None:
            return f"{check.name}{where} fails closed: {check.detail}; {WORDS[CheckName(check.name)].threshold(check)}."
        return failure(check, where)

    return sentence


def _latency_failure(check: Check, where: str) -> str:
    metric = "TTFT" if check.name == CheckName.P99_TTFT else "ITL"
    return (
        f"{check.name}{where} fails: candidate p99 {metric} is {ms(check.measured)} with a 95 % interval up to "
        f"{ms(check.high)}, over the {ms(check.threshold)} budget that the whole interval must stay within."
    )


def _gain_failure(check: Check, where: str) -> str:
    throughput = check.name == CheckName.THROUGHPUT_GAIN
    what = "output throughput gain" if throughput else "mean tokens-per-chunk gain"
    tail = "" if throughput else " (speculation accepting this few drafted tokens slows decoding)"
    return (
        f"{check.name}{where} fails: {what} is {pct(check.measured)} "
        f"with a 95 % interval down to {pct(check.low)}, "
        f"below the {pct(check.threshold)} minimum that the whole interval must reach{tail}."
    )


def _error_rate_failure(check: Check, where: str) -> str:
    return (
        f"{check.name}{where} fails: {check.detail}, an error rate of {check.measured:.2%}, "
        f"above the {check.threshold:.2%} maximum."
    )


def _shadow_traffic_threshold(check: Check) -> str:
    return f"at least {check.threshold:.0f} mirrored requests"


def _coverage_threshold(check: Check) -> str:
    return f"concurrency {check.threshold}" if check.threshold is not None else "a level measured by both"


def _goodput_threshold(check: Check) -> str:
    limit: Any = check.threshold  # a number of points, negative
    return f"at most {-limit:g} points below the baseline's share on the lower end of the 95 % interval"


def _goodput_failure(check: Check, where: str) -> str:
    return (
        f"goodput{where} fails: the candidate's share of requests within the SLO is {check.candidate:.1%}, the "
        f"baseline's {check.baseline:.1%}: {points(check.measured)} with a 95 % interval up to {points(check.high)}, "
        f"below the {points(check.threshold)} that the whole interval must stay above."
    )


def _capacity_threshold(check: Check) -> str:
    if not check.threshold:
        return "the SLO held at every level where the baseline holds it"
    return f"the SLO held at every level where the baseline holds it (up to c={check.threshold})"


def _acceptance_threshold(check: Check) -> str:
    limit: Any = check.threshold
    return f"break-even {limit:.0%} of drafted tokens accepted, below which drafting and verifying cost what they save"


_LATENCY = Words(_budget, _closed_without_figure(_latency_failure), "ms")
_GAIN = Words(_minimum, _closed_without_figure(_gain_failure), "%")
_ERROR_RATE = Words(_maximum, _closed_without_figure(_error_rate_failure), "fraction")

#: Every check's words, in :class:`CheckName`'s order.
WORDS: dict[CheckName, Words] = {
    CheckName.COVERAGE: Words(_coverage_threshold, lambda check, where: f"coverage{where} fails: {check.detail}."),
    CheckName.P99_TTFT: _LATENCY,
    CheckName.P99_ITL: _LATENCY,
    CheckName.THROUGHPUT_GAIN: _GAIN,
    CheckName.ERROR_RATE: _ERROR_RATE,
    CheckName.TOKENS_PER_CHUNK_GAIN: _GAIN,
    CheckName.SHADOW_TRAFFIC: Words(
        _shadow_traffic_threshold,
        lambda check, where: f"shadow_traffic fails closed: {check.detail}; {_shadow_traffic_threshold(check)}.",
    ),
    CheckName.SHADOW_ERROR_RATE: _ERROR_RATE,
    CheckName.QUALITY: Words(
        lambda check: "status pass",
        lambda check, where: f"quality{where} fails: {check.detail} (required: status pass).",
    ),
    CheckName.GOODPUT: Words(_goodput_threshold, _closed_without_figure(_goodput_failure), "points"),
    CheckName.CAPACITY: Words(_capacity_threshold, lambda check, where: f"capacity fails: {check.detail}."),
    CheckName.SPECULATIVE_ACCEPTANCE: Words(
        _acceptance_threshold,
        lambda check, where: f"speculative_acceptance{where} fails: {check.detail}, {_acceptance_threshold(check)}.",
        "fraction",
    ),
    CheckName.SCHEDULE: Words(
        lambda check: f"p99 lag of the sends within {check.threshold or '?'} ms of the recorded schedule",
        lambda check, where: f"schedule{where} fails: {check.detail}.",
        "ms",
    ),
    CheckName.INPUTS: Words(
        lambda check: "every file the decision reads valid, or nothing is decided from it",
        lambda check, where: f"inputs fail: {check.detail}.",
    ),
}


def threshold_text(check: Check) -> str:
    return WORDS[CheckName(check.name)].threshold(check)


def reason(check: Check) -> str:
    """One sentence per failed or inconclusive check: the check, where, the measured value and the threshold."""
    where = f" at concurrency {check.concurrency}" if check.concurrency is not None else ""
    if check.adapter is not None:
        where = f" for adapter {check.adapter}{where}"
    if check.inconclusive:
        return f"{check.name}{where} is inconclusive: {check.detail}; {threshold_text(check)}."
    return WORDS[CheckName(check.name)].failure(check, where)
