"""New adapter versions in a rehearsal: the archive of each adapter the candidate changes (`gate.candidate.adapters`),
put where its URI says in the emulated S3 before the gate runs, so the gate's own check
(optigate/lambdas/stage_candidate, `check_adapters`) reads it as it would in the account.

An archive is a local .tar.gz file, a local folder packed as one (its files at the archive's top level, as PEFT's
`save_pretrained` writes them: adapter_config.json, adapter_model.safetensors), or one generated to match what the
candidate declares (`generated_archive`): the rank at `serving.lora.max_lora_rank`, the team's base model by its
Hugging Face id (a local path when the team's model names none), and LoRA weights shaped for the base's
architecture, in its first and last decoder layers. Generated weights are zeros: the emulated endpoints never load
them; only the gate's archive check reads them, and it compares what optigate.deployment.adapter_archive compares
(hidden_size, intermediate_size, the layer indices).
"""

from __future__ import annotations

import io
import json
import struct
import tarfile
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

from optigate.deployment.adapter_archive import ADAPTER_CONFIG, SAFETENSORS, AdapterLimits

#: PEFT records the path the base was loaded from when it was not a Hub id (SageMaker training's channel).
LOCAL_BASE = "/opt/ml/input/data/model"
_MLP = ("gate_proj", "up_proj", "down_proj")


def candidate_adapters(deployment: Any) -> dict[str, str]:
    """Each adapter the gate's candidate changes, by name: the S3 URI of its new version, in the environment's
    region (empty: the candidate serves the team file's adapters)."""
    plan = deployment.gate
    components = plan.components if plan is not None else None
    return dict(components.approved_adapters) if components is not None else {}


def _tensors(limits: AdapterLimits) -> dict[str, list[int]]:
    """LoRA weights as PEFT names and shapes them (lora_A [r, in], lora_B [out, r]) in the base's first and last
    decoder layers: the attention's q_proj and o_proj, and the MLP's projections where the base's MLP takes LoRA
    and its intermediate_size is known."""
    arch, rank = limits.architecture, limits.max_lora_rank
    hidden, intermediate = arch.hidden_size, arch.intermediate_size
    features = {"q_proj": (hidden, hidden), "o_proj": (hidden, hidden)}
    if intermediate and set(_MLP) <= limits.modules:  # not an MoE's (ATTENTION_MODULES only)
        features |= {"gate_proj": (hidden, intermediate), "up_proj": (hidden, intermediate)}
        features["down_proj"] = (intermediate, hidden)
    tensors: dict[str, list[int]] = {}
    for layer in sorted({0, arch.num_hidden_layers - 1}):
        for module, (features_in, features_out) in features.items():
            prefix = f"base_model.model.model.layers.{layer}.{'mlp' if module in _MLP else 'self_attn'}.{module}"
            tensors[f"{prefix}.lora_A.weight"] = [rank, features_in]
            tensors[f"{prefix}.lora_B.weight"] = [features_out, rank]
    return tensors


def _safetensors(tensors: dict[str, list[int]]) -> bytes:
    """A safetensors file of zero BF16 tensors: the header's length (8 bytes, little-endian), its JSON, the data."""
    header: dict[str, Any] = {"__metadata__": {"format": "pt"}}
    offset = 0
    for name, shape in tensors.items():
        size = 2 * shape[0] * shape[1]
        header[name] = {"dtype": "BF16", "shape": shape, "data_offsets": [offset, offset + size]}
        offset += size
    encoded = json.dumps(header).encode()
    return struct.pack("<Q", len(encoded)) + encoded + bytes(offset)


