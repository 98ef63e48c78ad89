"""Top-level capacity + roofline plan for serving one model on one SageMaker instance type.

``plan()`` combines the memory budget (``memory``) with the roofline lower bounds
(``roofline``) and reports structured problems, each with a message that already
contains the numbers and a suggested fix computed by re-planning (FP8 KV cache,
lighter weights, a shorter max_model_len, or the cheapest catalog instance that fits).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from .architecture import ModelArchitecture, load_architecture
from .catalog import GIB, Instance, all_instances, get_instance
from .memory import (
    DEFAULT_BLOCK_SIZE,
    RuntimeReserve,
    WeightFootprint,
    WeightPrecision,
    estimate_runtime_reserve,
    kv_budget_bytes,
    kv_capacity_tokens,
    kv_dtype_bytes,
    max_concurrency,
    max_concurrent_sequences,
    weight_footprint,
)
from .memory import weight_precision as lookup_weight_precision
from .roofline import DecodePoint, RankHardware, decode_curve, prefill_bound

PROBLEM_KINDS = (
    "weights_do_not_fit",
    "kv_cannot_hold_one_sequence",
    "max_model_len_exceeds_position_embeddings",
    "batch_times_length_does_not_fit",
)

#: vLLM (V1 engine, OpenAI server) scheduler defaults: GPUs with >= 70 GiB get a
#: bigger prefill chunk and more sequences. They size the activation peak the engine
#: reserves, so the planner uses the same defaults unless told otherwise.
_LARGE_GPU_GIB = 70
_DEFAULTS_LARGE = (8192, 1024)  # (max_num_batched_tokens, max_num_seqs)
_DEFAULTS_SMALL = (2048, 256)


@dataclass(frozen=True)
class Problem:
    """Why a plan does not work, with the numbers; ``message`` is ready for users."""

    kind: str
    message: str
    details: dict[str, Any] = field(default_factory=dict, compare=False)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "message": self.message, "details": dict(self.details)}


@dataclass(frozen=True)
class _MemoryPlan:
    tp: int
    weights: WeightFootprint
    reserve: RuntimeReserve
    usable_bytes: float
    kv_budget: float
    kv_bytes_per_token: float
    kv_capacity: int


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
    problems: tuple[Problem, ...]
    notes: tuple[str, ...]

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
        data["fits"] = self.fits
        data["is_lower_bound"] = self.is_lower_bound
        return data


def _resolve_instance(instance: str | Instance) -> Instance:
    return instance if isinstance(instance, Instance) else get_instance(instance)


def _scheduler_defaults(inst: Instance) -> tuple[int, int]:
    per_rank_gib = inst.usable_memory_gib_per_accelerator / inst.cores_per_accelerator
    return _DEFAULTS_LARGE if per_rank_gib >= _LARGE_GPU_GIB else _DEFAULTS_SMALL


def _memory_plan(
    arch: ModelArchitecture,
    inst: Instance,
    wp: WeightPrecision,
    kv_bytes: int,
    tp: int,
    gmu: float,
    mnbt: int,
    seqs: int,
    graphs: bool,
) -> _MemoryPlan:
    weights = weight_footprint(arch, wp, tp)
    reserve = estimate_runtime_reserve(
        arch,
        tp=tp,
        max_num_batched_tokens=mnbt,
        max_num_seqs=seqs,
        nvlink=inst.has_nvlink and tp > 1,
        engine_subtracts_cuda_graphs=graphs and not inst.is_neuron,
    )
    usable = inst.usable_memory_bytes_per_tp_unit
    budget = kv_budget_bytes(usable, gmu, weights.total, reserve)
    per_token = arch.kv_bytes_per_token(kv_bytes, tp)
    return _MemoryPlan(tp, weights, reserve, usable, budget, per_token, kv_capacity_tokens(budget, per_token))


def _tp_candidates(arch: ModelArchitecture, inst: Instance) -> list[int]:
    units = inst.tp_units
    return [t for t in range(1, units + 1) if units % t == 0 and arch.valid_tensor_parallel(t)]


def _choose_tp(arch, inst, wp, kv_bytes, gmu, max_model_len, mnbt, seqs, graphs) -> int:
    """Smallest valid TP that holds the weights plus one max_model_len sequence, so the
    remaining accelerators can run extra replicas; the largest valid TP otherwise."""
    candidates = _tp_candidates(arch, inst)
    if not candidates:
        return 1
    for tp in candidates:
        mp = _memory_plan(arch, inst, wp, kv_bytes, tp, gmu, mnbt, seqs, graphs)
        if mp.kv_capacity >= max_model_len:
            return tp
    return candidates[-1]


def _cheapest_fitting_instance(arch, wp, kv_cache_dtype, gmu, max_model_len, need_tokens, exclude, graphs):
    """Cheapest priced catalog instance whose plan holds ``need_tokens`` KV tokens.

    Only instances of the same platform (GPU or Neuron: another container family) whose
    hardware runs the weight precision natively are suggested.
    """
    kv_bytes = kv_dtype_bytes(kv_cache_dtype)
    current = get_instance(exclude)
    best: tuple[float, Instance, int] | None = None
    unpriced: tuple[float, Instance, int] | None = None  # fallback when no priced instance fits
    for inst in all_instances():
        if inst.instance_type == exclude or inst.platform != current.platform:
            continue
        if wp.native_hardware_precision in ("fp8", "fp4") and not inst.supports(wp.native_hardware_precision):
            continue
        mnbt, seqs = _scheduler_defaults(inst)
        for tp in reversed(_tp_candidates(arch, inst)):
            mp = _memory_plan(arch, inst, wp, kv_bytes, tp, gmu, mnbt, seqs, graphs)
            if mp.kv_capacity >= need_tokens:
                if inst.price_per_hour_usd is not None:
                    if best is None or inst.price_per_hour_usd < best[0]:
                        best = (inst.price_per_hour_usd, inst, mp.kv_capacity)
                else:
                    total_memory = inst.memory_gib_per_accelerator * inst.accelerator_count
                    if unpriced is None or total_memory < unpriced[0]:
                        unpriced = (total_memory, inst, mp.kv_capacity)
                break
    if best is None and unpriced is not None:
        return (None, unpriced[1], unpriced[2])
    return best


def _instance_hint(found) -> str:
    if found is None:
        return ""
    price, inst, capacity = found
    cost = "price unknown" if price is None else f"${price:.2f}/h"
    return f"; or {inst.instance_type} ({cost}, KV holds {capacity:,} tokens)"


def plan(
    arch: str | ModelArchitecture | dict,
    instance: str | Instance,
    *,
    weight_precision: str = "bf16",
    kv_cache_dtype: str = "auto",
    tensor_parallel: int | None = None,
    gpu_memory_utilization: float = 0.9,
    max_model_len: int | None = None,
    prompt_tokens: int = 1024,
    output_tokens: int = 256,
    max_batch_size: int | None = None,
    max_num_batched_tokens: int | None = None,
    max_num_seqs: int | None = None,
    engine_subtracts_cuda_graphs: bool = True,
    achievable_fraction: float = 1.0,
    suggest_fixes: bool = True,
) -> PlanResult:
    """Plan serving ``arch`` on ``instance``.

    tensor_parallel=None picks the smallest valid degree that fits one max_model_len
    sequence (replicas = tp units // tp). max_num_batched_tokens / max_num_seqs default
    to vLLM's scheduler defaults for the GPU size; they size the activation reserve.
    max_batch_size caps the decode batch (defaults to max_num_seqs).
    achievable_fraction < 1 turns the roofline lower bounds into estimates.
    """
    model = load_architecture(arch)
    inst = _resolve_instance(instance)
    wp = lookup_weight_precision(weight_precision)
    kv_bytes = kv_dtype_bytes(kv_cache_dtype)
    if prompt_tokens < 1 or output_tokens < 1:
        raise ValueError("prompt_tokens and output_tokens must be >= 1")
    max_len = int(max_model_len or model.max_position_embeddings or prompt_tokens + output_tokens)
    default_mnbt, default_seqs = _scheduler_defaults(inst)
    mnbt = int(max_num_batched_tokens or default_mnbt)
    seqs = int(max_num_seqs or default_seqs)
    graphs = engine_subtracts_cuda_graphs

    if tensor_parallel is None:
        tp = _choose_tp(model, inst, wp, kv_bytes, gpu_memory_utilization, max_len, mnbt, seqs, graphs)
    else:
        tp = int(tensor_parallel)
        if tp > inst.tp_units:
            raise ValueError(f"tensor_parallel={tp} exceeds the {inst.tp_units} tp units of {inst.instance_type}")
        if not model.valid_tensor_parallel(tp):
            raise ValueError(
                f"tensor_parallel={tp} does not divide {model.name}'s {model.num_attention_heads} attention heads "
                f"/ {model.num_key_value_heads} KV heads"
            )
    replicas = max(1, inst.tp_units // tp)
    mp = _memory_plan(model, inst, wp, kv_bytes, tp, gpu_memory_utilization, mnbt, seqs, graphs)
    capacity = mp.kv_capacity
    typical_len = prompt_tokens + output_tokens
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
            f"prompt_tokens + output_tokens = {typical_len:,} exceeds max_model_len={max_len:,}; such requests are rejected"
        )

    # --- compute precision and roofline hardware ---
    compute = wp.compute_precision
    if not inst.supports(wp.native_hardware_precision) or inst.peak_flops_per_tp_unit(compute) is None:
        if wp.compute_precision != "bf16":
            notes.append(
                f"{inst.accelerator} has no native {wp.native_hardware_precision}; "
                f"{wp.name} runs as weight-only dequantization at the bf16 rate"
            )
        compute = "bf16"
    bandwidth = inst.memory_bandwidth_bytes_per_s_per_tp_unit
    peak = inst.peak_flops_per_tp_unit(compute)
    hardware = RankHardware(bandwidth, peak).scaled(achievable_fraction) if bandwidth and peak else None

    batch_cap = int(max_batch_size or seqs)
    seqs_at_typical = max_concurrent_sequences(capacity, typical_len) if capacity else 0
    max_feasible = min(batch_cap, seqs_at_typical)
    decode_context = prompt_tokens + output_tokens / 2

    curve: tuple[DecodePoint, ...] = ()
    tpot1 = bound1 = prefill_ms = prefill_kind = None
    best_batch = cost = None
    if hardware is not None:
        curve = decode_curve(
            model,
            mp.weights,
            hardware,
            max_batch=max(1, max_feasible),
            context_tokens=decode_context,
            kv_bytes_per_token=mp.kv_bytes_per_token,
            tp=tp,
        )
        tpot1, bound1 = curve[0].tpot_ms, curve[0].bound
        pf = prefill_bound(
            model, mp.weights, hardware, prompt_tokens=prompt_tokens, kv_bytes_per_token=mp.kv_bytes_per_token, tp=tp
        )
        prefill_ms, prefill_kind = pf.time_s * 1000, pf.bound
        price_per_s = inst.price_per_second_usd
        if price_per_s is not None and max_feasible >= 1:
            for b in range(1, max_feasible + 1):
                batch_prefill = prefill_bound(
                    model,
                    mp.weights,
                    hardware,
                    prompt_tokens=prompt_tokens,
                    kv_bytes_per_token=mp.kv_bytes_per_token,
                    tp=tp,
                    num_sequences=b,
                ).time_s
                step = curve[b - 1].tpot_ms / 1000
                seconds = batch_prefill + output_tokens * step
                dollars_per_million = price_per_s * seconds / (b * output_tokens * replicas) * 1e6
                if cost is None or dollars_per_million < cost:
                    best_batch, cost = b, dollars_per_million

    problems = _find_problems(
        model,
        inst,
        wp,
        kv_cache_dtype,
        kv_bytes,
        mp,
        gpu_memory_utilization,
        max_len,
        typical_len,
        max_batch_size,
        mnbt,
        seqs,
        graphs,
        suggest_fixes,
    )
    return PlanResult(
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
        max_num_batched_tokens=mnbt,
        max_num_seqs=seqs,
        kv_budget_gib_per_accelerator=mp.kv_budget / GIB,
        kv_bytes_per_token=mp.kv_bytes_per_token,
        kv_capacity_tokens=capacity,
        max_concurrency_at_max_model_len=max_concurrency(capacity, max_len),
        max_concurrent_sequences_at_max_model_len=max_concurrent_sequences(capacity, max_len),
        max_concurrent_sequences_at_typical_length=seqs_at_typical,
        max_feasible_batch=max_feasible,
        compute_precision=compute,
        decode_tpot_ms_batch1=tpot1,
        decode_bound=bound1,
        prefill_ms=prefill_ms,
        prefill_bound=prefill_kind,
        decode_curve=curve,
        best_batch=best_batch,
        cost_per_million_output_tokens=cost,
        price_per_hour_usd=inst.price_per_hour_usd,
        achievable_fraction=achievable_fraction,
        problems=tuple(problems),
        notes=tuple(notes),
    )


def _find_problems(
    model, inst, wp, kv_cache_dtype, kv_bytes, mp, gmu, max_len, typical_len, max_batch_size, mnbt, seqs, graphs, suggest
) -> list[Problem]:
    problems: list[Problem] = []
    name, itype = model.name, inst.instance_type
    available = mp.usable_bytes * gmu - mp.reserve.total

    if model.max_position_embeddings and max_len > model.max_position_embeddings:
        problems.append(
            Problem(
                "max_model_len_exceeds_position_embeddings",
                f"max_model_len={max_len:,} exceeds {name}'s max_position_embeddings="
                f"{model.max_position_embeddings:,}; set max_model_len <= {model.max_position_embeddings:,} "
                "(or configure RoPE scaling explicitly).",
                {"max_model_len": max_len, "max_position_embeddings": model.max_position_embeddings},
            )
        )

    if mp.weights.total > available:
        fixes: list[str] = []
        if suggest:
            for alt in ("fp8", "awq"):
                alt_wp = lookup_weight_precision(alt)
                if alt_wp.bytes_per_param >= wp.bytes_per_param:
                    continue
                alt_mp = _memory_plan(model, inst, alt_wp, kv_bytes, mp.tp, gmu, mnbt, seqs, graphs)
                if alt_mp.kv_capacity >= max_len:
                    fixes.append(f"{alt.upper()} weights ({alt_mp.weights.total / GIB:.1f} GiB per accelerator) fit")
                    break
            fixes_text = "; ".join(fixes)
            hint = _instance_hint(
                _cheapest_fitting_instance(model, wp, kv_cache_dtype, gmu, max_len, max_len, itype, graphs)
            )
            suggestion = (fixes_text + hint) if fixes_text else (hint[len("; or ") :] if hint else "")
        else:
            suggestion = ""
        problems.append(
            Problem(
                "weights_do_not_fit",
                f"{name} {wp.name} weights need {mp.weights.total / GIB:.1f} GiB per accelerator at TP={mp.tp}, "
                f"but {itype} leaves {max(available, 0) / GIB:.1f} GiB (usable {mp.usable_bytes / GIB:.1f} GiB x "
                f"gpu_memory_utilization {gmu} - {mp.reserve.total / GIB:.1f} GiB runtime reserve)."
                + (f" Try: {suggestion}." if suggestion else ""),
                {
                    "weights_gib_per_accelerator": mp.weights.total / GIB,
                    "available_gib_per_accelerator": available / GIB,
                    "tensor_parallel": mp.tp,
                },
            )
        )
    elif mp.kv_capacity < max_len:
        parts: list[str] = []
        details: dict[str, Any] = {"kv_capacity_tokens": mp.kv_capacity, "max_model_len": max_len}
        if suggest:
            if kv_bytes > 1:
                fp8 = _memory_plan(model, inst, wp, 1, mp.tp, gmu, mnbt, seqs, graphs)
                ratio = fp8.kv_capacity / max_len
                details["fp8_kv_capacity_tokens"] = fp8.kv_capacity
                parts.append(f"FP8 KV cache holds {fp8.kv_capacity:,} tokens ({ratio:.1f}x one sequence)")
            if mp.kv_capacity >= DEFAULT_BLOCK_SIZE:
                parts.append(f"lower max_model_len to {mp.kv_capacity:,}")
            hint = _instance_hint(
                _cheapest_fitting_instance(model, wp, kv_cache_dtype, gmu, max_len, max_len, itype, graphs)
            )
            if hint:
                parts.append(hint[len("; or ") :])
        problems.append(
            Problem(
                "kv_cannot_hold_one_sequence",
                f"KV cache on {itype} holds {mp.kv_capacity:,} tokens (TP={mp.tp}, "
                f"{mp.kv_budget / GIB:.2f} GiB at {mp.kv_bytes_per_token / 1024:.0f} KiB/token), but one "
                f"max_model_len={max_len:,} sequence needs {max_len:,}." + (f" Try: {'; or '.join(parts)}." if parts else ""),
                details,
            )
        )
    elif max_batch_size is not None and max_batch_size * typical_len > mp.kv_capacity:
        need = max_batch_size * typical_len
        feasible = max_concurrent_sequences(mp.kv_capacity, typical_len)
        parts = [f"lower max_batch_size to {feasible}"]
        details = {"needed_tokens": need, "kv_capacity_tokens": mp.kv_capacity, "feasible_batch": feasible}
        if suggest:
            if kv_bytes > 1:
                fp8 = _memory_plan(model, inst, wp, 1, mp.tp, gmu, mnbt, seqs, graphs)
                parts.append(
                    f"FP8 KV cache ({fp8.kv_capacity:,} tokens, {max_concurrent_sequences(fp8.kv_capacity, typical_len)} "
                    "sequences)"
                )
            hint = _instance_hint(_cheapest_fitting_instance(model, wp, kv_cache_dtype, gmu, max_len, need, itype, graphs))
            if hint:
                parts.append(hint[len("; or ") :])
        problems.append(
            Problem(
                "batch_times_length_does_not_fit",
                f"max_batch_size={max_batch_size} x {typical_len:,} tokens (prompt+output) = {need:,} tokens, but the "
                f"KV cache on {itype} holds {mp.kv_capacity:,}. Try: {'; or '.join(parts)}.",
                details,
            )
        )
    return problems
