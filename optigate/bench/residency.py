"""The adapter residency probe (`optigate bench residency`): what a LoRA swap costs in first-token latency.

vLLM keeps ``max_loras`` adapters in GPU slots and, when a request needs another one, evicts the least recently
used (vllm-project/vllm, vllm/lora/model_manager.py @ bb1d76e5, ``LRUCacheLoRAModelManager.activate_adapter``:
``_active_adapters`` is an LRU cache of ``max_loras`` entries whose oldest is removed). The worker's
``LRUCacheWorkerLoRAManager.add_adapter`` (vllm/lora/worker_manager.py @ 0030b9ff) does the same for the CPU
cache of ``max_cpu_loras``: where that equals max_loras (optigate's OPTION_MAX_CPU_LORAS when the team sets
none), an evicted adapter is read from disk again. So after adapter A served a request, requests to
``max_loras`` other adapters push A out, and A's next request pays the load. Requests to the base model carry
no LoRA and leave the slots alone.

Each round measures one adapter A in two trials, in an order drawn from a seeded generator (so drift over time
cannot pass for a difference):

- **resident**: A, then ``n`` requests to the base component (or none without one), then the measured request
  to A: A is in a slot;
- **evicted**: A, then requests to ``n`` other adapters, then the measured request to A: A was evicted.

``n`` is ``max_loras`` others plus one when the endpoint has one more adapter: one slot of margin should
max_loras be off by one. Both trials have the same number of requests before the measured one, each one
sequential on one keep-alive connection; every prompt is distinct (the bench's seeded synthetic prompts), so no
request finds its prefix in vLLM's prefix cache. TTFT is measured as the bench measures it
(optigate.bench.core.metrics: request sent until the first token-carrying frame arrives).

The swap cost is the median of the per-round differences (evicted minus resident, the two trials of a round
paired) with its percentile-bootstrap interval (optigate.stats.bootstrap_percentile): the median, because a
stall of the client's or the server's process (a GC pause, a busy core) lands in one trial and would move a mean
and stretch its interval, where a swap shifts every evicted trial alike. Fail closed: a round with any
failed request is dropped, and with fewer than ``MIN_PAIRS`` complete rounds, or more than ``MAX_FAILED_SHARE`` of
the rounds failed, the probe cannot tell.
"""

from __future__ import annotations

import gc
import random
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import numpy as np

from optigate.bench.core.client import Connection, StreamingClient, Target, decode_stream
from optigate.bench.core.load import LoadSpec
from optigate.stats import CONFIDENCE, bootstrap_percentile

RESIDENT, EVICTED = "resident", "evicted"
#: Complete rounds (pairs of trials) below which the probe cannot tell.
MIN_PAIRS = 20
#: Share of rounds with a failed request above which the probe cannot tell.
MAX_FAILED_SHARE = 0.1

SWAP_COST, NO_DIFFERENCE, CANNOT_TELL = "swap_cost", "no_difference", "cannot_tell"


@dataclass(frozen=True)
class ResidencySpec:
    """What the probe sends: components by adapter name, the slots they compete for, and the request shape."""

    adapters: dict[str, str]  # adapter name -> inference component name
    max_loras: int
    base_component: str | None = None
    rounds: int = 40
    prompt_tokens: int = 128
    max_new_tokens: int = 4
    engine_mode: str = "async"
    schema: str | None = None
    seed: int = 0

    def __post_init__(self) -> None:
        if self.max_loras < 1:
            raise ValueError(f"max_loras {self.max_loras}: must be at least 1")
        if len(self.adapters) <= self.max_loras:
            raise ValueError(
                f"{len(self.adapters)} adapters and max_loras {self.max_loras}: every adapter stays resident, so "
                f"there is no swap to measure (evicting one takes requests to max_loras others: "
                f"{self.max_loras + 1} adapters at least)"
            )
        if self.rounds < MIN_PAIRS:
            raise ValueError(f"rounds {self.rounds}: at least {MIN_PAIRS} are needed to tell a difference")

    @property
    def fillers(self) -> int:
        """Requests between the first and the measured request of a trial."""
        return min(len(self.adapters) - 1, self.max_loras + 1)

    def evictors(self, adapter: str) -> list[str]:
        """The other adapters whose requests evict ``adapter``: the next ones in the listed order."""
        names = list(self.adapters)
        start = names.index(adapter)
        return [names[(start + step) % len(names)] for step in range(1, self.fillers + 1)]

    def trial(self, adapter: str, condition: str) -> list[str | None]:
        """Components of a trial's requests, the measured one last (None: the base component)."""
        component = self.adapters[adapter]
        if condition == EVICTED:
            between: list[str | None] = [self.adapters[other] for other in self.evictors(adapter)]
        else:
            between = [self.base_component] * self.fillers if self.base_component else []
        return [component, *between, component]


@dataclass
class Trial:
    """One trial: the measured request's TTFT, or why the trial failed."""

    round: int
    adapter: str
    condition: str
    ttft_ms: float | None = None
    error: str | None = None
    requests: int = 0


