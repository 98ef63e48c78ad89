"""The typed LMI/vLLM engine options, one table: each field of `VllmEngineSwitches` is one option, its annotation
the value's type and validation, its `Field` the description, its `LmiOption` how the LMI container reads it.

The table drives everything an option needs: the `Serving` fields and so the JSON schema (`Serving` inherits
these fields), the container environment (optigate.serving.lmi.render_engine_switches), the refusals (wrong
container family and raw environment names in optigate.config.rules, too-old LMI versions and the model checks in
optigate.deployment.rules) and the reference rows (`reference_rows`). Adding an option is one field here and its
row in tests/config/test_engine_switches.py. The table sits in the config layer because the config models are
built from it and config imports no later layer; version strings are parsed in optigate.serving.images.

LMI passes `OPTION_<ENGINE_ARG>` through to vLLM's EngineArgs (deepjavalibrary/djl-serving
serving/docs/lmi/user_guides/vllm_user_guide.md, "Advanced vLLM Configurations"); the TensorRT-LLM and Neuron
containers read none of them, so an option there would be silently ignored: refused instead.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field

from optigate.config.limits import MAX_TOKENS

#: An LMI (DJL) container version, (0, 36, 0) for 0.36.0 (optigate.serving.images.version_tuple parses one).
LmiVersion = tuple[int, ...]

#: Why a container family without vLLM reads no vLLM engine argument (the wrong-family refusal says it).
NOT_READ_BY = {
    "lmi-trtllm": "TensorRT-LLM builds its engine (graphs, kernels, parallelism) ahead of time from its own options",
    "lmi-neuronx": "the Neuron compiler fixes the graph and kernels ahead of time",
}


def version_text(version: LmiVersion) -> str:
    return ".".join(map(str, version))


# --------------------------------------------------------------------------- refusals an option can carry


@dataclass(frozen=True)
class NotBelowField:
    """The value may not be below another serving field's (a config rule: vLLM would refuse to start).
    `message` takes {value} and {other}, the other field's value."""

    field: str
    message: str


@dataclass(frozen=True)
class ValueSince:
    """One value the container reads only from an LMI version on, later than the option itself (a deployment rule,
    checked once the option's own version is met). `message` takes {version} (running) and {since}."""

    value: str
    since: LmiVersion
    message: str


@dataclass(frozen=True)
class NeedsMixtureOfExperts:
    """Only meaningful for a mixture-of-experts model (a deployment rule). `message` takes {model}."""

    message: str


@dataclass(frozen=True)
class NeedsSeveralGpus:
    """Only meaningful when the model is sharded over several accelerators (a deployment rule, checked after
    NeedsMixtureOfExperts is met)."""

    message: str


Check = NotBelowField | ValueSince | NeedsMixtureOfExperts | NeedsSeveralGpus


@dataclass(frozen=True)
class LmiOption:
    """How the LMI container reads one option.

    :param engine_argument: what the option is in the engine, as the wrong-family refusal names it.
    :param names: the environment variable LMI reads from each LMI version on; the first version is the first that
        reads the option at all (older ones are refused).
    :param source: where LMI or vLLM documents the option and its versions.
    :param aliases: other variables the container reads for the same setting: refused in serving.environment too.
    :param families: container families whose engine reads it.
    :param checks: the option's own refusals beyond family and version.
    """

    engine_argument: str
    names: Mapping[LmiVersion, str]
    source: str
    aliases: tuple[str, ...] = ()
    families: tuple[str, ...] = ("lmi",)
    checks: tuple[Check, ...] = ()

    @property
    def since(self) -> LmiVersion:
        return min(self.names)

    def environment_name(self, running: LmiVersion) -> str:
        """The variable the container of version `running` reads (the first name on versions before `since`)."""
        starts = sorted(self.names)
        return self.names[max((start for start in starts if start <= running), default=starts[0])]

    @property
    def environment_names(self) -> tuple[str, ...]:
        """Every variable the container reads for this option, at any version."""
        return (*dict.fromkeys(self.names.values()), *self.aliases)


def render_value(value: object) -> str:
    """An option's value as the container environment carries it (LMI reads booleans as true/false)."""
    return str(value).lower() if isinstance(value, bool) else str(value)


# --------------------------------------------------------------------------- the table

