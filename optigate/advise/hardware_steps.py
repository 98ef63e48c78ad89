"""`optigate advise`'s steps on the hardware: 4. freeze the family, then compile; 5. a bigger or different instance.

Each reads the team's resolution (`optigate.advise.findings.Context`) and words what the planner computes.
"""

from __future__ import annotations

from typing import Any

from optigate.advise.admission import admit
from optigate.advise.findings import (
    DONE,
    NEEDS_INPUT,
    NOT_NOW,
    Context,
    Finding,
    proposal,
)
from optigate.plan.catalog import all_instances
from optigate.plan.cost import cost_per_month
from optigate.plan.speculation import expected_tpot_at
from optigate.plan.team_plan import architecture_for

# --------------------------------------------------------------------------- 4. compile


def step_compile(ctx: Context) -> Finding:
    base = ctx.baseline
    instance = base.instance
    # LMI builds these at start-up (the same engine compile: true builds ahead in the gate, which saves start-up and
    # scale-out time, not latency): step 4 is done.
    if ctx.family == "lmi-neuronx":
        return Finding(
            4,
            DONE,
            f"lmi-neuronx compiles for {instance.accelerator} already (at start-up; gate.candidate compile: true "
            "builds the same artifacts ahead, for a faster start)",
        )
    if ctx.family == "lmi-trtllm":
        return Finding(
            4,
            DONE,
            "the team serves TensorRT-LLM engines already (built at start-up; gate.candidate compile: true builds "
            "the same engine ahead, for a faster start)",
        )
    accelerators = {pool.instance.accelerator for pool in base.pools} or {instance.accelerator}
    if len(accelerators) > 1:
        return Finding(
            4,
            NOT_NOW,
            f"compile only after the family is frozen: the instance pools span {', '.join(sorted(accelerators))}, and "
            "an engine is pinned to one GPU family",
        )
    changing = ctx.team.gate.candidate.get("instance_type")
    if changing and changing != base.serving.instance_type:
        return Finding(4, NOT_NOW, f"compile only after the family is frozen: your gate.candidate moves to {changing}")
    speculation = base.serving.speculative_decoding
    if speculation is not None:
        return Finding(
            4,
            NOT_NOW,
            f"lmi-trtllm does not read speculative_decoding: compiling would drop the {speculation.method} speculation "
            "you serve; keep vLLM unless a gate run shows the engine gains more",
        )
    if ctx.team.gate.candidate.get("speculative_decoding"):
        return Finding(
            4,
            NOT_NOW,
            "lmi-trtllm does not read speculative_decoding: compiling would drop the speculation your gate.candidate "
            "proves; decide after that gate run (optigate advise --from-report)",
        )
    if ctx.team.adapters:
        return Finding(4, NOT_NOW, "lmi-trtllm serves no LoRA adapters in optigate: keep vLLM")
    # The block the gate proves: the family switch and the engine its optimization job compiles
    # (ModelCompilationConfig) for this instance, TP, maximum length and batch.
    block: dict[str, Any] = {"container": {"family": "lmi-trtllm"}, "compile": True}
    trade: list[str] = []
    if base.serving.gpu_memory_utilization is not None:
        block["gpu_memory_utilization"] = None
        trade.append("TensorRT-LLM sizes its KV cache itself (0.95 of the memory after the weights)")
    if base.serving.kv_cache_dtype != "auto":
        block["kv_cache_dtype"] = "auto"
        dtype = base.serving.kv_cache_dtype
        trade.append(f"LMI's TensorRT-LLM options have no {dtype} KV cache: it goes back to 16 bit")
    why = (
        f"the family is frozen on {instance.instance_type} ({instance.accelerator}, TP {base.tensor_parallel_degree}, "
        f"max_model_len {base.max_model_len:,}), the three an engine is pinned to, so an engine built now stays "
        "valid; compilation is worth single-digit to 30 % latency"
    )
    notes = (
        "the planner has no TensorRT-LLM efficiency of its own (it carries vLLM's over): the gate measures the gain",
        *trade,
    )
    return proposal(ctx, 4, why, block, notes)


# --------------------------------------------------------------------------- 5. instance


