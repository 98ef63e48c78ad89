"""`optigate advise`: the next optimization step for a team, in order ("a sequence, not a switch", issue 17).

1. container settings (max_model_len, batch, memory fraction) against the requests the team benchmarks;
2. quantize: FP8 where the GPU has FP8 tensor cores (compute capability >= 8.9), AWQ otherwise;
3. speculative decoding, where a decode step at the real concurrency is still memory-bound;
4. freeze the instance family, then compile (TensorRT-LLM);
5. only then a bigger or different instance, compared against a scale-to-zero inference component.

Pure logic: every step reads the team's resolution (`optigate.deployment.ResolvedTeam`, resolved once by the
caller), and every proposed block goes through the same rules as `optigate validate`
(`optigate.advise.admission`); its predicted effect is the re-plan of the merged serving block by that
resolution, never a rule of thumb. Where the config cannot know something (how busy the endpoint is, how
often drafts are accepted), the finding says which input is missing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import yaml

from optigate.advise.admission import GATE, Admission, admit
from optigate.config.models import NgramSpeculation, TeamConfig
from optigate.deployment import ResolvedServing, ResolvedTeam
from optigate.deployment.rules import FP8_MIN_COMPUTE_CAPABILITY
from optigate.plan.catalog import all_instances
from optigate.plan.memory import weight_footprint
from optigate.plan.planner import PlanResult
from optigate.plan.roofline import (
    attention_flops_per_token,
    expected_distinct_experts,
    linear_flops_per_token,
)
from optigate.plan.team import HEADROOM, MIN_DERIVED_MAX_MODEL_LEN, architecture_for, plan_serving

RECOMMENDED, PROVING, DONE, NOT_NOW, NEEDS_INPUT, TRIED = (
    "recommended",
    "proving",  # the team's gate.candidate already proves this step
    "done",
    "not now",
    "needs input",
    "tried",  # a gate report says this step did not pay off
)
STEPS = {
    1: "container settings",
    2: "quantize",
    3: "speculative decoding",
    4: "freeze the family, then compile",
    5: "a bigger or different instance",
}
#: A step is offered again only when its proposal changes the serving block this much or more (max_model_len).
LENGTH_RATIO = 2
#: vLLM's share of accelerator memory advise proposes when the KV cache binds the batch (the planner's reserve
#: for activations, non-torch memory and CUDA graphs is accounted separately, so 5 % slack remains).
RAISED_MEMORY_UTILIZATION = 0.95
HOURS_PER_MONTH = 730  # AWS's pricing convention


@dataclass(frozen=True)
class Figure:
    """One planner figure before and after a step (None where the planner has none)."""

    key: str
    label: str
    before: float | None
    after: float | None

    def to_dict(self) -> dict[str, Any]:
        return {"key": self.key, "label": self.label, "before": self.before, "after": self.after}


@dataclass(frozen=True)
class Finding:
    """What advise says about one step: its status, why (with the numbers), the block and its re-planned effect."""

    step: int
    status: str
    why: str
    candidate: dict[str, Any] | None = None
    target: str = GATE  # where the block goes: gate.candidate, or serving for teams the gate cannot stage
    effect: tuple[Figure, ...] = ()
    notes: tuple[str, ...] = ()

    @property
    def title(self) -> str:
        return STEPS[self.step]

    @property
    def candidate_yaml(self) -> str | None:
        """The exact YAML to paste (under `gate:` as `candidate:`, or the keys of `serving:`)."""
        if self.candidate is None:
            return None
        document: dict[str, Any] = (
            {"gate": {"candidate": self.candidate}} if self.target == GATE else {"serving": self.candidate}
        )
        return yaml.safe_dump(document, sort_keys=False, default_flow_style=False)

    def to_dict(self) -> dict[str, Any]:
        return {
            "step": self.step,
            "title": self.title,
            "status": self.status,
            "why": self.why,
            "target": self.target if self.candidate is not None else None,
            "candidate": self.candidate,
            "candidate_yaml": self.candidate_yaml,
            "effect": [f.to_dict() for f in self.effect],
            "notes": list(self.notes),
        }


@dataclass(frozen=True)
class Advice:
    team: str
    environment: str | None
    findings: tuple[Finding, ...]
    concurrency: int  # the real concurrency: the highest level the gate benchmarks

    @property
    def recommendations(self) -> tuple[Finding, ...]:
        """The steps to take, in the order of the sequence (the first is next)."""
        return tuple(f for f in self.findings if f.status in (RECOMMENDED, PROVING))

    @property
    def next(self) -> Finding | None:
        return self.recommendations[0] if self.recommendations else None

    def to_dict(self) -> dict[str, Any]:
        upcoming = self.next
        return {
            "team": self.team,
            "environment": self.environment,
            "concurrency": self.concurrency,
            "next_step": upcoming.step if upcoming else None,
            "recommendations": [f.to_dict() for f in self.recommendations],
            "findings": [f.to_dict() for f in self.findings],
        }


@dataclass(frozen=True)
class Context:
    """What every step reads: the team, its resolved baseline, and the workload the gate benchmarks."""

    resolved_team: ResolvedTeam
    baseline: ResolvedServing
    plan: PlanResult
    instance_count: int
    utilization_pct: float | None

    @property
    def team(self) -> TeamConfig:
        return self.resolved_team.team

    @property
    def concurrency(self) -> int:
        return max(self.team.gate.benchmark.concurrency)

    @property
    def prompt_tokens(self) -> int:
        return self.team.gate.benchmark.prompt_tokens

    @property
    def output_tokens(self) -> int:
        return self.team.gate.benchmark.max_new_tokens

    @property
    def family(self) -> str:
        return self.baseline.image_family


# --------------------------------------------------------------------------- figures


def expected_tpot_at(plan: PlanResult, concurrency: int) -> float | None:
    """The expected time per output token at `concurrency` (capped at the batch the plan runs): the expected
    decode curve's point at that batch, or the next larger one it has (conservative)."""
    if plan.expected is None:
        return None
    curve = plan.expected.decode_curve_ms
    batch = max(1, min(concurrency, plan.max_feasible_batch))
    larger = [b for b in curve if b >= batch]
    return curve[min(larger)] if larger else curve[max(curve)]


