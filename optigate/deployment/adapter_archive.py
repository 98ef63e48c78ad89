# Over 400 lines: the stager Lambda carries this one standard-library file, the archive and every check of it.
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
- The base model, three answers. vLLM does not read `base_model_name_or_path`: PEFTHelper has no such field and
  from_dict drops the keys it does not declare, so validate_legal never sees it (vllm/lora/peft_helper.py at
  e745bafffc44744aa601169f8c6f325e47ca7cd5). PEFT records whatever path the base was loaded from, so an adapter
  trained on SageMaker or in-house records a local path (`/opt/ml/input/data/model`, `./base`). The id is compared
  only when it is a Hugging Face repo id (huggingface_hub's validate_repo_id, utils/_validators.py at 0.36.2:
  `repo_name` or `namespace/repo_name`, letters, digits, `-`, `_`, `.`, at most 96 characters a part, neither
  starting nor ending with `-` or `.`, no `--` or `..`, not ending `.git`) and the team's model names one: then
  "same" passes and "differs" is refused (a base and its -Instruct differ). Anything else (a path, an s3:// URI,
  no value, a team whose model names no id) is "unknown": not refused, recorded with why (the gate report shows
  it).
- The base's architecture, wherever the archive tells it, against the team's (AdapterLimits.architecture, the
  catalog's or the team's config.json fields): the LoRA tensors' shapes in adapter_model.safetensors (PEFT saves
  lora_A as [r, in_features] and lora_B as [out_features, r]: q/k/v/gate/up_proj take hidden_size in, o_proj and
  down_proj give hidden_size out; gate/up_proj give intermediate_size out and down_proj takes it in) and their
  layer index (`...layers.<i>...`, below num_hidden_layers); and a `config.json` at the archive's top level
  (model_type, hidden_size, num_hidden_layers, intermediate_size). A difference is refused: the weights would
  not load on the base (a shape) or adapt layers it does not have.
