"""The weights as stored at a model's source: known from the catalog for a Hugging Face id, read from a
config.json's `quantization_config` / `torch_dtype`, and sized in bytes (what an endpoint downloads).

Pure logic: the file is read by the caller (optigate.deployment.checkpoint); nothing is fetched from a hub.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from typing import Any

from optigate.plan.architecture import ModelArchitecture, builtin_entries
from optigate.plan.memory import weight_footprint

#: config.json's torch_dtype (or `dtype`, its newer name in transformers) -> the weights as stored.
DTYPES = {"bfloat16": "bf16", "float16": "fp16", "half": "fp16", "float32": "fp32", "float": "fp32"}
#: quantization_config.quant_method -> the weights as stored, where the method names one format
#: (vLLM reads the same key: vllm/config/model.py, ModelConfig._verify_quantization).
QUANT_METHODS = {"awq": "awq", "gptq": "gptq", "fp8": "fp8", "fbgemm_fp8": "fp8"}
#: ModelOpt's quant_algo (vLLM maps FP8 -> modelopt, NVFP4 -> modelopt_fp4: ModelConfig._parse_quant_hf_config).
MODELOPT_ALGOS = {"FP8": "fp8", "NVFP4": "nvfp4"}


@cache
def catalog_weights() -> dict[str, tuple[str, str]]:
    """Every Hugging Face id in the catalog (lower case) -> (the weights as stored, where that was read)."""
    known: dict[str, tuple[str, str]] = {}
    for entry in builtin_entries().values():
        dtype = DTYPES.get(str(entry.get("config", {}).get("torch_dtype", "")).lower())
        if entry.get("hf_repo") and dtype:
            known[entry["hf_repo"].lower()] = (dtype, entry.get("source", ""))
        for checkpoint in entry.get("checkpoints", ()):
            known[checkpoint["hf_repo"].lower()] = (checkpoint["weights"], checkpoint["source"])
    return known


def weights_in_catalog(model_id: str) -> tuple[str, str] | None:
    """(weights as stored, source) of a Hugging Face id the catalog knows, else None (ids are case-insensitive)."""
    return catalog_weights().get(model_id.lower())


def weights_of_config(config: Mapping[str, Any]) -> str | None:
    """The weights as stored that a config.json describes, None when optigate cannot tell (then the team says)."""
    quantization = config.get("quantization_config")
    if quantization is None:
        dtype = config.get("torch_dtype", config.get("dtype"))
        return DTYPES.get(str(dtype).lower()) if dtype is not None else None
    if not isinstance(quantization, Mapping):
        return None
    method = str(quantization.get("quant_method", "")).lower().replace("_", "-")
    if method.replace("-", "_") in QUANT_METHODS:
        return QUANT_METHODS[method.replace("-", "_")]
    if method == "modelopt":
        return MODELOPT_ALGOS.get(str(quantization.get("quant_algo", "")).upper())
    if method == "compressed-tensors":
        return _compressed_tensors_weights(quantization)
    return None


def _compressed_tensors_weights(quantization: Mapping[str, Any]) -> str | None:
    """llm-compressor's checkpoints name one scheme per config group: 8-bit float weights are FP8, 4-bit float in
    groups of 16 NVFP4 (its `nvfp4-pack-quantized` format); integer schemes have no name in optigate's vocabulary."""
    kinds = set()
    for group in (quantization.get("config_groups") or {}).values():
        weights = group.get("weights") if isinstance(group, Mapping) else None
        if not isinstance(weights, Mapping):
            return None
        kinds.add((weights.get("type"), weights.get("num_bits")))
    if kinds == {("float", 8)}:
        return "fp8"
    if kinds == {("float", 4)} and quantization.get("format") == "nvfp4-pack-quantized":
        return "nvfp4"
    return None


def stored_gb(arch: ModelArchitecture, weights: str) -> float:
    """GB an endpoint downloads for `arch` stored as `weights` (quantized layers with their scales; fp32 is
    twice the 16-bit size)."""
    if weights == "fp32":
        return 2 * weight_footprint(arch, "bf16").total / 1e9
    return weight_footprint(arch, weights).total / 1e9
