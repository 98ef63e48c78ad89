"""Top-level capacity + roofline plan for serving one model on one SageMaker instance type.

``plan()`` resolves the question once (``sizing.PlanInputs``), chooses the tensor-parallel degree
(``search``), sizes the memory of one rank (``sizing`` over ``memory``), adds the roofline lower
bounds (``roofline``) and reports structured problems with verified fixes (``problems``), whose
user-facing messages already contain the numbers (``messages``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

from .architecture import ModelArchitecture, load_architecture
from .bounds import roofline_bounds
from .catalog import GIB, Instance
from .cost import CostBasis
from .expected import Calibration, ExpectedLatency, eager_overhead, efficiency_for, expected_latency
from .expert_parallel import expert_parallel_note
from .memory import (
    DEFAULT_GPU_MEMORY_UTILIZATION,
    kv_dtype_bytes,
    max_concurrency,
    max_concurrent_sequences,
)
from .memory import weight_precision as lookup_weight_precision
from .parallel import refusal
from .problems import PROBLEM_KINDS, Admissible, PlanProblem, Suggestion, find_problems
from .roofline import DecodePoint, RankHardware
from .search import choose_tensor_parallel
from .sizing import MemoryPlan, PlanInputs, memory_plan, resolve_instance, scheduler_defaults

__all__ = ["PROBLEM_KINDS", "PlanProblem", "PlanResult", "Suggestion", "plan"]


@dataclass(frozen=True)
class PlanResult:
    """Everything the planner derived; all memory figures are per accelerator (per TP rank)."""

    model: str
    instance_type: str
    weight_precision: str
    kv_cache_dtype: str
    tensor_parallel: int
    replicas: int
    gpu_memory_utilization: float
    max_model_len: int
    prompt_tokens: int
    output_tokens: int
    usable_memory_gib_per_accelerator: float
    weights_gib_per_accelerator: float
    runtime_reserve_gib_per_accelerator: float
    activation_reserve_gib: float
    non_torch_reserve_gib: float
    cuda_graph_reserve_gib: float
    max_num_batched_tokens: int
    max_num_seqs: int
    kv_budget_gib_per_accelerator: float
    kv_bytes_per_token: float
    kv_capacity_tokens: int
    max_concurrency_at_max_model_len: float
    max_concurrent_sequences_at_max_model_len: int
    max_concurrent_sequences_at_typical_length: int
    max_feasible_batch: int
    compute_precision: str
    decode_tpot_ms_batch1: float | None
    decode_bound: str | None
    prefill_ms: float | None
    prefill_bound: str | None
    decode_curve: tuple[DecodePoint, ...]
    best_batch: int | None
    cost_per_million_output_tokens: float | None
    price_per_hour_usd: float | None
    achievable_fraction: float
    problems: tuple[PlanProblem, ...]
    notes: tuple[str, ...]
    # What a team should expect to measure (optigate.plan.expected): None without hardware figures.
    expected: ExpectedLatency | None = None
    engine: str = "vllm"
    # vLLM engine switches planned (enforce_eager, expert_parallel) and what each changed against the engine's default
    enforce_eager: bool = False
    expert_parallel: bool = False
    setting_notes: tuple[str, ...] = ()

    @property
    def expected_tpot_ms_batch1(self) -> float | None:
        return self.expected.tpot_ms_batch1 if self.expected else None

    @property
    def cost_basis(self) -> CostBasis:
        """What the cost rows price: one replica (a TP group, or a copy of an inference component) at its share of
        the instance, the basis `summary`, `advise` and the gate's report price at (optigate.plan.cost)."""
        return CostBasis(
            self.instance_type, self.price_per_hour_usd, self.tensor_parallel * self.replicas, self.tensor_parallel
        )

    @property
    def fits(self) -> bool:
        return not self.problems

    @property
    def is_lower_bound(self) -> bool:
        """Latency/throughput figures are raw roofline lower bounds (no efficiency factor)."""
        return self.achievable_fraction == 1.0

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["decode_curve"] = [asdict(p) for p in self.decode_curve]
        data["problems"] = [p.to_dict() for p in self.problems]
        data["notes"] = list(self.notes)
        data["setting_notes"] = list(self.setting_notes)
        data["fits"] = self.fits
        data["is_lower_bound"] = self.is_lower_bound
        expected = self.expected.to_dict() if self.expected else {}
        data["expected"] = expected or None
        # The expected figures beside the bounds they refine (flat, as --json readers and the gate use them).
        data["expected_tpot_ms_batch1"] = expected.get("tpot_ms_batch1")
        data["expected_ttft_ms"] = expected.get("ttft_ms")
        data["expected_cost_per_million_output_tokens"] = expected.get("cost_per_million_output_tokens")
        data["cost_basis"] = self.cost_basis.to_json()
        return data


