"""Real adapter .tar.gz files for the tests: PEFT's adapter_config.json and a safetensors file whose header names
LoRA tensors as PEFT saves them (base_model.model.<module>.lora_A.weight, shape [r, in])."""

from __future__ import annotations

import io
import json
import struct
import tarfile
from typing import Any

from optigate.deployment.adapter_archive import DENSE_DECODER_MODULES, AdapterLimits

BASE = "Qwen/Qwen2.5-7B-Instruct"
LIMITS = AdapterLimits(max_lora_rank=32, base_models=(BASE,), modules=DENSE_DECODER_MODULES)
TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj"]


def adapter_config(**changes: Any) -> dict[str, Any]:
    """A LoraConfig as PEFT saves it (the fields vLLM reads; others as PEFT's defaults)."""
    config: dict[str, Any] = {
        "peft_type": "LORA",
        "task_type": "CAUSAL_LM",
        "base_model_name_or_path": BASE,
        "r": 16,
        "lora_alpha": 32,
        "lora_dropout": 0.05,
        "target_modules": TARGETS,
        "modules_to_save": None,
        "bias": "none",
        "use_dora": False,
        "use_rslora": False,
        "rank_pattern": {},
        "alpha_pattern": {},
    }
    config.update(changes)
    return config


def safetensors(tensors: dict[str, list[int]]) -> bytes:
    """A safetensors file: 8-byte little-endian header length, the JSON header, then the (zero) data."""
    header: dict[str, Any] = {"__metadata__": {"format": "pt"}}
    offset = 0
    for name, shape in tensors.items():
        size = 2 * shape[0] * shape[1]  # BF16
        header[name] = {"dtype": "BF16", "shape": shape, "data_offsets": [offset, offset + size]}
        offset += size
    encoded = json.dumps(header).encode()
    return struct.pack("<Q", len(encoded)) + encoded + b"\0" * offset


def lora_tensors(rank: int = 16, modules: list[str] = TARGETS, layers: int = 2) -> dict[str, list[int]]:
    tensors = {}
    for layer in range(layers):
        for module in modules:
            prefix = f"base_model.model.model.layers.{layer}.self_attn.{module}"
            tensors[f"{prefix}.lora_A.weight"] = [rank, 8]
            tensors[f"{prefix}.lora_B.weight"] = [8, rank]
    return tensors


def archive(files: dict[str, bytes], *, links: dict[str, str] | None = None) -> bytes:
    """A .tar.gz with `files` (name -> content) and symbolic `links` (name -> target)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        for name, target in (links or {}).items():
            info = tarfile.TarInfo(name)
            info.type = tarfile.SYMTYPE
            info.linkname = target
            tar.addfile(info)
    return buffer.getvalue()


def adapter(config: dict[str, Any] | None = None, tensors: dict[str, list[int]] | None = None, **extra: bytes) -> bytes:
    """A well-formed adapter archive, with `config` / `tensors` replaced and `extra` files added."""
    files = {
        "adapter_config.json": json.dumps(config if config is not None else adapter_config()).encode(),
        "adapter_model.safetensors": safetensors(tensors if tensors is not None else lora_tensors()),
        **extra,
    }
    return archive(files)
