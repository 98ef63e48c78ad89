# Over 400 lines: a function per model, hardware, engine switch and capacity rule; a split moves their home in docs.
"""Rules that need the instance catalog, the SDK's image tables or the capacity plan, registered with their IDs.

They run while a team is resolved (`optigate.deployment.team.resolve_team`), on the settings that
will be deployed, and return `Problem`s at YAML paths like the config rules do. `every_rule()` is the
whole registry: the config rules and these, and those of the other deployment modules.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

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
from optigate.config.rule_registry import Found, RuleCheck, rule_check
from optigate.config.rules import (
    PathT,
    Problem,
    architecture_fields_problems,
    check_serving,
    did_you_mean,
    quantization_problems,
)
from optigate.deployment.checkpoint import SIXTEEN_BIT, Checkpoint, served_precision
from optigate.plan import architecture, catalog, parallel
from optigate.plan.architecture import ModelArchitecture
from optigate.plan.catalog import Instance
from optigate.plan.planner import PlanProblem, PlanResult, Suggestion
from optigate.plan.team_plan import architecture_for, deployed_tensor_parallel
from optigate.plan.timeouts import timeout_refusals
from optigate.serving import images

FP8_MIN_COMPUTE_CAPABILITY = 8.9  # Ada (L4, L40S) and Hopper have FP8 tensor cores
NVFP4_MIN_COMPUTE_CAPABILITY = 10.0  # Blackwell
FP8_INSTANCES = "ml.g6 (L4), ml.g6e (L40S) or ml.p5 (H100)"


def hardware_problems(serving: Serving, path: PathT, *, has_adapters: bool, served: str | None = None) -> list[Problem]:
    """Container, instance and precision rules on one serving block, one rule function each, in the order they are
    reported; with an unknown instance type only the rules before it. `served`: the precision the engine serves
    (optigate.deployment.checkpoint.served_precision: weights stored quantized are served so with quantization
    unset), else serving.quantization's."""
    problems = [*container_version_known(serving, path), *instance_type_known(serving, path)]
    if any(problem.rule is instance_type_known.rule for problem in problems):
        return problems
    instance = catalog.get_instance(serving.instance_type)
    problems += [
        *neuronx_on_neuron(serving, path, instance),
        *neuron_needs_neuronx(serving, path, instance),
        *tensor_parallel_fits_instance(serving, path, instance),
    ]
    quantization = _checked_quantization(serving, served)
    return [
        *problems,
        *no_quantization_on_neuron(serving, path, instance, quantization),
        *fp8_needs_fp8_cores(serving, path, instance, quantization),
        *nvfp4_needs_blackwell(serving, path, instance, quantization),
        *trtllm_quantizations(serving, path, quantization),
        *no_fp8_kv_cache_on_neuron(serving, path, instance),
        *speculation_needs_lmi(serving, path),
        *speculation_needs_lmi_15(serving, path),
        *lora_needs_lmi(serving, path, has_adapters),
        *no_volume_on_instance_storage(serving, path, instance),
    ]


def _checked_quantization(serving: Serving, served: str | None) -> str | None:
    """serving.quantization, or with it unset the precision the weights are served in when not 16-bit (as stored:
    the FP8, NVFP4 and TensorRT-LLM rules apply to it the same)."""
    quantization: str | None = serving.quantization
    if served is not None and quantization is None and served != SIXTEEN_BIT:
        quantization = served
    return quantization


def _version(serving: Serving) -> str:
    """The container version deployed: as set, else the family's default."""
    return serving.container.version or images.default_version(serving.container.family)


@rule_check("OG301", "container.version is in the SageMaker SDK's image tables")
def container_version_known(serving: Serving, path: PathT) -> Iterator[Found]:
    """`container.version` (or the family's default) is a version of the container family in the SageMaker Python
    SDK's image tables (`optigate.serving.images`).

    Why: the image URI is looked up there; a version the tables do not list has no image to deploy.
    """
    family = serving.container.family
    version = _version(serving)
    versions = images.known_versions(family)
    if version not in versions:
        yield (
            (*path, "container", "version"),
            f"{family} has no version {version} in the SageMaker SDK's image tables; known: {', '.join(versions)}",
        )


