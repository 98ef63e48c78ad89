"""The planner applied to a team's config: what fits, what optigate derives, and what it refuses.

Pure logic (no aws_cdk): `plan_serving` maps a serving block onto `plan()`, `derive_settings`
fills `max_model_len`, `max_batch_size` and `gpu_memory_utilization` when the team left them
unset. `optigate.deployment` calls it once per variant and keeps the plan. `plan_longest_held` derives
the length the same way for a model planned ad hoc (`optigate plan --model`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from optigate.config.models import ArchitectureFields, Serving, TeamConfig
from optigate.plan.architecture import ModelArchitecture, load_architecture
from optigate.plan.catalog import Instance, get_instance
from optigate.plan.expected import ENGINE
from optigate.plan.memory import DEFAULT_GPU_MEMORY_UTILIZATION, weight_footprint
from optigate.plan.parallel import default_degree, unit_name
from optigate.plan.planner import PlanResult, plan
from optigate.plan.problems import Admissible

MIN_DERIVED_MAX_MODEL_LEN = 4096
LENGTH_GRANULE = 1024  # derived lengths are multiples of this
# A derived max_model_len leaves room for requests twice the team's typical prompt + output.
HEADROOM = 2

KV_CACHE_DTYPE = {"auto": "auto", "fp8": "fp8", "fp8_e4m3": "fp8", "fp8_e5m2": "fp8"}

# LMI's TensorRT-LLM default option.kv_cache_free_gpu_mem_fraction (trt_llm_user_guide.md in
# deepjavalibrary/djl-serving): the KV cache takes this share of the memory left after the weights. Planned
# as vLLM's share of all memory, which leaves the KV cache 5 % of the weights and reserve less than
# TensorRT-LLM takes: the plan errs on the side of refusing.
TRTLLM_KV_CACHE_FREE_GPU_MEM_FRACTION = 0.95


def architecture_for(spec: str | ArchitectureFields) -> ModelArchitecture:
    """The planner's architecture for a config entry; a stated parameter count sizes the MLP."""
    if isinstance(spec, str):
        return load_architecture(spec)
    fields: dict[str, Any] = spec.model_dump(exclude_none=True)
    published = fields.pop("num_parameters", None)
    if "intermediate_size" not in fields and published:
        without_mlp = ModelArchitecture.from_config(fields, name="custom").parameter_count().total
        fields["intermediate_size"] = max(
            1, round((published - without_mlp) / (3 * spec.hidden_size * spec.num_hidden_layers))
        )
    return ModelArchitecture.from_config(fields, name="custom", published={"total": published} if published else None)


def deployed_tensor_parallel(arch: ModelArchitecture, serving: Serving, instance: Instance | None = None) -> int:
    """The degree optigate deploys: the team's, or the largest the instance and the model's heads allow."""
    return serving.tensor_parallel_degree or default_degree(arch, instance or get_instance(serving.instance_type))


def weights_gb(arch: ModelArchitecture, weight_precision: str) -> float:
    """GB of weights served at `weight_precision` as the planner sizes them (quantized linear layers with their
    scales; embeddings, lm_head and norms at 16 bit)."""
    return weight_footprint(arch, weight_precision).total / 1e9


def planned_memory_utilization(serving: Serving) -> float:
    """The memory share the plan sizes with: what the container is actually told (see the TRT-LLM note)."""
    if serving.container.family == "lmi-trtllm":
        return TRTLLM_KV_CACHE_FREE_GPU_MEM_FRACTION
    return serving.gpu_memory_utilization or DEFAULT_GPU_MEMORY_UTILIZATION


@dataclass(frozen=True)
class DerivedSettings:
    """Values optigate chose for unset fields, and why (shown in the synth summary)."""

    max_model_len: int
    max_batch_size: int
    gpu_memory_utilization: float
    tensor_parallel_degree: int
    notes: tuple[str, ...]
    plan: PlanResult


def plan_serving(
    team: TeamConfig,
    serving: Serving,
    *,
    weight_precision: str,
    max_model_len: int | None = None,
    max_batch_size: int | None = None,
    admissible: Admissible | None = None,
    instance: Instance,
) -> PlanResult:
    """Plan `serving` on `instance` (its instance_type, resolved) at the tensor-parallel degree optigate deploys, its
    weights served at `weight_precision` (the served precision optigate.deployment.checkpoint resolves); fixes are
    offered only if `admissible`."""
    arch = architecture_for(team.model.architecture)
    benchmark = team.gate.benchmark
    return plan(
        arch,
        instance,
        weight_precision=weight_precision,
        kv_cache_dtype=KV_CACHE_DTYPE[serving.kv_cache_dtype],
        tensor_parallel=deployed_tensor_parallel(arch, serving, instance),
        gpu_memory_utilization=planned_memory_utilization(serving),
        max_model_len=max_model_len or serving.max_model_len,
        prompt_tokens=benchmark.prompt_tokens,
        output_tokens=benchmark.max_new_tokens,
        max_batch_size=max_batch_size or serving.max_batch_size,
        admissible=admissible,
        engine=ENGINE[serving.container.family],
        calibrations=team.calibrations,
        enforce_eager=serving.enforce_eager,
        expert_parallel=serving.enable_expert_parallel,
        max_num_batched_tokens=serving.max_num_batched_tokens,
    )


