"""What the emulator is told to do (`optigate emulate --config`, `EmulatorConfig.parse`): latency
distributions, payload format and injected faults per endpoint, variant and inference component.
Plain dataclasses, no server: `optigate.emulator.sagemaker_runtime` serves what these describe. The settings with a help
text are `optigate emulate`'s options too (`command_line_options`)."""

from __future__ import annotations

import random
import types
import typing
from dataclasses import dataclass, field, fields, replace
from typing import Any

from optigate.bench.core.payloads import ENGINE_MODES
from optigate.serving.surfaces import FAMILIES, Container

#: The container an emulated server stands for unless told otherwise: LMI 0.36.0 as the SageMaker SDK's table tags it,
#: the newest LMI whose surfaces are read from a source (optigate.serving.surfaces.LMI_READ_THROUGH).
DEFAULT_CONTAINER = "lmi:0.36.0-lmi27.0.0-cu130"


def emulated_container(text: str) -> Container:
    """`family:tag` (`lmi:0.36.0-lmi27.0.0-cu130`) as optigate.serving.surfaces names a container; ValueError for a
    family optigate does not deploy (the emulator serves LMI's streams only)."""
    family, _, tag = str(text).partition(":")
    if family not in FAMILIES or not tag:
        raise ValueError(f"container {text!r}: expected <family>:<image tag>, family one of {', '.join(FAMILIES)}")
    return Container.from_tag(family, tag)


@dataclass(frozen=True)
class Distribution:
    """A latency in milliseconds: `mean`, with `jitter` as the standard deviation."""

    mean: float
    jitter: float = 0.0
    kind: str = "normal"  # normal | lognormal | fixed

    def sample(self, rng: random.Random) -> float:
        if self.jitter <= 0 or self.kind == "fixed":
            return self.mean
        if self.kind == "lognormal":
            import math

            sigma2 = math.log(1 + (self.jitter / self.mean) ** 2)
            return rng.lognormvariate(math.log(self.mean) - sigma2 / 2, math.sqrt(sigma2))
        return max(0.0, rng.gauss(self.mean, self.jitter))

    @classmethod
    def parse(cls, value: Any) -> Distribution:
        if isinstance(value, Distribution):
            return value
        if isinstance(value, (int, float)):
            return cls(float(value))
        return cls(**value)


def _option(help: str, *, choices: tuple[str, ...] | None = None, default_text: str = "") -> dict[str, Any]:
    """The metadata of a setting `optigate emulate` also takes as an option: its help (the default is appended,
    or `default_text` where the value would not say it) and the values it accepts."""
    return {"help": help, "choices": choices, "default_text": default_text}


