"""Which tensor-parallel degrees an instance and a model allow, and the one deployed by default.

GPU (vLLM): the degree divides the model's attention heads (vLLM's ``ModelConfig.verify_with_parallel_config``
raises "Total number of attention heads ... must be divisible by tensor parallel size"), and either divides the
KV heads or is a multiple of them (``QKVParallelLinear`` replicates each KV head on ``tp / kv_heads`` ranks when
tp exceeds the KV heads; ``divide`` asserts both ways):
https://github.com/vllm-project/vllm/blob/main/vllm/model_executor/layers/linear.py. LMI runs
``gpus / tp`` model copies when the degree is a number below the GPU count ("LMI will attempt to maximize
the number of model workers", LMI configurations guide:
https://github.com/deepjavalibrary/djl-serving/blob/master/serving/docs/lmi/deployment_guide/configurations.md),
so on a GPU instance the degree also divides the GPU count.

Neuron (NxD Inference, "Tensor-parallelism support"): the attention heads are divisible by the degree, and the
Neuron runtime supports only some degrees: Inf2 1, 2, 4, 8, 24; Trn1 1, 2, 8, 16, 32
(https://awsdocs-neuron.readthedocs-hosted.com/en/latest/libraries/nxd-inference/developer_guides/feature-guide.html).
An ``ml.inf2.24xlarge`` has 12 NeuronCores, so its largest degree is 8, not 12.

The default degree is the largest valid one: the nearest to LMI's recommended ``max`` (every accelerator),
and the one that leaves each copy the most memory for weights and KV cache.
"""

from __future__ import annotations

from .architecture import ModelArchitecture
from .catalog import Instance

#: Tensor-parallel degrees the Neuron runtime supports, by accelerator (NxD Inference feature guide).
NEURON_RUNTIME_DEGREES: dict[str, tuple[int, ...]] = {
    "Inferentia2": (1, 2, 4, 8, 24),
    "Trainium": (1, 2, 8, 16, 32),
}


def instance_degrees(instance: Instance) -> list[int]:
    """Degrees the instance itself allows, smallest first (before the model's heads are known)."""
    units = instance.tp_units
    if instance.is_neuron:
        supported = NEURON_RUNTIME_DEGREES.get(instance.accelerator, tuple(range(1, units + 1)))
        return [d for d in supported if d <= units]
    return [d for d in range(1, units + 1) if units % d == 0]


def model_allows(model: ModelArchitecture, instance: Instance, tp: int) -> bool:
    """Whether the model's heads shard at ``tp`` on this platform (Neuron replicates KV heads itself)."""
    if instance.is_neuron:
        return tp >= 1 and model.num_attention_heads % tp == 0
    return model.valid_tensor_parallel(tp)


def valid_degrees(model: ModelArchitecture, instance: Instance) -> list[int]:
    """Degrees both the instance and the model allow, smallest first (never empty: 1 always shards)."""
    return [d for d in instance_degrees(instance) if model_allows(model, instance, d)]


def default_degree(model: ModelArchitecture, instance: Instance) -> int:
    """The degree deployed when the team sets none: the largest valid one."""
    return valid_degrees(model, instance)[-1]


def unit_name(instance: Instance) -> str:
    return "NeuronCores" if instance.is_neuron else "GPUs"


def refusal(model: ModelArchitecture, instance: Instance, tp: int) -> str | None:
    """Why ``tp`` cannot run ``model`` on ``instance``, or None when it can."""
    if tp in valid_degrees(model, instance):
        return None
    valid = valid_degrees(model, instance)
    units = f"{instance.tp_units} {unit_name(instance)}"
    if tp not in instance_degrees(instance):
        if instance.is_neuron:
            supported = NEURON_RUNTIME_DEGREES.get(instance.accelerator, ())
            why = (
                f"{tp} is not a degree the Neuron runtime runs on {instance.accelerator} {list(supported)} "
                f"within the {units} of {instance.instance_type}"
            )
        else:
            why = f"{tp} does not divide the {units} of {instance.instance_type}"
    else:
        why = (
            f"{tp} cannot shard the model's {model.num_attention_heads} attention heads / "
            f"{model.num_key_value_heads} KV heads"
        )
    return f"{why}; use one of {valid}"
