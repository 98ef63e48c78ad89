"""Rules that need the instance catalog, the SDK's image tables or the capacity plan, registered with their IDs.

They run while a team is resolved (`optigate.deployment.team.resolve_team`), on the settings that
will be deployed, and return `Problem`s at YAML paths like the config rules do. `every_rule()` is the
whole registry: the config rules and these, and those of the other deployment modules.
"""

from __future__ import annotations

from collections.abc import Callable

from pydantic import ValidationError

from optigate.config.lmi_options import (
    LmiOption,
    NeedsMixtureOfExperts,
    NeedsSeveralGpus,
    ValueSince,
    options_set,
    version_text,
)
from optigate.config.models import Serving, TeamConfig, serving_with
from optigate.config.rules import (
    PathT,
    Problem,
    Rule,
    architecture_fields_problems,
    check_serving,
    did_you_mean,
    quantization_problems,
    rule,
)
from optigate.deployment.checkpoint import SIXTEEN_BIT, Checkpoint, served_precision
from optigate.plan import architecture, catalog, parallel
from optigate.plan.architecture import ModelArchitecture
from optigate.plan.planner import Suggestion
from optigate.plan.team_plan import architecture_for, deployed_tensor_parallel
from optigate.plan.timeouts import timeout_refusals
from optigate.serving import images

FP8_MIN_COMPUTE_CAPABILITY = 8.9  # Ada (L4, L40S) and Hopper have FP8 tensor cores
NVFP4_MIN_COMPUTE_CAPABILITY = 10.0  # Blackwell
FP8_INSTANCES = "ml.g6 (L4), ml.g6e (L40S) or ml.p5 (H100)"

UNKNOWN_ARCHITECTURE = rule("OG108", "a named architecture is one the planner knows")
LENGTH_WITHIN_POSITIONS = rule("OG109", "max_model_len is at most the model's max_position_embeddings")
TIMEOUTS_FIT_WEIGHTS = rule("OG110", "the download and startup timeouts leave time for the model's weights")
TENSOR_PARALLEL_SHARDS_HEADS = rule("OG111", "an explicit tensor_parallel_degree shards the model's heads")
CONTAINER_VERSION_KNOWN = rule("OG301", "container.version is in the SageMaker SDK's image tables")
INSTANCE_TYPE_KNOWN = rule("OG302", "instance_type is in optigate's instance catalog")
NEURONX_ON_NEURON = rule("OG303", "lmi-neuronx runs on Inferentia/Trainium only")
NEURON_NEEDS_NEURONX = rule("OG304", "an Inferentia/Trainium instance runs lmi-neuronx")
TENSOR_PARALLEL_FITS_INSTANCE = rule("OG305", "tensor_parallel_degree is a degree the instance's accelerators run")
NO_QUANTIZATION_ON_NEURON = rule("OG306", "no quantization on lmi-neuronx")
FP8_NEEDS_FP8_CORES = rule("OG307", "fp8 on a GPU with FP8 tensor cores, or allow_weight_only_fp8")
NVFP4_NEEDS_BLACKWELL = rule("OG308", "nvfp4 on Blackwell")
TRTLLM_QUANTIZATIONS = rule("OG309", "lmi-trtllm takes fp8 or awq only")
NO_FP8_KV_CACHE_ON_NEURON = rule("OG310", "no FP8 KV cache on lmi-neuronx")
SPECULATION_NEEDS_LMI = rule("OG311", "speculative decoding on container family lmi")
SPECULATION_NEEDS_LMI_15 = rule("OG312", "speculative decoding needs LMI v15 (0.33.0) or newer")
LORA_NEEDS_LMI = rule("OG313", "LoRA adapters on container family lmi")
NO_VOLUME_ON_INSTANCE_STORAGE = rule("OG314", "no volume_size_gb on an instance with NVMe storage")
SWITCH_READ_BY_VERSION = rule("OG315", "a typed vLLM engine switch only on an LMI version that reads it")
SWITCH_VALUE_READ_BY_VERSION = rule("OG316", "an engine switch value only on an LMI version that has it")
SWITCH_NEEDS_MIXTURE_OF_EXPERTS = rule("OG317", "an expert-parallel switch only for a mixture-of-experts model")
SWITCH_NEEDS_SEVERAL_GPUS = rule("OG318", "a multi-GPU switch only where the model runs on more than one GPU")
WEIGHTS_FIT = rule("OG321", "the weights fit the instance's accelerator memory")
ONE_SEQUENCE_FITS = rule("OG322", "the KV cache holds one sequence of max_model_len")
BATCH_FITS = rule("OG323", "the KV cache holds max_batch_size sequences of max_model_len")

