"""The planner's note on vLLM's --enable-expert-parallel: what placing whole experts per GPU changed against slicing
every expert across them, with the busiest GPU's expected experts under top-k routing (optigate.plan.routing)."""

from __future__ import annotations

from typing import Protocol

from .catalog import GIB
from .memory import weight_footprint
from .routing import expected_busiest_rank_experts
from .sizing import PlanInputs, memory_plan


class PlanFigures(Protocol):
    """What the note reads of a plan (optigate.plan.planner.PlanResult, not imported: the planner imports this)."""

    @property
    def tensor_parallel(self) -> int: ...
    @property
    def kv_capacity_tokens(self) -> int: ...
    @property
    def decode_tpot_ms_batch1(self) -> float | None: ...


def expert_parallel_note(result: PlanFigures, inputs: PlanInputs, sliced: PlanFigures) -> str:
    """What enable_expert_parallel changed against the experts sliced across the GPUs; figures that print the same
    are said once."""
    model, tp = inputs.model, result.tensor_parallel
    whole = memory_plan(inputs, tp).weights
    whole_gib, sliced_gib = whole.experts_total / GIB, weight_footprint(model, inputs.weights, tp).experts_total / GIB
    held = f"{whole_gib:.2f} GiB of expert weights per GPU"
    held += f", {sliced_gib:.2f} GiB sliced" if f"{whole_gib:.2f}" != f"{sliced_gib:.2f}" else ", as sliced"
    text = (
        f"enable_expert_parallel: {whole.num_experts} whole expert(s) of {model.num_experts} per accelerator ({held}); "
        f"attention and the KV cache stay tensor parallel ({result.kv_capacity_tokens:,} KV tokens"
        + (
            f" instead of {sliced.kv_capacity_tokens:,})"
            if sliced.kv_capacity_tokens != result.kv_capacity_tokens
            else ")"
        )
    )
    k = model.num_experts_per_tok
    busiest = expected_busiest_rank_experts(model.num_experts, k, tp, 1)
    text += (
        f"; a step waits for the busiest GPU, sized for its expected experts under uniform top-{k} routing "
        f"({busiest:.2f} per layer at batch 1, against the balanced {k / tp:.2f}; skewed routers read more)"
    )
    ours, theirs = result.decode_tpot_ms_batch1, sliced.decode_tpot_ms_batch1
    if ours is not None and theirs is not None:
        if f"{ours:.1f}" != f"{theirs:.1f}":
            text += (
                f": TPOT bound at batch 1 {ours:.1f} ms instead of {theirs:.1f} ms with the experts sliced (the gap "
                "closes as the batch touches every expert)"
            )
        else:
            text += f": TPOT bound at batch 1 {ours:.1f} ms, as with the experts sliced"
    return text