#: vLLM V1 attention backends optigate accepts (vLLM's AttentionBackendEnum names; attention_backend's entry says
#: which LMI versions read which). Chosen automatically by vLLM when unset.
AttentionBackend = Literal["FLASH_ATTN", "FLASHINFER", "TRITON_ATTN", "FLEX_ATTENTION"]

VLLM_USER_GUIDE = "deepjavalibrary/djl-serving serving/docs/lmi/user_guides/vllm_user_guide.md"


class VllmEngineSwitches(BaseModel):
    """vLLM engine switches that change memory or speed (container family lmi only), as typed serving fields.
    A switch at its default here is vLLM's own default: it renders nothing and is refused nowhere."""

    enforce_eager: Annotated[
        bool,
        LmiOption(
            engine_argument="vLLM's --enforce-eager",
            names={(0, 27, 0): "OPTION_ENFORCE_EAGER"},
            source=f"{VLLM_USER_GUIDE}: option.enforce_eager from LMI 0.27.0",
        ),
    ] = Field(
        False,
        description="OPTION_ENFORCE_EAGER (vLLM --enforce-eager): run PyTorch eager mode without CUDA graphs. Frees "
        "the CUDA-graph memory for the KV cache, but every decode step pays the kernel launches graphs would replay "
        "(the planner adds that cost). Only with container family lmi.",
    )
    # vLLM reads VLLM_ATTENTION_BACKEND up to its deprecation (vLLM PR #26315, released in 0.12) and the engine
    # argument --attention-backend from 0.12 on (the variable is gone in current releases: vLLM issue #50292). LMI
    # 0.34.0 ships vLLM 0.10.2, 0.35.0 vLLM 0.11.1, the SDK's 0.36.0 images vLLM 0.12-0.23 (LMI release notes,
    # serving/docs/lmi/release_notes.md in deepjavalibrary/djl-serving). vLLM 0.10.2 named the Triton backend
    # TRITON_ATTN_VLLM_V1; LMI 0.33.0's vLLM 0.8.4 V1 engine is not documented to honour a chosen backend at all:
    # both refused (fail closed).
    attention_backend: Annotated[
        AttentionBackend | None,
        LmiOption(
            engine_argument="vLLM's --attention-backend",
            names={(0, 34, 0): "VLLM_ATTENTION_BACKEND", (0, 36, 0): "OPTION_ATTENTION_BACKEND"},
            source="vLLM PR #26315 and issue #50292; LMI release notes (serving/docs/lmi/release_notes.md)",
            checks=(
                ValueSince(
                    "TRITON_ATTN",
                    (0, 35, 0),
                    "LMI {version} ships vLLM 0.10.2, which names this backend TRITON_ATTN_VLLM_V1; pin "
                    "container.version {since} or newer, or choose FLASH_ATTN or FLASHINFER",
                ),
            ),
        ),
    ] = Field(
        None,
        description="vLLM's attention kernels (--attention-backend, OPTION_ATTENTION_BACKEND on LMI 0.36.0+; "
        "VLLM_ATTENTION_BACKEND on 0.34.0-0.35.0). Unset: vLLM picks for the GPU and model. Only with container "
        "family lmi; the planner does not model a per-backend speed, the gate measures it.",
    )
    enable_expert_parallel: Annotated[
        bool,
        LmiOption(
            engine_argument="vLLM's --enable-expert-parallel",
            names={(0, 33, 0): "OPTION_ENABLE_EXPERT_PARALLEL"},
            source="a vLLM V1 engine argument of the vLLM 0.8.4 that LMI v15 (0.33.0) ships; whole experts per "
            "tensor-parallel rank: https://docs.vllm.ai/en/latest/serving/expert_parallel_deployment.html",
            checks=(
                NeedsMixtureOfExperts(
                    "{model} is a dense model (no experts): expert parallelism places mixture-of-experts layers only; "
                    "remove it"
                ),
                NeedsSeveralGpus(
                    "with tensor_parallel_degree 1 every expert is on the one GPU: expert parallelism places nothing; "
                    "remove it, or serve on several GPUs (tensor_parallel_degree > 1)"
                ),
            ),
        ),
    ] = Field(
        False,
        description="OPTION_ENABLE_EXPERT_PARALLEL (vLLM --enable-expert-parallel): place whole experts of an MoE "
        "model on the tensor-parallel ranks instead of slicing every expert; attention and the KV cache stay "
        "tensor parallel. MoE models with tensor_parallel_degree > 1, container family lmi only.",
    )
    max_num_batched_tokens: Annotated[
        int | None,
        LmiOption(
            engine_argument="vLLM's max_num_batched_tokens (LMI option.max_rolling_batch_prefill_tokens)",
            # LMI's own name for vLLM's max_num_batched_tokens; the vLLM name is its documented alias
            names={(0, 24, 0): "OPTION_MAX_ROLLING_BATCH_PREFILL_TOKENS"},
            aliases=("OPTION_MAX_NUM_BATCHED_TOKENS",),
            source=f"{VLLM_USER_GUIDE}: option.max_rolling_batch_prefill_tokens from LMI 0.24.0",
            checks=(
                NotBelowField(
                    "max_batch_size",
                    "{value} is below max_batch_size ({other}): vLLM refuses to start when max_num_batched_tokens < "
                    "max_num_seqs (one step must hold a token of every running sequence); use at least {other}",
                ),
            ),
        ),
    ] = Field(
        None,
        ge=1,
        le=MAX_TOKENS,
        description="OPTION_MAX_ROLLING_BATCH_PREFILL_TOKENS (LMI's name for vLLM's max_num_batched_tokens): tokens "
        "one engine step processes, the chunk a long prompt is prefilled in. Sizes the activation reserve (memory) "
        "and the number of prefill steps (TTFT). Unset: vLLM's default for the GPU. Container family lmi only.",
    )
    # LMI passes the variable through to vLLM, true as --enable-prefix-caching and false as
    # --no-enable-prefix-caching (djl_python/properties_manager/vllm_rb_properties.py, construct_vllm_args_list).
    # Cached blocks are KV blocks no sequence holds any more, so the KV capacity the planner sizes is unchanged.
    enable_prefix_caching: Annotated[
        bool | None,
        LmiOption(
            engine_argument="vLLM's --enable-prefix-caching",
            names={(0, 29, 0): "OPTION_ENABLE_PREFIX_CACHING"},
            source=f"{VLLM_USER_GUIDE}: option.enable_prefix_caching from LMI 0.29.0 (djl-serving #2239), and "
            "OPTION_ENABLE_PREFIX_CACHING=true as the guide's pass-through example",
        ),
    ] = Field(
        None,
        description="OPTION_ENABLE_PREFIX_CACHING (vLLM --enable-prefix-caching): reuse the KV cache of a prompt "
        "prefix an earlier request computed (a shared system prompt, a chat's history), so those tokens skip "
        "prefill. Unset: vLLM's default (on in the vLLM V1 engine of LMI 0.33.0+, off before); false turns it off. "
        "The planner does not model cache hits (they depend on the traffic), the gate measures them. LMI 0.29.0+, "
        "container family lmi only.",
    )


