"""Precisions x instances side by side: which is cheapest per output token within a TPOT target.

This is the last decision step before paying for a GPU: for each candidate, plan it, take the
largest batch whose *expected* decode step (optigate.plan.expected: the roofline bound at the
efficiency engines reach, plus per-step overheads) still meets the target time per output token,
and price the tokens produced there at the expected speed. The roofline bound is kept beside it:
selecting on the bound would pick endpoints slower than the target.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from optigate.plan.architecture import ModelArchitecture
from optigate.plan.catalog import Instance, get_instance
from optigate.plan.planner import PlanResult, plan

PRECISION_HARDWARE = {"fp8": "fp8", "nvfp4": "fp4", "mxfp4": "fp4"}


@dataclass(frozen=True)
class Candidate:
    instance_type: str
    weight_precision: str
    result: PlanResult | None  # None: the instance cannot run this precision natively
    batch_within_target: int | None
    cost_within_target: float | None
    reason: str = ""

    @property
    def meets_target(self) -> bool:
        return self.cost_within_target is not None

    def to_dict(self) -> dict[str, Any]:
        result = self.result
        return {
            "instance_type": self.instance_type,
            "weight_precision": self.weight_precision,
            "fits": bool(result and result.fits),
            "reason": self.reason or (result.problems[0].kind if result and result.problems else ""),
            "tensor_parallel": result.tensor_parallel if result else None,
            "weights_gib_per_accelerator": result.weights_gib_per_accelerator if result else None,
            "kv_capacity_tokens": result.kv_capacity_tokens if result else None,
            "decode_tpot_ms_batch1": result.decode_tpot_ms_batch1 if result else None,
            "expected_tpot_ms_batch1": result.expected_tpot_ms_batch1 if result else None,
            "cost_per_million_output_tokens": result.cost_per_million_output_tokens if result else None,
            "expected_cost_per_million_output_tokens": (
                result.expected.cost_per_million_output_tokens if result and result.expected else None
            ),
            "batch_within_target": self.batch_within_target,
            "cost_within_target": self.cost_within_target,
        }


def _runs_natively(instance: Instance, precision: str) -> bool:
    needed = PRECISION_HARDWARE.get(precision)
    return needed is None or instance.supports(needed)


def compare(
    arch: ModelArchitecture,
    instance_types: list[str],
    precisions: list[str],
    *,
    tpot_ms: float | None = None,
    **plan_options: Any,
) -> tuple[list[Candidate], Candidate | None]:
    """Every (instance, precision) candidate and the cheapest one that fits and meets `tpot_ms`."""
    candidates: list[Candidate] = []
    for instance_type in instance_types:
        instance = get_instance(instance_type)
        for precision in precisions:
            if not _runs_natively(instance, precision):
                unfit = Candidate(instance.instance_type, precision, None, None, None, f"no native {precision}")
                candidates.append(unfit)
                continue
            result = plan(arch, instance, weight_precision=precision, suggest_fixes=False, **plan_options)
            batch = cost = None
            if result.fits and result.expected:
                curve = result.expected.decode_curve_ms
                within = [b for b, step_ms in curve.items() if tpot_ms is None or step_ms <= tpot_ms]
                if within:
                    batch = max(within)
                    capped_options = {**plan_options, "max_batch_size": batch}
                    capped = plan(arch, instance, weight_precision=precision, suggest_fixes=False, **capped_options)
                    cost = capped.expected.cost_per_million_output_tokens if capped.expected else None
            candidates.append(Candidate(instance.instance_type, precision, result, batch, cost))
    priced = [(c.cost_within_target, c) for c in candidates if c.cost_within_target is not None]
    cheapest = min(priced, key=lambda pair: pair[0])[1] if priced else None
    return candidates, cheapest
