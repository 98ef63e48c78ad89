"""`optigate advise`'s steps on the serving block: 1. container settings, 2. quantize, 3. speculative decoding.

Each reads the team's resolution (`optigate.advise.findings.Context`) and words what the planner computes.
"""

from __future__ import annotations

from typing import Any

from optigate.advise.findings import (
    DONE,
    NEEDS_INPUT,
    NOT_NOW,
    Context,
    Figure,
    Finding,
    proposal,
)
from optigate.config.models import NgramSpeculation, TeamConfig
from optigate.config.rules.gate_rules import adapter_gate_limits
from optigate.deployment.checkpoint import SIXTEEN_BIT
from optigate.deployment.rules import FP8_MIN_COMPUTE_CAPABILITY
from optigate.plan.speculation import expected_tpot_at, speculation_ceiling
from optigate.plan.team_plan import HEADROOM, MIN_DERIVED_MAX_MODEL_LEN, architecture_for, plan_serving

#: A step is offered again only when its proposal changes the serving block this much or more (max_model_len).
LENGTH_RATIO = 2
#: vLLM's share of accelerator memory advise proposes when the KV cache binds the batch (the planner's reserve
#: for activations, non-torch memory and CUDA graphs is accounted separately, so 5 % slack remains).
RAISED_MEMORY_UTILIZATION = 0.95


# --------------------------------------------------------------------------- 1. container settings


def _power_of_two_at_least(tokens: int) -> int:
    return 1 << max(0, tokens - 1).bit_length()


def stated_lengths(team: TeamConfig) -> bool:
    """Whether the team says how long its requests are: benchmark lengths it set, or a long-context evaluation the
    gate runs (an evaluation dataset); the defaults (1,024 + 256) are nobody's requests."""
    benchmark, evaluation = team.gate.benchmark, team.gate.evaluation
    said = {"prompt_tokens", "max_new_tokens"} & benchmark.model_fields_set
    long_context = evaluation.dataset_s3_uri is not None and "long_context_prompt_tokens" in evaluation.model_fields_set
    return bool(said) or long_context


def needed_length(team: TeamConfig) -> tuple[int, str]:
    """The longest request the team says it sends, and in which words: the benchmarked prompt + output with the
    planner's headroom, or the long-context evaluation's prompts + output when an evaluation dataset is set."""
    benchmark, evaluation = team.gate.benchmark, team.gate.evaluation
    typical = benchmark.prompt_tokens + benchmark.max_new_tokens
    needed, said = HEADROOM * typical, f"the {typical:,}-token request you benchmark, with {HEADROOM}x headroom"
    if evaluation.dataset_s3_uri is not None:
        long_context = evaluation.long_context_prompt_tokens + benchmark.max_new_tokens
        if long_context > needed:
            needed = long_context
            said = (
                f"the long-context evaluation's prompts (over {evaluation.long_context_prompt_tokens:,} tokens) "
                f"+ {benchmark.max_new_tokens:,} output"
            )
    return needed, said