def _faster_instance(ctx: Context, budget: float) -> tuple[str | None, list[str]]:
    """The cheapest instance of the same platform whose re-plan (through the rules) meets `budget` at the real
    concurrency, cheapest expected $ per 1M output tokens first; and the refusals on the way."""
    from optigate.plan.instance_comparison import compare

    plan, base = ctx.plan, ctx.baseline
    platform = base.instance.platform
    here = base.instance.instance_type
    names = [
        i.instance_type
        for i in all_instances()
        if i.platform == platform and i.price_per_hour_usd is not None and i.instance_type != here
    ]
    candidates, _ = compare(
        architecture_for(ctx.team.model.architecture),
        names,
        [plan.weight_precision],
        tpot_ms=budget,
        kv_cache_dtype=plan.kv_cache_dtype,
        gpu_memory_utilization=plan.gpu_memory_utilization,
        max_model_len=base.max_model_len,
        prompt_tokens=ctx.prompt_tokens,
        output_tokens=ctx.output_tokens,
    )
    ranked = sorted(
        (c for c in candidates if c.batch_within_target and c.batch_within_target >= min(ctx.concurrency, 256)),
        key=lambda c: c.cost_within_target or float("inf"),
    )
    refusals: list[str] = []
    for candidate in ranked:
        block: dict[str, Any] = {"instance_type": candidate.instance_type}
        if base.serving.tensor_parallel_degree is not None and candidate.result is not None:
            block["tensor_parallel_degree"] = candidate.result.tensor_parallel
        admission = admit(ctx.team, block)
        if admission.admitted:
            return candidate.instance_type, refusals
        refusals.append(f"{candidate.instance_type}: {'; '.join(admission.refusals)}")
    return None, refusals


def _scale_to_zero_note(ctx: Context) -> tuple[str, bool]:
    """The monthly comparison with a scale-to-zero inference component, or which input it needs."""
    scaling = ctx.baseline.serving.autoscaling
    price = ctx.baseline.price_per_hour_usd
    if scaling is not None and scaling.scale_to_zero:
        return "the endpoint already scales to zero when idle", False
    if price is None:
        return f"no public price for {ctx.baseline.instance.instance_type}: no monthly comparison", False
    count = ctx.min_instances or max(ctx.instance_count, scaling.min_capacity if scaling else 1)
    always_on = cost_per_month(price, count)  # at minimum capacity, as `optigate summary` prices it
    if ctx.utilization_pct is None:
        return (
            f"the always-on endpoint costs ${always_on:,.0f}/month ({count} x ${price:g}/h); the config does not say "
            "how busy it is: give --utilization-pct (the share of hours with traffic) to compare it with a "
            "scale-to-zero inference component",
            True,
        )
    busy = ctx.utilization_pct / 100
    saving = always_on * (1 - busy)
    return (
        f"at {ctx.utilization_pct:g} % utilisation a scale-to-zero inference component costs ${saving:,.0f}/month "
        f"less than the always-on endpoint (${always_on:,.0f}; cold starts not counted); in optigate scale to zero "
        "needs inference components, which it deploys for teams with adapters",
        False,
    )


def step_instance(ctx: Context) -> Finding:
    note, needs_input = _scale_to_zero_note(ctx)
    budget = ctx.team.gate.benchmark.p99_itl_ms_budget
    at = expected_tpot_at(ctx.plan, ctx.concurrency)
    c = ctx.concurrency
    if budget is None or at is None:
        why = "no p99_itl_ms_budget: nothing says this instance is too slow; keep it"
        return Finding(5, NEEDS_INPUT if needs_input else NOT_NOW, why, notes=(note,))
    if at <= budget:
        why = (
            f"the expected TPOT at concurrency {c} is {at:.1f} ms, within the p99 ITL budget {budget:g} ms on "
            f"{ctx.baseline.instance.instance_type}: no bigger instance"
        )
        return Finding(5, NEEDS_INPUT if needs_input else NOT_NOW, why, notes=(note,))
    found, refusals = _faster_instance(ctx, budget)
    if found is None:
        why = (
            f"the expected TPOT at concurrency {c} is {at:.1f} ms, over the p99 ITL budget {budget:g} ms, and no other "
            f"priced {ctx.baseline.instance.platform} instance the rules accept meets it"
        )
        return Finding(5, NOT_NOW, why, notes=(note, *refusals[:3]))
    why = (
        f"the expected TPOT at concurrency {c} is {at:.1f} ms, over the p99 ITL budget {budget:g} ms on "
        f"{ctx.baseline.instance.instance_type}; {found} is the cheapest instance whose plan meets it"
    )
    block: dict[str, Any] = {"instance_type": found}
    if ctx.baseline.serving.tensor_parallel_degree is not None:
        block = admit_block_with_tp(ctx, found)
    return proposal(ctx, 5, why, block, (note,), cost_may_rise=True)


def admit_block_with_tp(ctx: Context, instance_type: str) -> dict[str, Any]:
    """The instance block for a team that pins its tensor-parallel degree: the degree the new instance plans."""
    from optigate.plan.team_plan import deployed_tensor_parallel

    serving = ctx.baseline.serving.model_copy(update={"instance_type": instance_type, "tensor_parallel_degree": None})
    tp = deployed_tensor_parallel(architecture_for(ctx.team.model.architecture), serving)
    return {"instance_type": instance_type, "tensor_parallel_degree": tp}