@rule_check("OG302", "instance_type is in optigate's instance catalog")
def instance_type_known(serving: Serving, path: PathT) -> Iterator[Found]:
    """`instance_type` is in optigate's instance catalog (`optigate.plan.catalog`); when it is not, the other
    hardware rules are not checked.

    Why: the accelerators, their memory and compute capability, which the planner and every other hardware rule
    read, come from the catalog.
    """
    try:
        catalog.get_instance(serving.instance_type)
    except KeyError:
        names = [i.instance_type for i in catalog.all_instances()]
        yield (
            (*path, "instance_type"),
            "unknown or unsupported instance type "
            f"'{serving.instance_type}'{did_you_mean(serving.instance_type, names)}",
        )


@rule_check("OG303", "lmi-neuronx runs on Inferentia/Trainium only")
def neuronx_on_neuron(serving: Serving, path: PathT, instance: Instance) -> Iterator[Found]:
    """Container family lmi-neuronx is deployed on an Inferentia/Trainium instance (ml.inf2, ml.trn1).

    Why: the lmi-neuronx container runs on the Neuron SDK, which needs Neuron devices.
    """
    if serving.container.family == "lmi-neuronx" and instance.platform != "neuron":
        yield (
            (*path, "container", "family"),
            "lmi-neuronx runs only on Inferentia/Trainium (ml.inf2, ml.trn1), "
            f"not on {instance.instance_type} ({instance.accelerator}); use family lmi",
        )


@rule_check("OG304", "an Inferentia/Trainium instance runs lmi-neuronx")
def neuron_needs_neuronx(serving: Serving, path: PathT, instance: Instance) -> Iterator[Found]:
    """An Inferentia/Trainium instance runs container family lmi-neuronx.

    Why: only the lmi-neuronx container can use Neuron accelerators; a GPU container there has no device.
    """
    family = serving.container.family
    if instance.platform == "neuron" and family != "lmi-neuronx":
        yield (
            (*path, "container", "family"),
            f"{instance.instance_type} has {instance.accelerator} accelerators, which only the "
            "lmi-neuronx container can use; set container.family: lmi-neuronx or choose a GPU instance",
        )


@rule_check("OG305", "tensor_parallel_degree is a degree the instance's accelerators run")
def tensor_parallel_fits_instance(serving: Serving, path: PathT, instance: Instance) -> Iterator[Found]:
    """An explicit `tensor_parallel_degree` is one of the instance's degrees (`optigate.plan.parallel`): a divisor
    of its GPUs, or a degree the Neuron runtime runs within its NeuronCores.

    Why: the engine shards the model over that many accelerators of one instance.
    """
    tp = serving.tensor_parallel_degree
    degrees = parallel.instance_degrees(instance)
    if tp is not None and tp not in degrees:
        units = f"{instance.tp_units} {parallel.unit_name(instance)}"
        why = "is not a degree the Neuron runtime runs within" if instance.is_neuron else "does not divide"
        yield (
            (*path, "tensor_parallel_degree"),
            f"{tp} {why} the {units} of {instance.instance_type}; use one of {degrees}",
        )


@rule_check("OG306", "no quantization on lmi-neuronx")
def no_quantization_on_neuron(
    serving: Serving, path: PathT, instance: Instance, quantization: str | None
) -> Iterator[Found]:
    """`quantization` is not set on an Inferentia/Trainium instance.

    Why: optigate serves no quantization with lmi-neuronx; the Neuron instance serves the weights as they are.
    """
    if serving.quantization is not None and instance.platform == "neuron":
        yield (
            (*path, "quantization"),
            f"{quantization} is not served by lmi-neuronx on {instance.instance_type}; "
            "remove quantization or choose a GPU instance",
        )


