"""A LoRA adapter archive (.tar.gz) read and checked before any endpoint exists: can the candidate serve it?

Pure: reads a stream or bytes (the stager Lambda downloads the archive, bounded). Reading is bounded and refuses
what a hostile archive can do: too many or too large members, more unpacked bytes than a limit (a tar bomb),
absolute or `..` paths, links and device files. The checks follow what vLLM itself refuses when it loads an
adapter, so a refusal here is one the endpoint would give later, after an hour of staging:

- PEFT's adapter_config.json (peft src/peft/utils/constants.py CONFIG_NAME; the LoraConfig fields `r`,
  `lora_alpha`, `target_modules` (a list, or a string: a regex or "all-linear"), `modules_to_save`, `use_dora`,
  `bias`, `rank_pattern`, and PeftConfig's `base_model_name_or_path`: src/peft/tuners/lora/config.py and
  src/peft/config.py at huggingface/peft 5d602fdbff04c33c1c4de55cda9d4ae1d7cb7e40).
- vLLM's PEFTHelper.validate_legal (vllm/lora/peft_helper.py at vllm-project/vllm
  e745bafffc44744aa601169f8c6f325e47ca7cd5): "LoRA rank {r} is greater than max_lora_rank", "vLLM only
  supports modules_to_save being None." (also for lm_head, vLLM's tests/lora/test_peft_helper.py), "vLLM does not
  yet support DoRA.", "Adapter bias cannot be used without bias_enabled" (LMI sets no bias_enabled). Required
  fields r, lora_alpha, target_modules.
- vLLM's LoRAModel.from_local_checkpoint (vllm/lora/lora_model.py at 0306474e9d1f26d8717aad457b9511f0c9e57d60):
  the weights are adapter_model.safetensors (or .bin/.pt) and "Use safetensor key as a source of truth": every
  tensor's module (the name's last component) must be one the model serves with LoRA, else "expected target
  modules in ... but received ...". vllm/lora/utils.py get_supported_lora_modules: "In vLLM, all linear layers
  support LoRA" (by their last name; packed qkv_proj / gate_up_proj take q/k/v and gate/up).
- The files at the archive's top level: SageMaker's own adapter checks ask "an adapter_config.json file with a
  positive rank (r), and the adapter weight files (.safetensors or .bin)" at the adapter's location
  (https://docs.aws.amazon.com/sagemaker/latest/dg/generative-ai-inference-recommendations-adapters.html); that
  an inference component's ArtifactUrl archive is unpacked as that location is inferred, not documented.
"""

from __future__ import annotations

import io
import json
import posixpath
import re
import struct
import tarfile
import zlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import IO, Any

ADAPTER_CONFIG = "adapter_config.json"  # PEFT's CONFIG_NAME
SAFETENSORS = "adapter_model.safetensors"
WEIGHT_FILES = (SAFETENSORS, "adapter_model.bin", "adapter_model.pt")  # what vLLM loads, in its order

MAX_ARCHIVE_BYTES = 4 * 1024**3  # compressed: what the stager downloads at most
MAX_MEMBER_BYTES = 4 * 1024**3  # one file unpacked (a rank-256 adapter of a 70B model is ~3.5 GB in bf16)
MAX_TOTAL_BYTES = 8 * 1024**3  # every file unpacked: a tar bomb stops here
MAX_MEMBERS = 256
MAX_CONFIG_BYTES = 1024**2
MAX_HEADER_BYTES = 16 * 1024**2  # a safetensors JSON header (the format allows 100 MB; an adapter's is KBs)

