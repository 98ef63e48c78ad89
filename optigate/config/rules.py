"""Rules over the parsed config alone: cross-field checks that need no catalog, image table or plan.

Each rule returns `Problem(path, message)`; the loader turns the path into a file line. A message
says what is wrong and what to do instead, in one sentence where possible. Rules that need the
instance catalog, the SDK's image tables or the capacity plan live in `optigate.deployment.rules`
(the config layer imports neither `optigate.plan` nor `optigate.serving`).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ValidationError

from optigate.config import models
from optigate.config.lmi_options import NOT_READ_BY, NotBelowField, options_set, rendered_names
from optigate.config.models import (
    TIMEOUT_MAX_SECONDS,
    TIMEOUT_MIN_SECONDS,
    ArchitectureFields,
    EnvironmentsFile,
    Serving,
    TeamConfig,
    serving_with,
)

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
    # the typed engine options: every name the container reads for one (optigate.config.lmi_options)
    **rendered_names(),
    # the maximum length as the TensorRT-LLM and Neuron containers read it (optigate.serving.lmi.render_environment):
    # a compiled engine is built for it, so a second source would compile one length and serve another
    "OPTION_MAX_INPUT_LEN": "serving.max_model_len",
    "OPTION_N_POSITIONS": "serving.max_model_len",
}

#: A container environment variable name as POSIX shells and the LMI container read it.
ENV_NAME = re.compile(r"[A-Z][A-Z0-9_]*")
#: The config's pydantic models by name (how pydantic names a union member in an error's location).
MODEL_NAMES = frozenset(
    name for name, value in vars(models).items() if isinstance(value, type) and issubclass(value, BaseModel)
)
SHADOW_CANDIDATE: PathT = ("rollout", "shadow", "candidate")
GATE_CANDIDATE: PathT = ("gate", "candidate")


@dataclass(frozen=True)
class Problem:
    """A problem in a config file at a YAML path (the loader adds file and line)."""

    path: PathT
    message: str


def did_you_mean(value: str, choices: list[str]) -> str:
    """The closest choice, ignoring case (QUANTIZATION is quantization typed with caps lock)."""
    by_lower = {choice.lower(): choice for choice in choices}
    close = difflib.get_close_matches(value.lower(), list(by_lower), n=1, cutoff=0.6)
    return f"; did you mean '{by_lower[close[0]]}'?" if close else ""


def check_serving(serving: Serving, path: PathT, *, has_adapters: bool, artifact_uri: str) -> list[Problem]:
    """Rules on one serving block (the production variant, or a candidate) that need no catalog."""
    problems: list[Problem] = []

    def add(sub: PathT, message: str) -> None:
        problems.append(Problem((*path, *sub), message))

    speculative = serving.speculative_decoding
    model_uri = getattr(speculative, "model_s3_uri", None)
    if (
        speculative is not None
        and model_uri is not None
        and not model_uri.rstrip("/").startswith(artifact_uri.rstrip("/") + "/")
    ):
        add(
            ("speculative_decoding", "model_s3_uri"),
            f"must lie under the model's prefix {artifact_uri} "
            "(CloudFormation cannot attach a second model data source); "
            f"copy the {speculative.method} weights to e.g. {artifact_uri.rstrip('/')}/{speculative.method}/",
        )

    lora = serving.lora
    if lora is not None and lora.max_cpu_loras is not None and lora.max_cpu_loras < lora.max_loras:
        add(
            ("lora", "max_cpu_loras"),
            f"{lora.max_cpu_loras} is below max_loras ({lora.max_loras}); vLLM requires max_cpu_loras >= max_loras",
        )

    if serving.container.family == "lmi-trtllm":
        add_trtllm_problems(serving, add)
    add_engine_switch_problems(serving, add)

    for key in ("model_data_download_timeout_seconds", "container_startup_health_check_timeout_seconds"):
        value = getattr(serving, key)
        if value is not None and not TIMEOUT_MIN_SECONDS <= value <= TIMEOUT_MAX_SECONDS:
            add(
                (key,),
                f"{value} s is outside SageMaker's range {TIMEOUT_MIN_SECONDS}-{TIMEOUT_MAX_SECONDS} s; "
                "leave it unset to size it to the model",
            )

    scaling = serving.autoscaling
    if scaling is not None:
        if scaling.min_capacity > scaling.max_capacity:
            add(
                ("autoscaling", "min_capacity"), f"{scaling.min_capacity} exceeds max_capacity ({scaling.max_capacity})"
            )
        if scaling.scale_to_zero and not has_adapters:
            add(
                ("autoscaling", "scale_to_zero"),
                "scale to zero works only for inference components; add adapters (which "
                "deploy the model as an inference component) or set min_capacity >= 1",
            )
        if scaling.min_capacity == 0 and not scaling.scale_to_zero:
            add(
                ("autoscaling", "min_capacity"),
                "0 needs scale_to_zero: true (and adapters, which deploy inference components)",
            )

    problems += instance_pool_problems(serving, path)
    for key in serving.environment:
        if key in RENDERED_OPTIONS:
            add(("environment", key), f"{key} is rendered from {RENDERED_OPTIONS[key]}; set that field instead")
        elif not ENV_NAME.fullmatch(key):  # ASCII only: str.isalpha/isupper accept ÄÖ
            add(("environment", key), "environment variable names are upper-case letters, digits and underscores")
    return problems


def instance_pool_problems(serving: Serving, path: PathT) -> list[Problem]:
    """The shape of `instance_pools`: serving.instance_type is the priority-1 pool and comes first, 2-5 pools of
    distinct types with priorities 1..N each once; the provisioning timeout only with pools.

    SageMaker provisions in priority order (1 first) and falls back on insufficient capacity
    (https://docs.aws.amazon.com/sagemaker/latest/dg/realtime-endpoints-heterogeneous.html). The API takes 1-5
    pools with priorities 1-5 (botocore's InstancePoolList, InstancePoolPriority); whether it accepts ties or gaps
    is not documented, so the order is made explicit: 1..N, each once.
    """
    pools = serving.instance_pools
    if pools is None:
        if serving.instance_provision_timeout_seconds is not None:
            return [
                Problem(
                    (*path, "instance_provision_timeout_seconds"),
                    "VariantInstanceProvisionTimeoutInSeconds bounds the fallback across instance pools; add "
                    "instance_pools, or remove instance_provision_timeout_seconds",
                )
            ]
        return []
    where = (*path, "instance_pools")
    if len(pools) < 2:
        return [
            Problem(
                where,
                f"one pool is serving.instance_type alone; list {serving.instance_type} (priority 1) and 1-4 fallback "
                "types, or remove instance_pools",
            )
        ]
    problems: list[Problem] = []
    first = pools[0]
    if first.instance_type != serving.instance_type or first.priority != 1:
        problems.append(
            Problem(
                (*where, 0),
                f"the first pool must be serving.instance_type ({serving.instance_type}) with priority 1, got "
                f"{first.instance_type} with priority {first.priority}; list the primary first, or change "
                "serving.instance_type to the type you want tried first",
            )
        )
    seen_types: dict[str, int] = {}
    seen_priorities: dict[int, int] = {}
    for index, pool in enumerate(pools):
        if pool.instance_type in seen_types:
            problems.append(
                Problem(
                    (*where, index, "instance_type"),
                    f"{pool.instance_type} is already pool {seen_types[pool.instance_type]}; each type once",
                )
            )
        if pool.priority in seen_priorities:
            problems.append(
                Problem(
                    (*where, index, "priority"),
                    f"priority {pool.priority} is already pool {seen_priorities[pool.priority]}'s; give each pool "
                    f"its own priority, 1 to {len(pools)}",
                )
            )
        seen_types.setdefault(pool.instance_type, index)
        seen_priorities.setdefault(pool.priority, index)
    missing = sorted(set(range(1, len(pools) + 1)) - set(seen_priorities))
    if missing and len(seen_priorities) == len(pools):
        problems.append(
            Problem(
                where,
                f"priorities must be 1 to {len(pools)} without gaps; {', '.join(map(str, missing))} is missing",
            )
        )
    return problems


def add_trtllm_problems(serving: Serving, add: Callable[[PathT, str], None]) -> None:
    """Fields the LMI TensorRT-LLM container has no equivalent of: refused rather than dropped.

    LMI's TensorRT-LLM options (trt_llm_user_guide.md in deepjavalibrary/djl-serving) size the KV cache with
    `option.kv_cache_free_gpu_mem_fraction`, a share of the memory *left after the weights* (default 0.95),
    not vLLM's share of all memory, and list no KV-cache dtype; FP8 there is W8A8 only (TensorRT-LLM has no
    weight-only FP8 fallback on A10G/A100).
    """
    if serving.gpu_memory_utilization is not None:
        add(
            ("gpu_memory_utilization",),
            "lmi-trtllm has no gpu_memory_utilization: TensorRT-LLM gives its KV cache a share of the memory left "
            "after the weights (option.kv_cache_free_gpu_mem_fraction, 0.95); remove it, or use container family lmi",
        )
    if serving.kv_cache_dtype != "auto":
        add(
            ("kv_cache_dtype",),
            f"{serving.kv_cache_dtype} is not offered by LMI's TensorRT-LLM options; use auto, or container family lmi",
        )
    if serving.allow_weight_only_fp8:
        add(
            ("allow_weight_only_fp8",),
            "TensorRT-LLM runs FP8 only as W8A8 on GPUs with FP8 tensor cores, never weight-only; "
            "remove it, or use container family lmi",
        )


def add_engine_switch_problems(serving: Serving, add: Callable[[PathT, str], None]) -> None:
    """Typed engine options (optigate.config.lmi_options) on a container family whose engine does not read them,
    and each option's config checks (vLLM's own constraints across fields)."""
    family = serving.container.family
    for name, option, value in options_set(serving):
        if family not in option.families:
            add(
                (name,),
                f"{name} is {option.engine_argument}, which container family {family} does not read "
                f"({NOT_READ_BY[family]}); remove it, or use container family {' or '.join(option.families)}",
            )
            continue
        for check in option.checks:
            if isinstance(check, NotBelowField):
                other = getattr(serving, check.field)
                if other is not None and value < other:
                    add((name,), check.message.format(value=value, other=other))


def architecture_fields_problems(spec: ArchitectureFields) -> list[Problem]:
    """Architecture fields that cannot size a model; the planner is never asked about such fields."""
    problems: list[Problem] = []

    def add(field: str | None, message: str) -> None:
        problems.append(Problem(("model", "architecture", *((field,) if field else ())), message))

    if spec.intermediate_size is None and spec.num_parameters is None:
        add(None, "give intermediate_size or num_parameters so the weights can be sized")
    if spec.num_key_value_heads and spec.num_attention_heads % spec.num_key_value_heads:
        add(
            "num_key_value_heads",
            f"{spec.num_key_value_heads} does not divide num_attention_heads ({spec.num_attention_heads})",
        )
    if spec.head_dim is None and spec.hidden_size % spec.num_attention_heads:
        per_head = spec.hidden_size / spec.num_attention_heads
        add(
            "num_attention_heads",
            f"hidden_size {spec.hidden_size} / num_attention_heads {spec.num_attention_heads} = {per_head:g} is not a "
            "whole head size; give head_dim as in the model's config.json",
        )
    moe_fields = [name for name in ("num_local_experts", "moe_intermediate_size") if getattr(spec, name) is not None]
    if moe_fields and spec.num_experts_per_tok is None:
        add(
            moe_fields[0],
            f"{' and '.join(moe_fields)} describe a mixture of experts; give num_experts_per_tok too "
            "(without it the experts cannot be sized)",
        )
    if spec.num_experts_per_tok is not None:
        if spec.num_local_experts is None:
            add("num_experts_per_tok", "give num_local_experts (experts per layer) with num_experts_per_tok")
        elif spec.num_experts_per_tok > spec.num_local_experts:
            add(
                "num_experts_per_tok",
                f"{spec.num_experts_per_tok} exceeds num_local_experts ({spec.num_local_experts})",
            )
    return problems


def _architecture_problems(team: TeamConfig) -> list[Problem]:
    """Architecture fields that cannot size a model (known names are checked against the catalog later)."""
    spec = team.model.architecture
    return [] if isinstance(spec, str) else architecture_fields_problems(spec)


def _source_problems(team: TeamConfig) -> list[Problem]:
    source = team.model.source
    given = [name for name in ("s3_uri", "jumpstart", "hugging_face") if getattr(source, name) is not None]
    if len(given) != 1:
        what = "none" if not given else " and ".join(given)
        return [Problem(("model", "source"), f"give exactly one of s3_uri, jumpstart, hugging_face (got {what})")]
    return []


def _rollout_problems(team: TeamConfig) -> list[Problem]:
    rollout = team.rollout
    problems: list[Problem] = []
    if rollout.strategy == "shadow" and rollout.shadow is None:
        problems.append(Problem(("rollout", "shadow"), "strategy shadow needs a shadow block with sampling_percentage"))
    if rollout.shadow is not None and rollout.strategy != "shadow":
        problems.append(
            Problem(
                ("rollout", "shadow"),
                f"a shadow block is set but strategy is {rollout.strategy}; set strategy: shadow or remove the block",
            )
        )
    if rollout.strategy == "shadow" and team.adapters:
        problems.append(
            Problem(
                ("rollout", "strategy"),
                "shadow variants mirror a model-backed production variant; "
                "an endpoint serving adapters through inference components cannot be shadowed, use canary",
            )
        )
    return problems


def _gate_problems(team: TeamConfig) -> list[Problem]:
    if not team.gate.candidate:
        return []
    problems: list[Problem] = []
    if team.adapters:
        problems.append(
            Problem(
                GATE_CANDIDATE,
                "the gate stages candidates on a model-backed endpoint; "
                "teams serving adapters through inference components cannot use it yet",
            )
        )
    if team.gate.evaluation.dataset_s3_uri is None:
        problems.append(
            Problem(
                ("gate", "evaluation", "dataset_s3_uri"),
                "a gate candidate needs an evaluation dataset: "
                "nothing is promoted without quality numbers beside the speed numbers",
            )
        )
    return problems + candidate_problems(team, team.gate.candidate, GATE_CANDIDATE)


#: Container families whose endpoint answers the OpenAI chat completions schema (`messages`) SageMaker's managed
#: benchmark sends: "A SageMaker AI endpoint in InService status hosting an LLM that supports the OpenAI-compatible
#: chat completions API" (https://docs.aws.amazon.com/sagemaker/latest/dg/generative-ai-inference-recommendations-benchmark.html).
#: LMI's vLLM backend serves it (https://docs.djl.ai/master/docs/serving/serving/docs/lmi/user_guides/chat_input_output_schema.html;
#: optigate's own client sends it, optigate/bench/client.py). For TensorRT-LLM and Neuron the LMI pages do not say
#: it for the versions optigate pins, so they are refused (fail closed) rather than paid for and failed.
CROSS_CHECK_FAMILIES = frozenset({"lmi"})
CROSS_CHECK: PathT = ("gate", "benchmark", "cross_check")


def cross_check_tokenizer(team: TeamConfig) -> str | None:
    """The Hugging Face tokenizer the managed benchmark downloads: gate.benchmark.cross_check_tokenizer, else the
    model's Hugging Face id; None when neither says (an S3 or JumpStart source names no tokenizer)."""
    source = team.model.source.hugging_face
    return team.gate.benchmark.cross_check_tokenizer or (source.model_id if source else None)


