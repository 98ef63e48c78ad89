# Over 400 lines: the three load models (closed, open, replay) share one run's bookkeeping and request order.
"""Load models: a closed loop at fixed concurrency in steady state, an open Poisson loop, and a replay.

Closed loop: `concurrency` workers each send their next request as soon as the previous one
completes. Starting them all at once would make them move in lock-step waves (FMBench's
pattern), so a probe request measures one request's duration first and the workers start
staggered across it; the probe and each worker's first request are warm-up and excluded.

Open loop: arrivals follow a Poisson process at `rate` requests/s, independent of completions
(up to `concurrency` in flight, beyond which arrivals wait and the wait shows as queue time).

Replay: an open loop on a workload's recorded schedule (optigate.bench.core.workload): request i leaves at the
start plus its offset, whatever is in flight (a connection per request in flight, opened as needed; `concurrency`
of them opened before the start, so the first sends do not pay the handshake). No warm-up request: it would shift
the schedule. Each request's body is prepared (rendered and signed) before its time, so the send itself is the only
work at its time; its lag, `sent_at - scheduled_at`, is the schedule fidelity the runner judges.

Any of them stops after `requests` measured requests or after `duration_s` seconds of measurement (a replay also
at the end of its workload).
Stopping early (Ctrl-C, a cancelled task) keeps every request that completed.

Inference components (an adapter team's endpoint): each request goes to one component, in the order of
a :class:`ComponentSchedule` drawn from the spec's seed, so two runs with one seed (the baseline twin and
the candidate of a block) send the same adapters in the same order: the n-th measured request of each
goes to the same adapter, and N measured requests give both the same per-adapter counts. Warm-up
requests go round the components in turn, so every component is warm before measuring.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import math
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

from optigate.bench.core.client import Connection, Exchange, StreamingClient, decode_stream, request_body
from optigate.bench.core.metrics import RequestRecord
from optigate.bench.core.payloads import DEFAULT_SCHEMA, check_stream
from optigate.bench.core.workload import Workload

LOAD_MODES = ("closed", "open", "replay")
#: The default bound on a replay's p99 schedule lag (issue 27's acceptance: 5 ms at 100 requests/s on 2 cores).
DEFAULT_MAX_LAG_MS = 5.0
#: A replay starts this long after its connections are open, so the first send is not late by construction.
REPLAY_LEAD_S = 0.05
#: A replayed request is prepared (rendered, signed) at most this long before its time: SigV4 signatures age.
PREPARE_AHEAD_S = 1.0
#: Waits longer than this watch the stop event; shorter ones sleep (a stop is seen this late at most).
STOP_POLL_S = 0.05

PROMPT_WORDS = ("the", "cat", "sat", "on", "a", "mat", "and", "then", "it", "ran", "to", "see", "what", "was", "new")


def synthetic_prompt(tokens: int, seed: int = 0) -> str:
    """About `tokens` tokens of common words (one token each in Llama/Qwen/Mistral tokenizers)."""
    rng = random.Random(seed)
    return " ".join(rng.choice(PROMPT_WORDS) for _ in range(max(1, tokens)))


def load_prompts(path: str | Path) -> list[dict]:
    """JSONL of `{"prompt": ...}`, `{"inputs": ...}` or `{"messages": [...]}` records."""
    prompts = []
    for number, line in enumerate(Path(path).read_text().splitlines(), 1):
        if not line.strip():
            continue
        record = json.loads(line)
        if not any(key in record for key in ("prompt", "inputs", "messages")):
            raise ValueError(f"{path}:{number}: a record needs prompt, inputs or messages")
        prompts.append(record)
    if not prompts:
        raise ValueError(f"{path}: no prompts")
    return prompts


@dataclass(frozen=True)
class ComponentShare:
    """One inference component of the endpoint, the adapter it serves ("base": the base model) and its
    relative share of the requests."""

    name: str
    adapter: str
    weight: float

    def __post_init__(self) -> None:
        if not self.name or not self.adapter:
            raise ValueError(f"an inference component needs a name and an adapter label, got {self!r}")
        if isinstance(self.weight, bool) or not (
            isinstance(self.weight, int | float) and math.isfinite(self.weight) and self.weight > 0
        ):
            raise ValueError(
                f"inference component {self.name}: weight must be a finite number > 0, got {self.weight!r}"
            )


def parse_adapter_mix(text: str) -> tuple[ComponentShare, ...]:
    """``ADAPTER=COMPONENT:WEIGHT,...`` (e.g. ``base=support-ic-base:1,reply=support-ic-reply:3``) as shares;
    ValueError with what is wrong, in one line."""
    shares = []
    for item in (part.strip() for part in text.split(",")):
        adapter, equals, rest = item.partition("=")
        component, colon, weight_text = rest.rpartition(":")
        if not (equals and colon and adapter.strip() and component.strip()):
            raise ValueError(f"{item!r} is not ADAPTER=COMPONENT:WEIGHT (e.g. reply=support-ic-reply:3)")
        try:
            weight = float(weight_text)
        except ValueError:
            raise ValueError(f"{item!r}: weight {weight_text!r} is not a number") from None
        shares.append(ComponentShare(component.strip(), adapter.strip(), weight))
    return check_components(tuple(shares))


def check_components(components: tuple[ComponentShare, ...]) -> tuple[ComponentShare, ...]:
    """The components, when each names its own component and its own adapter (else ValueError)."""
    for key in ("name", "adapter"):
        values = [getattr(c, key) for c in components]
        if len(set(values)) != len(values):
            raise ValueError(f"inference components: each {key} at most once, got {', '.join(values)}")
    return components


#: Requests per round of a component schedule: a round holds each component's share (within one request)
#: in a seeded random order, so short runs keep the mix and the order does not cycle.
SCHEDULE_ROUND = 64


class ComponentSchedule:
    """The deterministic weighted sequence of components for the measured requests: position n is the
    component of the n-th measured request.

    Counts follow the weights at every round's end within one request per component (the greatest
    deficit first: component k after n requests has within one of ``n * w_k / sum(w)``); each round's
    order is shuffled by ``random.Random(seed)``, so the same seed gives the same sequence."""

    def __init__(self, components: tuple[ComponentShare, ...], seed: int) -> None:
        if not components:
            raise ValueError("a component schedule needs at least one inference component")
        self.components = components
        self._total = sum(c.weight for c in components)
        self._credit = [0.0] * len(components)
        self._rng = random.Random(seed)
        self._sequence: list[ComponentShare] = []

    def _extend(self) -> None:
        round_ = []
        for _ in range(SCHEDULE_ROUND):
            for k, component in enumerate(self.components):
                self._credit[k] += component.weight
            chosen = max(range(len(self.components)), key=lambda k: self._credit[k])  # ties: listed first
            self._credit[chosen] -= self._total
            round_.append(self.components[chosen])
        self._rng.shuffle(round_)
        self._sequence += round_

    def __getitem__(self, position: int) -> ComponentShare:
        while position >= len(self._sequence):
            self._extend()
        return self._sequence[position]

    def first(self, count: int) -> list[ComponentShare]:
        return [self[n] for n in range(count)]


@dataclass(frozen=True)
class LoadSpec:
    concurrency: int
    requests: int | None = 100
    duration_s: float | None = None
    max_new_tokens: int = 256
    prompt_tokens: int = 1024
    prompts: tuple[dict, ...] = ()
    # LMI's engine mode of the target (async | rolling-batch), as resolved for its container: it decides the
    # request schema (None: the mode's own, optigate.bench.core.payloads.DEFAULT_SCHEMA) and how the stream is read.
    engine_mode: str = "async"
    schema: str | None = None  # inputs | messages
    mode: str = "closed"  # closed | open | replay (the workload's recorded schedule)
    rate: float | None = None  # open loop: requests per second
    warmup: bool = True
    seed: int = 0
    # The endpoint's inference components and their shares; empty: a model-backed endpoint (or the
    # target's one fixed component).
    components: tuple[ComponentShare, ...] = ()
    # Requests with their own bodies and output lengths (and, replayed, their schedule) instead of
    # prompt_tokens/max_new_tokens/prompts (optigate.bench.core.workload).
    workload: Workload | None = None
    # Replay: the p99 lag of sends behind their schedule beyond which the client, not the server, shaped the load
    # and the run is refused (optigate.bench.core.schedule.schedule_fidelity).
    max_lag_ms: float = DEFAULT_MAX_LAG_MS

    def __post_init__(self) -> None:
        check_components(self.components)
        if self.schema is None:
            object.__setattr__(self, "schema", DEFAULT_SCHEMA.get(self.engine_mode))
        check_stream(self.engine_mode, self.request_schema)
        records = list(self.prompts) + [request.body for request in (self.workload.requests if self.workload else ())]
        if self.request_schema == "inputs" and any("messages" in record for record in records):
            raise ValueError("chat (messages) prompt records need the messages schema")
        if self.mode not in LOAD_MODES:
            raise ValueError(f"load mode {self.mode!r}: expected one of {', '.join(LOAD_MODES)}")
        if self.mode == "replay":
            if not (self.workload and self.workload.scheduled):
                raise ValueError("a replay needs a workload with a recorded schedule (kind replay)")
            offsets = [float(request.offset_s or 0.0) for request in self.workload.requests]
            if not all(math.isfinite(o) and o >= 0 for o in offsets) or offsets != sorted(offsets):
                raise ValueError("a replay's offsets must be finite, from 0 and in order (the order they are sent in)")
        if not (math.isfinite(self.max_lag_ms) and self.max_lag_ms > 0):
            raise ValueError(f"max_lag_ms must be a positive number, got {self.max_lag_ms!r}")

    @property
    def request_schema(self) -> str:
        return str(self.schema)

    @property
    def warms_up(self) -> bool:
        """Whether a warm-up request precedes the measured ones: the closed loop's only (an open loop and a replay
        send on their schedule from the first request)."""
        return self.warmup and self.mode == "closed"

    def body(self, index: int) -> bytes:
        """The index-th request's body: the workload's requests (each with its own output length), the prompt
        records, or a synthetic prompt, in order and cycling."""
        if self.workload is not None:
            request = self.workload.requests[index % len(self.workload.requests)]
            return self._render(request.body, request.max_new_tokens)
        if self.prompts:
            return self._render(self.prompts[index % len(self.prompts)], self.max_new_tokens)
        prompt = synthetic_prompt(self.prompt_tokens, self.seed + index)
        return request_body(prompt, self.max_new_tokens, self.request_schema)

    def _render(self, record: dict, max_new_tokens: int) -> bytes:
        if "messages" in record:
            return request_body("", max_new_tokens, "messages", {"messages": record["messages"]})
        return request_body(record.get("inputs") or record["prompt"], max_new_tokens, self.request_schema)


@dataclass
class LoadResult:
    records: list[RequestRecord]
    interrupted: bool
    wall_offset: float  # add to a record's perf_counter time to get epoch seconds
    error: str | None = None  # why the level ended early, when it was not a stop or a cancellation


class _Run:
    def __init__(self, client: StreamingClient, spec: LoadSpec, progress: Callable[[Exchange], None] | None) -> None:
        self.client, self.spec, self.progress = client, spec, progress
        self.exchanges: list[tuple[float, bool, Exchange, str | None]] = []  # (scheduled, warm-up, exchange, adapter)
        self.probe_seconds: float | None = None
        self.issued = 0
        self.measured_issued = 0
        self.measure_start: float | None = None
        self.stop = asyncio.Event()
        self.schedule = ComponentSchedule(spec.components, spec.seed) if spec.components else None
        self.components_sent = {"warm-up": 0, "measured": 0}

    def _budget_left(self) -> bool:
        if self.stop.is_set():
            return False
        if (
            self.measure_start is not None
            and self.spec.duration_s is not None
            and time.perf_counter() - self.measure_start >= self.spec.duration_s
        ):
            return False
        return self.spec.requests is None or self.measured_issued < self.spec.requests

    def prepare(self, index: int, warmup: bool) -> tuple[bytes, dict[str, str], ComponentShare | None]:
        """The index-th request's body, signed headers and component (signing happens before the clock starts)."""
        body = self.spec.body(index)
        component = self._component(warmup)
        headers = self.client.prepare(body, "application/jsonlines", component.name if component else None)
        return body, headers, component

    async def one(
        self,
        connection: Connection,
        scheduled_at: float,
        warmup: bool,
        counted: bool = False,
        prepared: tuple[bytes, dict[str, str], ComponentShare | None] | None = None,
    ) -> None:
        index = self.issued
        self.issued += 1
        if not warmup and not counted:
            self.measured_issued += 1
        body, headers, component = prepared or self.prepare(index, warmup)
        exchange = await self.client.invoke(connection, body, headers)
        # Decoding waits until the level ends: doing it here would stall the loop that is
        # timestamping every other stream's chunks.
        self.exchanges.append((scheduled_at, warmup, exchange, component.adapter if component else None))
        if self.progress is not None and not warmup:
            self.progress(exchange)

    def _component(self, warmup: bool) -> ComponentShare | None:
        """Warm-up requests go round the components in turn; measured ones follow the schedule."""
        if self.schedule is None:
            return None
        kind = "warm-up" if warmup else "measured"
        sent = self.components_sent[kind]
        self.components_sent[kind] += 1
        return self.spec.components[sent % len(self.spec.components)] if warmup else self.schedule[sent]

    def records(self) -> list[RequestRecord]:
        records = []
        for scheduled_at, warmup, exchange, adapter in self.exchanges:
            result = decode_stream(exchange, self.spec.engine_mode, self.spec.request_schema)
            records.append(
                RequestRecord(
                    scheduled_at=scheduled_at,
                    sent_at=result.sent_at,
                    first_token_at=result.chunks[0][0] if result.chunks else None,
                    completed_at=result.completed_at if result.error is None else None,
                    chunks=result.chunks,
                    output_tokens=result.output_tokens,
                    error=result.error,
                    request_id=result.request_id,
                    warmup=warmup,
                    coalesced_frames=result.coalesced_frames,
                    adapter=adapter,
                )
            )
        return records

    async def closed(self) -> None:
        connections = [self.client.new_connection() for _ in range(self.spec.concurrency)]
        stagger = 0.0
        if self.spec.warms_up:
            await self.one(connections[0], time.perf_counter(), warmup=True)
            probe = self.exchanges[-1][2]
            if probe.error is None and probe.segments:
                stagger = (probe.segments[-1][0] - probe.sent_at) / self.spec.concurrency

        async def worker(position: int, connection: Connection) -> None:
            if stagger:
                await asyncio.sleep(position * stagger)
            first = self.spec.warms_up
            while True:
                if not first and self.measure_start is None:
                    self.measure_start = time.perf_counter()
                if not first and not self._budget_left():
                    return
                await self.one(connection, time.perf_counter(), warmup=first)
                first = False

        try:
            async with asyncio.TaskGroup() as workers:  # one worker failing stops the others
                for position, connection in enumerate(connections):
                    workers.create_task(worker(position, connection))
        finally:
            for connection in connections:
                connection.close()

    async def open(self) -> None:
        rate = self.spec.rate
        if not rate or rate <= 0:
            raise ValueError("the open loop needs a positive rate (requests per second)")
        rng = random.Random(self.spec.seed)
        idle: list[Connection] = [self.client.new_connection() for _ in range(self.spec.concurrency)]
        slots = asyncio.Semaphore(self.spec.concurrency)
        tasks: set[asyncio.Task] = set()
        self.measure_start = time.perf_counter()
        next_arrival = self.measure_start

        async def send(scheduled: float) -> None:
            async with slots:
                connection = idle.pop()
                try:
                    await self.one(connection, scheduled, warmup=False, counted=True)
                finally:
                    idle.append(connection)

        try:
            while self._budget_left():
                delay = next_arrival - time.perf_counter()
                if delay > 0:
                    try:
                        await asyncio.wait_for(self.stop.wait(), delay)
                        break
                    except TimeoutError:
                        pass
                self.measured_issued += 1  # count arrivals, so the budget holds while they queue
                task = asyncio.create_task(send(next_arrival))
                tasks.add(task)
                task.add_done_callback(tasks.discard)
                next_arrival += rng.expovariate(rate)
            if tasks:
                await asyncio.gather(*tasks, return_exceptions=True)
        finally:
            for connection in idle:
                connection.close()

    async def _wait(self, seconds: float) -> bool:
        """Sleep `seconds` (nothing when not positive); False when the run was stopped meanwhile. Short waits are
        a plain sleep: waiting on the stop event costs a task and a cancellation, late by that much."""
        if seconds > STOP_POLL_S:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.stop.wait(), seconds)
        elif seconds > 0:
            await asyncio.sleep(seconds)
        return not self.stop.is_set()

    async def replay(self, start_at: Callable[[], Awaitable[float]] | None) -> None:
        """Send the workload's requests on their offsets from a start time (epoch seconds from `start_at`, once the
        connections are open: shards in other processes share it; default: now)."""
        assert self.spec.workload is not None  # LoadSpec checks it
        idle = [self.client.new_connection() for _ in range(self.spec.concurrency)]
        await asyncio.gather(*(connection.connect(self.client.timeout) for connection in idle))
        if start_at is None:
            start = time.perf_counter() + REPLAY_LEAD_S
        else:
            start = await start_at() - (time.time() - time.perf_counter())
        self.measure_start = start
        tasks: set[asyncio.Task] = set()

        async def send(scheduled: float, prepared: tuple[bytes, dict[str, str], ComponentShare | None]) -> None:
            connection = idle.pop() if idle else self.client.new_connection()  # never waits for a slot
            try:
                await self.one(connection, scheduled, warmup=False, counted=True, prepared=prepared)
            finally:
                idle.append(connection)

        try:
            for index, request in enumerate(self.spec.workload.requests):
                offset = float(request.offset_s or 0.0)
                if self.spec.duration_s is not None and offset >= self.spec.duration_s:
                    break
                if not self._budget_left():
                    break
                scheduled = start + offset
                if not await self._wait(scheduled - PREPARE_AHEAD_S - time.perf_counter()):
                    break
                prepared = self.prepare(index, warmup=False)
                if not await self._wait(scheduled - time.perf_counter()):
                    break
                self.measured_issued += 1
                task = asyncio.create_task(send(scheduled, prepared))
                tasks.add(task)
                task.add_done_callback(tasks.discard)
                await asyncio.sleep(0)  # let it write before the next request is prepared: that is not its lag
            if tasks:
                await asyncio.gather(*tasks, return_exceptions=True)
        finally:
            for connection in idle:
                connection.close()