@rule_check("OG307", "fp8 on a GPU with FP8 tensor cores, or allow_weight_only_fp8")
def fp8_needs_fp8_cores(serving: Serving, path: PathT, instance: Instance, quantization: str | None) -> Iterator[Found]:
    """FP8 (set, or the precision stored weights are served in) runs on a GPU of compute capability 8.9 or more
    (Ada: L4, L40S; Hopper: H100), unless `allow_weight_only_fp8` accepts less; not checked where OG306 refuses.

    Why: below 8.9 there are no FP8 tensor cores, and vLLM falls back to FP8 weight-only: less memory, no faster
    math, which is rarely what FP8 was chosen for.
    """
    cc = instance.compute_capability
    if (
        not (serving.quantization is not None and instance.platform == "neuron")
        and quantization == "fp8"
        and cc is not None
        and cc < FP8_MIN_COMPUTE_CAPABILITY
        and not serving.allow_weight_only_fp8
    ):
        yield (
            (*path, "quantization"),
            f"FP8 W8A8 needs compute capability >= 8.9, and {instance.accelerator} on "
            f"{instance.instance_type} has {cc}: vLLM would fall back to FP8 weight-only (less memory, "
            f"no faster math); use awq/gptq, choose {FP8_INSTANCES}, or set allow_weight_only_fp8: true",
        )


@rule_check("OG308", "nvfp4 on Blackwell")
def nvfp4_needs_blackwell(
    serving: Serving, path: PathT, instance: Instance, quantization: str | None
) -> Iterator[Found]:
    """NVFP4 (set, or the precision stored weights are served in) runs on a GPU of compute capability 10.0 or more
    (Blackwell); not checked where OG306 refuses.

    Why: NVFP4 is Blackwell's 4-bit floating point format; older GPUs have no kernels for it.
    """
    cc = instance.compute_capability
    if (
        not (serving.quantization is not None and instance.platform == "neuron")
        and quantization == "nvfp4"
        and (cc is None or cc < NVFP4_MIN_COMPUTE_CAPABILITY)
    ):
        yield (
            (*path, "quantization"),
            f"NVFP4 needs Blackwell (compute capability >= 10.0), and {instance.accelerator} on "
            f"{instance.instance_type} has {cc}; use fp8 on Ada/Hopper or awq/gptq, or choose ml.p6-b200.48xlarge",
        )


@rule_check("OG309", "lmi-trtllm takes fp8 or awq only")
def trtllm_quantizations(serving: Serving, path: PathT, quantization: str | None) -> Iterator[Found]:
    """On container family lmi-trtllm, the quantization (set, or as the weights are stored) is fp8 or awq.

    Why: optigate's lmi-trtllm rendering (`optigate.serving.lmi`) offers no other; gptq and nvfp4 have no
    TensorRT-LLM option there.
    """
    if quantization is not None and serving.container.family == "lmi-trtllm" and quantization in ("gptq", "nvfp4"):
        yield (
            (*path, "quantization"),
            f"{quantization} is not offered by optigate's lmi-trtllm rendering; "
            "use fp8 or awq, or container family lmi",
        )


@rule_check("OG310", "no FP8 KV cache on lmi-neuronx")
def no_fp8_kv_cache_on_neuron(serving: Serving, path: PathT, instance: Instance) -> Iterator[Found]:
    """`kv_cache_dtype` is auto on an Inferentia/Trainium instance.

    Why: an FP8 KV cache is not available with lmi-neuronx.
    """
    if serving.kv_cache_dtype != "auto" and instance.platform == "neuron":
        yield (*path, "kv_cache_dtype"), "an FP8 KV cache is not available with lmi-neuronx; use auto"


@rule_check("OG311", "speculative decoding on container family lmi")
def speculation_needs_lmi(serving: Serving, path: PathT) -> Iterator[Found]:
    """`speculative_decoding` is set only on container family lmi.

    Why: it is rendered as vLLM's OPTION_SPECULATIVE_CONFIG, which only container family lmi reads.
    """
    family = serving.container.family
    if serving.speculative_decoding is not None and family != "lmi":
        yield (
            (*path, "speculative_decoding"),
            "speculative decoding is configured through vLLM's OPTION_SPECULATIVE_CONFIG, "
            f"which only container family lmi reads (not {family})",
        )