@dataclass(frozen=True)
class Behaviour:
    """How one endpoint (or variant, or inference component) responds."""

    ttft_ms: Distribution = field(default=Distribution(150.0), metadata=_option("time to first token, ms"))
    itl_ms: Distribution = field(default=Distribution(15.0), metadata=_option("time between tokens, ms"))
    output_tokens: int | None = field(
        default=None, metadata=_option("tokens per response", default_text="the request's max_new_tokens")
    )
    # Cycled per chunk in a config file; (3,) emulates speculative decoding.
    tokens_per_chunk: tuple[int, ...] = field(
        default=(1,), metadata=_option("tokens per event-stream frame; >1 emulates speculative decoding")
    )
    # Frames handed to the socket in one write: n > 1 sends n frames (each still its own chunk of
    # tokens) back to back, as a server that flushes in bursts, so the client's reads coalesce them.
    frames_per_write: int = 1
    engine_mode: str = field(
        default="async",
        metadata=_option(
            "LMI's engine mode, whose stream is emitted: async (vLLM's chat chunks; LMI v17+) or rolling-batch",
            choices=ENGINE_MODES,
        ),
    )
    container: str = field(
        default=DEFAULT_CONTAINER,
        metadata=_option(
            "the container emulated, <family>:<image tag>: it serves only what optigate.serving.surfaces says that "
            "container publishes (no /metrics on LMI)"
        ),
    )
    throttle_rate: float = field(default=0.0, metadata=_option("share of requests answered 429 ThrottlingException"))
    model_error_rate: float = field(default=0.0, metadata=_option("share answered 424 ModelError"))
    stream_error_rate: float = field(default=0.0, metadata=_option("share failing mid-stream with ModelStreamError"))
    reset_rate: float = field(default=0.0, metadata=_option("share whose connection is reset mid-stream"))
    stall_rate: float = field(default=0.0, metadata=_option("share that stall mid-stream for stall_seconds"))
    fault_after_tokens: int = 4  # mid-stream faults strike after this many tokens
    # Load-dependent latency, as a batching server behaves: each stream in flight adds this much.
    ttft_ms_per_active_stream: float = 0.0
    itl_ms_per_active_stream: float = 0.0
    # vLLM's --max-num-seqs: requests beyond this many wait for a slot before their prefill (their wait is part of
    # their TTFT); the per-active-stream slowdowns then count this server's running requests only.
    max_num_seqs: int | None = field(
        default=None,
        metadata=_option(
            "batch slots (vLLM's --max-num-seqs): more requests wait for a slot before prefill",
            default_text="unlimited",
        ),
    )
    # KV cache in tokens: a request is admitted once its prompt + output tokens fit beside the running ones'
    # (optigate.emulator.scheduler). None: unlimited.
    kv_cache_tokens: int | None = field(
        default=None,
        metadata=_option("KV cache in tokens; a request waits until its prompt + output fit", default_text="unlimited"),
    )
    # Prefill cost and vLLM's automatic prefix caching (optigate.emulator.latency_model): each prompt token not found
    # in the cache adds this much to the TTFT; without prefix_caching every prompt token pays it.
    ttft_ms_per_prompt_token: float = field(default=0.0, metadata=_option("prefill ms per uncached prompt token"))
    prefix_caching: bool = False
    # Speculative decoding (optigate.emulator.latency_model): k drafts per step, each accepted with this probability
    # until the first rejection; drafting costs draft_ms_per_token each, verifying grows with the batch.
    num_speculative_tokens: int = field(default=0, metadata=_option("draft tokens per decode step (0: off)"))
    acceptance_rate: float = field(
        default=0.0, metadata=_option("probability each draft token is accepted, given the ones before it were")
    )
    draft_ms_per_token: float = field(default=0.0, metadata=_option("ms to draft one speculative token"))
    # Deterministic answers (quality evaluation): a JSONL table of {id, model_input, target_output,
    # category}; a request whose prompt contains a record's model_input gets its answer, except a
    # deterministic `wrong_fraction` / `refuse_fraction` of the records in `*_categories` (all
    # categories when empty), which are answered wrongly or refused.
    answers_file: str | None = None
    wrong_fraction: float = 0.0
    wrong_categories: tuple[str, ...] = ()
    refuse_fraction: float = 0.0
    refuse_categories: tuple[str, ...] = ()
    stall_seconds: float = 30.0

    @classmethod
    def parse(
        cls, data: dict[str, Any] | None, base: Behaviour | None = None, beside: frozenset[str] = frozenset()
    ) -> Behaviour:
        """`data`'s settings over `base`'s; `beside`: keys of the same block that are not behaviour settings."""
        data = dict(data or {})
        allowed = {f.name for f in fields(cls)}
        unknown = set(data) - allowed - beside
        if unknown:
            raise ValueError(f"unknown emulator setting(s) {sorted(unknown)}; allowed: {sorted(allowed)}")
        values: dict[str, Any] = {k: v for k, v in data.items() if k in allowed}
        for key in ("ttft_ms", "itl_ms"):
            if key in values:
                values[key] = Distribution.parse(values[key])
        for key in ("wrong_categories", "refuse_categories"):
            if key in values:
                values[key] = tuple(values[key])
        if "container" in values:
            emulated_container(values["container"])
        if values.get("engine_mode", ENGINE_MODES[0]) not in ENGINE_MODES:
            raise ValueError(f"engine_mode {values['engine_mode']!r}: expected one of {', '.join(ENGINE_MODES)}")
        slots = values.get("max_num_seqs")
        if slots is not None and (isinstance(slots, bool) or not isinstance(slots, int) or slots < 1):
            raise ValueError(f"max_num_seqs: {slots!r}, expected a whole number of batch slots >= 1")
        kv = values.get("kv_cache_tokens")
        if kv is not None and (isinstance(kv, bool) or not isinstance(kv, int) or kv < 1):
            raise ValueError(f"kv_cache_tokens: {kv!r}, expected a whole number of tokens >= 1")
        _check_speculation(values, base or cls())
        if "tokens_per_chunk" in values:
            chunk = values["tokens_per_chunk"]
            values["tokens_per_chunk"] = tuple(chunk) if isinstance(chunk, (list, tuple)) else (int(chunk),)
        return replace(base or cls(), **values)