- The files at the archive's top level: SageMaker's own adapter checks ask "an adapter_config.json file with a
  positive rank (r), and the adapter weight files (.safetensors or .bin)" at the adapter's location
  (https://docs.aws.amazon.com/sagemaker/latest/dg/generative-ai-inference-recommendations-adapters.html); that
  an inference component's ArtifactUrl archive is unpacked as that location is inferred, not documented.
"""

from __future__ import annotations

import io
import itertools
import json
import posixpath
import re
import struct
import tarfile
import zlib
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
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
ARCHITECTURE = "adapter-base-architecture-differs"
BASE_CONFIG = "config.json"  # the base's config, when an archive carries it at its top level

# The base model check's answers (AdapterFacts.base_model_check): the id is the team's, or cannot be compared.
SAME, UNKNOWN = "same", "unknown"
#: huggingface_hub's REPO_ID_REGEX (utils/_validators.py at 0.36.2): an optional namespace, then a name.
HF_REPO_ID = re.compile(r"^(\b[\w\-.]+\b/)?\b[\w\-.]{1,96}\b$")
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
class BaseArchitecture:
    """The team's base model as far as an adapter archive can show it: the config.json fields its LoRA tensors'
    shapes and layer indices depend on (intermediate_size and model_type None where the team's model does not
    give them: not compared)."""

    hidden_size: int
    num_hidden_layers: int
    intermediate_size: int | None = None
    model_type: str | None = None

    def event(self) -> dict[str, Any]:
        return {
            "hidden_size": self.hidden_size,
            "num_hidden_layers": self.num_hidden_layers,
            "intermediate_size": self.intermediate_size,
            "model_type": self.model_type,
        }

    @classmethod
    def from_event(cls, event: Any) -> BaseArchitecture:
        """ValueError for a malformed one (never a default: that would pass)."""
        if not isinstance(event, dict):
            raise ValueError(f"architecture must be an object of the base's config.json fields, not {event!r}")

        def size(key: str) -> int:
            value = event.get(key)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"architecture.{key} must be a positive integer, not {value!r}")
            return value

        model_type = event.get("model_type")
        if model_type is not None and (not isinstance(model_type, str) or not model_type):
            raise ValueError(f"architecture.model_type must be a name or null, not {model_type!r}")
        intermediate = None if event.get("intermediate_size") is None else size("intermediate_size")
        return cls(size("hidden_size"), size("num_hidden_layers"), intermediate, model_type)


@dataclass(frozen=True)
class AdapterLimits:
    """What the serving side takes: the candidate's OPTION_MAX_LORA_RANK, the Hugging Face ids the team's base
    model is known by (empty: the model names none, and an adapter's base_model_name_or_path is then not compared:
    the base check is "unknown"), the module names vLLM serves LoRA on, and the base's architecture (compared with
    the archive's tensor shapes and config.json whatever the id says)."""

    max_lora_rank: int
    base_models: tuple[str, ...]
    modules: frozenset[str]
    architecture: BaseArchitecture

    def event(self) -> dict[str, Any]:
        """As the stager Lambda's event carries it."""
        return {
            "max_lora_rank": self.max_lora_rank,
            "base_models": list(self.base_models),
            "modules": sorted(self.modules),
            "architecture": self.architecture.event(),
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
        architecture = BaseArchitecture.from_event(event.get("architecture"))
        return cls(rank, tuple(bases or ()), frozenset(modules or ()), architecture)


@dataclass(frozen=True)
class AdapterFacts:
    """What a passing archive declares, and how far its base was checked: `base_model_check` SAME (the team's
    Hugging Face id) or UNKNOWN (not compared, `base_model_why` says why); `architecture_checked` names the files
    whose figures matched the team's architecture (empty: none could tell, e.g. .bin weights and no config.json)."""

    rank: int
    lora_alpha: float
    base_model: str
    target_modules: tuple[str, ...] | str
    tensor_modules: frozenset[str] = field(default_factory=frozenset)
    base_model_check: str = SAME
    base_model_why: str = ""
    architecture_checked: tuple[str, ...] = ()


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
    base_config: dict[str, Any] | None = None  # the base's config.json, when the archive carries it


def read_archive(archive: bytes | IO[bytes]) -> _Contents:
    """adapter_config.json, the weight files, the safetensors header and a base config.json of an adapter .tar.gz,
    read as a stream (members are never written anywhere); AdapterRefused for what a hostile or broken archive
    does."""
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
                elif name == BASE_CONFIG:
                    if contents.base_config is not None:
                        raise AdapterRefused(BAD_CONFIG, f"{BASE_CONFIG} appears twice")
                    data = _read(tar.extractfile(member), MAX_CONFIG_BYTES, BASE_CONFIG)
                    contents.base_config = _config(data, BASE_CONFIG)
                elif name in WEIGHT_FILES:
                    contents.weights.append(name)
                    if name == SAFETENSORS:
                        contents.tensors = _safetensors_names(tar.extractfile(member), member.size)
    except AdapterRefused:
        raise
    except (tarfile.TarError, OSError, EOFError, ValueError, TypeError, zlib.error) as error:  # gzip/tar, truncation
        raise AdapterRefused(UNREADABLE, f"not a readable .tar.gz ({type(error).__name__}: {error})") from None
    return contents


def _config(data: bytes, what: str = ADAPTER_CONFIG) -> dict[str, Any]:
    try:
        config = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as error:
        raise AdapterRefused(BAD_CONFIG, f"{what} is not JSON ({error})") from None
    if not isinstance(config, dict):
        raise AdapterRefused(BAD_CONFIG, f"{what} is not a JSON object")
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


#: What a LoRA weight's shape says about its base: (module, lora_A or lora_B) -> (the axis, the config.json field).
#: PEFT saves lora_A as [r, in_features] and lora_B as [out_features, r]. The packed qkv_proj and gate_up_proj take
#: hidden_size in; what they give out (q + 2 kv heads, twice intermediate_size) and o_proj's input (the query heads)
#: are not compared.
_SIZES = {
    **{(module, "lora_A"): (1, "hidden_size") for module in ("q_proj", "k_proj", "v_proj", "gate_proj", "up_proj")},
    ("qkv_proj", "lora_A"): (1, "hidden_size"),
    ("gate_up_proj", "lora_A"): (1, "hidden_size"),
    ("o_proj", "lora_B"): (0, "hidden_size"),
    ("down_proj", "lora_B"): (0, "hidden_size"),
    ("gate_proj", "lora_B"): (0, "intermediate_size"),
    ("up_proj", "lora_B"): (0, "intermediate_size"),
    ("down_proj", "lora_A"): (1, "intermediate_size"),
}
TRAIN_ON_BASE = "the adapter was trained on another model: train it on the team's base model"


def _layer(parts: list[str]) -> int | None:
    """The decoder layer a weight adapts (`...layers.<i>...`, as PEFT names Llama-style models), or None."""
    for before, part in itertools.pairwise(parts):
        if before == "layers" and re.fullmatch(r"[0-9]{1,9}", part):
            return int(part)
    return None


def _tensor_architecture(tensors: dict[str, Any], base: BaseArchitecture) -> bool:
    """The LoRA weights' layer indices and shapes against the team's base; AdapterRefused (ARCHITECTURE) for a
    layer it does not have or a width it does not have. True when any figure was compared."""
    compared = False
    for name, info in tensors.items():
        parts = name.removeprefix("base_model.model.").split(".")
        if parts[-2:] not in (["lora_A", "weight"], ["lora_B", "weight"]):
            continue  # lora_embedding_A/B: embeddings are not served (_tensor_modules refuses them)
        layer = _layer(parts)
        if layer is not None:
            compared = True
            if layer >= base.num_hidden_layers:
                raise AdapterRefused(
                    ARCHITECTURE,
                    f"{name} adapts layer {layer}; the team's base has {base.num_hidden_layers} layers "
                    f"(num_hidden_layers): {TRAIN_ON_BASE}",
                )
        shape = info["shape"]
        if len(shape) != 2:
            raise AdapterRefused(UNREADABLE, f"{SAFETENSORS} gives {name} the shape {shape}, not a matrix")
        axis, key = _SIZES.get((parts[-3], parts[-2]), (None, ""))
        expected = getattr(base, key, None) if axis is not None else None
        if axis is None or expected is None:
            continue
        compared = True
        if shape[axis] != expected:
            raise AdapterRefused(
                ARCHITECTURE,
                f"{name} has shape {shape}: a base of {key} {shape[axis]}; the team's base has {key} {expected}: "
                f"{TRAIN_ON_BASE}",
            )
    return compared


def _config_architecture(config: dict[str, Any], base: BaseArchitecture) -> bool:
    """A config.json the archive carries against the team's base (model_type, hidden_size, num_hidden_layers,
    intermediate_size, each where the team's model gives it; a VLM wrapper's text_config as the planner reads it;
    `architectures`, class names, are not compared: the team's model gives its model_type only). AdapterRefused
    (ARCHITECTURE) for a difference; True when any field was compared."""
    text = config.get("text_config")
    if isinstance(text, dict) and "num_hidden_layers" not in config:
        config = {**config, **text}
    compared = False
    for key in ("model_type", "hidden_size", "num_hidden_layers", "intermediate_size"):
        expected, found = getattr(base, key), config.get(key)
        if expected is None or found is None:
            continue
        compared = True
        same = (
            found.lower() == expected.lower() if isinstance(found, str) and key == "model_type" else found == expected
        )
        if not same or isinstance(found, bool):
            raise AdapterRefused(
                ARCHITECTURE,
                f"the archive's {BASE_CONFIG} gives {key} {found!r}; the team's base has {key} {expected!r}: "
                f"{TRAIN_ON_BASE}",
            )
    return compared


def is_hugging_face_id(value: str) -> bool:
    """Whether `value` is a Hugging Face repo id by huggingface_hub's validate_repo_id: `name` or `org/name`,
    REPO_ID_REGEX, no `--` or `..`, not ending `.git` (a local path or an s3:// URI is not)."""
    return (
        value.count("/") <= 1
        and HF_REPO_ID.match(value) is not None
        and "--" not in value
        and ".." not in value
        and not value.endswith(".git")
    )


def base_check(base: Any, known: Iterable[str]) -> tuple[str, str]:
    """(SAME, "") when `base` (adapter_config.json's base_model_name_or_path) is one of the team's Hugging Face ids
    `known`, (UNKNOWN, why) when it cannot be compared: not a Hugging Face id (a local path, an s3:// URI, none), or
    a team whose model names no id (`known` empty; the architecture is still checked). AdapterRefused (BASE_MODEL)
    for another Hugging Face id: a LoRA adapter is only valid on the weights it was trained on."""
    known = tuple(known)
    if not isinstance(base, str) or not base.strip():
        return UNKNOWN, f"{ADAPTER_CONFIG} names no base_model_name_or_path"
    base = base.strip()
    if not is_hugging_face_id(base):
        return UNKNOWN, f"base_model_name_or_path {base!r} is not a Hugging Face id (a local path or a URI)"
    if not known:
        return UNKNOWN, (
            f"the team's model names no Hugging Face id to compare {base!r} with (set model.source.hugging_face to "
            "have it compared)"
        )
    # Hugging Face ids are case-insensitive.
    if base.lower() not in {k.lower() for k in known}:
        raise AdapterRefused(
            BASE_MODEL,
            f"the adapter was trained on {base!r}; the team serves {' / '.join(known)}. A LoRA adapter is only "
            "valid on the weights it was trained on (a base and its -Instruct differ): train it on the team's base, "
            f"or, if {base!r} names a local copy of those weights, set base_model_name_or_path to {known[0]}",
        )
    return SAME, ""


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
    named = config.get("base_model_name_or_path")
    check, why = base_check(named, limits.base_models)
    base = named.strip() if isinstance(named, str) else ""
    return AdapterFacts(rank, alpha, base, targets, base_model_check=check, base_model_why=why)


def check_archive(archive: bytes | IO[bytes], limits: AdapterLimits) -> AdapterFacts:
    """Every check of one adapter archive; AdapterRefused names the first that fails. A base that cannot be
    compared by its id passes as UNKNOWN, its architecture checked wherever the archive shows it."""
    contents = read_archive(archive)
    if contents.config is None:
        raise AdapterRefused(NO_CONFIG, f"no {ADAPTER_CONFIG} at the archive's top level")
    facts = check_config(contents.config, limits)
    if not contents.weights:
        raise AdapterRefused(NO_WEIGHTS, f"none of {list(WEIGHT_FILES)} at the archive's top level")
    modules: frozenset[str] = frozenset()
    checked: list[str] = []
    # .bin/.pt weights are pickles, not opened here: vLLM checks their names when it loads them.
    if contents.tensors is not None:
        modules = _tensor_modules(contents.tensors, limits.modules, limits.max_lora_rank)
        if _tensor_architecture(contents.tensors, limits.architecture):
            checked.append(SAFETENSORS)
    if contents.base_config is not None and _config_architecture(contents.base_config, limits.architecture):
        checked.append(BASE_CONFIG)
    why = facts.base_model_why
    if facts.base_model_check == UNKNOWN and not checked:
        why += "; nor does the archive show its base's architecture (no safetensors weights or config.json to compare)"
    return replace(facts, tensor_modules=modules, base_model_why=why, architecture_checked=tuple(checked))