@rule_check("OG312", "speculative decoding needs LMI v15 (0.33.0) or newer")
def speculation_needs_lmi_15(serving: Serving, path: PathT) -> Iterator[Found]:
    """`speculative_decoding` on container family lmi runs a known container version of LMI v15 (0.33.0) or newer
    (an unknown version is OG301's).

    Why: OPTION_SPECULATIVE_CONFIG is read from LMI v15 on (`images.FIRST_VLLM_SPECULATIVE_CONFIG_VERSION`); the
    older OPTION_SPECULATIVE_DRAFT_MODEL belonged to lmi-dist.
    """
    family = serving.container.family
    version = _version(serving)
    if (
        serving.speculative_decoding is not None
        and family == "lmi"
        and images.version_tuple(version) < images.FIRST_VLLM_SPECULATIVE_CONFIG_VERSION
        and version in images.known_versions(family)
    ):
        yield (
            (*path, "container", "version"),
            "OPTION_SPECULATIVE_CONFIG needs LMI v15 (container version 0.33.0) or newer, "
            f"got {version}; the older OPTION_SPECULATIVE_DRAFT_MODEL belonged to lmi-dist",
        )


@rule_check("OG313", "LoRA adapters on container family lmi")
def lora_needs_lmi(serving: Serving, path: PathT, has_adapters: bool) -> Iterator[Found]:
    """`lora` or adapters only on container family lmi.

    Why: adapters are served through vLLM's multi-LoRA support, which only container family lmi offers.
    """
    lora = serving.lora
    family = serving.container.family
    if (lora is not None or has_adapters) and family != "lmi":
        yield (
            (*path, "lora") if lora else path,
            "LoRA adapters are served through vLLM's multi-LoRA support, "
            f"which only container family lmi offers (not {family})",
        )


@rule_check("OG314", "no volume_size_gb on an instance with NVMe storage")
def no_volume_on_instance_storage(serving: Serving, path: PathT, instance: Instance) -> Iterator[Found]:
    """`volume_size_gb` is not set on an instance with NVMe instance storage.

    Why: such an instance stores the model on its instance storage, and SageMaker refuses VolumeSizeInGB there.
    """
    if serving.volume_size_gb is not None and instance.has_instance_storage:
        yield (
            (*path, "volume_size_gb"),
            f"{instance.instance_type} stores models on its NVMe instance storage, "
            "where SageMaker refuses VolumeSizeInGB; remove volume_size_gb",
        )


def architecture_problems(team: TeamConfig) -> tuple[ModelArchitecture | None, list[Problem]]:
    """The planner's architecture for the team, or the problems that keep it from being loaded."""
    spec = team.model.architecture
    if isinstance(spec, str):
        unknown = architecture_known(team)
        if unknown:
            return None, unknown
    elif architecture_fields_problems(spec):
        return None, []  # reported by the config rules
    return architecture_for(spec), []


@rule_check("OG108", "a named architecture is one the planner knows")
def architecture_known(team: TeamConfig) -> Iterator[Found]:
    """`model.architecture`, when it is a name, is one the planner knows (optigate/plan/data/models.yaml, listed by
    `optigate plan --list-models`); otherwise it gives the fields of the model's config.json.

    Why: the planner sizes the weights, the KV cache and the tensor-parallel degrees from the architecture, and has
    nothing to size an unknown name with.
    """
    spec = team.model.architecture
    if isinstance(spec, str):
        names = sorted(architecture.known_models())
        if spec not in names:
            yield (
                ("model", "architecture"),
                f"unknown architecture '{spec}'; give a known name or the fields of the model's config.json"
                f"{did_you_mean(spec, names)}",
            )


