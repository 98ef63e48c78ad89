"""Semantic rules over parsed config: hardware, container and cross-field checks.

Each rule returns `Problem(path, message)`; the loader turns the path into a file line. A message
says what is wrong and what to do instead, in one sentence where possible.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from optigate.config.models import (
    TIMEOUT_MAX_SECONDS,
    TIMEOUT_MIN_SECONDS,
    EnvironmentsFile,
    Serving,
    TeamConfig,
)
from optigate.plan import catalog
from optigate.serving import images

PathT = tuple[str | int, ...]

# OPTION_* variables that optigate renders from typed fields: setting them raw would create two
# sources of truth, so `serving.environment` may not.
RENDERED_OPTIONS = {
    "OPTION_MAX_MODEL_LEN": "serving.max_model_len",
    "OPTION_MAX_ROLLING_BATCH_SIZE": "serving.max_batch_size",
    "OPTION_GPU_MEMORY_UTILIZATION": "serving.gpu_memory_utilization",
    "OPTION_TENSOR_PARALLEL_DEGREE": "serving.tensor_parallel_degree",
    "OPTION_QUANTIZE": "serving.quantization",
    "OPTION_KV_CACHE_DTYPE": "serving.kv_cache_dtype",
    "OPTION_SPECULATIVE_CONFIG": "serving.speculative_decoding",
    "OPTION_ENABLE_LORA": "serving.lora",
    "OPTION_MAX_LORAS": "serving.lora.max_loras",
    "OPTION_MAX_LORA_RANK": "serving.lora.max_lora_rank",
    "OPTION_MAX_CPU_LORAS": "serving.lora.max_cpu_loras",
    "OPTION_ROLLING_BATCH": "serving.container.family",
}

# Families whose instances carry NVMe instance storage: SageMaker puts the model there and refuses
# VolumeSizeInGB (EBS) for them.
INSTANCE_STORAGE_FAMILIES = {"g4dn", "g5", "g6", "g6e", "p4d", "p4de", "p5", "p5e", "p5en", "p6-b200", "trn1"}

FP8_MIN_COMPUTE_CAPABILITY = 8.9  # Ada (L4, L40S) and Hopper have FP8 tensor cores
NVFP4_MIN_COMPUTE_CAPABILITY = 10.0  # Blackwell


@dataclass(frozen=True)
class Problem:
    path: PathT
    message: str


def _did_you_mean(value: str, choices: list[str]) -> str:
    close = difflib.get_close_matches(value, choices, n=1, cutoff=0.6)
    return f"; did you mean '{close[0]}'?" if close else ""


def cheapest_fp8_instances() -> str:
    return "ml.g6 (L4), ml.g6e (L40S) or ml.p5 (H100)"


def check_serving(serving: Serving, path: PathT, *, has_adapters: bool, artifact_uri: str) -> list[Problem]:
    """Rules on one serving block (the production variant, or a shadow candidate)."""
    problems: list[Problem] = []

    def add(sub: PathT, message: str) -> None:
        problems.append(Problem((*path, *sub), message))

    family = serving.container.family
    version = serving.container.version or images.DEFAULT_VERSION[family]
    versions = images.known_versions(family)
    if version not in versions:
        add(("container", "version"), f"{family} has no version {version} in the SageMaker SDK's image tables; known: {', '.join(versions)}")

    try:
        instance = catalog.get_instance(serving.instance_type)
    except KeyError:
        names = [i.instance_type for i in catalog.all_instances()]
        add(("instance_type",), f"unknown or unsupported instance type '{serving.instance_type}'{_did_you_mean(serving.instance_type, names)}")
        return problems

    if family == "lmi-neuronx" and instance.platform != "neuron":
        add(("container", "family"), f"lmi-neuronx runs only on Inferentia/Trainium (ml.inf2, ml.trn1), not on {instance.instance_type} ({instance.accelerator}); use family lmi")
    if instance.platform == "neuron" and family != "lmi-neuronx":
        add(("container", "family"), f"{instance.instance_type} has {instance.accelerator} accelerators, which only the lmi-neuronx container can use; set container.family: lmi-neuronx or choose a GPU instance")

    units = instance.tp_units
    unit_name = "NeuronCores" if instance.platform == "neuron" else "GPUs"
    tp = serving.tensor_parallel_degree
    if tp is not None and (tp > units or units % tp != 0):
        divisors = [d for d in range(1, units + 1) if units % d == 0]
        add(("tensor_parallel_degree",), f"{tp} does not divide the {units} {unit_name} of {instance.instance_type}; use one of {divisors}")

    cc = instance.compute_capability
    quantization = serving.quantization
    if quantization is not None and instance.platform == "neuron":
        add(("quantization",), f"{quantization} is not served by lmi-neuronx on {instance.instance_type}; remove quantization or choose a GPU instance")
    elif quantization == "fp8" and cc is not None and cc < FP8_MIN_COMPUTE_CAPABILITY and not serving.allow_weight_only_fp8:
        add(("quantization",), f"FP8 W8A8 needs compute capability >= 8.9, and {instance.accelerator} on {instance.instance_type} has {cc}: vLLM would fall back to FP8 weight-only (less memory, no faster math); use awq/gptq, choose {cheapest_fp8_instances()}, or set allow_weight_only_fp8: true")
    elif quantization == "nvfp4" and (cc is None or cc < NVFP4_MIN_COMPUTE_CAPABILITY):
        add(("quantization",), f"NVFP4 needs Blackwell (compute capability >= 10.0), and {instance.accelerator} on {instance.instance_type} has {cc}; use fp8 on Ada/Hopper or awq/gptq, or choose ml.p6-b200.48xlarge")
    if quantization is not None and family == "lmi-trtllm" and quantization in ("gptq", "nvfp4"):
        add(("quantization",), f"{quantization} is not offered by optigate's lmi-trtllm rendering; use fp8 or awq, or container family lmi")

    if serving.kv_cache_dtype != "auto" and instance.platform == "neuron":
        add(("kv_cache_dtype",), "an FP8 KV cache is not available with lmi-neuronx; use auto")

    speculative = serving.speculative_decoding
    if speculative is not None:
        if family != "lmi":
            add(("speculative_decoding",), f"speculative decoding is configured through vLLM's OPTION_SPECULATIVE_CONFIG, which only container family lmi reads (not {family})")
        elif images.version_tuple(version) < images.FIRST_VLLM_SPECULATIVE_CONFIG_VERSION and version in versions:
            add(("container", "version"), f"OPTION_SPECULATIVE_CONFIG needs LMI v15 (container version 0.33.0) or newer, got {version}; the older OPTION_SPECULATIVE_DRAFT_MODEL belonged to lmi-dist")
        model_uri = getattr(speculative, "model_s3_uri", None)
        if model_uri is not None and not model_uri.rstrip("/").startswith(artifact_uri.rstrip("/") + "/"):
            add(("speculative_decoding", "model_s3_uri"), f"must lie under the model's prefix {artifact_uri} (CloudFormation cannot attach a second model data source); copy the {speculative.method} weights to e.g. {artifact_uri.rstrip('/')}/{speculative.method}/")

    lora = serving.lora
    if (lora is not None or has_adapters) and family != "lmi":
        add(("lora",) if lora else (), f"LoRA adapters are served through vLLM's multi-LoRA support, which only container family lmi offers (not {family})")
    if lora is not None and lora.max_cpu_loras is not None and lora.max_cpu_loras < lora.max_loras:
        add(("lora", "max_cpu_loras"), f"{lora.max_cpu_loras} is below max_loras ({lora.max_loras}); vLLM requires max_cpu_loras >= max_loras")

    for key in ("model_data_download_timeout_seconds", "container_startup_health_check_timeout_seconds"):
        value = getattr(serving, key)
        if value is not None and not TIMEOUT_MIN_SECONDS <= value <= TIMEOUT_MAX_SECONDS:
            add((key,), f"{value} s is outside SageMaker's range {TIMEOUT_MIN_SECONDS}-{TIMEOUT_MAX_SECONDS} s; leave it unset to size it to the model")

    if serving.volume_size_gb is not None and instance.instance_type.split(".")[1] in INSTANCE_STORAGE_FAMILIES:
        add(("volume_size_gb",), f"{instance.instance_type} stores models on its NVMe instance storage, where SageMaker refuses VolumeSizeInGB; remove volume_size_gb")

    scaling = serving.autoscaling
    if scaling is not None:
        if scaling.min_capacity > scaling.max_capacity:
            add(("autoscaling", "min_capacity"), f"{scaling.min_capacity} exceeds max_capacity ({scaling.max_capacity})")
        if scaling.scale_to_zero and not has_adapters:
            add(("autoscaling", "scale_to_zero"), "scale to zero works only for inference components; add adapters (which deploy the model as an inference component) or set min_capacity >= 1")
        if scaling.min_capacity == 0 and not scaling.scale_to_zero:
            add(("autoscaling", "min_capacity"), "0 needs scale_to_zero: true (and adapters, which deploy inference components)")

    for key in serving.environment:
        if key in RENDERED_OPTIONS:
            add(("environment", key), f"{key} is rendered from {RENDERED_OPTIONS[key]}; set that field instead")
        elif not key.replace("_", "").isalnum() or not key[:1].isalpha() or key.upper() != key:
            add(("environment", key), "environment variable names are upper-case letters, digits and underscores")
    return problems


def _architecture_problems(team: TeamConfig) -> list[Problem]:
    from optigate.plan import architecture

    problems: list[Problem] = []
    spec = team.model.architecture
    if isinstance(spec, str):
        names = sorted(architecture.known_models())
        if spec not in names:
            problems.append(Problem(("model", "architecture"), f"unknown architecture '{spec}'; give a known name or the fields of the model's config.json{_did_you_mean(spec, names)}"))
            return problems
    else:
        if spec.intermediate_size is None and spec.num_parameters is None:
            problems.append(Problem(("model", "architecture"), "give intermediate_size or num_parameters so the weights can be sized"))
        if spec.num_key_value_heads and spec.num_attention_heads % spec.num_key_value_heads:
            problems.append(Problem(("model", "architecture", "num_key_value_heads"), f"{spec.num_key_value_heads} does not divide num_attention_heads ({spec.num_attention_heads})"))
        if problems:
            return problems
    arch = architecture.load_architecture(spec if isinstance(spec, str) else spec.model_dump(exclude_none=True))
    if team.serving.max_model_len is not None and team.serving.max_model_len > arch.max_position_embeddings:
        problems.append(Problem(("serving", "max_model_len"), f"{team.serving.max_model_len} exceeds the model's max_position_embeddings ({arch.max_position_embeddings}); vLLM refuses to start; use at most {arch.max_position_embeddings}"))
    heads = arch.num_key_value_heads
    tp = team.serving.tensor_parallel_degree
    if tp and heads and tp > heads and tp % heads != 0:
        problems.append(Problem(("serving", "tensor_parallel_degree"), f"{tp} is neither a divisor nor a multiple of the model's {heads} KV heads; vLLM cannot shard attention"))
    return problems


def _source_problems(team: TeamConfig) -> list[Problem]:
    source = team.model.source
    given = [name for name in ("s3_uri", "jumpstart", "hugging_face") if getattr(source, name) is not None]
    if len(given) != 1:
        what = "none" if not given else " and ".join(given)
        return [Problem(("model", "source"), f"give exactly one of s3_uri, jumpstart, hugging_face (got {what})")]
    return []


def _merged_candidate(serving: Serving, overrides: dict[str, Any]) -> Serving:
    merged = serving.model_dump(exclude_unset=True)
    merged.update(overrides)
    return Serving.model_validate(merged)


def _rollout_problems(team: TeamConfig) -> list[Problem]:
    rollout = team.rollout
    problems: list[Problem] = []
    if rollout.strategy == "shadow" and rollout.shadow is None:
        problems.append(Problem(("rollout", "shadow"), "strategy shadow needs a shadow block with sampling_percentage"))
    if rollout.shadow is not None and rollout.strategy != "shadow":
        problems.append(Problem(("rollout", "shadow"), f"a shadow block is set but strategy is {rollout.strategy}; set strategy: shadow or remove the block"))
    if rollout.strategy == "shadow" and team.adapters:
        problems.append(Problem(("rollout", "strategy"), "shadow variants mirror a model-backed production variant; an endpoint serving adapters through inference components cannot be shadowed, use canary"))
    if rollout.shadow is not None and rollout.shadow.candidate:
        problems += candidate_problems(team, rollout.shadow.candidate, ("rollout", "shadow", "candidate"))
    return problems


def _capacity_problems(team: TeamConfig, serving: Serving, path: PathT) -> list[Problem]:
    """What the capacity planner refuses: weights, one sequence, or the batch that do not fit."""
    from optigate.plan.team import plan_problems

    if catalog.get_instance(serving.instance_type).is_neuron:
        return []  # the memory model is not validated against Neuron; the planner only notes it
    problems = []
    for field_name, message in plan_problems(team, serving):
        if getattr(serving, field_name) is None:  # derived by optigate: point at what the user chose
            field_name = "instance_type"
        problems.append(Problem((*path, field_name), message))
    return problems


def gate_candidate(team: TeamConfig) -> dict[str, Any]:
    """The serving overrides the gate proves: gate.candidate, else the shadow rollout's candidate."""
    if team.gate.candidate:
        return dict(team.gate.candidate)
    if team.rollout.shadow is not None:
        return dict(team.rollout.shadow.candidate)
    return {}