def _cross_check_problems(team: TeamConfig) -> list[Problem]:
    """Where SageMaker's managed benchmark cannot target the gate's endpoints, say why and what to change.

    The gate's two endpoints are its own temporary single-model endpoints (a candidate and the baseline's
    twin, one container each, no inference components, outside any VPC: optigate configures none), so the
    job needs no InferenceComponents, TargetContainerHostname or NetworkConfig; what is left is the API the
    container speaks and the tokenizer AIPerf must download."""
    if team.gate.benchmark.cross_check != "sagemaker":
        return []
    if not team.gate.candidate:
        return [
            Problem(
                CROSS_CHECK,
                "a cross-check runs beside the gate's benchmark; without gate.candidate there is "
                "no gate: set cross_check: none or give a candidate",
            )
        ]
    problems: list[Problem] = []
    try:
        sides = {"serving": team.serving, "gate.candidate": serving_with(team.serving, team.gate.candidate)}
    except ValidationError:  # the candidate's own problems are reported at gate.candidate
        sides = {"serving": team.serving}
    for where, serving in sides.items():
        family = serving.container.family
        if family not in CROSS_CHECK_FAMILIES:
            problems.append(
                Problem(
                    CROSS_CHECK,
                    f"SageMaker's managed benchmark sends OpenAI chat completions (`messages`), which optigate knows "
                    f"only LMI's vLLM backend (family lmi) to answer; {where} runs {family}. Use container family "
                    "lmi, or set cross_check: none",
                )
            )
    if cross_check_tokenizer(team) is None:
        problems.append(
            Problem(
                (*CROSS_CHECK[:-1], "cross_check_tokenizer"),
                "AIPerf downloads a Hugging Face tokenizer to size prompts and count tokens, and this model's source "
                "names none: set gate.benchmark.cross_check_tokenizer to the id of an ungated repository with this "
                "model's tokenizer (e.g. the model's own Hugging Face id)",
            )
        )
    return problems