@rule_check("OG109", "max_model_len is at most the model's max_position_embeddings")
def serving_architecture_problems(arch: ModelArchitecture, serving: Serving, path: PathT) -> Iterator[Found]:
    """An explicit `max_model_len` is at most the model's `max_position_embeddings` (from its config.json or the
    planner's architecture table).

    Why: vLLM refuses to start with a maximum length beyond the model's positions.
    """
    if serving.max_model_len is not None and serving.max_model_len > arch.max_position_embeddings:
        yield (
            (*path, "max_model_len"),
            f"{serving.max_model_len} exceeds the model's max_position_embeddings "
            f"({arch.max_position_embeddings}); vLLM refuses to start; use at most {arch.max_position_embeddings}",
        )


@rule_check("OG110", "the download and startup timeouts leave time for the model's weights")
def timeout_problems(downloaded_gb: float, serving: Serving, path: PathT) -> Iterator[Found]:
    """Explicit `model_data_download_timeout_seconds` and `container_startup_health_check_timeout_seconds` are at
    least the minimum for the GB the variant downloads (the weights as stored, not as served), at the rates of
    `optigate.plan.timeouts`.

    Why: a timeout shorter than the download or the load of the weights fails the deployment after the wait.
    """
    download = serving.model_data_download_timeout_seconds
    startup = serving.container_startup_health_check_timeout_seconds
    for field_name, message in timeout_refusals(downloaded_gb, download, startup).items():
        yield (*path, field_name), message


def engine_switch_problems(arch: ModelArchitecture, serving: Serving, path: PathT) -> list[Problem]:
    """Typed engine options (optigate.config.lmi_options) the container version or the model cannot honour, on the
    families that read them (the config rules refuse them on the others), one rule function each: first every
    option older containers do not read, then each option's own checks in table order."""
    family = serving.container.family
    read = [(name, option, value) for name, option, value in options_set(serving) if family in option.families]
    if not read:
        return []
    version = serving.container.version or images.default_version(family)
    if version not in images.known_versions(family):
        return []  # reported by hardware_problems
    problems: list[Problem] = []
    for name, option, _ in read:
        problems += switch_read_by_version(serving, path, name, option)
    for name, option, value in read:
        problems += _option_refusal(arch, serving, path, name, option, value)
    return problems


def _option_refusal(
    arch: ModelArchitecture, serving: Serving, path: PathT, name: str, option: LmiOption, value: object
) -> list[Problem]:
    """The first of an option's deployment checks the settings fail (a later check presumes the earlier ones)."""
    for check in option.checks:
        if isinstance(check, ValueSince):
            refusal = switch_value_read_by_version(serving, path, name, option, value, check)
        elif isinstance(check, NeedsMixtureOfExperts):
            refusal = switch_needs_mixture_of_experts(arch, path, name, check)
        elif isinstance(check, NeedsSeveralGpus):
            try:
                instance = catalog.get_instance(serving.instance_type)
            except KeyError:
                return []  # an unknown instance type: reported by hardware_problems
            refusal = switch_needs_several_gpus(arch, serving, path, name, check, instance)
        else:
            continue
        if refusal:
            return refusal
    return []


@rule_check("OG315", "a typed vLLM engine switch only on an LMI version that reads it")
def switch_read_by_version(serving: Serving, path: PathT, name: str, option: LmiOption) -> Iterator[Found]:
    """A typed engine option (`optigate.config.lmi_options`) set on a family that reads it, checked one option at a
    time, runs on a known container version (an unknown one is OG301's) at or after the first LMI version that
    reads the option (the first of `LmiOption.names`).

    Why: an older container's vLLM does not read the variable, so the endpoint would start without the setting,
    silently; each option's versions and their source are in the option table (`LmiOption.source`).
    """
    family = serving.container.family
    version = _version(serving)
    if (
        family in option.families
        and version in images.known_versions(family)
        and images.version_tuple(version) < option.since
    ):
        yield (
            (*path, name),
            f"the vLLM of LMI {version} does not read {name}; pin container.version {version_text(option.since)} or "
            "newer, or remove it",
        )