def _option_of(name: str) -> LmiOption:
    (option,) = [meta for meta in VllmEngineSwitches.model_fields[name].metadata if isinstance(meta, LmiOption)]
    return option


#: The table by field name, in field order.
LMI_OPTIONS: dict[str, LmiOption] = {name: _option_of(name) for name in VllmEngineSwitches.model_fields}


def options_set(serving: BaseModel) -> Iterator[tuple[str, LmiOption, Any]]:
    """(field, option, value) of each option a serving block sets: a value other than the field's default (vLLM's
    own default, which needs no variable)."""
    for name, option in LMI_OPTIONS.items():
        value = getattr(serving, name)
        if value != VllmEngineSwitches.model_fields[name].default:
            yield name, option, value


def rendered_names() -> dict[str, str]:
    """Each variable an option renders or the container reads for it -> the serving field it comes from."""
    return {
        variable: f"serving.{name}" for name, option in LMI_OPTIONS.items() for variable in option.environment_names
    }


def reference_rows() -> list[str]:
    """The options as rows of a Markdown table: | field | environment (LMI versions) | families | description |."""
    rows = []
    for name, option in LMI_OPTIONS.items():
        starts = sorted(option.names)
        ranges = [
            f"`{option.names[start]}` (LMI {version_text(start)}"
            + (f" to before {version_text(starts[index + 1])})" if index + 1 < len(starts) else "+)")
            for index, start in enumerate(starts)
        ]
        description = VllmEngineSwitches.model_fields[name].description or ""
        rows.append(f"| `serving.{name}` | {', '.join(ranges)} | {', '.join(option.families)} | {description} |")
    return rows