def candidate_problems(team: TeamConfig, overrides: dict[str, Any], base: PathT) -> list[Problem]:
    """A candidate (serving with `overrides`): its shape and cross-field rules, reported under `base`."""
    try:
        candidate = serving_with(team.serving, overrides)
    except ValidationError as error:
        problems = []
        for item in error.errors(include_url=False):
            # pydantic puts a union member's model name in the location; a key the user wrote stays.
            loc = tuple(p for p in item["loc"] if not (isinstance(p, str) and p in MODEL_NAMES))
            message = item["msg"]
            if item["type"] == "extra_forbidden":
                message = f"unknown key '{loc[-1]}'{did_you_mean(str(loc[-1]), list(Serving.model_fields))}"
            problems.append(Problem((*base, *loc), message))
        return problems
    problems = check_serving(
        candidate, base, has_adapters=bool(team.adapters), artifact_uri=team.model.source.artifact_uri
    )
    problems += compile_problems(team, candidate, base)
    return problems + (trained_head_problems(candidate, base) if base != GATE_CANDIDATE else [])


def check_team(team: TeamConfig) -> list[Problem]:
    problems = _source_problems(team)
    if problems:
        return problems
    problems += check_serving(
        team.serving, ("serving",), has_adapters=bool(team.adapters), artifact_uri=team.model.source.artifact_uri
    )
    problems += trained_head_problems(team.serving, ("serving",))
    problems += compile_problems(team, team.serving, ("serving",))
    problems += _architecture_problems(team)
    names: set[str] = set()
    for index, adapter in enumerate(team.adapters):
        if not adapter.s3_uri.endswith(".tar.gz"):
            problems.append(
                Problem(
                    ("adapters", index, "s3_uri"),
                    "an adapter is deployed from a .tar.gz archive "
                    f"(adapter_config.json + weights), got {adapter.s3_uri}",
                )
            )
        if adapter.name in names:
            problems.append(
                Problem(
                    ("adapters", index, "name"),
                    f"adapter name '{adapter.name}' is used twice; inference component names must be unique",
                )
            )
        names.add(adapter.name)
    problems += _rollout_problems(team)
    if not problems:  # a candidate inherits the serving block: report its own problems only
        shadow = team.rollout.shadow
        if shadow is not None and shadow.candidate:
            problems += candidate_problems(team, shadow.candidate, SHADOW_CANDIDATE)
        problems += _gate_problems(team)
        problems += _cross_check_problems(team)
    concurrency = team.gate.benchmark.concurrency
    if any(c < 1 for c in concurrency) or sorted(set(concurrency)) != concurrency:
        problems.append(
            Problem(
                ("gate", "benchmark", "concurrency"),
                f"list distinct positive levels in increasing order, got {concurrency}",
            )
        )
    return problems