@rule_check("OG316", "an engine switch value only on an LMI version that has it")
def switch_value_read_by_version(
    serving: Serving, path: PathT, name: str, option: LmiOption, value: object, check: ValueSince
) -> Iterator[Found]:
    """An option's value that a container reads only from a later LMI version than the option itself (a
    `ValueSince` check in `optigate.config.lmi_options`) runs on that version or newer; checked once the option's
    own version is met (OG315).

    Why: the older container's vLLM does not have the value, or names it otherwise (attention_backend TRITON_ATTN:
    the vLLM 0.10.2 of LMI 0.34.0 names it TRITON_ATTN_VLLM_V1; LMI release notes, serving/docs/lmi/release_notes.md
    in deepjavalibrary/djl-serving); the option table holds each such value, its version and its message.
    """
    version = _version(serving)
    running = images.version_tuple(version)
    if value == check.value and option.since <= running < check.since:
        yield (*path, name), check.message.format(version=version, since=version_text(check.since))


@rule_check("OG317", "an expert-parallel switch only for a mixture-of-experts model")
def switch_needs_mixture_of_experts(
    arch: ModelArchitecture, path: PathT, name: str, check: NeedsMixtureOfExperts
) -> Iterator[Found]:
    """An option meaningful only for a mixture-of-experts model (a `NeedsMixtureOfExperts` check in
    `optigate.config.lmi_options`: enable_expert_parallel) is set only for a model with expert layers.

    Why: expert parallelism places whole experts of the mixture-of-experts layers on the tensor-parallel ranks
    (https://docs.vllm.ai/en/latest/serving/expert_parallel_deployment.html); a dense model has none to place.
    """
    if not arch.is_moe:
        yield (*path, name), check.message.format(model=arch.name)


@rule_check("OG318", "a multi-GPU switch only where the model runs on more than one GPU")
def switch_needs_several_gpus(
    arch: ModelArchitecture, serving: Serving, path: PathT, name: str, check: NeedsSeveralGpus, instance: Instance
) -> Iterator[Found]:
    """An option meaningful only when the model is sharded over several accelerators (a `NeedsSeveralGpus` check in
    `optigate.config.lmi_options`: enable_expert_parallel) is set only where the tensor-parallel degree deployed
    (the team's, or the one optigate chooses: `optigate.plan.team_plan.deployed_tensor_parallel`) is above 1;
    checked once the model is a mixture of experts (OG317).

    Why: with one GPU every expert is on it, and expert parallelism places nothing.
    """
    if deployed_tensor_parallel(arch, serving, instance) <= 1:
        yield (*path, name), check.message


@rule_check("OG111", "an explicit tensor_parallel_degree shards the model's heads")
def tensor_parallel_problems(arch: ModelArchitecture, serving: Serving, path: PathT) -> Iterator[Found]:
    """An explicit `tensor_parallel_degree` is one of the degrees that shard the model's attention and key-value
    heads on the instance (`optigate.plan.parallel.refusal`); the default is chosen from that valid set.

    Why: the engine splits the heads evenly across the accelerators, and refuses a degree that does not divide them.
    """
    tp = serving.tensor_parallel_degree
    if tp is None:
        return
    why = parallel.refusal(arch, catalog.get_instance(serving.instance_type), tp)
    if why is not None:
        yield (*path, "tensor_parallel_degree"), why


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


def capacity_problems(resolved_plan: PlanResult | None, serving: Serving, path: PathT) -> list[Problem]:
    """What the capacity plan of the deployed settings refuses (weights, one sequence, or the batch), in the order
    the planner found it, each by its kind's rule function."""
    if resolved_plan is None:
        return []
    problems = []
    for problem in resolved_plan.problems:
        reported = PLAN_PROBLEM_RULES[problem.kind]  # a new kind of problem must be placed here (KeyError)
        if reported is not None:
            problems += reported(problem, serving, path)
    return problems


def _at_chosen(serving: Serving, path: PathT, field_name: str) -> PathT:
    """`field_name` under `path`, or instance_type when optigate derived the field: point at what the user chose."""
    return (*path, field_name if getattr(serving, field_name) is not None else "instance_type")


