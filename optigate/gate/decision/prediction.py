"""The planner's prediction beside what the candidate measured, in a gate's verdict (roofline lower bounds and the
expected figures next to the measured ones, with their ratios)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def _ratio(measured: float | None, predicted: float | None) -> float | None:
    if measured is None or predicted is None or not predicted:
        return None
    return measured / predicted


def prediction_vs_measurement(
    prediction: Mapping[str, Any] | None, levels: list[dict[str, Any]], costs: list[dict[str, Any]]
) -> dict[str, Any] | None:
    """The planner's figures (roofline lower bounds) next to what the candidate measured."""
    if not prediction:
        return None
    at_one = next((lvl["candidate"] for lvl in levels if lvl["concurrency"] == 1), None)
    tpot = prediction.get("decode_tpot_ms_batch1")
    prefill = prediction.get("prefill_ms")
    cost = prediction.get("cost_per_million_output_tokens")
    measured_costs = [c for c in costs if c["candidate"] is not None]
    cheapest = min(measured_costs, key=lambda c: c["candidate"]) if measured_costs else None
    measured_tpot = at_one["p50_tpot_ms"] if at_one else None
    measured_ttft = at_one["p50_ttft_ms"] if at_one else None
    measured_cost = cheapest["candidate"] if cheapest else None
    cost_measured_as = (
        f"candidate at concurrency {cheapest['concurrency']} (its cheapest level)"
        if cheapest
        else "no measured cost (no price or no throughput)"
    )
    expected_tpot = prediction.get("expected_tpot_ms_batch1")
    return {
        "decode_tpot_ms_batch1": {
            "predicted": tpot,
            "expected": expected_tpot,
            "measured": measured_tpot,
            "measured_as": "candidate p50 TPOT at concurrency 1",
            "ratio": _ratio(measured_tpot, tpot),
            "expected_ratio": _ratio(measured_tpot, expected_tpot),
        },
        "prefill_ms": {
            "predicted": prefill,
            "measured": measured_ttft,
            "measured_as": "candidate p50 TTFT at concurrency 1 (includes network and queueing)",
            "ratio": _ratio(measured_ttft, prefill),
        },
        "cost_per_million_output_tokens": {
            "predicted": cost,
            "measured": measured_cost,
            "measured_as": cost_measured_as,
            "ratio": _ratio(measured_cost, cost),
        },
        "kv_capacity_tokens": {
            "predicted": prediction.get("kv_capacity_tokens"),
            "measured": None,
            "measured_as": "not observable from the client",
            "ratio": None,
        },
        # The plan the figures come from: `optigate plan --calibrate` turns this report into a calibration.
        "plan": prediction.get("plan"),
        "note": (
            "predicted figures are roofline lower bounds: a measured/predicted ratio of 1 or more is expected; "
            "the expected TPOT adds the efficiency engines reach and per-step overheads "
            f"({(prediction.get('plan') or {}).get('basis') or 'no expected figure'}): far from it, calibrate"
        ),
    }
