"""From a validated team config to concrete serving settings and the LMI container environment.

`resolve_serving` fills every value the user left unset (and records why, for the synth summary);
`render_environment` is the one function that turns settings into `OPTION_*` variables.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field

from optigate.config.models import (
    TIMEOUT_MAX_SECONDS,
    TIMEOUT_MIN_SECONDS,
    DraftModelSpeculation,
    Eagle3Speculation,
    LoraLimits,
    NgramSpeculation,
    Serving,
    SpeculativeDecoding,
    TeamConfig,
)
from optigate.plan import catalog
from optigate.plan.team import derive_settings
from optigate.serving import images

MODEL_DIR = "/opt/ml/model"  # where SageMaker mounts ModelDataSource
DEFAULT_GPU_MEMORY_UTILIZATION = 0.9
DEFAULT_MAX_BATCH_SIZE = 32
DEFAULT_MAX_MODEL_LEN_CAP = 8192  # without a plan, never default to a 128k context nobody can batch

# Timeouts sized to the weights: S3 → instance at a conservative ~100 MB/s per GB-bucket plus load,
# compilation and CUDA-graph capture. 8B bf16 (16 GB): 760 s / 840 s; 70B bf16 (141 GB): 2010 s / 2715 s.
DOWNLOAD_SECONDS_BASE, DOWNLOAD_SECONDS_PER_GB = 600, 10
STARTUP_SECONDS_BASE, STARTUP_SECONDS_PER_GB = 600, 15

QUANTIZE_OPTION = {"fp8": "fp8", "awq": "awq", "gptq": "gptq", "nvfp4": "modelopt_fp4"}
ROLLING_BATCH = {"lmi": "vllm", "lmi-trtllm": "trtllm", "lmi-neuronx": "auto"}
WEIGHT_BYTES = {None: 2.0, "fp8": 1.0, "awq": 0.5, "gptq": 0.5, "nvfp4": 0.5}


@dataclass(frozen=True)
class ResolvedServing:
    """Every serving value concrete, plus notes on what optigate chose and why."""

    serving: Serving
    image_family: str
    image_version: str
    tensor_parallel_degree: int
    max_model_len: int
    max_batch_size: int
    gpu_memory_utilization: float
    lora: LoraLimits | None
    weights_gb: float
    model_data_download_timeout_seconds: int
    container_startup_health_check_timeout_seconds: int
    notes: tuple[str, ...] = field(default_factory=tuple)


def _clamp_timeout(seconds: float) -> int:
    return int(min(TIMEOUT_MAX_SECONDS, max(TIMEOUT_MIN_SECONDS, math.ceil(seconds / 10) * 10)))


def sized_timeouts(weights_gb: float) -> tuple[int, int]:
    """(download, startup health check) seconds for a model with this many GB of weights."""
    download = _clamp_timeout(DOWNLOAD_SECONDS_BASE + DOWNLOAD_SECONDS_PER_GB * weights_gb)
    startup = _clamp_timeout(STARTUP_SECONDS_BASE + STARTUP_SECONDS_PER_GB * weights_gb)
    return download, startup


def architecture_of(team: TeamConfig):
    from optigate.plan.team import architecture_for

    return architecture_for(team.model.architecture)


def parameter_total(team: TeamConfig) -> int:
    """Published count when the team states it, else computed from the architecture."""
    spec = team.model.architecture
    if not isinstance(spec, str) and spec.num_parameters:
        return spec.num_parameters
    return architecture_of(team).parameter_count().total


def resolve_serving(team: TeamConfig, serving: Serving | None = None) -> ResolvedServing:
    """Concrete settings for `serving` (default: the team's production serving block)."""
    serving = serving or team.serving
    notes: list[str] = []
    instance = catalog.get_instance(serving.instance_type)
    arch = architecture_of(team)
    family = serving.container.family
    version = serving.container.version or images.DEFAULT_VERSION[family]

    if instance.is_neuron:
        # The planner's memory model is not validated on Neuron: fixed defaults, said so.
        tp = serving.tensor_parallel_degree or instance.tp_units
        max_model_len = serving.max_model_len or min(arch.max_position_embeddings, DEFAULT_MAX_MODEL_LEN_CAP)
        max_batch_size = serving.max_batch_size or DEFAULT_MAX_BATCH_SIZE
        gpu_memory_utilization = serving.gpu_memory_utilization or DEFAULT_GPU_MEMORY_UTILIZATION
        if serving.max_model_len is None or serving.max_batch_size is None:
            notes.append(f"Neuron: max_model_len={max_model_len}, max_batch_size={max_batch_size} are defaults, not planned")
    else:
        derived = derive_settings(team, serving)
        tp, max_model_len = derived.tensor_parallel_degree, derived.max_model_len
        max_batch_size, gpu_memory_utilization = derived.max_batch_size, derived.gpu_memory_utilization
        notes += derived.notes

    lora = serving.lora
    if lora is None and team.adapters:
        count = len(team.adapters)
        lora = LoraLimits(max_loras=min(count, 8), max_cpu_loras=max(count, min(count, 8)))
        notes.append(f"lora: max_loras={lora.max_loras}, max_cpu_loras={lora.max_cpu_loras} for {count} adapters")

    weights_gb = parameter_total(team) * WEIGHT_BYTES[serving.quantization] / 1e9
    download, startup = sized_timeouts(weights_gb)
    if serving.model_data_download_timeout_seconds is not None:
        download = serving.model_data_download_timeout_seconds
    else:
        notes.append(f"model_data_download_timeout={download}s for {weights_gb:.0f} GB of weights")
    if serving.container_startup_health_check_timeout_seconds is not None:
        startup = serving.container_startup_health_check_timeout_seconds
    else:
        notes.append(f"container_startup_health_check_timeout={startup}s for {weights_gb:.0f} GB of weights")

    return ResolvedServing(
        serving=serving,
        image_family=family,
        image_version=version,
        tensor_parallel_degree=tp,
        max_model_len=max_model_len,
        max_batch_size=max_batch_size,
        gpu_memory_utilization=gpu_memory_utilization,
        lora=lora,
        weights_gb=weights_gb,
        model_data_download_timeout_seconds=download,
        container_startup_health_check_timeout_seconds=startup,
        notes=tuple(notes),
    )


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


def render_environment(resolved: ResolvedServing, model_prefix: str) -> dict[str, str]:
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
        if serving.speculative_decoding is not None:
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
    if serving.quantization is not None:
        env["OPTION_QUANTIZE"] = QUANTIZE_OPTION[serving.quantization]
    env.update(serving.environment)
    return dict(sorted(env.items()))