#: Every kind of planner problem (optigate.plan.PROBLEM_KINDS): the serving field it points at and the rule it
#: breaks, or None where another rule reports it first (a length beyond the model's positions: OG109, checked
#: before the plan, with the model's own figure).
PLAN_PROBLEM_RULES: dict[str, tuple[str, Rule] | None] = {
    "weights_do_not_fit": ("instance_type", WEIGHTS_FIT),
    "kv_cannot_hold_one_sequence": ("max_model_len", ONE_SEQUENCE_FITS),
    "max_model_len_exceeds_position_embeddings": None,
    "batch_times_length_does_not_fit": ("max_batch_size", BATCH_FITS),
}


# Over 80 lines: the hardware rules in one pass over one block (one function per rule is issue 38's).
def hardware_problems(serving: Serving, path: PathT, *, has_adapters: bool, served: str | None = None) -> list[Problem]:
    """Container, instance and precision rules on one serving block; `served`: the precision the engine serves
    (optigate.deployment.checkpoint.served_precision: weights stored quantized are served so with quantization
    unset), else serving.quantization's."""
    problems: list[Problem] = []

    def add(broken: Rule, sub: PathT, message: str) -> None:
        problems.append(Problem((*path, *sub), message, broken))

    family = serving.container.family
    version = serving.container.version or images.default_version(family)
    versions = images.known_versions(family)
    if version not in versions:
        add(
            CONTAINER_VERSION_KNOWN,
            ("container", "version"),
            f"{family} has no version {version} in the SageMaker SDK's image tables; known: {', '.join(versions)}",
        )

    try:
        instance = catalog.get_instance(serving.instance_type)
    except KeyError:
        names = [i.instance_type for i in catalog.all_instances()]
        add(
            INSTANCE_TYPE_KNOWN,
            ("instance_type",),
            "unknown or unsupported instance type "
            f"'{serving.instance_type}'{did_you_mean(serving.instance_type, names)}",
        )
        return problems

    if family == "lmi-neuronx" and instance.platform != "neuron":
        add(
            NEURONX_ON_NEURON,
            ("container", "family"),
            "lmi-neuronx runs only on Inferentia/Trainium (ml.inf2, ml.trn1), "
            f"not on {instance.instance_type} ({instance.accelerator}); use family lmi",
        )
    if instance.platform == "neuron" and family != "lmi-neuronx":
        add(
            NEURON_NEEDS_NEURONX,
            ("container", "family"),
            f"{instance.instance_type} has {instance.accelerator} accelerators, which only the "
            "lmi-neuronx container can use; set container.family: lmi-neuronx or choose a GPU instance",
        )

    tp = serving.tensor_parallel_degree
    degrees = parallel.instance_degrees(instance)
    if tp is not None and tp not in degrees:
        units = f"{instance.tp_units} {parallel.unit_name(instance)}"
        why = "is not a degree the Neuron runtime runs within" if instance.is_neuron else "does not divide"
        add(
            TENSOR_PARALLEL_FITS_INSTANCE,
            ("tensor_parallel_degree",),
            f"{tp} {why} the {units} of {instance.instance_type}; use one of {degrees}",
        )

    cc = instance.compute_capability
    quantization: str | None = serving.quantization
    if served is not None and quantization is None and served != SIXTEEN_BIT:
        quantization = served  # as stored: the FP8, NVFP4 and TensorRT-LLM rules apply to it the same
    if serving.quantization is not None and instance.platform == "neuron":
        add(
            NO_QUANTIZATION_ON_NEURON,
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
            FP8_NEEDS_FP8_CORES,
            ("quantization",),
            f"FP8 W8A8 needs compute capability >= 8.9, and {instance.accelerator} on "
            f"{instance.instance_type} has {cc}: vLLM would fall back to FP8 weight-only (less memory, "
            f"no faster math); use awq/gptq, choose {FP8_INSTANCES}, or set allow_weight_only_fp8: true",
        )
    elif quantization == "nvfp4" and (cc is None or cc < NVFP4_MIN_COMPUTE_CAPABILITY):
        add(
            NVFP4_NEEDS_BLACKWELL,
            ("quantization",),
            f"NVFP4 needs Blackwell (compute capability >= 10.0), and {instance.accelerator} on "
            f"{instance.instance_type} has {cc}; use fp8 on Ada/Hopper or awq/gptq, or choose ml.p6-b200.48xlarge",
        )
    if quantization is not None and family == "lmi-trtllm" and quantization in ("gptq", "nvfp4"):
        add(
            TRTLLM_QUANTIZATIONS,
            ("quantization",),
            f"{quantization} is not offered by optigate's lmi-trtllm rendering; "
            "use fp8 or awq, or container family lmi",
        )

    if serving.kv_cache_dtype != "auto" and instance.platform == "neuron":
        add(
            NO_FP8_KV_CACHE_ON_NEURON,
            ("kv_cache_dtype",),
            "an FP8 KV cache is not available with lmi-neuronx; use auto",
        )

    if serving.speculative_decoding is not None:
        if family != "lmi":
            add(
                SPECULATION_NEEDS_LMI,
                ("speculative_decoding",),
                "speculative decoding is configured through vLLM's OPTION_SPECULATIVE_CONFIG, "
                f"which only container family lmi reads (not {family})",
            )
        elif images.version_tuple(version) < images.FIRST_VLLM_SPECULATIVE_CONFIG_VERSION and version in versions:
            add(
                SPECULATION_NEEDS_LMI_15,
                ("container", "version"),
                "OPTION_SPECULATIVE_CONFIG needs LMI v15 (container version 0.33.0) or newer, "
                f"got {version}; the older OPTION_SPECULATIVE_DRAFT_MODEL belonged to lmi-dist",
            )

    lora = serving.lora
    if (lora is not None or has_adapters) and family != "lmi":
        add(
            LORA_NEEDS_LMI,
            ("lora",) if lora else (),
            "LoRA adapters are served through vLLM's multi-LoRA support, "
            f"which only container family lmi offers (not {family})",
        )

    if serving.volume_size_gb is not None and instance.has_instance_storage:
        add(
            NO_VOLUME_ON_INSTANCE_STORAGE,
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
            return None, [Problem(("model", "architecture"), message, UNKNOWN_ARCHITECTURE)]
    elif architecture_fields_problems(spec):
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
                LENGTH_WITHIN_POSITIONS,
            )
        )
    return problems