def check_environments(environments: EnvironmentsFile) -> list[Problem]:
    problems: list[Problem] = []
    seen: set[str] = set()
    for index, environment in enumerate(environments.environments):
        if environment.name in seen:
            problems.append(
                Problem(("environments", index, "name"), f"environment '{environment.name}' is defined twice")
            )
        seen.add(environment.name)
        blocks: list[tuple[PathT, Any]] = [(("environments", index, "overrides"), environment.overrides)]
        blocks += [(("environments", index, "teams", name), own) for name, own in environment.teams.items()]
        for path, overrides in blocks:
            if overrides.data_capture is not None and overrides.data_capture_percentage is not None:
                problems.append(
                    Problem(
                        (*path, "data_capture_percentage"),
                        "give data_capture or data_capture_percentage, not both; "
                        "move the percentage into data_capture.percentage",
                    )
                )
    return problems


def trained_head_problems(serving: Serving, path: PathT) -> list[Problem]:
    """`method: eagle` is a head the gate's optimization job trains: it exists only as a gate candidate, which a
    promotion then deploys as the package the gate recorded (head included)."""
    if not isinstance(serving.speculative_decoding, models.EagleTraining):
        return []
    return [
        Problem(
            (*path, "speculative_decoding", "method"),
            "eagle trains a head in the gate's optimization job, so it is a gate.candidate setting only; here use "
            "method: eagle3 with a model_s3_uri of an existing head, or put method: eagle under gate.candidate and "
            "let the gate train, prove and promote it",
        )
    ]