def _gate_problems(team: TeamConfig) -> list[Problem]:
    if not team.gate.candidate:
        return []
    base = ("gate", "candidate")
    problems: list[Problem] = []
    if team.adapters:
        problems.append(Problem(base, "the gate stages candidates on a model-backed endpoint; teams serving adapters through inference components cannot use it yet"))
    if team.gate.evaluation.dataset_s3_uri is None:
        problems.append(Problem(("gate", "evaluation", "dataset_s3_uri"), "a gate candidate needs an evaluation dataset: nothing is promoted without quality numbers beside the speed numbers"))
    return problems + candidate_problems(team, team.gate.candidate, base)


def candidate_problems(team: TeamConfig, overrides: dict[str, Any], base: PathT) -> list[Problem]:
    """A candidate (serving with `overrides`): its shape, hardware and capacity, reported under `base`."""
    try:
        candidate = _merged_candidate(team.serving, overrides)
    except ValidationError as error:
        problems = []
        for item in error.errors(include_url=False):
            loc = tuple(p for p in item["loc"] if not (isinstance(p, str) and p[:1].isupper()))
            message = item["msg"]
            if item["type"] == "extra_forbidden":
                message = f"unknown key '{loc[-1]}'{_did_you_mean(str(loc[-1]), list(Serving.model_fields))}"
            problems.append(Problem((*base, *loc), message))
        return problems
    problems = check_serving(candidate, base, has_adapters=bool(team.adapters), artifact_uri=team.model.source.artifact_uri)
    if not problems:
        problems = [Problem((*base, *p.path[1:]), p.message) for p in _capacity_problems(team, candidate, ("serving",))]
    return problems


