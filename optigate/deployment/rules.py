"""Rules that need the instance catalog, the SDK's image tables or the capacity plan.

They run while a team is resolved (`optigate.deployment.team.resolve_team`), on the settings that
will be deployed, and return `Problem`s at YAML paths like the config rules do.
"""

from __future__ import annotations

from optigate.config.models import Serving, TeamConfig
from optigate.config.rules import PathT, Problem, did_you_mean
from optigate.plan import architecture, catalog
from optigate.plan.architecture import ModelArchitecture
from optigate.plan.team import architecture_for
from optigate.serving import images

FP8_MIN_COMPUTE_CAPABILITY = 8.9  # Ada (L4, L40S) and Hopper have FP8 tensor cores
NVFP4_MIN_COMPUTE_CAPABILITY = 10.0  # Blackwell
FP8_INSTANCES = "ml.g6 (L4), ml.g6e (L40S) or ml.p5 (H100)"

# which serving field a planner problem points at
PLAN_PROBLEM_FIELD = {
    "weights_do_not_fit": "instance_type",
    "kv_cannot_hold_one_sequence": "max_model_len",
    "batch_times_length_does_not_fit": "max_batch_size",
}


def hardware_problems(serving: Serving, path: PathT, *, has_adapters: bool) -> list[Problem]:
    """Container, instance and precision rules on one serving block."""
    problems: list[Problem] = []

    def add(sub: PathT, message: str) -> None:
        problems.append(Problem((*path, *sub), message))

    family = serving.container.family
    version = serving.container.version or images.DEFAULT_VERSION[family]
    versions = images.known_versions(family)
    if version not in versions:
        add(
            ("container", "version"),
            f"{family} has no version {version} in the SageMaker SDK's image tables; known: {', '.join(versions)}",
        )

    try:
        instance = catalog.get_instance(serving.instance_type)
    except KeyError:
        names = [i.instance_type for i in catalog.all_instances()]
        add(
            ("instance_type",),
            "unknown or unsupported instance type "
            f"'{serving.instance_type}'{did_you_mean(serving.instance_type, names)}",
        )
        return problems

    if family == "lmi-neuronx" and instance.platform != "neuron":
        add(
            ("container", "family"),
            "lmi-neuronx runs only on Inferentia/Trainium (ml.inf2, ml.trn1), "
            f"not on {instance.instance_type} ({instance.accelerator}); use family lmi",
        )
    if instance.platform == "neuron" and family != "lmi-neuronx":
        add(
            ("container", "family"),
            f"{instance.instance_type} has {instance.accelerator} accelerators, which only the "
            "lmi-neuronx container can use; set container.family: lmi-neuronx or choose a GPU instance",
        )

    units = instance.tp_units
    unit_name = "NeuronCores" if instance.platform == "neuron" else "GPUs"
    tp = serving.tensor_parallel_degree
    if tp is not None and (tp > units or units % tp != 0):
        divisors = [d for d in range(1, units + 1) if units % d == 0]
        add(
            ("tensor_parallel_degree",),
            f"{tp} does not divide the {units} {unit_name} of {instance.instance_type}; use one of {divisors}",
        )

    cc = instance.compute_capability
    quantization = serving.quantization
    if quantization is not None and instance.platform == "neuron":
        add(
            ("quantization",),
            f"{quantization} is not served by lmi-neuronx on {instance.instance_type}; "
            "remove quantization or choose a GPU instance",
        )
    elif (
        quantization == "fp8"
        and cc is not None
        and cc < FP8_MIN_COMPUTE_CAPABILITY
        and not serving.allow_weight_only_fp8
    ):
        add(
            ("quantization",),
            f"FP8 W8A8 needs compute capability >= 8.9, and {instance.accelerator} on "
            f"{instance.instance_type} has {cc}: vLLM would fall back to FP8 weight-only (less memory, "
            f"no faster math); use awq/gptq, choose {FP8_INSTANCES}, or set allow_weight_only_fp8: true",
        )
    elif quantization == "nvfp4" and (cc is None or cc < NVFP4_MIN_COMPUTE_CAPABILITY):
        add(
            ("quantization",),
            f"NVFP4 needs Blackwell (compute capability >= 10.0), and {instance.accelerator} on "
            f"{instance.instance_type} has {cc}; use fp8 on Ada/Hopper or awq/gptq, or choose ml.p6-b200.48xlarge",
        )
    if quantization is not None and family == "lmi-trtllm" and quantization in ("gptq", "nvfp4"):
        add(
            ("quantization",),
            f"{quantization} is not offered by optigate's lmi-trtllm rendering; "
            "use fp8 or awq, or container family lmi",
        )

    if serving.kv_cache_dtype != "auto" and instance.platform == "neuron":
        add(("kv_cache_dtype",), "an FP8 KV cache is not available with lmi-neuronx; use auto")

    if serving.speculative_decoding is not None:
        if family != "lmi":
            add(
                ("speculative_decoding",),
                "speculative decoding is configured through vLLM's OPTION_SPECULATIVE_CONFIG, "
                f"which only container family lmi reads (not {family})",
            )
        elif images.version_tuple(version) < images.FIRST_VLLM_SPECULATIVE_CONFIG_VERSION and version in versions:
            add(
                ("container", "version"),
                "OPTION_SPECULATIVE_CONFIG needs LMI v15 (container version 0.33.0) or newer, "
                f"got {version}; the older OPTION_SPECULATIVE_DRAFT_MODEL belonged to lmi-dist",
            )

    lora = serving.lora
    if (lora is not None or has_adapters) and family != "lmi":
        add(
            ("lora",) if lora else (),
            "LoRA adapters are served through vLLM's multi-LoRA support, "
            f"which only container family lmi offers (not {family})",
        )

    if serving.volume_size_gb is not None and instance.has_instance_storage:
        add(
            ("volume_size_gb",),
            f"{instance.instance_type} stores models on its NVMe instance storage, "
            "where SageMaker refuses VolumeSizeInGB; remove volume_size_gb",
        )
    return problems