def effect(before: PlanResult, after: PlanResult | None, concurrency: int) -> tuple[Figure, ...]:
    """The planner's figures of the deployed plan and of the re-planned block."""

    def pair(key: str, label: str, read) -> Figure:
        return Figure(key, label, read(before), read(after) if after is not None else None)

    return (
        pair("kv_capacity_tokens", "KV capacity (tokens)", lambda p: p.kv_capacity_tokens),
        pair(
            "sequences_at_max_model_len",
            "sequences of max_model_len the cache holds",
            lambda p: p.max_concurrent_sequences_at_max_model_len,
        ),
        pair("expected_tpot_ms_batch1", "TPOT at batch 1, expected (ms)", lambda p: p.expected_tpot_ms_batch1),
        pair("decode_tpot_ms_batch1", "TPOT at batch 1, bound (ms)", lambda p: p.decode_tpot_ms_batch1),
        pair(
            "expected_tpot_ms_at_concurrency",
            f"TPOT at concurrency {concurrency}, expected (ms)",
            lambda p: expected_tpot_at(p, concurrency),
        ),
        pair(
            "expected_cost_per_million_output_tokens",
            "$ per 1M output tokens, expected",
            lambda p: p.expected.cost_per_million_output_tokens if p.expected else None,
        ),
        pair(
            "cost_per_million_output_tokens",
            "$ per 1M output tokens, bound",
            lambda p: p.cost_per_million_output_tokens,
        ),
    )


def _proposal(ctx: Context, step: int, why: str, block: dict[str, Any], notes: tuple[str, ...] = ()) -> Finding:
    """A step's block through the rules: recommended with its re-planned effect, or why it cannot be offered."""
    if ctx.team.gate.candidate and _same(ctx.team.gate.candidate, block):
        proving = ctx.resolved_team.candidate  # resolved once with the team: reused, not re-planned
        return Finding(
            step,
            PROVING,
            why + "; your gate.candidate already proves this",
            dict(ctx.team.gate.candidate),
            GATE,
            effect(ctx.plan, proving.plan if proving else None, ctx.concurrency),
            notes,
        )
    admission: Admission = admit(ctx.team, block)
    if not admission.admitted:
        refusal = "; ".join(admission.refusals)
        return Finding(step, NOT_NOW, f"{why}; but the rules refuse the change ({refusal})", notes=notes)
    if admission.prerequisites:
        notes += tuple(f"before the gate takes it: {p}" for p in admission.prerequisites)
    if admission.target != GATE:
        notes += (
            "the gate stages candidates on a model-backed endpoint, not for teams serving adapters: "
            "change serving directly (validated as such)",
        )
    replanned = admission.resolved.plan if admission.resolved else None
    return Finding(
        step, RECOMMENDED, why, admission.block, admission.target, effect(ctx.plan, replanned, ctx.concurrency), notes
    )