@rule_check("OG321", "the weights fit the instance's accelerator memory")
def weights_fit(problem: PlanProblem, serving: Serving, path: PathT) -> Iterator[Found]:
    """The capacity plan of the deployed settings (`optigate.plan`) finds room for the weights on each accelerator
    at the deployed tensor-parallel degree: what gpu_memory_utilization leaves of its memory, less the runtime
    reserve. Reported at `instance_type` with the planner's figures and fixes (`weights_do_not_fit`).

    Why: the plan mirrors how vLLM sizes its memory at start-up (`optigate.plan.memory`); weights beyond it leave
    no KV cache, and the endpoint would not start. On Neuron too: NxD Inference needs the weights and KV cache
    within the cores' memory (16 GB per NeuronCore on Inf2/Trn1), which the plan sizes per core.
    """
    if problem.kind == "weights_do_not_fit":
        yield _at_chosen(serving, path, "instance_type"), problem.message


@rule_check("OG322", "the KV cache holds one sequence of max_model_len")
def one_sequence_fits(problem: PlanProblem, serving: Serving, path: PathT) -> Iterator[Found]:
    """The KV cache the capacity plan leaves after the weights holds one sequence of `max_model_len` tokens;
    checked once the weights fit (OG321). Reported at `max_model_len`, or at `instance_type` when optigate derived
    the length (`kv_cannot_hold_one_sequence`).

    Why: the plan sizes the KV cache as vLLM does at start-up (`optigate.plan.memory`), and vLLM refuses to start
    when its KV cache cannot hold one sequence of the maximum length ("The model's max seq len ... is larger than
    the maximum number of tokens that can be stored in KV cache": vLLM PR #2163).
    """
    if problem.kind == "kv_cannot_hold_one_sequence":
        yield _at_chosen(serving, path, "max_model_len"), problem.message


@rule_check("OG323", "the KV cache holds max_batch_size sequences of max_model_len")
def batch_fits(problem: PlanProblem, serving: Serving, path: PathT) -> Iterator[Found]:
    """The KV cache the capacity plan leaves holds `max_batch_size` sequences of the team's typical request
    (gate.benchmark's prompt and output tokens); checked once one sequence fits (OG322). Reported at
    `max_batch_size`, or at `instance_type` when optigate derived the batch (`batch_times_length_does_not_fit`).

    Why: a batch the KV cache cannot hold is never reached, and the endpoint would be sized and measured for a
    concurrency it cannot serve; the planner names the batch that fits.
    """
    if problem.kind == "batch_times_length_does_not_fit":
        yield _at_chosen(serving, path, "max_batch_size"), problem.message


#: Every kind of planner problem (optigate.plan.PROBLEM_KINDS) and the rule function that reports it, or None where
#: another rule reports it first (a length beyond the model's positions: OG109, checked before the plan, with the
#: model's own figure).
PLAN_PROBLEM_RULES: dict[str, RuleCheck[[PlanProblem, Serving, PathT]] | None] = {
    "weights_do_not_fit": weights_fit,
    "kv_cannot_hold_one_sequence": one_sequence_fits,
    "max_model_len_exceeds_position_embeddings": None,
    "batch_times_length_does_not_fit": batch_fits,
}


#: This module's rules, in ID order: optigate.deployment.all_rules collects them (every_rule).
RULES = (
    architecture_known,
    serving_architecture_problems,
    timeout_problems,
    tensor_parallel_problems,
    container_version_known,
    instance_type_known,
    neuronx_on_neuron,
    neuron_needs_neuronx,
    tensor_parallel_fits_instance,
    no_quantization_on_neuron,
    fp8_needs_fp8_cores,
    nvfp4_needs_blackwell,
    trtllm_quantizations,
    no_fp8_kv_cache_on_neuron,
    speculation_needs_lmi,
    speculation_needs_lmi_15,
    lora_needs_lmi,
    no_volume_on_instance_storage,
    switch_read_by_version,
    switch_value_read_by_version,
    switch_needs_mixture_of_experts,
    switch_needs_several_gpus,
    weights_fit,
    one_sequence_fits,
    batch_fits,
)
