"""The server's own figures in the verdict (pure): what the baseline's twin and the candidate published over the
benchmark's window (optigate.bench.server_metrics.read_sides, run by the gate's reader function), as report rows,
informational findings, and the one check they decide: speculation whose acceptance is below break-even is rejected.

The acceptance check here is the server's evidence of speculative decoding, used only where the candidate's container
exports vLLM's counters (optigate.serving.surfaces; no LMI container does: optigate.gate.decision.speculation reads
the client's instead). Break-even: the plan's (optigate.deployment.speculation_proof), else the rule of thumb
(optigate.plan.speculation.DEFAULT_BREAK_EVEN_ACCEPTANCE). Fail closed: a candidate that speculates but whose
acceptance the server did not publish cannot be approved.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from optigate.bench.server_metrics import FIGURES, TABLE
from optigate.gate.decision.inputs import speculative_method
from optigate.gate.decision.wording import CheckName
from optigate.judge import Check, Outcome
from optigate.plan.speculation import DEFAULT_BREAK_EVEN_ACCEPTANCE

BREAK_EVEN_ACCEPTANCE = DEFAULT_BREAK_EVEN_ACCEPTANCE
SIDES = ("baseline", "candidate")
ACCEPTANCE_SERIES = "vllm:spec_decode_num_accepted_tokens / vllm:spec_decode_num_draft_tokens"
KV_FULL = 0.95  # a KV cache this full admits new requests only as others finish


def _side(figures: Mapping[str, Any] | None, side: str) -> Mapping[str, Any] | None:
    found = figures.get(side) if isinstance(figures, Mapping) else None
    return found if isinstance(found, Mapping) else None


def _value(side: Mapping[str, Any] | None, figure: str) -> float | None:
    value = side.get(figure) if side is not None else None
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _missing_why(side: Mapping[str, Any] | None, figure: str) -> str:
    if side is None:
        return "the gate read no server metrics for it"
    why = (side.get("missing") or {}).get(figure) if isinstance(side.get("missing"), Mapping) else None
    return str(why or "no value")


def acceptance_check(
    figures: Mapping[str, Any] | None, change: Mapping[str, Any], *, break_even: float | None = None
) -> Check | None:
    """The speculative_acceptance check, only when the change turns speculative decoding on: PASS at or above
    break-even, FAIL below it, INCONCLUSIVE when the candidate's server published no acceptance (fail closed: the
    verdict cannot be APPROVED; not a FAIL, because AWS documents no stored names for the container's series and
    a name that differs on a real endpoint must not reject every speculative candidate; see
    optigate.bench.server_metrics)."""
    method = speculative_method(change)
    if method is None:
        return None
    threshold = BREAK_EVEN_ACCEPTANCE if break_even is None else float(break_even)
    candidate = _side(figures, "candidate")
    acceptance = _value(candidate, "spec_acceptance")
    name = CheckName.SPECULATIVE_ACCEPTANCE
    if acceptance is None:
        detail = (
            f"speculative decoding ({method}): the candidate's server published no acceptance for the benchmark "
            f"window ({_missing_why(candidate, 'spec_acceptance')})"
        )
        return Check(name, Outcome.INCONCLUSIVE, None, threshold, detail)
    measured = f"accepted {acceptance:.0%} of drafted tokens over the benchmark ({ACCEPTANCE_SERIES})"
    if acceptance < threshold:
        detail = f"speculative decoding ({method}) loses: the candidate's server {measured}"
        return Check(name, Outcome.FAIL, acceptance, threshold, detail)
    return Check(name, Outcome.PASS, acceptance, threshold, f"the candidate's server {measured}")


def _findings(rows: list[dict[str, Any]]) -> list[str]:
    """What the figures say beside the verdict (never a reason to reject)."""
    by = {row["figure"]: row for row in rows}
    notes: list[str] = []
    for side in SIDES:
        kv = by["kv_cache_usage_max"][side]
        if kv is not None and kv >= KV_FULL:
            notes.append(f"the {side}'s KV cache reached {kv:.0%}: requests waited for room (queue time, preemptions)")
        preempted = by["preemptions"][side]
        if preempted is not None and preempted > 0:
            notes.append(f"the {side}'s server preempted {preempted:.0f} requests: its KV cache ran out mid-decode")
    base_hits, cand_hits = by["prefix_cache_hit_rate"]["baseline"], by["prefix_cache_hit_rate"]["candidate"]
    if base_hits is not None and cand_hits is not None and abs(cand_hits - base_hits) >= 0.1:
        notes.append(f"prefix-cache hit rate {cand_hits:.0%} on the candidate vs {base_hits:.0%} on the baseline")
    return notes


def figures_to_report(figures: Mapping[str, Any] | None) -> dict[str, Any]:
    """The report's server-metrics section: one row per figure of the table (optigate.bench.server_metrics) with
    both sides, what is missing and why, and findings. Without figures: available False and why."""
    if not isinstance(figures, Mapping) or not any(_side(figures, side) for side in SIDES):
        return {"available": False, "why": "the gate read no server metrics", "rows": [], "findings": []}
    sides = {side: _side(figures, side) for side in SIDES}
    rows = [
        {
            "figure": metric.figure,
            "unit": metric.unit,
            "statistic": metric.statistic,
            "series": list(metric.series),
            **{side: _value(sides[side], metric.figure) for side in SIDES},
        }
        for metric in TABLE
    ]
    missing = {
        side: {figure: _missing_why(sides[side], figure) for figure in FIGURES if _value(sides[side], figure) is None}
        for side in SIDES
    }
    window = next(({"start": s.get("start"), "end": s.get("end")} for s in sides.values() if s is not None), {})
    return {
        "available": True,
        "source": "CloudWatch QueryMetrics (PromQL) over SageMaker detailed observability, the benchmark's window",
        "window": window,
        "endpoints": {side: (s.get("endpoint") if s is not None else None) for side, s in sides.items()},
        "rows": rows,
        "missing": {side: why for side, why in missing.items() if why},
        "findings": _findings(rows),
    }