def _length_step(ctx: Context, block: dict[str, Any], reasons: list[str], fine: list[str]) -> None:
    """Lower max_model_len where it is far above the longest request the team states and the cache cannot hold the
    batch at that length (vLLM pages the cache: the capacity stays; what grows is how many full-length sequences
    fit, a real gain only while fewer than the batch do)."""
    base, plan = ctx.baseline, ctx.plan
    arch_max = architecture_for(ctx.team.model.architecture).max_position_embeddings
    needed, said = needed_length(ctx.team)
    proposed = min(arch_max, max(MIN_DERIVED_MAX_MODEL_LEN, _power_of_two_at_least(needed)))
    length = base.max_model_len
    if length < needed:
        fine.append(f"max_model_len {length:,} is below the {needed:,} tokens of {said}: longer requests are refused")
        return
    if length < LENGTH_RATIO * proposed:
        fine.append(f"max_model_len {length:,} covers the {needed:,} tokens of {said}")
        return
    if not stated_lengths(ctx.team):
        fine.append(
            f"max_model_len {length:,}: gate.benchmark.prompt_tokens and max_new_tokens are unset (the defaults, "
            f"{ctx.prompt_tokens:,} + {ctx.output_tokens:,}), so nothing says your requests are shorter; set them "
            "to what your users send for advise to size it"
        )
        return
    wanted = min(ctx.concurrency, base.max_batch_size)
    full = plan.max_concurrent_sequences_at_max_model_len
    if full >= wanted:
        fine.append(
            f"max_model_len {length:,} is above the {needed:,} tokens of {said}, but the cache holds {full:,} "
            f"sequences of that length, enough for the {wanted} you run at once (vLLM pages it)"
        )
        return
    block["max_model_len"] = proposed
    reasons.append(
        f"max_model_len {length:,} is {length / needed:.0f}x the {needed:,} tokens of {said}, and the cache holds "
        f"only {full} sequences of that length for the {wanted} you run at once: lower it to {proposed:,}. vLLM "
        f"pages the cache, so it still holds {plan.kv_capacity_tokens:,} tokens; what changes is how many "
        "full-length sequences fit"
    )


def step_container_settings(ctx: Context) -> Finding:
    base, plan = ctx.baseline, ctx.plan
    if base.instance.is_neuron:
        return Finding(
            1,
            NOT_NOW,
            "on Neuron the planner's memory model is not validated: size max_model_len and batch there "
            "from NxD Inference's compile logs",
        )
    block: dict[str, Any] = {}
    reasons: list[str] = []
    fine: list[str] = []
    _length_step(ctx, block, reasons, fine)

    concurrency, holds = ctx.concurrency, plan.max_concurrent_sequences_at_typical_length
    typical = ctx.prompt_tokens + ctx.output_tokens
    budget = ctx.team.gate.benchmark.p99_itl_ms_budget
    if base.max_batch_size < concurrency:
        within = True
        if budget is not None:  # the deployed curve stops at the deployed batch: re-plan at the concurrency
            wider = plan_serving(
                ctx.team,
                base.serving,
                weight_precision=base.served_weights,
                max_model_len=base.max_model_len,
                max_batch_size=concurrency,
                instance=base.instance,
            )
            at = expected_tpot_at(wider, concurrency)
            within = at is None or at <= budget
        if holds >= concurrency and within:
            block["max_batch_size"] = concurrency
            reasons.append(
                f"max_batch_size {base.max_batch_size} queues requests at the concurrency {concurrency} you "
                f"benchmark, and the KV cache holds {holds} sequences of {typical:,} tokens: raise it to {concurrency}"
            )
        else:
            fine.append(
                f"max_batch_size {base.max_batch_size} is below concurrency {concurrency}, but the KV cache holds "
                f"{holds} sequences of {typical:,} tokens"
                + ("" if within else f" and the expected TPOT there exceeds the p99 ITL budget {budget:g} ms")
            )
    else:
        fine.append(f"max_batch_size {base.max_batch_size} covers concurrency {concurrency}")

    wanted = min(concurrency, base.max_batch_size)
    share = base.gpu_memory_utilization
    if holds < wanted and ctx.family == "lmi" and share < RAISED_MEMORY_UTILIZATION:
        block["gpu_memory_utilization"] = RAISED_MEMORY_UTILIZATION
        reasons.append(
            f"the KV cache holds {holds} sequences of {typical:,} tokens, fewer than the {wanted} you run at once: "
            f"gpu_memory_utilization {share:g} -> {RAISED_MEMORY_UTILIZATION:g} (the planner reserves activations, "
            "non-torch memory and CUDA graphs separately)"
        )
    elif holds < wanted:
        fine.append(f"the KV cache holds {holds} of the {wanted} sequences you run at once (quantize next)")
    else:
        fine.append(f"the KV cache holds {holds} sequences of {typical:,} tokens, enough for {wanted}")

    if not block:
        requests = "you benchmark" if stated_lengths(ctx.team) else "of the benchmark's default lengths"
        return Finding(1, DONE, "; ".join(fine) + f": the container settings fit the requests {requests}")
    return proposal(ctx, 1, "; ".join(reasons), block)