# Over 80 lines: the roofline in one pass: memory, then compute, then the fit, each figure made once.
def plan(
    arch: str | ModelArchitecture | dict,
    instance: str | Instance,
    *,
    weight_precision: str = "bf16",
    kv_cache_dtype: str = "auto",
    tensor_parallel: int | None = None,
    gpu_memory_utilization: float = DEFAULT_GPU_MEMORY_UTILIZATION,
    max_model_len: int | None = None,
    prompt_tokens: int = 1024,
    output_tokens: int = 256,
    max_batch_size: int | None = None,
    max_num_batched_tokens: int | None = None,
    max_num_seqs: int | None = None,
    engine_subtracts_cuda_graphs: bool = True,
    achievable_fraction: float = 1.0,
    suggest_fixes: bool = True,
    admissible: Admissible | None = None,
    engine: str = "vllm",
    calibrations: Sequence[Calibration] = (),
    enforce_eager: bool = False,
    expert_parallel: bool = False,
) -> PlanResult:
    """Plan serving ``arch`` on ``instance``.

    tensor_parallel=None picks the smallest valid degree that fits one max_model_len
    sequence (replicas = tp units // tp). max_num_batched_tokens / max_num_seqs default
    to vLLM's scheduler defaults for the GPU size; they size the activation reserve.
    max_batch_size caps the decode batch (defaults to max_num_seqs).
    achievable_fraction < 1 turns the roofline lower bounds into estimates.
    admissible re-checks each fix (a Suggestion) before it is offered: the config rules, for a team.
    engine (vllm, trtllm, neuron) and calibrations (a team's own gate runs) set the expected figures.
    enforce_eager (vLLM --enforce-eager) drops the CUDA-graph reserve and adds the eager launch cost to every step;
    expert_parallel (vLLM --enable-expert-parallel) places whole MoE experts per rank. `setting_notes` then say what
    each changed against the engine's default, and so does an explicit max_num_batched_tokens.
    """
    model = load_architecture(arch)
    inst = resolve_instance(instance)
    wp = lookup_weight_precision(weight_precision)
    kv_dtype_bytes(kv_cache_dtype)  # an unknown dtype is refused before any sizing
    if prompt_tokens < 1 or output_tokens < 1:
        raise ValueError("prompt_tokens and output_tokens must be >= 1")
    default_batched_tokens, default_seqs = scheduler_defaults(inst)
    inputs = PlanInputs(
        model=model,
        instance=inst,
        weights=wp,
        kv_cache_dtype=kv_cache_dtype,
        gpu_memory_utilization=gpu_memory_utilization,
        max_model_len=int(max_model_len or model.max_position_embeddings or prompt_tokens + output_tokens),
        prompt_tokens=prompt_tokens,
        output_tokens=output_tokens,
        max_batch_size=max_batch_size,
        max_num_batched_tokens=int(max_num_batched_tokens or default_batched_tokens),
        max_num_seqs=int(max_num_seqs or default_seqs),
        engine_subtracts_cuda_graphs=engine_subtracts_cuda_graphs,
        enforce_eager=enforce_eager,
        expert_parallel=expert_parallel,
    )
    if tensor_parallel is None:
        tp = choose_tensor_parallel(inputs)
    else:
        tp = _checked_tensor_parallel(inputs, tensor_parallel)
    replicas = max(1, inst.tp_units // tp)
    mp = memory_plan(inputs, tp)
    capacity, max_len = mp.kv_capacity, inputs.max_model_len
    notes = _memory_notes(inputs)
    compute, compute_note = _compute_precision(inputs)
    notes += [compute_note] if compute_note else []
    seqs_at_typical = max_concurrent_sequences(capacity, inputs.typical_length) if capacity else 0
    max_feasible = min(int(max_batch_size or inputs.max_num_seqs), seqs_at_typical)
    bounds = roofline_bounds(
        inputs, mp, compute, replicas=replicas, max_feasible=max_feasible, fraction=achievable_fraction
    )
    expected = _expected(inputs, mp, compute, replicas, max_feasible, engine, calibrations)
    result = PlanResult(
        model=model.name,
        instance_type=inst.instance_type,
        weight_precision=wp.name,
        kv_cache_dtype=kv_cache_dtype,
        tensor_parallel=tp,
        replicas=replicas,
        gpu_memory_utilization=gpu_memory_utilization,
        max_model_len=max_len,
        prompt_tokens=prompt_tokens,
        output_tokens=output_tokens,
        usable_memory_gib_per_accelerator=mp.usable_bytes / GIB,
        weights_gib_per_accelerator=mp.weights.total / GIB,
        runtime_reserve_gib_per_accelerator=mp.reserve.total / GIB,
        activation_reserve_gib=mp.reserve.activation_bytes / GIB,
        non_torch_reserve_gib=mp.reserve.non_torch_bytes / GIB,
        cuda_graph_reserve_gib=mp.reserve.cuda_graph_bytes / GIB,
        max_num_batched_tokens=inputs.max_num_batched_tokens,
        max_num_seqs=inputs.max_num_seqs,
        kv_budget_gib_per_accelerator=mp.kv_budget / GIB,
        kv_bytes_per_token=mp.kv_bytes_per_token,
        kv_capacity_tokens=capacity,
        max_concurrency_at_max_model_len=max_concurrency(capacity, max_len),
        max_concurrent_sequences_at_max_model_len=max_concurrent_sequences(capacity, max_len),
        max_concurrent_sequences_at_typical_length=seqs_at_typical,
        max_feasible_batch=max_feasible,
        compute_precision=compute,
        decode_tpot_ms_batch1=bounds.tpot_ms_batch1,
        decode_bound=bounds.decode_bound,
        prefill_ms=bounds.prefill_ms,
        prefill_bound=bounds.prefill_bound,
        decode_curve=bounds.curve,
        best_batch=bounds.best_batch,
        cost_per_million_output_tokens=bounds.cost_per_million_output_tokens,
        price_per_hour_usd=inst.price_per_hour_usd,
        achievable_fraction=achievable_fraction,
        problems=tuple(find_problems(inputs, mp, suggest_fixes=suggest_fixes, admissible=admissible)),
        notes=tuple(notes),
        expected=expected,
        engine=engine,
        enforce_eager=enforce_eager,
        expert_parallel=inputs.expert_parallel and model.is_moe and tp > 1,
    )
    if not (enforce_eager or result.expert_parallel or max_num_batched_tokens not in (None, default_batched_tokens)):
        return result

    def again(**changes: Any) -> PlanResult:
        """This plan with a switch at the engine's default, to say what the switch changed."""
        asked: dict[str, Any] = {
            "weight_precision": weight_precision,
            "kv_cache_dtype": kv_cache_dtype,
            "tensor_parallel": tp,
            "gpu_memory_utilization": gpu_memory_utilization,
            "max_model_len": max_len,
            "prompt_tokens": prompt_tokens,
            "output_tokens": output_tokens,
            "max_batch_size": max_batch_size,
            "max_num_batched_tokens": max_num_batched_tokens,
            "max_num_seqs": max_num_seqs,
            "engine_subtracts_cuda_graphs": engine_subtracts_cuda_graphs,
            "achievable_fraction": achievable_fraction,
            "suggest_fixes": False,
            "engine": engine,
            "calibrations": calibrations,
            "enforce_eager": enforce_eager,
            "expert_parallel": expert_parallel,
        }
        return plan(model, inst, **(asked | changes))

    changed = _setting_notes(result, inputs, max_num_batched_tokens, default_batched_tokens, again)
    return replace(result, setting_notes=tuple(changed))


def _setting_notes(
    result: PlanResult,
    inputs: PlanInputs,
    batched_tokens_asked: int | None,
    default_batched_tokens: int,
    plan_again: Callable[..., PlanResult],
) -> list[str]:
    """What each vLLM engine switch changed against the engine's default, with the planner's figures."""
    notes: list[str] = []
    if result.enforce_eager:
        graphs = plan_again(enforce_eager=False)
        freed = result.kv_capacity_tokens - graphs.kv_capacity_tokens
        text = (
            f"enforce_eager: no CUDA graphs, so no graph reserve ({graphs.cuda_graph_reserve_gib:.2f} GiB per "
            f"accelerator more for the KV cache: {result.kv_capacity_tokens:,} tokens instead of "
            f"{graphs.kv_capacity_tokens:,}, +{freed:,})"
        )
        if result.expected is not None and graphs.expected is not None:
            eager, extra = eager_overhead(), result.expected.eager_overhead_ms_per_step
            text += (
                f"; every decode step launches its kernels one by one: +{extra:.1f} ms "
                f"({inputs.model.num_hidden_layers} layers x {eager.us_per_layer:g} us, literature estimate), "
                f"expected TPOT at batch 1 {result.expected.tpot_ms_batch1:.1f} ms instead of "
                f"{graphs.expected.tpot_ms_batch1:.1f} ms with graphs"
            )
        notes.append(text)
    if result.expert_parallel:
        notes.append(expert_parallel_note(result, inputs, plan_again(expert_parallel=False)))
    if batched_tokens_asked is not None and batched_tokens_asked != default_batched_tokens:
        default = plan_again(max_num_batched_tokens=default_batched_tokens)
        text = (
            f"max_num_batched_tokens={batched_tokens_asked:,}: activation reserve {result.activation_reserve_gib:.2f} "
            f"GiB (vLLM's default {default_batched_tokens:,}: {default.activation_reserve_gib:.2f} GiB), KV capacity "
            f"{result.kv_capacity_tokens:,} tokens instead of {default.kv_capacity_tokens:,}"
        )
        if result.expected is not None and default.expected is not None:
            text += (
                f"; a {inputs.prompt_tokens:,}-token prompt prefills in {result.expected.prefill_steps} step(s) "
                f"(expected TTFT {result.expected.ttft_ms:.0f} ms instead of {default.expected.ttft_ms:.0f} ms)"
            )
        notes.append(text)
    return notes


def _expected(
    inputs: PlanInputs,
    mp: MemoryPlan,
    compute: str,
    replicas: int,
    max_feasible: int,
    engine: str,
    calibrations: Sequence[Calibration],
) -> ExpectedLatency | None:
    inst = inputs.instance
    bandwidth = inst.memory_bandwidth_bytes_per_s_per_tp_unit
    peak = inst.peak_flops_per_tp_unit(compute)
    if not (bandwidth and peak):
        return None
    efficiency = efficiency_for(inst, inputs.weights.name, engine, calibrations)
    return expected_latency(
        inputs.model,
        mp.weights,
        RankHardware(bandwidth, peak),
        efficiency,
        max_batch=max(1, max_feasible),
        prompt_tokens=inputs.prompt_tokens,
        output_tokens=inputs.output_tokens,
        kv_bytes_per_token=mp.kv_bytes_per_token,
        tp=mp.tp,
        replicas=replicas,
        price_per_second_usd=inst.price_per_second_usd,
        enforce_eager=inputs.enforce_eager,
        max_num_batched_tokens=inputs.max_num_batched_tokens,
    )


def _checked_tensor_parallel(inputs: PlanInputs, tensor_parallel: int) -> int:
    """The degree the caller asked for, refused when the instance or the model cannot run it."""
    tp = int(tensor_parallel)
    why = refusal(inputs.model, inputs.instance, tp)
    if why is not None:
        raise ValueError(f"tensor_parallel={tp}: {why}")
    return tp


def _memory_notes(inputs: PlanInputs) -> list[str]:
    """Caveats on the memory figures and on the requested lengths."""
    inst, typical_len, max_len = inputs.instance, inputs.typical_length, inputs.max_model_len
    notes: list[str] = []
    if not inst.usable_memory_is_observed:
        notes.append(
            f"{inst.accelerator}: runtime-visible memory not observed; assumed "
            f"{inst.usable_memory_gib_per_accelerator:.1f} GiB of the nominal {inst.memory_gib_per_accelerator:g}"
        )
    if inst.is_neuron:
        notes.append("Neuron: budget applied per NeuronCore (chip memory / cores); not validated against Neuron logs")
    if typical_len > max_len:
        notes.append(
            f"prompt_tokens + output_tokens = {typical_len:,} exceeds max_model_len={max_len:,}; "
            "such requests are rejected"
        )
    return notes


def _compute_precision(inputs: PlanInputs) -> tuple[str, str | None]:
    """The precision the matmuls run in on this hardware, and a note when it is not the weights' own."""
    inst, wp = inputs.instance, inputs.weights
    compute = wp.compute_precision
    if inst.supports(wp.native_hardware_precision) and inst.peak_flops_per_tp_unit(compute) is not None:
        return compute, None
    note = None
    if wp.compute_precision != "bf16":
        note = (
            f"{inst.accelerator} has no native {wp.native_hardware_precision}; "
            f"{wp.name} runs as weight-only dequantization at the bf16 rate"
        )
    return "bf16", note
