"""The verdict's sentences: figures with their units, the threshold each check applies, and one
reason per failed check that names the check, where, the measured value and the threshold."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from optigate.bench.metrics import RunSamples

if TYPE_CHECKING:  # checks.py words its details with the helpers below
    from optigate.gate.decision.checks import Check


# Typed Any: they word a check's figures, typed float | str | None, where the check says a number.
def ms(value: Any) -> str:
    return f"{value:,.1f} ms"


def pct(value: Any) -> str:
    return f"{value:+.1f} %"


def error_text(run: RunSamples) -> str:
    """``"; ModelError 3, Timeout 1"`` for a run with errors, else empty."""
    return "; " + ", ".join(f"{name} {count}" for name, count in sorted(run.errors.items())) if run.errors else ""


def label(check: Check) -> str:
    """``name`` or ``name@c<level>``: a check's short name in the summary."""
    return check.name if check.concurrency is None else f"{check.name}@c{check.concurrency}"


def threshold_text(check: Check) -> str:
    if check.name in ("p99_ttft", "p99_itl"):
        return f"budget {ms(check.threshold)} on the upper end of the 95 % interval"
    if check.name in ("throughput_gain", "tokens_per_chunk_gain"):
        return f"minimum {pct(check.threshold)} on the lower end of the 95 % interval"
    if check.name in ("error_rate", "shadow_error_rate"):
        return f"maximum {check.threshold:.2%}"
    if check.name == "shadow_traffic":
        return f"at least {check.threshold:.0f} mirrored requests"
    if check.name == "quality":
        return "status pass"
    return f"concurrency {check.threshold}" if check.threshold is not None else "a level measured by both"


def reason(check: Check) -> str:
    """One sentence per failed or inconclusive check: the check, where, the measured value and the threshold."""
    where = f" at concurrency {check.concurrency}" if check.concurrency is not None else ""
    if check.inconclusive:
        return f"{check.name}{where} is inconclusive: {check.detail}; {threshold_text(check)}."
    if check.name == "quality":
        return f"quality fails: {check.detail} (required: {threshold_text(check)})."
    if check.name == "coverage":
        return f"coverage{where} fails: {check.detail}."
    if check.measured is None:
        return f"{check.name}{where} fails closed: {check.detail}; {threshold_text(check)}."
    if check.name in ("p99_ttft", "p99_itl"):
        metric = "TTFT" if check.name == "p99_ttft" else "ITL"
        return (
            f"{check.name}{where} fails: candidate p99 {metric} is {ms(check.measured)} with a 95 % interval up to "
            f"{ms(check.ci_high)}, over the {ms(check.threshold)} budget that the whole interval must stay within."
        )
    if check.name in ("throughput_gain", "tokens_per_chunk_gain"):
        throughput = check.name == "throughput_gain"
        what = "output throughput gain" if throughput else "mean tokens-per-chunk gain"
        tail = "" if throughput else " (speculation accepting this few drafted tokens slows decoding)"
        return (
            f"{check.name}{where} fails: {what} is {pct(check.measured)} "
            f"with a 95 % interval down to {pct(check.ci_low)}, "
            f"below the {pct(check.threshold)} minimum that the whole interval must reach{tail}."
        )
    if check.name in ("error_rate", "shadow_error_rate"):
        return (
            f"{check.name}{where} fails: {check.detail}, an error rate of {check.measured:.2%}, "
            f"above the {check.threshold:.2%} maximum."
        )
    if check.name == "shadow_traffic":
        return f"shadow_traffic fails closed: {check.detail}; {threshold_text(check)}."
    return f"{check.name}{where} fails: {check.detail}."
