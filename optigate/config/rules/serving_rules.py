# Over 400 lines: one function per serving rule, each with the docstring docs/rules.md shows, and their order.
"""Serving rules: one serving block (production, shadow or gate candidate) alone, and the adapters.

They need no catalog, image table or plan (those are `optigate.deployment.rules`).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from optigate.config.lmi_options import NOT_READ_BY, LmiOption, NotBelowField, options_set, rendered_names
from optigate.config.models import TIMEOUT_MAX_SECONDS, TIMEOUT_MIN_SECONDS, Serving, TeamConfig
from optigate.config.rule_registry import Found, PathT, Problem, rule_check

#: The variables optigate renders from typed fields -> the field: those fields are the sources of truth, so
#: `serving.environment` may not set them.
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
    # the engine mode: async or the rolling batch, per container family and version (optigate.serving.engine_mode)
    "OPTION_ROLLING_BATCH": "serving.container",
    "OPTION_ASYNC_MODE": "serving.container",
    "OPTION_ENTRYPOINT": "serving.container",
    # the typed engine options: every name the container reads for one (optigate.config.lmi_options)
    **rendered_names(),
    # the maximum length as the TensorRT-LLM and Neuron containers read it (optigate.serving.lmi.render_environment):
    # a compiled engine is built for it, so a second source would compile one length and serve another
    "OPTION_MAX_INPUT_LEN": "serving.max_model_len",
    "OPTION_N_POSITIONS": "serving.max_model_len",
}

#: A container environment variable name as POSIX shells and the LMI container read it.
ENV_NAME = re.compile(r"[A-Z][A-Z0-9_]*")


def check_serving(serving: Serving, path: PathT, *, has_adapters: bool, artifact_uri: str) -> list[Problem]:
    """Rules on one serving block (the production variant, or a candidate) that need no catalog, in the order
    they are reported: one rule function each (the engine switches and environment variables one at a time)."""
    problems = [
        *speculative_model_under_prefix(serving, path, artifact_uri),
        *cpu_loras_at_least_loras(serving, path),
        *trtllm_no_gpu_memory_utilization(serving, path),
        *trtllm_no_kv_cache_dtype(serving, path),
        *trtllm_no_weight_only_fp8(serving, path),
    ]
    for name, option, value in options_set(serving):
        problems += switch_read_by_family(serving, path, name, option)
        problems += switch_not_below_field(serving, path, name, option, value)
    problems += [
        *timeout_in_range(serving, path),
        *scaling_min_at_most_max(serving, path),
        *scale_to_zero_needs_adapters(serving, path, has_adapters),
        *zero_min_needs_scale_to_zero(serving, path),
        *instance_scaling_needs_adapters(serving, path, has_adapters),
        *scale_to_zero_needs_instance_scaling(serving, path),
        *instance_pool_problems(serving, path),
    ]
    for key in serving.environment:
        problems += environment_not_rendered(serving, path, key)
        problems += environment_name(serving, path, key)
    return problems


@rule_check("OG201", "a speculative draft or head lies under the model's S3 prefix")
def speculative_model_under_prefix(serving: Serving, path: PathT, artifact_uri: str) -> Iterator[Found]:
    """The weights of a speculative draft model or trained head (`speculative_decoding.model_s3_uri`) lie under
    the model's own S3 prefix (`artifact_uri`).

    Why: the endpoint's model is deployed with one model data source, and CloudFormation cannot attach a second,
    so weights elsewhere would never reach the container.
    """
    speculative = serving.speculative_decoding
    model_uri = getattr(speculative, "model_s3_uri", None)
    if (
        speculative is not None
        and model_uri is not None
        and not model_uri.rstrip("/").startswith(artifact_uri.rstrip("/") + "/")
    ):
        yield (
            (*path, "speculative_decoding", "model_s3_uri"),
            f"must lie under the model's prefix {artifact_uri} "
            "(CloudFormation cannot attach a second model data source); "
            f"copy the {speculative.method} weights to e.g. {artifact_uri.rstrip('/')}/{speculative.method}/",
        )


@rule_check("OG202", "lora.max_cpu_loras is at least lora.max_loras")
def cpu_loras_at_least_loras(serving: Serving, path: PathT) -> Iterator[Found]:
    """`lora.max_cpu_loras`, when set, is at least `lora.max_loras`.

    Why: vLLM refuses to start when its CPU adapter cache holds fewer adapters than the GPU batch may use
    (vLLM's LoRAConfig requires max_cpu_loras >= max_loras).
    """
    lora = serving.lora
    if lora is not None and lora.max_cpu_loras is not None and lora.max_cpu_loras < lora.max_loras:
        yield (
            (*path, "lora", "max_cpu_loras"),
            f"{lora.max_cpu_loras} is below max_loras ({lora.max_loras}); vLLM requires max_cpu_loras >= max_loras",
        )


@rule_check("OG203", "lmi-trtllm takes no gpu_memory_utilization")
def trtllm_no_gpu_memory_utilization(serving: Serving, path: PathT) -> Iterator[Found]:
    """On container family lmi-trtllm, `gpu_memory_utilization` is not set: refused rather than dropped.

    Why: LMI's TensorRT-LLM options (trt_llm_user_guide.md in deepjavalibrary/djl-serving) size the KV cache with
    `option.kv_cache_free_gpu_mem_fraction`, a share of the memory *left after the weights* (default 0.95), not
    vLLM's share of all memory, so the field has no equivalent there.
    """
    if serving.container.family == "lmi-trtllm" and serving.gpu_memory_utilization is not None:
        yield (
            (*path, "gpu_memory_utilization"),
            "lmi-trtllm has no gpu_memory_utilization: TensorRT-LLM gives its KV cache a share of the memory left "
            "after the weights (option.kv_cache_free_gpu_mem_fraction, 0.95); remove it, or use container family lmi",
        )


@rule_check("OG204", "lmi-trtllm takes no kv_cache_dtype other than auto")
def trtllm_no_kv_cache_dtype(serving: Serving, path: PathT) -> Iterator[Found]:
    """On container family lmi-trtllm, `kv_cache_dtype` is auto: refused rather than dropped.

    Why: LMI's TensorRT-LLM options (trt_llm_user_guide.md in deepjavalibrary/djl-serving) list no KV-cache dtype.
    """
    if serving.container.family == "lmi-trtllm" and serving.kv_cache_dtype != "auto":
        yield (
            (*path, "kv_cache_dtype"),
            f"{serving.kv_cache_dtype} is not offered by LMI's TensorRT-LLM options; use auto, or container family lmi",
        )


@rule_check("OG205", "lmi-trtllm takes no allow_weight_only_fp8")
def trtllm_no_weight_only_fp8(serving: Serving, path: PathT) -> Iterator[Found]:
    """On container family lmi-trtllm, `allow_weight_only_fp8` is not set: refused rather than dropped.

    Why: FP8 in TensorRT-LLM is W8A8 only, on GPUs with FP8 tensor cores; it has no weight-only FP8 fallback on
    A10G/A100 as vLLM has (trt_llm_user_guide.md in deepjavalibrary/djl-serving).
    """
    if serving.container.family == "lmi-trtllm" and serving.allow_weight_only_fp8:
        yield (
            (*path, "allow_weight_only_fp8"),
            "TensorRT-LLM runs FP8 only as W8A8 on GPUs with FP8 tensor cores, never weight-only; "
            "remove it, or use container family lmi",
        )


@rule_check("OG206", "a typed vLLM engine switch is set only on a container family that reads it")
def switch_read_by_family(serving: Serving, path: PathT, name: str, option: LmiOption) -> Iterator[Found]:
    """A typed engine option (`optigate.config.lmi_options`), checked one option at a time, is set only on a
    container family whose engine reads it.

    Why: a family that does not read the option would start without it, silently; the families each option is
    read by are in the option table (`LMI_OPTIONS`), what each family reads instead in `NOT_READ_BY`.
    """
    family = serving.container.family
    if family not in option.families:
        yield (
            (*path, name),
            f"{name} is {option.engine_argument}, which container family {family} does not read "
            f"({NOT_READ_BY[family]}); remove it, or use container family {' or '.join(option.families)}",
        )


@rule_check("OG207", "a typed vLLM engine switch is not below the field vLLM requires it to reach")
def switch_not_below_field(
    serving: Serving, path: PathT, name: str, option: LmiOption, value: object
) -> Iterator[Found]:
    """A typed engine option set on a family that reads it, checked one option at a time, is not below the
    serving field its table entry names (a `NotBelowField` check in `optigate.config.lmi_options`).

    Why: vLLM refuses to start when such an option is below the field it must reach; the option table holds each
    constraint and its message.
    """
    if serving.container.family not in option.families:
        return  # OG206's
    for check in option.checks:
        if isinstance(check, NotBelowField):
            other = getattr(serving, check.field)
            if other is not None and value < other:
                yield (*path, name), check.message.format(value=value, other=other)


@rule_check("OG208", "model download and startup timeouts lie within SageMaker's 60-3600 s")
def timeout_in_range(serving: Serving, path: PathT) -> Iterator[Found]:
    """`model_data_download_timeout_seconds` and `container_startup_health_check_timeout_seconds`, when set, lie
    within 60-3600 s.

    Why: SageMaker's production variant (ModelDataDownloadTimeoutInSeconds,
    ContainerStartupHealthCheckTimeoutInSeconds) accepts only that range, so CloudFormation would fail the deploy.
    """
    for key in ("model_data_download_timeout_seconds", "container_startup_health_check_timeout_seconds"):
        value = getattr(serving, key)
        if value is not None and not TIMEOUT_MIN_SECONDS <= value <= TIMEOUT_MAX_SECONDS:
            yield (
                (*path, key),
                f"{value} s is outside SageMaker's range {TIMEOUT_MIN_SECONDS}-{TIMEOUT_MAX_SECONDS} s; "
                "leave it unset to size it to the model",
            )


@rule_check("OG209", "autoscaling.min_capacity is at most max_capacity")
def scaling_min_at_most_max(serving: Serving, path: PathT) -> Iterator[Found]:
    """`autoscaling.min_capacity` is at most `autoscaling.max_capacity`.

    Why: Application Auto Scaling refuses a scalable target whose MinCapacity exceeds its MaxCapacity.
    """
    scaling = serving.autoscaling
    if scaling is not None and scaling.min_capacity > scaling.max_capacity:
        yield (
            (*path, "autoscaling", "min_capacity"),
            f"{scaling.min_capacity} exceeds max_capacity ({scaling.max_capacity})",
        )


@rule_check("OG210", "scale_to_zero only with adapters (inference components)")
def scale_to_zero_needs_adapters(serving: Serving, path: PathT, has_adapters: bool) -> Iterator[Found]:
    """`autoscaling.scale_to_zero` is set only for a team with adapters.

    Why: SageMaker scales to zero only inference components, and optigate deploys the model as an inference
    component only when the team has adapters; a model-backed endpoint keeps at least one instance.
    """
    scaling = serving.autoscaling
    if scaling is not None and scaling.scale_to_zero and not has_adapters:
        yield (
            (*path, "autoscaling", "scale_to_zero"),
            "scale to zero works only for inference components; add adapters (which "
            "deploy the model as an inference component) or set min_capacity >= 1",
        )


@rule_check("OG211", "autoscaling.min_capacity 0 only with scale_to_zero")
def zero_min_needs_scale_to_zero(serving: Serving, path: PathT) -> Iterator[Found]:
    """`autoscaling.min_capacity` is 0 only with `autoscaling.scale_to_zero: true`.

    Why: a minimum of no copies is scaling to zero, which needs the settings that make it work (and adapters,
    which deploy inference components: OG210).
    """
    scaling = serving.autoscaling
    if scaling is not None and scaling.min_capacity == 0 and not scaling.scale_to_zero:
        yield (
            (*path, "autoscaling", "min_capacity"),
            "0 needs scale_to_zero: true (and adapters, which deploy inference components)",
        )


@rule_check("OG216", "managed_instance_scaling only with adapters (inference components)")
def instance_scaling_needs_adapters(serving: Serving, path: PathT, has_adapters: bool) -> Iterator[Found]:
    """`autoscaling.managed_instance_scaling` is set only for a team with adapters.

    Why: managed instance scaling adds instances for inference component copies; a model-backed endpoint (no
    adapters) already scales instances through its scalable target.
    """
    scaling = serving.autoscaling
    if scaling is not None and scaling.managed_instance_scaling is not None and not has_adapters:
        yield (
            (*path, "autoscaling", "managed_instance_scaling"),
            "managed instance scaling adds instances for inference component copies, and this endpoint is "
            "model-backed (no adapters): its scalable target scales instances already; remove "
            "managed_instance_scaling",
        )


@rule_check("OG217", "scale_to_zero with managed instance scaling (not set false)")
def scale_to_zero_needs_instance_scaling(serving: Serving, path: PathT) -> Iterator[Found]:
    """`autoscaling.scale_to_zero` is not combined with `managed_instance_scaling: false`.

    Why: scaling to zero removes the instances with the last copy, which only managed instance scaling does (its
    MinInstanceCount 0).
    """
    scaling = serving.autoscaling
    if scaling is not None and scaling.scale_to_zero and scaling.managed_instance_scaling is False:
        yield (
            (*path, "autoscaling", "managed_instance_scaling"),
            "scale to zero removes the instances with the last copy, which only managed instance scaling does "
            "(its MinInstanceCount 0); remove managed_instance_scaling: false or scale_to_zero",
        )


@rule_check("OG212", "serving.environment sets no variable optigate renders from a field")
def environment_not_rendered(serving: Serving, path: PathT, key: str) -> Iterator[Found]:
    """A `serving.environment` variable, checked one at a time, is not one optigate renders from a typed field
    (`RENDERED_OPTIONS`).

    Why: the field is the variable's one source of truth (the planner, the gate and the rendering read it); a
    second source in `environment` would serve one value and plan another.
    """
    if key in RENDERED_OPTIONS:
        yield (*path, "environment", key), f"{key} is rendered from {RENDERED_OPTIONS[key]}; set that field instead"


@rule_check("OG213", "serving.environment names are upper-case letters, digits and underscores")
def environment_name(serving: Serving, path: PathT, key: str) -> Iterator[Found]:
    """A `serving.environment` variable name, checked one at a time, is upper-case ASCII letters, digits and
    underscores, starting with a letter (a name OG212 refuses is not checked again).

    Why: the names POSIX shells and the LMI container read; ASCII only, as `str.isalpha` and `str.isupper` accept
    letters such as Ä.
    """
    if key not in RENDERED_OPTIONS and not ENV_NAME.fullmatch(key):
        yield (*path, "environment", key), "environment variable names are upper-case letters, digits and underscores"


def instance_pool_problems(serving: Serving, path: PathT) -> list[Problem]:
    """The shape of `instance_pools`, one rule function each: the provisioning timeout only with pools; with one
    pool only that; else the primary first, each type and priority once (pool by pool), priorities without gaps."""
    pools = serving.instance_pools
    if pools is None:
        return pool_timeout_needs_pools(serving, path)
    if len(pools) < 2:
        return pools_at_least_two(serving, path)
    problems = pool_primary_first(serving, path)
    for index in range(len(pools)):
        problems += pool_type_once(serving, path, index)
        problems += pool_priority_once(serving, path, index)
    return problems + pool_priorities_without_gaps(serving, path)


@rule_check("OG251", "instance_provision_timeout_seconds only with instance_pools")
def pool_timeout_needs_pools(serving: Serving, path: PathT) -> Iterator[Found]:
    """`instance_provision_timeout_seconds` is set only with `instance_pools`.

    Why: it is the production variant's VariantInstanceProvisionTimeoutInSeconds, which bounds the fallback across
    instance pools (https://docs.aws.amazon.com/sagemaker/latest/dg/realtime-endpoints-heterogeneous.html).
    """
    if serving.instance_pools is None and serving.instance_provision_timeout_seconds is not None:
        yield (
            (*path, "instance_provision_timeout_seconds"),
            "VariantInstanceProvisionTimeoutInSeconds bounds the fallback across instance pools; add "
            "instance_pools, or remove instance_provision_timeout_seconds",
        )


@rule_check("OG252", "instance_pools lists at least two pools")
def pools_at_least_two(serving: Serving, path: PathT) -> Iterator[Found]:
    """`instance_pools` lists serving.instance_type and 1-4 fallback types; with fewer than two pools the other pool
    rules are not checked.

    Why: one pool is serving.instance_type alone, with no fallback; the API takes 1-5 pools (botocore's
    InstancePoolList).
    """
    pools = serving.instance_pools
    if pools is not None and len(pools) < 2:
        yield (
            (*path, "instance_pools"),
            f"one pool is serving.instance_type alone; list {serving.instance_type} (priority 1) and 1-4 fallback "
            "types, or remove instance_pools",
        )


@rule_check("OG253", "the first pool is serving.instance_type with priority 1")
def pool_primary_first(serving: Serving, path: PathT) -> Iterator[Found]:
    """The first of two or more pools is serving.instance_type, with priority 1.

    Why: SageMaker provisions in priority order (1 first) and falls back on insufficient capacity
    (https://docs.aws.amazon.com/sagemaker/latest/dg/realtime-endpoints-heterogeneous.html); the type the rest of
    the config (and the plan) names is the one tried first, and listed first.
    """
    pools = serving.instance_pools
    if pools is None or len(pools) < 2:
        return
    first = pools[0]
    if first.instance_type != serving.instance_type or first.priority != 1:
        yield (
            (*path, "instance_pools", 0),
            f"the first pool must be serving.instance_type ({serving.instance_type}) with priority 1, got "
            f"{first.instance_type} with priority {first.priority}; list the primary first, or change "
            "serving.instance_type to the type you want tried first",
        )


@rule_check("OG254", "each instance type is one pool")
def pool_type_once(serving: Serving, path: PathT, index: int) -> Iterator[Found]:
    """Pool `index` (of two or more) has a type no earlier pool has, checked one pool at a time.

    Why: a pool is one instance type; the same type twice is one pool with two priorities.
    """
    pools = serving.instance_pools
    if pools is None or len(pools) < 2:
        return
    instance_type = pools[index].instance_type  # read before the earlier pools', as the pools are read in turn
    earlier = [i for i, other in enumerate(pools[:index]) if other.instance_type == instance_type]
    if earlier:
        yield (
            (*path, "instance_pools", index, "instance_type"),
            f"{instance_type} is already pool {earlier[0]}; each type once",
        )


@rule_check("OG255", "each pool has its own priority")
def pool_priority_once(serving: Serving, path: PathT, index: int) -> Iterator[Found]:
    """Pool `index` (of two or more) has a priority no earlier pool has, checked one pool at a time.

    Why: the API takes priorities 1-5 (botocore's InstancePoolPriority); whether it accepts ties is not documented,
    so the order is made explicit: each priority once.
    """
    pools = serving.instance_pools
    if pools is None or len(pools) < 2:
        return
    priority = pools[index].priority  # read before the earlier pools', as the pools are read in turn
    earlier = [i for i, other in enumerate(pools[:index]) if other.priority == priority]
    if earlier:
        yield (
            (*path, "instance_pools", index, "priority"),
            f"priority {priority} is already pool {earlier[0]}'s; give each pool its own priority, 1 to {len(pools)}",
        )


@rule_check("OG256", "pool priorities run 1 to N without gaps")
def pool_priorities_without_gaps(serving: Serving, path: PathT) -> Iterator[Found]:
    """The priorities of two or more pools, each once, are 1 to N, N the number of pools (a tie is OG255's).

    Why: whether the API accepts gaps is not documented (botocore's InstancePoolPriority is 1-5), so the order is
    made explicit: 1..N.
    """
    pools = serving.instance_pools
    if pools is None or len(pools) < 2:
        return
    priorities = {pool.priority for pool in pools}
    missing = sorted(set(range(1, len(pools) + 1)) - priorities)
    if missing and len(priorities) == len(pools):
        yield (
            (*path, "instance_pools"),
            f"priorities must be 1 to {len(pools)} without gaps; {', '.join(map(str, missing))} is missing",
        )


def adapter_problems(team: TeamConfig) -> list[Problem]:
    """Each adapter an archive, each name once, adapter by adapter."""
    problems: list[Problem] = []
    for index in range(len(team.adapters)):
        problems += adapter_archive(team, index)
        problems += adapter_name_unique(team, index)
    return problems


@rule_check("OG214", "an adapter is a .tar.gz archive")
def adapter_archive(team: TeamConfig, index: int) -> Iterator[Found]:
    """Adapter `index`'s `s3_uri` names a .tar.gz archive, checked one adapter at a time.

    Why: an inference component deploys an adapter from an archive of adapter_config.json and the weights.
    """
    adapter = team.adapters[index]
    if not adapter.s3_uri.endswith(".tar.gz"):
        yield (
            ("adapters", index, "s3_uri"),
            f"an adapter is deployed from a .tar.gz archive (adapter_config.json + weights), got {adapter.s3_uri}",
        )


@rule_check("OG215", "adapter names are unique")
def adapter_name_unique(team: TeamConfig, index: int) -> Iterator[Found]:
    """Adapter `index`'s name is no earlier adapter's, checked one adapter at a time.

    Why: each adapter is an inference component named after it, and inference component names are unique.
    """
    name = team.adapters[index].name  # read before the earlier adapters', as the adapters are read in turn
    if any(other.name == name for other in team.adapters[:index]):
        yield (
            ("adapters", index, "name"),
            f"adapter name '{name}' is used twice; inference component names must be unique",
        )


#: This module's rules, in ID order: optigate.deployment.all_rules collects them (every_rule).
RULES = (
    speculative_model_under_prefix,
    cpu_loras_at_least_loras,
    trtllm_no_gpu_memory_utilization,
    trtllm_no_kv_cache_dtype,
    trtllm_no_weight_only_fp8,
    switch_read_by_family,
    switch_not_below_field,
    timeout_in_range,
    scaling_min_at_most_max,
    scale_to_zero_needs_adapters,
    zero_min_needs_scale_to_zero,
    environment_not_rendered,
    environment_name,
    adapter_archive,
    adapter_name_unique,
    instance_scaling_needs_adapters,
    scale_to_zero_needs_instance_scaling,
    pool_timeout_needs_pools,
    pools_at_least_two,
    pool_primary_first,
    pool_type_once,
    pool_priority_once,
    pool_priorities_without_gaps,
)
