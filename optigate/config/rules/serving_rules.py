"""Serving rules: one serving block (production, shadow or gate candidate) alone, and the adapters.

They need no catalog, image table or plan (those are `optigate.deployment.rules`).
"""

from __future__ import annotations

import re
from collections.abc import Callable

from optigate.config.lmi_options import NOT_READ_BY, NotBelowField, options_set, rendered_names
from optigate.config.models import TIMEOUT_MAX_SECONDS, TIMEOUT_MIN_SECONDS, Serving, TeamConfig
from optigate.config.rules.registry import PathT, Problem, Rule, rule

SPECULATIVE_MODEL_UNDER_PREFIX = rule("OG201", "a speculative draft or head lies under the model's S3 prefix")
CPU_LORAS_AT_LEAST_LORAS = rule("OG202", "lora.max_cpu_loras is at least lora.max_loras")
TRTLLM_NO_GPU_MEMORY_UTILIZATION = rule("OG203", "lmi-trtllm takes no gpu_memory_utilization")
TRTLLM_NO_KV_CACHE_DTYPE = rule("OG204", "lmi-trtllm takes no kv_cache_dtype other than auto")
TRTLLM_NO_WEIGHT_ONLY_FP8 = rule("OG205", "lmi-trtllm takes no allow_weight_only_fp8")
SWITCH_READ_BY_FAMILY = rule("OG206", "a typed vLLM engine switch is set only on a container family that reads it")
SWITCH_NOT_BELOW_FIELD = rule("OG207", "a typed vLLM engine switch is not below the field vLLM requires it to reach")
TIMEOUT_IN_RANGE = rule("OG208", "model download and startup timeouts lie within SageMaker's 60-3600 s")
SCALING_MIN_AT_MOST_MAX = rule("OG209", "autoscaling.min_capacity is at most max_capacity")
SCALE_TO_ZERO_NEEDS_ADAPTERS = rule("OG210", "scale_to_zero only with adapters (inference components)")
ZERO_MIN_NEEDS_SCALE_TO_ZERO = rule("OG211", "autoscaling.min_capacity 0 only with scale_to_zero")
ENVIRONMENT_NOT_RENDERED = rule("OG212", "serving.environment sets no variable optigate renders from a field")
ENVIRONMENT_NAME = rule("OG213", "serving.environment names are upper-case letters, digits and underscores")
ADAPTER_ARCHIVE = rule("OG214", "an adapter is a .tar.gz archive")
ADAPTER_NAME_UNIQUE = rule("OG215", "adapter names are unique")
INSTANCE_SCALING_NEEDS_ADAPTERS = rule("OG216", "managed_instance_scaling only with adapters (inference components)")
SCALE_TO_ZERO_NEEDS_INSTANCE_SCALING = rule("OG217", "scale_to_zero with managed instance scaling (not set false)")
POOL_TIMEOUT_NEEDS_POOLS = rule("OG251", "instance_provision_timeout_seconds only with instance_pools")
POOLS_AT_LEAST_TWO = rule("OG252", "instance_pools lists at least two pools")
POOL_PRIMARY_FIRST = rule("OG253", "the first pool is serving.instance_type with priority 1")
POOL_TYPE_ONCE = rule("OG254", "each instance type is one pool")
POOL_PRIORITY_ONCE = rule("OG255", "each pool has its own priority")
POOL_PRIORITIES_WITHOUT_GAPS = rule("OG256", "pool priorities run 1 to N without gaps")

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