#: What `compile: true` builds, by container family (the job's LMI container picks the compiler by its features:
#: djl-serving serving/docker/partition/sm_neo_dispatcher.py runs sm_neo_trt_llm_partition.py in the TensorRT-LLM
#: container and sm_neo_neuron_partition.py in the Neuron one; the vLLM container only quantizes or shards).
COMPILED_BY = {
    "lmi-trtllm": "TensorRT-LLM engines for the candidate's NVIDIA GPU",
    "lmi-neuronx": "Neuron artifacts for the candidate's Inferentia2/Trainium instance",
}
#: Quantizations SageMaker compiles into a TensorRT-LLM engine in one optimization job (the SageMaker Python SDK's
#: ModelBuilder.optimize rules, sagemaker/serve/validations/optimization.py TRT_CONFIGURATION: awq, fp8,
#: smoothquant; optigate offers fp8 and awq on lmi-trtllm). Neuron compiles no quantization (NEURON_CONFIGURATION).
COMPILED_QUANTIZATIONS = {"lmi-trtllm": frozenset({"fp8", "awq"}), "lmi-neuronx": frozenset()}


def compile_problems(team: TeamConfig, serving: Serving, path: PathT) -> list[Problem]:
    """`compile: true` is a gate candidate (the gate's optimization job compiles, proves and records the engine) for a
    container that reads compiled artifacts, without what such a container or SageMaker's job does not take.

    Rules from the SageMaker Python SDK's ModelBuilder.optimize (sagemaker/serve/model_builder.py and
    sagemaker/serve/validations/optimization.py): compilation only for TensorRT-LLM (GPU) and Neuron; "Compilation is
    not supported with speculative decoding with a GPU instance", and never with speculative decoding on Neuron;
    sharding is exclusive with every other technique (optigate never shards); on TensorRT-LLM a quantization is made
    by compilation ("Quantization ... must be provided with Compilation"). The typed vLLM engine switches are refused
    on these families by add_engine_switch_problems."""
    problems: list[Problem] = []
    family = serving.container.family
    candidate = path == GATE_CANDIDATE
    if serving.compile and not candidate:
        problems.append(
            Problem(
                (*path, "compile"),
                "compile is a gate.candidate setting only: the gate's optimization job compiles the engine for the "
                "instance it proves it on, and a promotion deploys the package the gate recorded; remove it here and "
                "put compile: true under gate.candidate",
            )
        )
        return problems
    if not candidate:
        return problems
    overrides = team.gate.candidate
    if serving.compile and family not in COMPILED_BY:
        problems.append(
            Problem(
                (*path, "compile"),
                f"container family {family} (vLLM) takes no ahead-of-time compiled engine: vLLM captures its CUDA "
                "graphs and picks its kernels when it starts (see enforce_eager, attention_backend). To compile, "
                "switch the candidate to TensorRT-LLM with container: {family: lmi-trtllm} beside compile: true "
                "(Neuron: lmi-neuronx on inf2/trn1), or remove compile",
            )
        )
        return problems
    if serving.compile and serving.speculative_decoding is not None:
        problems.append(
            Problem(
                (*path, "compile"),
                "SageMaker compiles no speculative decoding (the SDK: 'Compilation is not supported with speculative "
                f"decoding'), and {family} reads no OPTION_SPECULATIVE_CONFIG: prove speculative decoding and "
                "compilation in separate gate runs (remove speculative_decoding from serving and the candidate, or "
                "remove compile)",
            )
        )
    quantization = serving.quantization
    new_quantization = "quantization" in overrides and overrides["quantization"] != team.serving.quantization
    if serving.compile and quantization is not None and quantization not in COMPILED_QUANTIZATIONS[family]:
        allowed = sorted(COMPILED_QUANTIZATIONS[family])
        problems.append(
            Problem(
                (*path, "quantization"),
                f"SageMaker does not compile {quantization} into {COMPILED_BY[family]} (the SDK's optimize rules); "
                + (f"use {' or '.join(allowed)}, or remove compile" if allowed else "remove quantization, or compile")
                + " in a separate step",
            )
        )
    if not serving.compile and family == "lmi-trtllm" and new_quantization and quantization is not None:
        problems.append(
            Problem(
                (*path, "quantization"),
                "on lmi-trtllm SageMaker's optimization job quantizes by compiling a TensorRT-LLM engine (the SDK: "
                "'Quantization ... must be provided with Compilation'); add compile: true to the candidate, or "
                "quantize on container family lmi",
            )
        )
    return problems