async def run_load(
    client: StreamingClient,
    spec: LoadSpec,
    *,
    progress: Callable[[Exchange], None] | None = None,
    stop: asyncio.Event | None = None,
    start_at: Callable[[], Awaitable[float]] | None = None,
) -> LoadResult:
    """Run one load level; cancelling it (or setting `stop`) returns what completed so far, and so
    does a failure of the load itself (recorded as `error`): measured requests are never lost.

    `start_at` (replay only) is awaited once the connections are open and returns the schedule's start in epoch
    seconds: shards of one replay in several processes start on one clock."""
    if spec.mode == "open" and not (spec.rate and spec.rate > 0):
        raise ValueError("the open loop needs a positive rate (requests per second)")
    run = _Run(client, spec, progress)
    if stop is not None:
        run.stop = stop
    interrupted = False
    error: str | None = None
    # A cyclic-GC pause stalls every stream's timestamps at once; collect between levels instead.
    gc_was_enabled = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        if spec.mode == "replay":
            await run.replay(start_at)
        else:
            await (run.closed() if spec.mode == "closed" else run.open())
    except asyncio.CancelledError:
        interrupted = True
    except Exception as failure:  # keep what was measured; the caller reports the failure
        interrupted = True
        while isinstance(failure, ExceptionGroup) and failure.exceptions:
            failure = failure.exceptions[0]
        error = f"{type(failure).__name__}: {failure}"
    finally:
        if gc_was_enabled:
            gc.enable()
    if stop is not None and stop.is_set():
        interrupted = True
    return LoadResult(run.records(), interrupted, time.time() - time.perf_counter(), error)