def check_team(team: TeamConfig) -> list[Problem]:
    problems = _source_problems(team)
    if problems:
        return problems
    problems += check_serving(team.serving, ("serving",), has_adapters=bool(team.adapters), artifact_uri=team.model.source.artifact_uri)
    problems += _architecture_problems(team)
    if not problems:
        problems += _capacity_problems(team, team.serving, ("serving",))
    names: set[str] = set()
    for index, adapter in enumerate(team.adapters):
        if not adapter.s3_uri.endswith(".tar.gz"):
            problems.append(Problem(("adapters", index, "s3_uri"), f"an adapter is deployed from a .tar.gz archive (adapter_config.json + weights), got {adapter.s3_uri}"))
        if adapter.name in names:
            problems.append(Problem(("adapters", index, "name"), f"adapter name '{adapter.name}' is used twice; inference component names must be unique"))
        names.add(adapter.name)
    problems += _rollout_problems(team)
    if not problems:  # a candidate inherits the serving block: report its own problems only
        problems += _gate_problems(team)
    concurrency = team.gate.benchmark.concurrency
    if any(c < 1 for c in concurrency) or sorted(set(concurrency)) != concurrency:
        problems.append(Problem(("gate", "benchmark", "concurrency"), f"list distinct positive levels in increasing order, got {concurrency}"))
    return problems


def check_environments(environments: EnvironmentsFile) -> list[Problem]:
    problems: list[Problem] = []
    seen: set[str] = set()
    for index, environment in enumerate(environments.environments):
        if environment.name in seen:
            problems.append(Problem(("environments", index, "name"), f"environment '{environment.name}' is defined twice"))
        seen.add(environment.name)
    return problems
