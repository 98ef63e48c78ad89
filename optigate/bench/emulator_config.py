"""What the emulator is told to do (`optigate emulate --config`, `EmulatorConfig.parse`): latency
distributions, payload format and injected faults per endpoint, variant and inference component.
Plain dataclasses, no server: `optigate.bench.emulator` serves what these describe."""

from __future__ import annotations

import random
from dataclasses import dataclass, field, fields, replace
from typing import Any


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


@dataclass(frozen=True)
class Behaviour:
    """How one endpoint (or variant, or inference component) responds."""

    ttft_ms: Distribution = Distribution(150.0)
    itl_ms: Distribution = Distribution(15.0)
    output_tokens: int | None = None  # None: the request's max_new_tokens / max_tokens
    tokens_per_chunk: tuple[int, ...] = (1,)  # cycled per chunk; (3,) emulates speculative decoding
    # Frames handed to the socket in one write: n > 1 sends n frames (each still its own chunk of
    # tokens) back to back, as a server that flushes in bursts, so the client's reads coalesce them.
    frames_per_write: int = 1
    payload_format: str = "lmi"  # lmi | tgi | openai
    throttle_rate: float = 0.0
    model_error_rate: float = 0.0
    stream_error_rate: float = 0.0
    reset_rate: float = 0.0
    stall_rate: float = 0.0
    fault_after_tokens: int = 4  # mid-stream faults strike after this many tokens
    # Load-dependent latency, as a batching server behaves: each stream in flight adds this much.
    ttft_ms_per_active_stream: float = 0.0
    itl_ms_per_active_stream: float = 0.0
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
    def parse(cls, data: dict[str, Any] | None, base: Behaviour | None = None) -> Behaviour:
        data = dict(data or {})
        allowed = {f.name for f in fields(cls)}
        unknown = set(data) - allowed - {"variants", "inference_components"}
        if unknown:
            raise ValueError(f"unknown emulator setting(s) {sorted(unknown)}; allowed: {sorted(allowed)}")
        values: dict[str, Any] = {k: v for k, v in data.items() if k in allowed}
        for key in ("ttft_ms", "itl_ms"):
            if key in values:
                values[key] = Distribution.parse(values[key])
        for key in ("wrong_categories", "refuse_categories"):
            if key in values:
                values[key] = tuple(values[key])
        if "tokens_per_chunk" in values:
            chunk = values["tokens_per_chunk"]
            values["tokens_per_chunk"] = tuple(chunk) if isinstance(chunk, (list, tuple)) else (int(chunk),)
        return replace(base or cls(), **values)


@dataclass
class EndpointConfig:
    behaviour: Behaviour
    variants: dict[str, Behaviour] = field(default_factory=dict)
    inference_components: dict[str, Behaviour] = field(default_factory=dict)


@dataclass
class EmulatorConfig:
    """`{"endpoints": {name: {behaviour..., "variants": {v: {...}}, "inference_components": {...}}}}`.

    An endpoint not listed gets `default`. `seed` makes the fault and latency draws repeatable.
    """

    endpoints: dict[str, EndpointConfig] = field(default_factory=dict)
    default: Behaviour = Behaviour()
    seed: int = 0
    record_trace: bool = True

    @classmethod
    def parse(cls, data: dict[str, Any]) -> EmulatorConfig:
        default = Behaviour.parse(data.get("default"))
        endpoints = {}
        for name, spec in (data.get("endpoints") or {}).items():
            behaviour = Behaviour.parse(spec, default)
            endpoints[name] = EndpointConfig(
                behaviour,
                {v: Behaviour.parse(s, behaviour) for v, s in (spec or {}).get("variants", {}).items()},
                {c: Behaviour.parse(s, behaviour) for c, s in (spec or {}).get("inference_components", {}).items()},
            )
        return cls(endpoints, default, int(data.get("seed", 0)), bool(data.get("record_trace", True)))

    def behaviour_for(self, endpoint: str, variant: str | None, component: str | None) -> Behaviour | None:
        config = self.endpoints.get(endpoint)
        if config is None:
            return self.default if not self.endpoints else None
        if component:
            return config.inference_components.get(component, None if config.inference_components else config.behaviour)
        if variant and variant != "AllTraffic":
            return config.variants.get(variant, None if config.variants else config.behaviour)
        return config.behaviour