def timeout_problems(downloaded_gb: float, serving: Serving, path: PathT) -> list[Problem]:
    """Explicit timeouts too short for the GB the variant downloads (the weights as stored, not as served)."""
    download = serving.model_data_download_timeout_seconds
    startup = serving.container_startup_health_check_timeout_seconds
    return [
        Problem((*path, field_name), message, TIMEOUTS_FIT_WEIGHTS)
        for field_name, message in timeout_refusals(downloaded_gb, download, startup).items()
    ]


def engine_switch_problems(arch: ModelArchitecture, serving: Serving, path: PathT) -> list[Problem]:
    """Typed engine options (optigate.config.lmi_options) the container version or the model cannot honour, on the
    families that read them (the config rules refuse them on the others): first every option older containers do
    not read, then each option's own checks in table order."""
    family = serving.container.family
    read = [(name, option, value) for name, option, value in options_set(serving) if family in option.families]
    if not read:
        return []
    version = serving.container.version or images.default_version(family)
    if version not in images.known_versions(family):
        return []  # reported by hardware_problems
    running = images.version_tuple(version)
    problems = [
        Problem(
            (*path, name),
            f"the vLLM of LMI {version} does not read {name}; pin container.version {version_text(option.since)} or "
            "newer, or remove it",
            SWITCH_READ_BY_VERSION,
        )
        for name, option, _ in read
        if running < option.since
    ]
    for name, option, value in read:
        refusal = _check_refusal(arch, serving, option, value, running, version)
        if refusal is not None:
            problems.append(Problem((*path, name), *refusal))
    return problems