def _round_down(value: int, granule: int = LENGTH_GRANULE) -> int:
    return value // granule * granule


def plan_longest_held(
    arch: ModelArchitecture, instance: Instance | str, **options: Any
) -> tuple[PlanResult, int | None]:
    """`plan()` as asked, and the model's own length when it was replaced (else None): when no max_model_len is
    asked for and the model's own does not fit, the plan at the longest length the KV cache holds (a multiple of
    LENGTH_GRANULE, as a team file without max_model_len gets), if that fits."""
    result = plan(arch, instance, **options)
    if options.get("max_model_len") is not None or result.fits:
        return result, None
    derived = _round_down(result.kv_capacity_tokens)
    if not derived:
        return result, None
    shorter = plan(arch, instance, **{**options, "max_model_len": derived})
    return (shorter, result.max_model_len) if shorter.fits else (result, None)


def derive_settings(
    team: TeamConfig,
    serving: Serving,
    *,
    weight_precision: str,
    admissible: Admissible | None = None,
    instance: Instance,
) -> DerivedSettings:
    """`serving`'s unset settings on `instance` (its instance_type, resolved) chosen by the plan of its weights served
    at `weight_precision`."""
    arch = architecture_for(team.model.architecture)
    benchmark = team.gate.benchmark
    typical = benchmark.prompt_tokens + benchmark.max_new_tokens
    notes: list[str] = []

    gpu_memory_utilization = planned_memory_utilization(serving)
    notes += _memory_notes(serving, gpu_memory_utilization)
    tp = deployed_tensor_parallel(arch, serving, instance)
    if serving.tensor_parallel_degree is None:
        notes.append(default_tensor_parallel_note(arch, instance, tp))

    max_model_len = serving.max_model_len
    if max_model_len is None:
        # Probe the KV capacity at a short length, then take the longest length that the cache
        # holds, capped by the model and by twice the team's typical request.
        probe = plan_serving(
            team,
            serving,
            weight_precision=weight_precision,
            max_model_len=min(typical, arch.max_position_embeddings or typical),
            max_batch_size=1,
            admissible=admissible,
            instance=instance,
        )
        wanted = max(MIN_DERIVED_MAX_MODEL_LEN, 1 << (HEADROOM * typical - 1).bit_length())
        ceiling = min(arch.max_position_embeddings or wanted, wanted)
        capacity = _round_down(probe.kv_capacity_tokens)
        max_model_len = max(min(ceiling, capacity), min(typical, capacity)) if capacity else ceiling
        notes.append(
            f"max_model_len={max_model_len:,}: room for {HEADROOM}x the typical {typical:,}-token request "
            f"(model allows {arch.max_position_embeddings:,}; KV cache holds {probe.kv_capacity_tokens:,} tokens)"
        )

    result = plan_serving(
        team,
        serving,
        weight_precision=weight_precision,
        max_model_len=max_model_len,
        admissible=admissible,
        instance=instance,
    )
    max_batch_size = serving.max_batch_size
    if max_batch_size is None:
        fits = result.max_concurrent_sequences_at_typical_length
        max_batch_size = max(1, min(result.max_num_seqs, fits))
        notes.append(
            f"max_batch_size={max_batch_size}: the KV cache holds {fits:,} sequences of {typical:,} tokens"
            + (f" (capped at vLLM's max_num_seqs {result.max_num_seqs})" if fits > result.max_num_seqs else "")
        )
        tokens = serving.max_num_batched_tokens
        if tokens is not None and max_batch_size > tokens:  # vLLM refuses max_num_seqs > max_num_batched_tokens
            max_batch_size = tokens
            notes.append(f"max_batch_size={tokens}: capped at max_num_batched_tokens (one token of each sequence)")
        result = plan_serving(
            team,
            serving,
            weight_precision=weight_precision,
            max_model_len=max_model_len,
            max_batch_size=max_batch_size,
            admissible=admissible,
            instance=instance,
        )
    return DerivedSettings(max_model_len, max_batch_size, gpu_memory_utilization, tp, tuple(notes), result)


def _memory_notes(serving: Serving, gpu_memory_utilization: float) -> list[str]:
    """Why the plan sizes with `gpu_memory_utilization` (shown in the summary), when optigate chose it."""
    if serving.container.family == "lmi-trtllm":
        return [
            f"planned with TensorRT-LLM's KV share {gpu_memory_utilization} of the memory after the weights "
            "(LMI's default kv_cache_free_gpu_mem_fraction)"
        ]
    if serving.gpu_memory_utilization is None:
        return [f"gpu_memory_utilization={gpu_memory_utilization}: vLLM's default share, leaving room for the runtime"]
    return []


def default_tensor_parallel_note(arch: ModelArchitecture, instance: Instance, tp: int) -> str:
    """Why the default degree is what it is (shown in the summary)."""
    units = f"{instance.tp_units} {unit_name(instance)}"
    copies = instance.tp_units // tp
    if tp == instance.tp_units:
        return f"tensor_parallel_degree={tp}: every one of the {units} of {instance.instance_type}"
    return (
        f"tensor_parallel_degree={tp}: the largest degree the {units} of {instance.instance_type} and the model's "
        f"{arch.num_attention_heads} attention / {arch.num_key_value_heads} KV heads allow"
        + (f" ({copies} model copies)" if copies > 1 and not instance.is_neuron else "")
    )