def _same(candidate: Mapping[str, Any], block: Mapping[str, Any]) -> bool:
    """The team's candidate makes the change `block` makes (the same keys, the same values where both say)."""
    for key, value in block.items():
        have = candidate.get(key)
        if key == "speculative_decoding" and have:
            continue  # any speculation method proves step 3
        if key == "container" and isinstance(have, Mapping) and isinstance(value, Mapping):
            if have.get("family") != value.get("family"):
                return False
            continue
        if key not in candidate or have != value:
            return False
    return True


# --------------------------------------------------------------------------- 1. container settings


def _power_of_two_at_least(tokens: int) -> int:
    return 1 << max(0, tokens - 1).bit_length()


def needed_length(team: TeamConfig) -> tuple[int, str]:
    """The longest request the team says it sends, and in which words: the benchmarked prompt + output with the
    planner's headroom, or the long-context evaluation's prompts + output when an evaluation dataset is set."""
    benchmark, evaluation = team.gate.benchmark, team.gate.evaluation
    typical = benchmark.prompt_tokens + benchmark.max_new_tokens
    needed, said = HEADROOM * typical, f"{HEADROOM}x the {typical:,}-token request you benchmark"
    if evaluation.dataset_s3_uri is not None:
        long_context = evaluation.long_context_prompt_tokens + benchmark.max_new_tokens
        if long_context > needed:
            needed = long_context
            said = (
                f"the long-context evaluation's {evaluation.long_context_prompt_tokens:,}-token prompts "
                f"+ {benchmark.max_new_tokens:,} output"
            )
    return needed, said


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
    arch_max = architecture_for(ctx.team.model.architecture).max_position_embeddings
    needed, said = needed_length(ctx.team)
    proposed = min(arch_max, max(MIN_DERIVED_MAX_MODEL_LEN, _power_of_two_at_least(needed)))
    length = base.max_model_len
    if length >= LENGTH_RATIO * proposed:
        block["max_model_len"] = proposed
        reasons.append(
            f"max_model_len {length:,} reserves KV for {length / ctx.prompt_tokens:.0f}x the prompt you benchmark "
            f"({ctx.prompt_tokens:,}); {proposed:,} covers {said} ({needed:,} tokens): lower it first. vLLM pages "
            f"the cache, so it still holds {plan.kv_capacity_tokens:,} tokens; what changes is how many "
            f"max-length sequences fit ({plan.max_concurrent_sequences_at_max_model_len} for a batch of "
            f"{base.max_batch_size})"
        )
    else:
        fine.append(f"max_model_len {length:,} is within {LENGTH_RATIO}x of {said} ({needed:,} tokens)")

    concurrency, holds = ctx.concurrency, plan.max_concurrent_sequences_at_typical_length
    typical = ctx.prompt_tokens + ctx.output_tokens
    budget = ctx.team.gate.benchmark.p99_itl_ms_budget
    if base.max_batch_size < concurrency:
        within = True
        if budget is not None:  # the deployed curve stops at the deployed batch: re-plan at the concurrency
            wider = plan_serving(ctx.team, base.serving, max_model_len=base.max_model_len, max_batch_size=concurrency)
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
        return Finding(1, DONE, "; ".join(fine) + ": the container settings fit the requests you benchmark")
    return _proposal(ctx, 1, "; ".join(reasons), block)


# --------------------------------------------------------------------------- 2. quantize


def step_quantize(ctx: Context) -> Finding:
    base = ctx.baseline
    instance = base.instance
    quantization = base.serving.quantization
    if instance.is_neuron:
        return Finding(2, NOT_NOW, f"lmi-neuronx serves no quantized weights in optigate on {instance.instance_type}")
    if quantization is not None:
        cc = instance.compute_capability
        weight_only = quantization == "fp8" and cc is not None and cc < FP8_MIN_COMPUTE_CAPABILITY
        extra = " (weight-only: less memory, no faster math)" if weight_only else ""
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
    return _proposal(ctx, 2, why, {"quantization": target}, notes)


# --------------------------------------------------------------------------- 3. speculative decoding