# --------------------------------------------------------------------------- 2. quantize


def step_quantize(ctx: Context) -> Finding:
    base = ctx.baseline
    instance = base.instance
    quantization = base.serving.quantization or (base.served_weights if base.served_weights != SIXTEEN_BIT else None)
    if instance.is_neuron:
        return Finding(2, NOT_NOW, f"lmi-neuronx serves no quantized weights in optigate on {instance.instance_type}")
    if quantization is not None:
        cc = instance.compute_capability
        weight_only = quantization == "fp8" and cc is not None and cc < FP8_MIN_COMPUTE_CAPABILITY
        extra = " (weight-only: less memory, no faster math)" if weight_only else ""
        seconds = base.startup_quantization_seconds
        if seconds is not None:  # served quantized, but quantized on every start: visible and costed
            extra += (
                f", quantized at start-up from the {base.downloaded_weights} checkpoint (+{seconds} s per cold start "
                f"and scale-out); a {quantization} checkpoint made once by a SageMaker optimization job saves that: "
                f"its output as model.source with model.weights: {quantization}, and quantization: {quantization} "
                "kept or removed (either serves the weights as stored, with no start-up quantization)"
            )
        return Finding(2, DONE, f"the weights are already {quantization} on {instance.accelerator}{extra}")
    cc = instance.compute_capability
    if cc is not None and cc >= FP8_MIN_COMPUTE_CAPABILITY:
        target = "fp8"
        why = (
            f"{instance.accelerator} (compute capability {cc:g}) has FP8 tensor cores: FP8 weights (W8A8) halve the "
            f"bytes every decode step reads ({ctx.plan.weights_gib_per_accelerator:.1f} GiB per accelerator in 16 bit)"
        )
    else:
        target = "awq"
        why = (
            f"{instance.accelerator} has no FP8 (compute capability {cc:g} < {FP8_MIN_COMPUTE_CAPABILITY}): AWQ "
            "4-bit weights (optigate's config has no INT8 weight option); the SageMaker optimization job makes them"
        )
    notes = ("re-benchmark and re-evaluate: the gate's quality check decides whether the weights keep their answers",)
    return proposal(ctx, 2, why, {"quantization": target}, notes)


# --------------------------------------------------------------------------- 3. speculative decoding


def _candidate_speculation(ctx: Context) -> Any:
    """The speculative decoding the team's gate.candidate proposes, if any."""
    try:
        candidate = ctx.team.gate_serving()
    except ValueError:  # a candidate the rules refuse: validate says so
        return None
    return candidate.speculative_decoding if candidate is not None else None


