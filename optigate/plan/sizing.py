"""What the planner was asked (``PlanInputs``) and the memory budget of one tensor-parallel rank under it.

``PlanInputs`` is resolved once by ``plan()`` (architecture loaded, instance looked up, defaults
filled) and handed as one object to the tensor-parallel choice, the instance search and the
problem checks; a variant (another instance, precision or KV dtype) is ``dataclasses.replace`` of it.
"""

from __future__ import annotations

from dataclasses import dataclass

from .architecture import ModelArchitecture
from .catalog import Instance, get_instance
from .memory import (
    RuntimeReserve,
    WeightFootprint,
    WeightPrecision,
    estimate_runtime_reserve,
    kv_budget_bytes,
    kv_capacity_tokens,
    kv_dtype_bytes,
    weight_footprint,
)

#: vLLM (V1 engine, OpenAI server) scheduler defaults: GPUs with >= 70 GiB get a
#: bigger prefill chunk and more sequences. They size the activation peak the engine
#: reserves, so the planner uses the same defaults unless told otherwise.
_LARGE_GPU_GIB = 70
_DEFAULTS_LARGE = (8192, 1024)  # (max_num_batched_tokens, max_num_seqs)
_DEFAULTS_SMALL = (2048, 256)


def resolve_instance(instance: str | Instance) -> Instance:
    return instance if isinstance(instance, Instance) else get_instance(instance)


def scheduler_defaults(instance: Instance) -> tuple[int, int]:
    """vLLM's (max_num_batched_tokens, max_num_seqs) for the memory of one rank of ``instance``."""
    per_rank_gib = instance.usable_memory_gib_per_accelerator / instance.cores_per_accelerator
    return _DEFAULTS_LARGE if per_rank_gib >= _LARGE_GPU_GIB else _DEFAULTS_SMALL


@dataclass(frozen=True)
class PlanInputs:
    """One planning question with every default filled in: the model, where it runs and how it is served."""

    model: ModelArchitecture
    instance: Instance
    weights: WeightPrecision
    kv_cache_dtype: str
    gpu_memory_utilization: float
    max_model_len: int
    prompt_tokens: int
    output_tokens: int
    max_batch_size: int | None  # None: the decode batch is capped by max_num_seqs only
    max_num_batched_tokens: int
    max_num_seqs: int
    engine_subtracts_cuda_graphs: bool
    enforce_eager: bool = False  # vLLM --enforce-eager: no CUDA graphs, so no graph memory (and slower steps)
    expert_parallel: bool = False  # vLLM --enable-expert-parallel: whole MoE experts per rank

    @property
    def kv_bytes(self) -> int:
        """Bytes per KV element for ``kv_cache_dtype``."""
        return kv_dtype_bytes(self.kv_cache_dtype)

    @property
    def typical_length(self) -> int:
        """Tokens one typical request holds in the KV cache (prompt + output)."""
        return self.prompt_tokens + self.output_tokens


@dataclass(frozen=True)
class MemoryPlan:
    """The memory of one tensor-parallel rank at one TP degree: weights, reserve, and what is left for KV."""

    tp: int
    weights: WeightFootprint
    reserve: RuntimeReserve
    usable_bytes: float
    kv_budget: float
    kv_bytes_per_token: float
    kv_capacity: int

    def room_for_weights(self, gpu_memory_utilization: float) -> float:
        """Bytes the engine's share of memory leaves for weights and KV after the runtime reserve."""
        return self.usable_bytes * gpu_memory_utilization - self.reserve.total


def memory_plan(inputs: PlanInputs, tp: int, *, kv_bytes: int | None = None) -> MemoryPlan:
    """Size one rank of ``inputs.instance`` at tensor-parallel degree ``tp``.

    ``kv_bytes`` overrides the KV element size (the FP8 KV suggestion sizes 1-byte elements).
    """
    model, instance = inputs.model, inputs.instance
    weights = weight_footprint(model, inputs.weights, tp, expert_parallel=inputs.expert_parallel)
    reserve = estimate_runtime_reserve(
        model,
        tp=tp,
        max_num_batched_tokens=inputs.max_num_batched_tokens,
        max_num_seqs=inputs.max_num_seqs,
        nvlink=instance.has_nvlink and tp > 1,
        engine_subtracts_cuda_graphs=inputs.engine_subtracts_cuda_graphs
        and not inputs.enforce_eager
        and not instance.is_neuron,
    )
    usable = instance.usable_memory_bytes_per_tp_unit
    budget = kv_budget_bytes(usable, inputs.gpu_memory_utilization, weights.total, reserve)
    per_token = model.kv_bytes_per_token(inputs.kv_bytes if kv_bytes is None else kv_bytes, tp)
    return MemoryPlan(tp, weights, reserve, usable, budget, per_token, kv_capacity_tokens(budget, per_token))