@dataclass(frozen=True)
class SpeculationCeiling:
    """Expected decode steps at the real concurrency (optigate.plan.expected: the roofline terms at the efficiencies
    engines reach, plus per-step overheads), without and with `k` draft tokens to verify per sequence."""

    batch: int
    k: int
    memory_ms: float  # streaming weights and KV once per step
    compute_ms: float  # the math of one token per sequence
    overhead_ms: float  # scheduler, sampling, launches, all-reduces
    verify_ms: float  # the step verifying k + 1 tokens per sequence

    @property
    def plain_ms(self) -> float:
        return max(self.memory_ms, self.compute_ms) + self.overhead_ms

    def gain_pct(self, tokens_per_step: float) -> float:
        """Output tokens per second gained when a verification step yields `tokens_per_step` tokens per sequence."""
        return 100 * (tokens_per_step * self.plain_ms / self.verify_ms - 1)

    @property
    def full_acceptance_gain_pct(self) -> float:
        return self.gain_pct(self.k + 1)


def speculation_ceiling(ctx: Context, k: int) -> SpeculationCeiling | None:
    """A decode step at the real concurrency, and the step verifying k draft tokens per sequence: k + 1 query
    tokens per sequence read the weights and each sequence's KV once, and do k + 1 times the math."""
    from optigate.plan.expected import allreduce_ms, efficiency_for

    plan, instance = ctx.plan, ctx.baseline.instance
    bandwidth = instance.memory_bandwidth_bytes_per_s_per_tp_unit
    peak = instance.peak_flops_per_tp_unit(plan.compute_precision)
    if not (bandwidth and peak):
        return None
    arch = architecture_for(ctx.team.model.architecture)
    efficiency = efficiency_for(instance, plan.weight_precision, plan.engine, ctx.team.calibrations)
    weights = weight_footprint(arch, plan.weight_precision, plan.tensor_parallel)
    batch = max(1, min(ctx.concurrency, plan.max_feasible_batch))
    context = ctx.prompt_tokens + ctx.output_tokens / 2
    tp = plan.tensor_parallel
    kv = batch * context * plan.kv_bytes_per_token
    per_token = linear_flops_per_token(arch, tp) + attention_flops_per_token(arch, context, tp)

    def memory_ms(tokens: int) -> float:
        read = weights.read_per_step(expected_distinct_experts(arch, tokens)) + kv
        return 1000 * read / (bandwidth * efficiency.bandwidth)

    def compute_ms(tokens: int) -> float:
        return 1000 * tokens * per_token / (peak * efficiency.flops)

    overhead = efficiency.step_overhead_ms + allreduce_ms(arch, efficiency, tp)
    verify = max(memory_ms(batch * (k + 1)), compute_ms(batch * (k + 1))) + overhead
    return SpeculationCeiling(batch, k, memory_ms(batch), compute_ms(batch), overhead, verify)


def _candidate_speculation(ctx: Context) -> Any:
    """The speculative decoding the team's gate.candidate proposes, if any."""
    try:
        candidate = ctx.team.gate_serving()
    except ValueError:  # a candidate the rules refuse: validate says so
        return None
    return candidate.speculative_decoding if candidate is not None else None


def _break_even_acceptance(ceiling: SpeculationCeiling) -> float:
    """The share of the k draft tokens that must be accepted for a verify step (1 + accepted tokens) to beat
    plain steps: (1 + a x k) x plain >= verify."""
    return max(0.0, (ceiling.verify_ms / ceiling.plain_ms - 1) / ceiling.k)