def architecture_problems(team: TeamConfig) -> tuple[ModelArchitecture | None, list[Problem]]:
    """The planner's architecture for the team, or the problems that keep it from being loaded."""
    spec = team.model.architecture
    if isinstance(spec, str):
        names = sorted(architecture.known_models())
        if spec not in names:
            message = (
                f"unknown architecture '{spec}'; give a known name or the fields of the model's config.json"
                f"{did_you_mean(spec, names)}"
            )
            return None, [Problem(("model", "architecture"), message)]
    elif (spec.intermediate_size is None and spec.num_parameters is None) or (
        spec.num_key_value_heads and spec.num_attention_heads % spec.num_key_value_heads
    ):
        return None, []  # reported by the config rules
    return architecture_for(spec), []


def serving_architecture_problems(arch: ModelArchitecture, serving: Serving, path: PathT) -> list[Problem]:
    """Settings the model itself refuses: lengths beyond its positions, a TP its heads cannot shard."""
    problems: list[Problem] = []
    if serving.max_model_len is not None and serving.max_model_len > arch.max_position_embeddings:
        problems.append(
            Problem(
                (*path, "max_model_len"),
                f"{serving.max_model_len} exceeds the model's max_position_embeddings "
                f"({arch.max_position_embeddings}); vLLM refuses to start; use at most {arch.max_position_embeddings}",
            )
        )
    heads = arch.num_key_value_heads
    tp = serving.tensor_parallel_degree
    if tp and heads and tp > heads and tp % heads != 0:
        problems.append(
            Problem(
                (*path, "tensor_parallel_degree"),
                f"{tp} is neither a divisor nor a multiple of the "
                f"model's {heads} KV heads; vLLM cannot shard attention",
            )
        )
    return problems


def tensor_parallel_problems(arch: ModelArchitecture, serving: Serving, path: PathT) -> list[Problem]:
    """The deployed tensor-parallel degree (explicit, or every accelerator by default) must shard the heads."""
    instance = catalog.get_instance(serving.instance_type)
    explicit = serving.tensor_parallel_degree
    tp = explicit or instance.tp_units
    if arch.valid_tensor_parallel(tp):
        return []
    units = instance.tp_units
    valid = [d for d in range(1, units + 1) if units % d == 0 and arch.valid_tensor_parallel(d)]
    heads = f"{arch.num_attention_heads} attention heads / {arch.num_key_value_heads} KV heads"
    if explicit is not None:
        return [
            Problem(
                (*path, "tensor_parallel_degree"),
                f"{tp} cannot shard the model's {heads}; vLLM refuses to start; use one of {valid}",
            )
        ]
    unit = "NeuronCore" if instance.is_neuron else "GPU"
    return [
        Problem(
            (*path, "instance_type"),
            (
                f"the default tensor_parallel_degree {tp} (every {unit} "
                f"of {instance.instance_type}) cannot shard the model's "
                f"{heads}; set tensor_parallel_degree to one of {valid}"
            ),
        )
    ]


def capacity_problems(resolved_plan, serving: Serving, path: PathT) -> list[Problem]:
    """What the capacity plan of the deployed settings refuses: weights, one sequence, or the batch.

    Not on Neuron, where the memory model is not validated (the planner only notes it).
    """
    if resolved_plan is None or catalog.get_instance(serving.instance_type).is_neuron:
        return []
    problems = []
    for problem in resolved_plan.problems:
        field_name = PLAN_PROBLEM_FIELD.get(problem.kind)
        if field_name is None:
            continue
        if getattr(serving, field_name) is None:  # derived by optigate: point at what the user chose
            field_name = "instance_type"
        problems.append(Problem((*path, field_name), problem.message))
    return problems