def _check_refusal(
    arch: ModelArchitecture, serving: Serving, option: LmiOption, value: object, running: tuple[int, ...], version: str
) -> tuple[str, Rule] | None:
    """The first of an option's deployment checks the settings fail (a later check presumes the earlier ones)."""
    for check in option.checks:
        if isinstance(check, ValueSince):
            if value == check.value and option.since <= running < check.since:
                return check.message.format(
                    version=version, since=version_text(check.since)
                ), SWITCH_VALUE_READ_BY_VERSION
        elif isinstance(check, NeedsMixtureOfExperts):
            if not arch.is_moe:
                return check.message.format(model=arch.name), SWITCH_NEEDS_MIXTURE_OF_EXPERTS
        elif isinstance(check, NeedsSeveralGpus):
            try:
                tp = deployed_tensor_parallel(arch, serving, catalog.get_instance(serving.instance_type))
            except KeyError:
                return None  # an unknown instance type: reported by hardware_problems
            if tp <= 1:
                return check.message, SWITCH_NEEDS_SEVERAL_GPUS
    return None


def tensor_parallel_problems(arch: ModelArchitecture, serving: Serving, path: PathT) -> list[Problem]:
    """An explicit tensor-parallel degree must shard the model's heads (the default is chosen from the valid set)."""
    tp = serving.tensor_parallel_degree
    if tp is None:
        return []
    why = parallel.refusal(arch, catalog.get_instance(serving.instance_type), tp)
    return [] if why is None else [Problem((*path, "tensor_parallel_degree"), why, TENSOR_PARALLEL_SHARDS_HEADS)]


# The serving field each kind of planner fix changes.
SUGGESTION_FIELD = {
    "weight_precision": "quantization",
    "kv_cache_dtype": "kv_cache_dtype",
    "max_model_len": "max_model_len",
    "max_batch_size": "max_batch_size",
    "instance_type": "instance_type",
}


def suggestion_admissible(
    team: TeamConfig, arch: ModelArchitecture, serving: Serving, checkpoint: Checkpoint | None = None
) -> Callable[[Suggestion], bool]:
    """Whether a planner fix, applied to `serving`, passes every rule that needs no plan: a fix the rules
    would refuse (FP8 weights on A10G, an FP8 KV cache on Neuron, AWQ on a bf16 checkpoint) is never offered.
    `checkpoint`: the weights the variant downloads."""

    def admissible(suggestion: Suggestion) -> bool:
        change: dict[str, object] = {SUGGESTION_FIELD[suggestion.setting]: suggestion.value}
        if suggestion.setting == "instance_type" and serving.tensor_parallel_degree is not None:
            change["tensor_parallel_degree"] = suggestion.tensor_parallel
        try:
            fixed = serving_with(serving, change)
        except ValidationError:
            return False
        adapters = bool(team.adapters)
        uri = team.model.source.artifact_uri
        return not (
            check_serving(fixed, (), has_adapters=adapters, artifact_uri=uri)
            or hardware_problems(
                fixed,
                (),
                has_adapters=adapters,
                served=served_precision(checkpoint.weights, fixed.quantization) if checkpoint else None,
            )
            or serving_architecture_problems(arch, fixed, ())
            or tensor_parallel_problems(arch, fixed, ())
            or engine_switch_problems(arch, fixed, ())
            or (
                checkpoint is not None
                and quantization_problems(
                    checkpoint.weights, checkpoint.known_from, fixed.quantization, fixed.container.family, ()
                )
            )
        )

    return admissible


def capacity_problems(resolved_plan, serving: Serving, path: PathT) -> list[Problem]:
    """What the capacity plan of the deployed settings refuses: weights, one sequence, or the batch.

    On Neuron too: NxD Inference needs the weights and KV cache within the cores' memory (16 GB per
    NeuronCore on Inf2/Trn1), which the plan sizes per core.
    """
    if resolved_plan is None:
        return []
    problems = []
    for problem in resolved_plan.problems:
        reported = PLAN_PROBLEM_RULES[problem.kind]  # a new kind of problem must be placed here (KeyError)
        if reported is None:
            continue
        field_name, broken = reported
        if getattr(serving, field_name) is None:  # derived by optigate: point at what the user chose
            field_name = "instance_type"
        problems.append(Problem((*path, field_name), problem.message, broken))
    return problems