#: The linear projections of a dense decoder's attention and MLP (Llama, Qwen2/3, Mistral, Granite in vLLM), and
#: the packed modules vLLM serves them as. Embeddings and lm_head are refused: whether vLLM serves LoRA on them
#: depends on the model class and version, which optigate does not pin per team.
DENSE_DECODER_MODULES = frozenset(
    {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj", "qkv_proj", "gate_up_proj"}
)
#: PEFT's special target_modules value: every linear layer but the output layer (peft LoraConfig help text).
ALL_LINEAR = "all-linear"
#: An MoE's MLP is its experts, whose LoRA depends on the vLLM version (vllm/lora/layers/fused_moe.py arrived late):
#: only the attention projections are accepted there.
ATTENTION_MODULES = frozenset({"q_proj", "k_proj", "v_proj", "o_proj", "qkv_proj"})

# Named reasons: the state machine and the report say which one stopped the candidate.
UNREADABLE = "archive-unreadable"
TOO_LARGE = "archive-too-large"
TAR_BOMB = "archive-tar-bomb"
UNSAFE_MEMBER = "archive-unsafe-member"
NO_CONFIG = "adapter-config-missing"
BAD_CONFIG = "adapter-config-invalid"
NO_WEIGHTS = "adapter-weights-missing"
NOT_LORA = "adapter-not-lora"
RANK = "adapter-rank-too-high"
BASE_MODEL = "adapter-base-model-differs"
BASE_UNKNOWN = "adapter-base-model-unknown"
TARGET_MODULE = "adapter-target-module-unsupported"
MODULES_TO_SAVE = "adapter-modules-to-save"
DORA = "adapter-dora"
BIAS = "adapter-bias"


class AdapterRefused(ValueError):
    """An adapter archive the candidate cannot serve: `reason` names the check, the message says why."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(f"{reason}: {message}")
        self.reason, self.detail = reason, message


@dataclass(frozen=True)
class AdapterLimits:
    """What the serving side takes: the candidate's OPTION_MAX_LORA_RANK, the Hugging Face ids the team's base
    model is known by (empty: unknown, every archive is refused), and the module names vLLM serves LoRA on."""

    max_lora_rank: int
    base_models: tuple[str, ...]
    modules: frozenset[str] = DENSE_DECODER_MODULES

    def event(self) -> dict[str, Any]:
        """As the stager Lambda's event carries it."""
        return {
            "max_lora_rank": self.max_lora_rank,
            "base_models": list(self.base_models),
            "modules": sorted(self.modules),
        }

    @classmethod
    def from_event(cls, event: dict[str, Any]) -> AdapterLimits:
        """The limits an event carries; ValueError for a malformed one (never a default: that would pass)."""
        rank, bases, modules = event.get("max_lora_rank"), event.get("base_models"), event.get("modules")
        if not isinstance(rank, int) or isinstance(rank, bool) or rank < 1:
            raise ValueError(f"max_lora_rank must be a positive integer, not {rank!r}")
        for key, value in (("base_models", bases), ("modules", modules)):
            if not isinstance(value, list) or not all(isinstance(item, str) and item for item in value):
                raise ValueError(f"{key} must be a list of names, not {value!r}")
        if not modules:
            raise ValueError("modules is empty: no module could be served")
        return cls(rank, tuple(bases or ()), frozenset(modules or ()))


@dataclass(frozen=True)
class AdapterFacts:
    """What a passing archive declares."""

    rank: int
    lora_alpha: float
    base_model: str
    target_modules: tuple[str, ...] | str
    tensor_modules: frozenset[str] = field(default_factory=frozenset)


def _member_name(member: tarfile.TarInfo) -> str:
    """The member's path inside the archive, normalised; AdapterRefused for a path that leaves the folder."""
    name = member.name
    if name.startswith("/") or re.match(r"^[A-Za-z]:", name) or "\\" in name:
        raise AdapterRefused(UNSAFE_MEMBER, f"{name!r} is an absolute path")
    normal = posixpath.normpath(name)
    if normal == ".." or normal.startswith("../") or "/../" in f"/{name}/":
        raise AdapterRefused(UNSAFE_MEMBER, f"{name!r} leaves the archive's folder")
    return "" if normal == "." else normal


def _read(member_file: IO[bytes] | None, size: int, what: str) -> bytes:
    if member_file is None:
        raise AdapterRefused(UNREADABLE, f"{what} cannot be read")
    data = member_file.read(size + 1)
    if len(data) > size:
        raise AdapterRefused(TOO_LARGE, f"{what} is larger than {size} bytes")
    return data


def _safetensors_names(member_file: IO[bytes] | None, member_size: int) -> dict[str, Any]:
    """The tensors of a safetensors file from its header alone (8 bytes little-endian length, then JSON)."""
    if member_file is None:
        raise AdapterRefused(UNREADABLE, f"{SAFETENSORS} cannot be read")
    head = member_file.read(8)
    if len(head) < 8:
        raise AdapterRefused(UNREADABLE, f"{SAFETENSORS} is shorter than its header")
    (length,) = struct.unpack("<Q", head)
    if length > min(MAX_HEADER_BYTES, member_size - 8):
        raise AdapterRefused(UNREADABLE, f"{SAFETENSORS} declares a header of {length} bytes")
    try:
        header = json.loads(member_file.read(length))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise AdapterRefused(UNREADABLE, f"{SAFETENSORS}'s header is not JSON ({error})") from None
    if not isinstance(header, dict):
        raise AdapterRefused(UNREADABLE, f"{SAFETENSORS}'s header is not a JSON object")
    return {name: info for name, info in header.items() if name != "__metadata__"}


@dataclass
class _Contents:
    config: dict[str, Any] | None = None
    weights: list[str] = field(default_factory=list)
    tensors: dict[str, Any] | None = None


def read_archive(archive: bytes | IO[bytes]) -> _Contents:
    """adapter_config.json, the weight files and the safetensors header of an adapter .tar.gz, read as a stream
    (members are never written anywhere); AdapterRefused for what a hostile or broken archive does."""
    stream = io.BytesIO(archive) if isinstance(archive, bytes | bytearray) else archive
    contents = _Contents()
    total = count = 0
    try:
        with tarfile.open(fileobj=stream, mode="r|gz") as tar:
            for member in tar:
                count += 1
                if count > MAX_MEMBERS:
                    raise AdapterRefused(TAR_BOMB, f"more than {MAX_MEMBERS} members")
                name = _member_name(member)
                if member.isdir():
                    continue
                if not member.isfile():
                    raise AdapterRefused(UNSAFE_MEMBER, f"{member.name!r} is a link or a device, not a file")
                if member.size > MAX_MEMBER_BYTES:
                    raise AdapterRefused(
                        TOO_LARGE, f"{name} unpacks to {member.size} bytes (at most {MAX_MEMBER_BYTES})"
                    )
                total += member.size
                if total > MAX_TOTAL_BYTES:
                    raise AdapterRefused(TAR_BOMB, f"the archive unpacks to more than {MAX_TOTAL_BYTES} bytes")
                if name == ADAPTER_CONFIG:
                    if contents.config is not None:
                        raise AdapterRefused(BAD_CONFIG, f"{ADAPTER_CONFIG} appears twice")
                    contents.config = _config(_read(tar.extractfile(member), MAX_CONFIG_BYTES, ADAPTER_CONFIG))
                elif name in WEIGHT_FILES:
                    contents.weights.append(name)
                    if name == SAFETENSORS:
                        contents.tensors = _safetensors_names(tar.extractfile(member), member.size)
    except AdapterRefused:
        raise
    except (tarfile.TarError, OSError, EOFError, ValueError, TypeError, zlib.error) as error:  # gzip/tar, truncation
        raise AdapterRefused(UNREADABLE, f"not a readable .tar.gz ({type(error).__name__}: {error})") from None
    return contents


def _config(data: bytes) -> dict[str, Any]:
    try:
        config = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise AdapterRefused(BAD_CONFIG, f"{ADAPTER_CONFIG} is not JSON ({error})") from None
    if not isinstance(config, dict):
        raise AdapterRefused(BAD_CONFIG, f"{ADAPTER_CONFIG} is not a JSON object")
    return config


def _rank(config: dict[str, Any]) -> int:
    rank = config.get("r")
    if not isinstance(rank, int) or isinstance(rank, bool) or rank < 1:
        raise AdapterRefused(BAD_CONFIG, f"`r` is {rank!r}, not a positive integer (vLLM requires r)")
    pattern = config.get("rank_pattern") or {}
    if not isinstance(pattern, dict) or not all(
        isinstance(r, int) and not isinstance(r, bool) and r >= 1 for r in pattern.values()
    ):
        raise AdapterRefused(BAD_CONFIG, f"`rank_pattern` is {pattern!r}, not a mapping to positive ranks")
    return max([rank, *pattern.values()])  # vLLM's buffers are max_lora_rank wide for every module


def _target_modules(value: Any, allowed: frozenset[str]) -> tuple[str, ...] | str:
    """The target modules when vLLM serves every one of them; AdapterRefused otherwise."""
    if isinstance(value, list) and value and all(isinstance(name, str) for name in value):
        unsupported = sorted({name for name in value if name.rsplit(".", 1)[-1] not in allowed})
        if unsupported:
            raise AdapterRefused(
                TARGET_MODULE,
                f"target_modules {unsupported} are not linear projections vLLM serves LoRA on here "
                f"(it serves {sorted(allowed)})",
            )
        return tuple(value)
    if value == ALL_LINEAR:
        return value
    if isinstance(value, str):
        # vLLM's own reading of a regex (vllm/lora/utils.py is_regex_target_modules): the final (a|b)$ group.
        match = re.search(r"\((.*?)\)\$?$", value)
        names = set(match.group(1).split("|")) if match else set()
        if names and names <= allowed:
            return value
        raise AdapterRefused(
            TARGET_MODULE,
            f"target_modules {value!r} is a pattern whose final (a|b) group does not name only {sorted(allowed)}",
        )
    raise AdapterRefused(BAD_CONFIG, f"target_modules is {value!r}; vLLM requires a list of module names or a regex")


def _tensor_modules(tensors: dict[str, Any], allowed: frozenset[str], max_rank: int) -> frozenset[str]:
    """The modules the weights adapt (vLLM's parse_fine_tuned_lora_name), each one vLLM serves, and no lora_A
    wider than `max_rank`."""
    modules: set[str] = set()
    for name, info in tensors.items():
        parts = name.removeprefix("base_model.model.").split(".")
        if "lora_magnitude_vector" in parts:
            raise AdapterRefused(DORA, f"the weights hold DoRA magnitudes ({name}); vLLM does not yet support DoRA")
        if parts[-2:] in (["lora_A", "weight"], ["lora_B", "weight"]):
            module = parts[:-2]
        elif parts[-1] in ("lora_embedding_A", "lora_embedding_B"):
            module = parts[:-1]
        else:
            raise AdapterRefused(TARGET_MODULE, f"{name} is not a LoRA weight vLLM loads")
        if "experts" in module or not module or module[-1] not in allowed:
            raise AdapterRefused(TARGET_MODULE, f"the weights adapt {'.'.join(module)}, which vLLM does not serve here")
        shape = info.get("shape") if isinstance(info, dict) else None
        if not isinstance(shape, list) or not shape or not all(isinstance(n, int) and n >= 0 for n in shape):
            raise AdapterRefused(UNREADABLE, f"{SAFETENSORS} gives {name} no shape: {shape!r}")
        if parts[-2] == "lora_A" and shape[0] > max_rank:
            raise AdapterRefused(RANK, f"{name} has rank {shape[0]}, above max_lora_rank {max_rank}")
        modules.add(module[-1])
    if not modules:
        raise AdapterRefused(NO_WEIGHTS, f"{SAFETENSORS} holds no LoRA weights")
    return frozenset(modules)


def _same_base(base: Any, known: Iterable[str]) -> str:
    known = tuple(known)
    if not known:
        raise AdapterRefused(
            BASE_UNKNOWN,
            "the team's model names no Hugging Face id (model.source.hugging_face, or an architecture optigate's "
            "catalog knows) to compare the adapter's base_model_name_or_path with",
        )
    if not isinstance(base, str) or not base:
        raise AdapterRefused(BASE_UNKNOWN, "adapter_config.json names no base_model_name_or_path")
    # Hugging Face ids are case-insensitive; a local path or another repository is another base.
    if base.strip().lower() not in {k.lower() for k in known}:
        raise AdapterRefused(
            BASE_MODEL,
            f"the adapter was trained on {base!r}; the team serves {' / '.join(known)}. A LoRA adapter is only "
            "valid on the weights it was trained on (a base and its -Instruct differ)",
        )
    return base.strip()


def check_config(config: dict[str, Any], limits: AdapterLimits) -> AdapterFacts:
    """The adapter_config.json checks, in vLLM's order of refusal where vLLM has one."""
    peft_type = config.get("peft_type", "LORA")
    if str(peft_type).upper() != "LORA":
        raise AdapterRefused(NOT_LORA, f"peft_type is {peft_type!r}; vLLM's LoRA serves LORA adapters only")
    missing = sorted({"r", "lora_alpha", "target_modules"} - set(config))
    if missing:
        raise AdapterRefused(BAD_CONFIG, f"adapter_config.json lacks {missing} (vLLM's required fields)")
    if config.get("modules_to_save"):
        raise AdapterRefused(
            MODULES_TO_SAVE,
            f"modules_to_save is {config['modules_to_save']!r}; vLLM only supports modules_to_save being None",
        )
    if config.get("use_dora"):
        raise AdapterRefused(DORA, "use_dora is true; vLLM does not yet support DoRA")
    if config.get("bias", "none") != "none":
        raise AdapterRefused(BIAS, f"bias is {config['bias']!r}; vLLM refuses adapter bias without bias_enabled")
    rank = _rank(config)
    if rank > limits.max_lora_rank:
        raise AdapterRefused(
            RANK, f"rank {rank} is greater than the candidate's max_lora_rank {limits.max_lora_rank} (serving.lora)"
        )
    alpha = config["lora_alpha"]
    if not isinstance(alpha, int | float) or isinstance(alpha, bool):
        raise AdapterRefused(BAD_CONFIG, f"lora_alpha is {alpha!r}, not a number")
    targets = _target_modules(config["target_modules"], limits.modules)
    base = _same_base(config.get("base_model_name_or_path"), limits.base_models)
    return AdapterFacts(rank, alpha, base, targets)


def check_archive(archive: bytes | IO[bytes], limits: AdapterLimits) -> AdapterFacts:
    """Every check of one adapter archive; AdapterRefused names the first that fails."""
    contents = read_archive(archive)
    if contents.config is None:
        raise AdapterRefused(NO_CONFIG, f"no {ADAPTER_CONFIG} at the archive's top level")
    facts = check_config(contents.config, limits)
    if not contents.weights:
        raise AdapterRefused(NO_WEIGHTS, f"none of {list(WEIGHT_FILES)} at the archive's top level")
    if contents.tensors is None:
        return facts  # .bin/.pt: pickles, not opened here; vLLM checks their names when it loads them
    modules = _tensor_modules(contents.tensors, limits.modules, limits.max_lora_rank)
    return AdapterFacts(facts.rank, facts.lora_alpha, facts.base_model, facts.target_modules, modules)