def _tar_gz(files: Mapping[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz", compresslevel=6) as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o644
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def generated_archive(limits: AdapterLimits) -> bytes:
    """A LoRA adapter archive the candidate can serve: rank `limits.max_lora_rank`, the base by its first Hugging
    Face id (else LOCAL_BASE), weights shaped for `limits.architecture` (see the module's docstring)."""
    tensors = _tensors(limits)
    modules = sorted({name.split(".")[-3] for name in tensors})
    config = {
        "peft_type": "LORA",
        "task_type": "CAUSAL_LM",
        "base_model_name_or_path": limits.base_models[0] if limits.base_models else LOCAL_BASE,
        "r": limits.max_lora_rank,
        "lora_alpha": 2 * limits.max_lora_rank,
        "lora_dropout": 0.05,
        "target_modules": modules,
        "modules_to_save": None,
        "bias": "none",
        "use_dora": False,
        "use_rslora": False,
        "rank_pattern": {},
        "alpha_pattern": {},
    }
    return _tar_gz({ADAPTER_CONFIG: json.dumps(config, indent=2).encode(), SAFETENSORS: _safetensors(tensors)})


def packed_folder(folder: Path) -> bytes:
    """A folder as an adapter archive: every entry under it by its path relative to the folder (links and all,
    as they are: the gate's check refuses what vLLM's loader would)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz", compresslevel=6) as tar:
        for path in sorted(folder.rglob("*")):
            tar.add(path, arcname=path.relative_to(folder).as_posix(), recursive=False)
    return buffer.getvalue()


def local_archive(path: Path) -> bytes:
    """The archive at `path` (a file, as it is) or packed from it (a folder); ValueError naming what is wrong."""
    if path.is_dir():
        if not any(path.iterdir()):
            raise ValueError(f"{path} is an empty folder: no adapter to pack")
        return packed_folder(path)
    if not path.is_file():
        raise ValueError(f"{path}: no such file or folder")
    return path.read_bytes()


def parse_adapter_options(values: Collection[str]) -> dict[str, Path]:
    """`--adapter NAME=PATH` options as {name: path}; ValueError for one without a name and a path, or a name given
    twice."""
    chosen: dict[str, Path] = {}
    for value in values:
        name, sign, path = value.partition("=")
        if not sign or not name.strip() or not path.strip():
            raise ValueError(f"--adapter {value}: give NAME=PATH, e.g. --adapter reply=./reply-v3.tar.gz")
        if name.strip() in chosen:
            raise ValueError(f"--adapter {name.strip()} is given twice")
        chosen[name.strip()] = Path(path.strip()).expanduser()
    return chosen


def adapter_seeds(
    deployment: Any, supplied: Mapping[str, Path], left_out: Collection[str] = ()
) -> tuple[dict[str, bytes], dict[str, str]]:
    """What a rehearsal puts in the emulated S3 for the candidate's new adapter versions: (S3 URI -> archive, and
    for each adapter what its archive is, to print). Each changed adapter gets the archive `supplied` for it, else a
    generated one; those `left_out` get none (the gate then refuses the missing archive). ValueError for a name the
    candidate does not change, with the names it does."""
    changed = candidate_adapters(deployment)
    unknown = sorted((set(supplied) | set(left_out)) - set(changed))
    if unknown:
        changes = ", ".join(sorted(changed)) or "none (its gate.candidate.adapters is not set)"
        raise ValueError(
            f"{', '.join(unknown)}: team {deployment.team.team}'s candidate brings no new version of it; it changes: "
            f"{changes}"
        )
    both = sorted(set(supplied) & set(left_out))
    if both:
        raise ValueError(f"{', '.join(both)}: both supplied (--adapter) and left out (--missing-adapter)")
    seeds: dict[str, bytes] = {}
    said: dict[str, str] = {}
    for name, uri in sorted(changed.items()):
        if name in left_out:
            said[name] = f"{uri}: left out (the gate must refuse it as missing)"
            continue
        if name in supplied:
            path = supplied[name]
            seeds[uri] = local_archive(path)
            kind = "packed from folder" if path.is_dir() else "from"
            said[name] = f"{uri}: {kind} {path} ({len(seeds[uri]):,} bytes)"
        else:
            limits = deployment.resolved_team.adapter_limits
            seeds[uri] = generated_archive(limits)
            base = limits.base_models[0] if limits.base_models else LOCAL_BASE
            said[name] = f"{uri}: generated (rank {limits.max_lora_rank}, base {base}; --adapter {name}=PATH for yours)"
    return seeds, said