# Over 80 lines: the serving rules in one pass over one block (one function per rule is issue 38's).
def check_serving(serving: Serving, path: PathT, *, has_adapters: bool, artifact_uri: str) -> list[Problem]:
    """Rules on one serving block (the production variant, or a candidate) that need no catalog."""
    problems: list[Problem] = []

    def add(broken: Rule, sub: PathT, message: str) -> None:
        problems.append(Problem((*path, *sub), message, broken))

    speculative = serving.speculative_decoding
    model_uri = getattr(speculative, "model_s3_uri", None)
    if (
        speculative is not None
        and model_uri is not None
        and not model_uri.rstrip("/").startswith(artifact_uri.rstrip("/") + "/")
    ):
        add(
            SPECULATIVE_MODEL_UNDER_PREFIX,
            ("speculative_decoding", "model_s3_uri"),
            f"must lie under the model's prefix {artifact_uri} "
            "(CloudFormation cannot attach a second model data source); "
            f"copy the {speculative.method} weights to e.g. {artifact_uri.rstrip('/')}/{speculative.method}/",
        )

    lora = serving.lora
    if lora is not None and lora.max_cpu_loras is not None and lora.max_cpu_loras < lora.max_loras:
        add(
            CPU_LORAS_AT_LEAST_LORAS,
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
                TIMEOUT_IN_RANGE,
                (key,),
                f"{value} s is outside SageMaker's range {TIMEOUT_MIN_SECONDS}-{TIMEOUT_MAX_SECONDS} s; "
                "leave it unset to size it to the model",
            )

    scaling = serving.autoscaling
    if scaling is not None:
        if scaling.min_capacity > scaling.max_capacity:
            add(
                SCALING_MIN_AT_MOST_MAX,
                ("autoscaling", "min_capacity"),
                f"{scaling.min_capacity} exceeds max_capacity ({scaling.max_capacity})",
            )
        if scaling.scale_to_zero and not has_adapters:
            add(
                SCALE_TO_ZERO_NEEDS_ADAPTERS,
                ("autoscaling", "scale_to_zero"),
                "scale to zero works only for inference components; add adapters (which "
                "deploy the model as an inference component) or set min_capacity >= 1",
            )
        if scaling.min_capacity == 0 and not scaling.scale_to_zero:
            add(
                ZERO_MIN_NEEDS_SCALE_TO_ZERO,
                ("autoscaling", "min_capacity"),
                "0 needs scale_to_zero: true (and adapters, which deploy inference components)",
            )
        if scaling.managed_instance_scaling is not None and not has_adapters:
            add(
                INSTANCE_SCALING_NEEDS_ADAPTERS,
                ("autoscaling", "managed_instance_scaling"),
                "managed instance scaling adds instances for inference component copies, and this endpoint is "
                "model-backed (no adapters): its scalable target scales instances already; remove "
                "managed_instance_scaling",
            )
        if scaling.scale_to_zero and scaling.managed_instance_scaling is False:
            add(
                SCALE_TO_ZERO_NEEDS_INSTANCE_SCALING,
                ("autoscaling", "managed_instance_scaling"),
                "scale to zero removes the instances with the last copy, which only managed instance scaling does "
                "(its MinInstanceCount 0); remove managed_instance_scaling: false or scale_to_zero",
            )

    problems += instance_pool_problems(serving, path)
    for key in serving.environment:
        if key in RENDERED_OPTIONS:
            add(
                ENVIRONMENT_NOT_RENDERED,
                ("environment", key),
                f"{key} is rendered from {RENDERED_OPTIONS[key]}; set that field instead",
            )
        elif not ENV_NAME.fullmatch(key):  # ASCII only: str.isalpha/isupper accept ÄÖ
            add(
                ENVIRONMENT_NAME,
                ("environment", key),
                "environment variable names are upper-case letters, digits and underscores",
            )
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
                    POOL_TIMEOUT_NEEDS_POOLS,
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
                POOLS_AT_LEAST_TWO,
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
                POOL_PRIMARY_FIRST,
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
                    POOL_TYPE_ONCE,
                )
            )
        if pool.priority in seen_priorities:
            problems.append(
                Problem(
                    (*where, index, "priority"),
                    f"priority {pool.priority} is already pool {seen_priorities[pool.priority]}'s; give each pool "
                    f"its own priority, 1 to {len(pools)}",
                    POOL_PRIORITY_ONCE,
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
                POOL_PRIORITIES_WITHOUT_GAPS,
            )
        )
    return problems


def add_trtllm_problems(serving: Serving, add: Callable[[Rule, PathT, str], None]) -> None:
    """Fields the LMI TensorRT-LLM container has no equivalent of: refused rather than dropped.

    LMI's TensorRT-LLM options (trt_llm_user_guide.md in deepjavalibrary/djl-serving) size the KV cache with
    `option.kv_cache_free_gpu_mem_fraction`, a share of the memory *left after the weights* (default 0.95),
    not vLLM's share of all memory, and list no KV-cache dtype; FP8 there is W8A8 only (TensorRT-LLM has no
    weight-only FP8 fallback on A10G/A100).
    """
    if serving.gpu_memory_utilization is not None:
        add(
            TRTLLM_NO_GPU_MEMORY_UTILIZATION,
            ("gpu_memory_utilization",),
            "lmi-trtllm has no gpu_memory_utilization: TensorRT-LLM gives its KV cache a share of the memory left "
            "after the weights (option.kv_cache_free_gpu_mem_fraction, 0.95); remove it, or use container family lmi",
        )
    if serving.kv_cache_dtype != "auto":
        add(
            TRTLLM_NO_KV_CACHE_DTYPE,
            ("kv_cache_dtype",),
            f"{serving.kv_cache_dtype} is not offered by LMI's TensorRT-LLM options; use auto, or container family lmi",
        )
    if serving.allow_weight_only_fp8:
        add(
            TRTLLM_NO_WEIGHT_ONLY_FP8,
            ("allow_weight_only_fp8",),
            "TensorRT-LLM runs FP8 only as W8A8 on GPUs with FP8 tensor cores, never weight-only; "
            "remove it, or use container family lmi",
        )


def add_engine_switch_problems(serving: Serving, add: Callable[[Rule, PathT, str], None]) -> None:
    """Typed engine options (optigate.config.lmi_options) on a container family whose engine does not read them,
    and each option's config checks (vLLM's own constraints across fields)."""
    family = serving.container.family
    for name, option, value in options_set(serving):
        if family not in option.families:
            add(
                SWITCH_READ_BY_FAMILY,
                (name,),
                f"{name} is {option.engine_argument}, which container family {family} does not read "
                f"({NOT_READ_BY[family]}); remove it, or use container family {' or '.join(option.families)}",
            )
            continue
        for check in option.checks:
            if isinstance(check, NotBelowField):
                other = getattr(serving, check.field)
                if other is not None and value < other:
                    add(SWITCH_NOT_BELOW_FIELD, (name,), check.message.format(value=value, other=other))


def adapter_problems(team: TeamConfig) -> list[Problem]:
    """Each adapter an archive, each name once (inference component names are unique)."""
    problems: list[Problem] = []
    names: set[str] = set()
    for index, adapter in enumerate(team.adapters):
        if not adapter.s3_uri.endswith(".tar.gz"):
            problems.append(
                Problem(
                    ("adapters", index, "s3_uri"),
                    "an adapter is deployed from a .tar.gz archive "
                    f"(adapter_config.json + weights), got {adapter.s3_uri}",
                    ADAPTER_ARCHIVE,
                )
            )
        if adapter.name in names:
            problems.append(
                Problem(
                    ("adapters", index, "name"),
                    f"adapter name '{adapter.name}' is used twice; inference component names must be unique",
                    ADAPTER_NAME_UNIQUE,
                )
            )
        names.add(adapter.name)
    return problems
