"""Searches over sizings: the tensor-parallel degree to deploy, and the cheapest catalog instance that fits."""

from __future__ import annotations

from dataclasses import dataclass, replace

from .architecture import ModelArchitecture
from .catalog import Instance, all_instances
from .parallel import valid_degrees
from .sizing import PlanInputs, memory_plan, scheduler_defaults


def tp_candidates(model: ModelArchitecture, instance: Instance) -> list[int]:
    """Tensor-parallel degrees, smallest first, that the instance runs and the model's heads shard."""
    return valid_degrees(model, instance)


def choose_tensor_parallel(inputs: PlanInputs) -> int:
    """Smallest valid TP that holds the weights plus one max_model_len sequence, so the
    remaining accelerators can run extra replicas; the largest valid TP otherwise."""
    candidates = tp_candidates(inputs.model, inputs.instance)
    if not candidates:
        return 1
    for tp in candidates:
        if memory_plan(inputs, tp).kv_capacity >= inputs.max_model_len:
            return tp
    return candidates[-1]


@dataclass(frozen=True)
class InstanceFit:
    """An instance that holds the tokens asked for, at the largest valid TP (one replica)."""

    instance: Instance
    tensor_parallel: int
    kv_capacity_tokens: int


def cheapest_fitting_instance(inputs: PlanInputs, need_tokens: int) -> InstanceFit | None:
    """Cheapest priced catalog instance, other than ``inputs.instance``, whose plan holds ``need_tokens`` KV tokens.

    Only instances of the same platform (GPU or Neuron: another container family) whose
    hardware runs the weight precision natively are considered; each is sized with its own
    scheduler defaults. When no priced instance fits, the fitting unpriced one with the least
    accelerator memory is returned.
    """
    current = inputs.instance
    native = inputs.weights.native_hardware_precision
    best: tuple[float, InstanceFit] | None = None
    unpriced: tuple[float, InstanceFit] | None = None  # fallback when no priced instance fits
    for instance in all_instances():
        if instance.instance_type == current.instance_type or instance.platform != current.platform:
            continue
        if native in ("fp8", "fp4") and not instance.supports(native):
            continue
        batched_tokens, seqs = scheduler_defaults(instance)
        on_instance = replace(inputs, instance=instance, max_num_batched_tokens=batched_tokens, max_num_seqs=seqs)
        for tp in reversed(tp_candidates(inputs.model, instance)):
            capacity = memory_plan(on_instance, tp).kv_capacity
            if capacity >= need_tokens:
                fit = InstanceFit(instance, tp, capacity)
                price = instance.price_per_hour_usd
                if price is not None:
                    if best is None or price < best[0]:
                        best = (price, fit)
                else:
                    total_memory = instance.memory_gib_per_accelerator * instance.accelerator_count
                    if unpriced is None or total_memory < unpriced[0]:
                        unpriced = (total_memory, fit)
                break
    if best is not None:
        return best[1]
    return unpriced[1] if unpriced is not None else None