def step_speculation(ctx: Context) -> Finding:
    base = ctx.baseline
    if ctx.family != "lmi":
        return Finding(3, NOT_NOW, f"speculative decoding is a vLLM option, which {ctx.family} does not read")
    if base.serving.speculative_decoding is not None:
        return Finding(3, DONE, f"{base.serving.speculative_decoding.method} speculation is already served")
    proposed = _candidate_speculation(ctx)
    # The draft length the team's candidate proposes, else n-gram's default (what this step would propose).
    k = proposed.num_speculative_tokens if proposed else NgramSpeculation.model_fields["num_speculative_tokens"].default
    ceiling = speculation_ceiling(ctx, k)
    if ceiling is None:
        return Finding(3, NEEDS_INPUT, f"the catalog has no bandwidth or peak for {base.instance.instance_type}")
    benchmark = ctx.team.gate.benchmark
    minimum, chunk_gain = benchmark.min_throughput_gain_pct, benchmark.min_tokens_per_chunk_gain_pct
    at_minimum = ceiling.gain_pct(1 + chunk_gain / 100)
    c = ctx.concurrency
    steps = (
        f"verifying {k} draft tokens per sequence takes {ceiling.verify_ms:.1f} ms against {ceiling.plain_ms:.1f} ms "
        f"per plain step (expected)"
    )
    if at_minimum < minimum:
        return Finding(
            3,
            NOT_NOW,
            f"concurrency {c} is high for speculation: {steps}; at the {chunk_gain:g} % more tokens per chunk the "
            f"gate requires it gains {at_minimum:.0f} %, under the gate's {minimum:g} %: expect little (at most "
            f"{ceiling.full_acceptance_gain_pct:.0f} % at full acceptance)",
        )
    why = (
        f"at concurrency {c} a decode step is memory-bound ({ceiling.memory_ms:.1f} ms of memory against "
        f"{ceiling.compute_ms:.1f} ms of math): {steps}, so speculation gains {at_minimum:.0f} % at the "
        f"{chunk_gain:g} % more tokens per chunk the gate requires, up to {ceiling.full_acceptance_gain_pct:.0f} % "
        f"at full acceptance; it pays from {_break_even_acceptance(ceiling):.0%} acceptance of the {k} draft tokens"
    )
    budget = benchmark.p99_itl_ms_budget
    at = expected_tpot_at(ctx.plan, c)
    if budget is not None and at is not None:
        why += f"; the expected TPOT at concurrency {c} is {at:.1f} ms against the p99 ITL budget {budget:g} ms"
    notes = (
        "the planner does not model acceptance (its figures do not change); the gate measures it as tokens per "
        "streamed chunk (tokens_per_chunk_gain)",
        "n-gram needs no extra weights and pays where outputs repeat the prompt; an EAGLE-3 head under the "
        "model's prefix accepts more on free text",
    )
    return _proposal(ctx, 3, why, {"speculative_decoding": {"method": "ngram", "num_speculative_tokens": k}}, notes)


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
        f"max_model_len {base.max_model_len:,}): compile only after the family is frozen, as an engine is pinned to "
        "all three; compilation is worth single-digit to 30 % latency"
    )
    notes = (
        "the planner has no TensorRT-LLM efficiency of its own (it carries vLLM's over): the gate measures the gain",
        *trade,
    )
    return _proposal(ctx, 4, why, block, notes)


# --------------------------------------------------------------------------- 5. instance


def _faster_instance(ctx: Context, budget: float) -> tuple[str | None, list[str]]:
    """The cheapest instance of the same platform whose re-plan (through the rules) meets `budget` at the real
    concurrency, cheapest expected $ per 1M output tokens first; and the refusals on the way."""
    from optigate.plan.compare import compare

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
    count = max(ctx.instance_count, scaling.min_capacity if scaling else 1)
    always_on = price * count * HOURS_PER_MONTH
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
    return _proposal(ctx, 5, why, block, (note,))


def admit_block_with_tp(ctx: Context, instance_type: str) -> dict[str, Any]:
    """The instance block for a team that pins its tensor-parallel degree: the degree the new instance plans."""
    from optigate.plan.team import deployed_tensor_parallel

    serving = ctx.baseline.serving.model_copy(update={"instance_type": instance_type, "tensor_parallel_degree": None})
    tp = deployed_tensor_parallel(architecture_for(ctx.team.model.architecture), serving)
    return {"instance_type": instance_type, "tensor_parallel_degree": tp}


# --------------------------------------------------------------------------- the sequence

STEP_FUNCTIONS = (step_container_settings, step_quantize, step_speculation, step_compile, step_instance)


class CannotAdvise(ValueError):
    """A team advise cannot plan (it did not resolve, or the planner has no plan of it)."""


def advise(
    resolved_team: ResolvedTeam,
    *,
    environment: str | None = None,
    instance_count: int | None = None,
    utilization_pct: float | None = None,
    tried: Mapping[int, str] | None = None,
) -> Advice:
    """Every step of the sequence for the team, now; `tried`: steps a gate report says did not pay off (step ->
    the gate's summary), which are not offered again."""
    baseline = resolved_team.baseline
    if baseline is None or baseline.plan is None or resolved_team.problems:
        raise CannotAdvise(f"team {resolved_team.team.team} does not resolve to a plan: run `optigate validate`")
    ctx = Context(
        resolved_team,
        baseline,
        baseline.plan,
        instance_count or resolved_team.team.serving.instance_count,
        utilization_pct,
    )
    findings = []
    for function in STEP_FUNCTIONS:
        finding = function(ctx)
        if tried and finding.step in tried and finding.status in (RECOMMENDED, PROVING):
            finding = Finding(finding.step, TRIED, f"the gate did not approve it: {tried[finding.step]}")
        findings.append(finding)
    return Advice(resolved_team.team.team, environment, tuple(findings), ctx.concurrency)
