"""The LMI container environment: the one function that turns concrete serving settings into
`OPTION_*` variables (`render_environment`), and vLLM's speculative config.

The settings come from `optigate.deployment.serving.resolve_serving`; this module only renders.
"""

from __future__ import annotations

import json
from typing import Protocol

from optigate.config.lmi_options import options_set, render_value
from optigate.config.models import (
    DraftModelSpeculation,
    Eagle3Speculation,
    EagleTraining,
    LoraLimits,
    NgramSpeculation,
    Serving,
    SpeculativeDecoding,
)
from optigate.serving import images
from optigate.serving.engine_mode import engine_mode

MODEL_DIR = "/opt/ml/model"  # where SageMaker mounts ModelDataSource

QUANTIZE_OPTION = {"fp8": "fp8", "awq": "awq", "gptq": "gptq", "nvfp4": "modelopt_fp4"}


class LmiSettings(Protocol):
    """What rendering reads: a serving block with every value made concrete (ResolvedServing).
    Read-only properties, so a frozen dataclass satisfies it."""

    @property
    def serving(self) -> Serving: ...
    @property
    def image_family(self) -> str: ...
    @property
    def tensor_parallel_degree(self) -> int: ...
    @property
    def max_model_len(self) -> int: ...
    @property
    def max_batch_size(self) -> int: ...
    @property
    def gpu_memory_utilization(self) -> float: ...
    @property
    def lora(self) -> LoraLimits | None: ...
    @property
    def image_version(self) -> str: ...
    @property
    def quantize(self) -> str | None: ...


def container_path(model_prefix: str, uri: str) -> str:
    """Where an S3 object under the model prefix appears inside the container."""
    relative = uri.rstrip("/")[len(model_prefix.rstrip("/")) :].lstrip("/")
    return f"{MODEL_DIR}/{relative}" if relative else MODEL_DIR


def speculative_config(speculative: SpeculativeDecoding, model_prefix: str) -> dict:
    """vLLM's speculative_config as LMI v15+ reads it from OPTION_SPECULATIVE_CONFIG."""
    config: dict = {"num_speculative_tokens": speculative.num_speculative_tokens}
    if isinstance(speculative, NgramSpeculation):
        config["method"] = speculative.method
        if speculative.method == "ngram":
            config["prompt_lookup_max"] = speculative.prompt_lookup_max
            config["prompt_lookup_min"] = speculative.prompt_lookup_min
    elif isinstance(speculative, DraftModelSpeculation):
        config.update(method="draft_model", model=container_path(model_prefix, speculative.model_s3_uri))
    elif isinstance(speculative, Eagle3Speculation):
        config.update(method="eagle3", model=container_path(model_prefix, speculative.model_s3_uri))
    return config


def render_engine_switches(serving: Serving, family: str, image_version: str) -> dict[str, str]:
    """The typed engine options `serving` sets, under the variable the LMI container of `family` and `image_version`
    reads for each (the table: optigate.config.lmi_options); an option left at vLLM's default renders nothing."""
    read = [(option, value) for _, option, value in options_set(serving) if family in option.families]
    running = images.version_tuple(image_version) if read else ()
    return {option.environment_name(running): render_value(value) for option, value in read}


def render_environment(resolved: LmiSettings, model_prefix: str) -> dict[str, str]:
    """The container environment for the LMI family of `resolved` (sorted, all strings)."""
    serving = resolved.serving
    family = resolved.image_family
    env: dict[str, str] = {
        # async mode or the rolling-batch handler, as the version's recommender makes it (optigate.serving.engine_mode)
        **engine_mode(family, resolved.image_version).environment,
        "OPTION_TENSOR_PARALLEL_DEGREE": str(resolved.tensor_parallel_degree),
        "OPTION_MAX_ROLLING_BATCH_SIZE": str(resolved.max_batch_size),
    }
    if family == "lmi":
        env["OPTION_MAX_MODEL_LEN"] = str(resolved.max_model_len)
        env["OPTION_GPU_MEMORY_UTILIZATION"] = f"{resolved.gpu_memory_utilization:g}"
        if serving.kv_cache_dtype != "auto":
            env["OPTION_KV_CACHE_DTYPE"] = serving.kv_cache_dtype
        # A head the gate trains is not there yet: the gate renders its OPTION_SPECULATIVE_CONFIG at run time, from
        # the trained head (optigate/lambdas/stage_candidate), into the candidate it proves and records.
        if serving.speculative_decoding is not None and not isinstance(serving.speculative_decoding, EagleTraining):
            env["OPTION_SPECULATIVE_CONFIG"] = json.dumps(
                speculative_config(serving.speculative_decoding, model_prefix), sort_keys=True, separators=(",", ":")
            )
        if resolved.lora is not None:
            env["OPTION_ENABLE_LORA"] = "true"
            env["OPTION_MAX_LORAS"] = str(resolved.lora.max_loras)
            env["OPTION_MAX_LORA_RANK"] = str(resolved.lora.max_lora_rank)
            env["OPTION_MAX_CPU_LORAS"] = str(resolved.lora.max_cpu_loras or resolved.lora.max_loras)
    elif family == "lmi-trtllm":
        env["OPTION_MAX_INPUT_LEN"] = str(resolved.max_model_len)
    elif family == "lmi-neuronx":
        env["OPTION_N_POSITIONS"] = str(resolved.max_model_len)
    env.update(render_engine_switches(serving, family, resolved.image_version))
    if resolved.quantize is not None:  # weights stored quantized are served as stored: vLLM reads their config
        env["OPTION_QUANTIZE"] = QUANTIZE_OPTION[resolved.quantize]
    env.update(serving.environment)
    return dict(sorted(env.items()))
