"""The LMI container environment: the one function that turns concrete serving settings into
`OPTION_*` variables (`render_environment`), and vLLM's speculative config.

The settings come from `optigate.deployment.serving.resolve_serving`; this module only renders.
"""

from __future__ import annotations

import json
from typing import Protocol

from optigate.config.models import (
    DraftModelSpeculation,
    Eagle3Speculation,
    EagleTraining,
    LoraLimits,
    NgramSpeculation,
    Serving,
    SpeculativeDecoding,
)

MODEL_DIR = "/opt/ml/model"  # where SageMaker mounts ModelDataSource

QUANTIZE_OPTION = {"fp8": "fp8", "awq": "awq", "gptq": "gptq", "nvfp4": "modelopt_fp4"}
ROLLING_BATCH = {"lmi": "vllm", "lmi-trtllm": "trtllm", "lmi-neuronx": "auto"}


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


#: The first LMI (DJL) version whose vLLM (0.12+) takes the attention backend as the engine argument
#: --attention-backend (OPTION_ATTENTION_BACKEND); older ones read vLLM's VLLM_ATTENTION_BACKEND variable
#: (optigate.deployment.rules.engine_switch_problems says which versions and why).
ATTENTION_BACKEND_ENGINE_ARG_VERSION = (0, 36, 0)


def render_engine_switches(serving: Serving, image_version: str) -> dict[str, str]:
    """The vLLM engine switches of `serving` as LMI passes them to vLLM: `OPTION_<ENGINE_ARG>` for an EngineArgs
    field (vllm_user_guide.md in deepjavalibrary/djl-serving, "Advanced vLLM Configurations"); a switch left at
    vLLM's default renders nothing."""
    env: dict[str, str] = {}
    if serving.enforce_eager:
        env["OPTION_ENFORCE_EAGER"] = "true"
    if serving.enable_expert_parallel:
        env["OPTION_ENABLE_EXPERT_PARALLEL"] = "true"
    if serving.max_num_batched_tokens is not None:
        # LMI's own name for vLLM's max_num_batched_tokens (documented since LMI 0.24.0).
        env["OPTION_MAX_ROLLING_BATCH_PREFILL_TOKENS"] = str(serving.max_num_batched_tokens)
    if serving.attention_backend is not None:
        engine_arg = tuple(int(p) for p in image_version.split(".")) >= ATTENTION_BACKEND_ENGINE_ARG_VERSION
        env["OPTION_ATTENTION_BACKEND" if engine_arg else "VLLM_ATTENTION_BACKEND"] = serving.attention_backend
    return env


def render_environment(resolved: LmiSettings, model_prefix: str) -> dict[str, str]:
    """The container environment for the LMI family of `resolved` (sorted, all strings)."""
    serving = resolved.serving
    family = resolved.image_family
    env: dict[str, str] = {
        "OPTION_ROLLING_BATCH": ROLLING_BATCH[family],
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
        env.update(render_engine_switches(serving, resolved.image_version))
    elif family == "lmi-trtllm":
        env["OPTION_MAX_INPUT_LEN"] = str(resolved.max_model_len)
    elif family == "lmi-neuronx":
        env["OPTION_N_POSITIONS"] = str(resolved.max_model_len)
    if serving.quantization is not None:
        env["OPTION_QUANTIZE"] = QUANTIZE_OPTION[serving.quantization]
    env.update(serving.environment)
    return dict(sorted(env.items()))