def step_speculation(ctx: Context) -> Finding:
    base = ctx.baseline
    if ctx.family != "lmi":
        return Finding(3, NOT_NOW, f"speculative decoding is a vLLM option, which {ctx.family} does not read")
    if base.serving.speculative_decoding is not None:
        return Finding(3, DONE, f"{base.serving.speculative_decoding.method} speculation is already served")
    proposed = _candidate_speculation(ctx)
    # The draft length the team's candidate proposes, else n-gram's default (what this step would propose).
    k = proposed.num_speculative_tokens if proposed else NgramSpeculation.model_fields["num_speculative_tokens"].default
    ceiling = speculation_ceiling(
        ctx.plan,
        base.instance,
        architecture_for(ctx.team.model.architecture),
        k,
        concurrency=ctx.concurrency,
        prompt_tokens=ctx.prompt_tokens,
        output_tokens=ctx.output_tokens,
        calibrations=ctx.team.calibrations,
    )
    if ceiling is None:
        return Finding(3, NEEDS_INPUT, f"the catalog has no bandwidth or peak for {base.instance.instance_type}")
    benchmark = ctx.team.gate.benchmark
    minimum, chunk_gain = benchmark.min_throughput_gain_pct, benchmark.min_tokens_per_chunk_gain_pct
    at_minimum = ceiling.gain_pct(1 + chunk_gain / 100)
    c = ctx.concurrency
    verify, plain = f"{ceiling.verify_ms:.1f}", f"{ceiling.plain_ms:.1f}"
    steps = (
        f"verifying {k} draft tokens per sequence takes {verify} ms against {plain} ms per plain step (expected)"
        if verify != plain
        else f"verifying {k} draft tokens per sequence takes the {plain} ms of a plain step (expected)"
    )
    if at_minimum < minimum:
        return Finding(
            3,
            NOT_NOW,
            f"concurrency {c} is high for speculation: {steps}; at the {chunk_gain:g} % more tokens per chunk the "
            f"gate requires it {_gains(at_minimum)}, under the gate's {minimum:g} %: expect little (at most "
            f"{ceiling.full_acceptance_gain_pct:.0f} % at full acceptance)",
        )
    why = (
        f"at concurrency {c} a decode step is memory-bound ({ceiling.memory_ms:.1f} ms of memory against "
        f"{ceiling.compute_ms:.1f} ms of math): {steps}, so speculation gains {at_minimum:.0f} % at the "
        f"{chunk_gain:g} % more tokens per chunk the gate requires, up to {ceiling.full_acceptance_gain_pct:.0f} % "
        f"at full acceptance; {_break_even(ceiling.break_even_acceptance, k)}"
    )
    budget = benchmark.p99_itl_ms_budget
    at = expected_tpot_at(ctx.plan, c)
    if budget is not None and at is not None:
        why += f"; the expected TPOT at concurrency {c} is {at:.1f} ms against the p99 ITL budget {budget:g} ms"
    notes: tuple[str, ...] = (
        "the planner does not model acceptance (its own figures do not change); the last row is the speculation "
        "roofline at the tokens per step the gate requires, which it measures as tokens per streamed chunk "
        "(tokens_per_chunk_gain)",
        "n-gram needs no extra weights and pays where outputs repeat the prompt; an EAGLE-3 head under the "
        "model's prefix accepts more on free text",
    )
    if ctx.team.adapters:
        notes += (
            f"with adapters the gate trains no EAGLE head ({adapter_gate_limits.rule.id}: SageMaker's optimization job "
            "documents training for a base model alone, not the adapters' outputs); a head trained elsewhere "
            "(method: eagle3 with model) is staged like n-gram",
        )
    per_token = Figure(
        "speculation_tpot_ms_at_concurrency",
        f"ms per output token at concurrency {c}, {1 + chunk_gain / 100:g} tokens per step",
        ceiling.plain_ms,
        ceiling.verify_ms / (1 + chunk_gain / 100),
    )
    block = {"speculative_decoding": {"method": "ngram", "num_speculative_tokens": k}}
    return proposal(ctx, 3, why, block, notes, (per_token,))


def _gains(pct: float) -> str:
    return f"gains {pct:.0f} %" if f"{pct:.0f}" != "-0" and pct >= 0 else f"loses {-pct:.0f} %"


def _break_even(acceptance: float, k: int) -> str:
    """From which acceptance speculation pays, in words that hold at the precision printed: a verify step that costs
    no more than a plain one loses nothing when every draft is rejected, and gains from the first accepted token."""
    if f"{acceptance:.0%}" == "0%":
        return (
            "rejected drafts cost nothing in this model, so every accepted draft token is a gain (the drafting itself "
            "and the rejection sampler, which it leaves out, are what the gate measures)"
        )
    return f"it pays once more than {acceptance:.0%} of the {k} draft tokens are accepted"