@dataclass
class ResidencyResult:
    """The probe's answer: a verdict, the paired swap cost with its interval, and every trial."""

    verdict: str
    reason: str
    swap_ms: dict[str, float] | None = None  # point, low, high
    pairs: int = 0
    failed_rounds: int = 0
    errors: dict[str, int] = field(default_factory=dict)
    resident_ttft_ms: float | None = None  # median over complete pairs
    evicted_ttft_ms: float | None = None
    per_adapter_swap_ms: dict[str, float] = field(default_factory=dict)  # point estimates only
    confidence: float = CONFIDENCE
    trials: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def plan_rounds(spec: ResidencySpec) -> list[tuple[int, str, str]]:
    """(round, adapter, condition) in the order they run: adapters in rotation, the two trials of a round in
    a seeded random order."""
    draw = random.Random(spec.seed)
    names = list(spec.adapters)
    order: list[tuple[int, str, str]] = []
    for number in range(spec.rounds):
        adapter = names[number % len(names)]
        conditions = [RESIDENT, EVICTED]
        draw.shuffle(conditions)
        order.extend((number, adapter, condition) for condition in conditions)
    return order


async def run_probe(
    target: Target,
    spec: ResidencySpec,
    *,
    timeout: float = 60.0,
    on_trial: Callable[[Trial], None] | None = None,
) -> list[Trial]:
    """Send every trial, one request at a time on one connection; return the trials in the order run."""
    load = LoadSpec(
        concurrency=1,
        max_new_tokens=spec.max_new_tokens,
        prompt_tokens=spec.prompt_tokens,
        engine_mode=spec.engine_mode,
        schema=spec.schema,
        seed=spec.seed,
    )
    clients: dict[str | None, StreamingClient] = {}

    def client_for(component: str | None) -> StreamingClient:
        if component not in clients:
            clients[component] = StreamingClient(replace(target, inference_component=component), timeout=timeout)
        return clients[component]

    connection: Connection = client_for(None).new_connection()
    index = 0
    trials = []
    # A cyclic-GC pause would land in one trial; collect before the probe instead (as optigate.bench.core.load does).
    gc_was_enabled = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        for number, adapter, condition in plan_rounds(spec):
            trial = Trial(number, adapter, condition)
            for component in spec.trial(adapter, condition):
                client = client_for(component)
                body = load.body(index)  # a distinct prompt per request
                index += 1
                exchange = await client.invoke(connection, body, client.prepare(body))
                result = decode_stream(exchange, load.engine_mode, load.request_schema)
                trial.requests += 1
                error = result.error or (None if result.chunks else "EmptyStream")
                if error:
                    trial.error = error
                    break
                trial.ttft_ms = (result.chunks[0][0] - result.sent_at) * 1000
            if trial.error:
                trial.ttft_ms = None
            trials.append(trial)
            if on_trial is not None:
                on_trial(trial)
    finally:
        connection.close()
        if gc_was_enabled:
            gc.enable()
    return trials


def judge(trials: list[Trial], *, confidence: float = CONFIDENCE) -> ResidencyResult:
    """The verdict on a probe's trials: a swap cost, no difference (at most the interval's upper end), or cannot
    tell (too few complete rounds, too many failed, or evicted requests faster: something else differs)."""
    rounds: dict[int, dict[str, Trial]] = {}
    for trial in trials:
        rounds.setdefault(trial.round, {})[trial.condition] = trial
    complete = [
        pair
        for pair in rounds.values()
        if all(pair.get(c) is not None and pair[c].ttft_ms is not None for c in (RESIDENT, EVICTED))
    ]
    failed = len(rounds) - len(complete)
    errors = Counter(trial.error for trial in trials if trial.error)
    result = ResidencyResult(
        CANNOT_TELL,
        "",
        pairs=len(complete),
        failed_rounds=failed,
        errors=dict(errors),
        confidence=confidence,
        trials=[asdict(trial) for trial in trials],
    )
    if not rounds or failed > MAX_FAILED_SHARE * len(rounds):
        shown = ", ".join(f"{name} {count}" for name, count in errors.items()) or "incomplete rounds"
        result.reason = f"{failed} of {len(rounds)} rounds failed ({shown}): more than {MAX_FAILED_SHARE:.0%}"
        return result
    if len(complete) < MIN_PAIRS:
        result.reason = f"{len(complete)} complete rounds: at least {MIN_PAIRS} are needed"
        return result
    resident = np.array([pair[RESIDENT].ttft_ms for pair in complete], dtype=float)
    evicted = np.array([pair[EVICTED].ttft_ms for pair in complete], dtype=float)
    point, low, high = bootstrap_percentile(evicted - resident, 50, confidence=confidence)
    per_adapter: dict[str, list[float]] = {}
    for pair, before, after in zip(complete, resident, evicted, strict=True):
        per_adapter.setdefault(pair[RESIDENT].adapter, []).append(after - before)
    result.swap_ms = {"point": point, "low": low, "high": high}
    result.resident_ttft_ms = float(np.median(resident))
    result.evicted_ttft_ms = float(np.median(evicted))
    result.per_adapter_swap_ms = {name: float(np.median(values)) for name, values in per_adapter.items()}
    interval = f"{point:+.1f} ms, {confidence:.0%} interval [{low:+.1f}, {high:+.1f}]"
    if low > 0:
        result.verdict = SWAP_COST
        result.reason = f"a request whose adapter is not resident waits {interval} longer for its first token"
    elif high < 0:
        result.reason = (
            f"requests whose adapter was evicted came {interval} sooner: something other than residency differs "
            "between the trials (e.g. the endpoint does not serve these components as LoRA adapters of one base)"
        )
    else:
        result.verdict = NO_DIFFERENCE
        result.reason = f"no swap cost told apart from zero: {interval}; a swap costs at most {high:.1f} ms"
    return result