def _check_speculation(values: dict[str, Any], base: Behaviour) -> None:
    drafts = values.get("num_speculative_tokens", base.num_speculative_tokens)
    rate = values.get("acceptance_rate", base.acceptance_rate)
    if isinstance(drafts, bool) or not isinstance(drafts, int) or drafts < 0:
        raise ValueError(f"num_speculative_tokens: {drafts!r}, expected a whole number >= 0")
    if isinstance(rate, bool) or not isinstance(rate, int | float) or not 0 <= rate < 1:
        raise ValueError(f"acceptance_rate: {rate!r}, expected a probability in [0, 1)")
    chunks = values.get("tokens_per_chunk", base.tokens_per_chunk)
    if drafts and tuple(chunks if isinstance(chunks, (list, tuple)) else (chunks,)) != (1,):
        raise ValueError("num_speculative_tokens sets the tokens of each frame: leave tokens_per_chunk at 1")


# Settings of an endpoint beside its behaviour: per-variant and per-component behaviours, and LoRA residency.
ENDPOINT_SETTINGS = frozenset({"variants", "inference_components", "max_loras", "adapter_load_ms"})
# In an inference component's settings: the component whose model it adapts (SageMaker's BaseInferenceComponentName).
BASE_KEY = "base_inference_component"


@dataclass
class EndpointConfig:
    """One endpoint. Each inference component answers with its own behaviour (the endpoint's where it sets none);
    an adapter component (`base_inference_component: <base>`) needs one of `max_loras` GPU slots, as vLLM's
    `--max-loras`: a request for an adapter that is not resident pays `adapter_load_ms` more before its first
    token and evicts the least recently used adapter. Requests for the base need no slot. `max_loras` None: every
    adapter stays resident (no swap cost)."""

    behaviour: Behaviour
    variants: dict[str, Behaviour] = field(default_factory=dict)
    inference_components: dict[str, Behaviour] = field(default_factory=dict)
    adapter_bases: dict[str, str] = field(default_factory=dict)  # adapter component -> its base component
    max_loras: int | None = None
    adapter_load_ms: Distribution = Distribution(0.0)

    @classmethod
    def parse(cls, name: str, spec: dict[str, Any] | None, default: Behaviour) -> EndpointConfig:
        spec = spec or {}
        behaviour = Behaviour.parse(spec, default, ENDPOINT_SETTINGS)
        components: dict[str, Behaviour] = {}
        bases: dict[str, str] = {}
        for component, settings in (spec.get("inference_components") or {}).items():
            settings = dict(settings or {})
            if BASE_KEY in settings:
                bases[component] = str(settings.pop(BASE_KEY))
            components[component] = Behaviour.parse(settings, behaviour)
        for adapter, base in bases.items():
            if base not in components or base in bases:
                raise ValueError(
                    f"endpoints.{name}.inference_components.{adapter}.{BASE_KEY}: {base!r} is not a base component "
                    f"of this endpoint (bases: {sorted(set(components) - set(bases))})"
                )
        max_loras = spec.get("max_loras")
        if max_loras is not None and (isinstance(max_loras, bool) or not isinstance(max_loras, int) or max_loras < 1):
            raise ValueError(f"endpoints.{name}.max_loras: {max_loras!r}, expected a whole number of slots >= 1")
        load = Distribution.parse(spec.get("adapter_load_ms", 0.0))
        if load.mean < 0:
            raise ValueError(f"endpoints.{name}.adapter_load_ms: {load.mean:g}, expected >= 0")
        variants = {v: Behaviour.parse(s, behaviour) for v, s in (spec.get("variants") or {}).items()}
        return cls(behaviour, variants, components, bases, max_loras, load)


@dataclass
class EmulatorConfig:
    """`{"endpoints": {name: {behaviour..., "variants": {v: {...}}, "inference_components": {c: {...}},
    "max_loras": n, "adapter_load_ms": ms}}}` (EndpointConfig).

    An endpoint not listed gets `default`. `seed` makes the fault and latency draws repeatable.
    """

    endpoints: dict[str, EndpointConfig] = field(default_factory=dict)
    default: Behaviour = Behaviour()
    seed: int = 0
    record_trace: bool = True
    # Where to write each request as SageMaker's data capture does (optigate.bench.core.capture's layout); None:
    # nowhere.
    capture_dir: str | None = None
    # Whether streamed invocations are captured too. AWS documents data capture of InvokeEndpoint only: capturing
    # InvokeEndpointWithResponseStream is an assumed surface (optigate.serving.surfaces), off unless asked for.
    capture_streams: bool = False

    @classmethod
    def parse(cls, data: dict[str, Any]) -> EmulatorConfig:
        default = Behaviour.parse(data.get("default"))
        endpoints = {
            name: EndpointConfig.parse(name, spec, default) for name, spec in (data.get("endpoints") or {}).items()
        }
        capture_dir = data.get("capture_dir")
        return cls(
            endpoints,
            default,
            int(data.get("seed", 0)),
            bool(data.get("record_trace", True)),
            None if capture_dir is None else str(capture_dir),
            bool(data.get("capture_streams", False)),
        )

    def behaviour_for(self, endpoint: str, variant: str | None, component: str | None) -> Behaviour | None:
        config = self.endpoints.get(endpoint)
        if config is None:
            return self.default if not self.endpoints else None
        if component:
            return config.inference_components.get(component, None if config.inference_components else config.behaviour)
        if variant and variant != "AllTraffic":
            return config.variants.get(variant, None if config.variants else config.behaviour)
        return config.behaviour


@dataclass(frozen=True)
class CommandLineOption:
    """A Behaviour setting as `optigate emulate` offers it: `--NAME` overrides the config's `default`."""

    name: str  # the Behaviour field
    type: type  # what one value on the command line is read as
    help: str  # ending with the default
    choices: tuple[str, ...] | None


def _one_value(hint: Any) -> type:
    """The type one command-line value of a setting annotated `hint` is read as."""
    if hint is Distribution:  # a number is its mean (Distribution.parse)
        return float
    if typing.get_origin(hint) is tuple:  # one value is a one-element cycle (Behaviour.parse)
        return typing.get_args(hint)[0]
    if isinstance(hint, types.UnionType):  # `X | None`: None is the default, not a value to type
        return next(arg for arg in typing.get_args(hint) if arg is not type(None))
    return hint


def _shown(value: Any) -> str:
    if isinstance(value, Distribution):
        value = value.mean
    if isinstance(value, tuple):
        return ",".join(_shown(item) for item in value)
    return f"{value:g}" if isinstance(value, float) else str(value)


def command_line_options() -> tuple[CommandLineOption, ...]:
    """The settings with a help text, in the order Behaviour lists them, each with its default in its help."""
    hints = typing.get_type_hints(Behaviour)
    default = Behaviour()
    options = []
    for setting in fields(Behaviour):
        if "help" not in setting.metadata:
            continue
        shown = setting.metadata["default_text"] or _shown(getattr(default, setting.name))
        help_text = f"{setting.metadata['help']} (default: {shown})"
        options.append(
            CommandLineOption(setting.name, _one_value(hints[setting.name]), help_text, setting.metadata["choices"])
        )
    return tuple(options)
