"""One emulated server (an endpoint's variant or inference component) as the emulator keeps it: its batch
(optigate.emulator.scheduler), prefix cache (optigate.emulator.latency_model), container metrics
(optigate.emulator.container_metrics); and the data-capture files the emulator writes as SageMaker does."""

from __future__ import annotations

import contextlib
import json
import time
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path

from optigate.bench.core.capture import capture_key, capture_record
from optigate.emulator.config import Behaviour
from optigate.emulator.container_metrics import ServerMetrics
from optigate.emulator.latency_model import PREFIX_BLOCK_TOKENS, PrefixCache
from optigate.emulator.scheduler import Batch


@dataclass
class Admission:
    """A request admitted to a server's batch: how long it waited and how much of its prompt was cached."""

    waited_s: float
    cached_tokens: int
    prompt_tokens: int

    @property
    def uncached_tokens(self) -> int:
        return self.prompt_tokens - self.cached_tokens


class Server:
    """A server's batch (its own with `max_num_seqs` or `kv_cache_tokens`, else `shared`: the emulator's one
    unlimited batch, so per-active-stream slowdowns count every stream as before batches existed)."""

    def __init__(self, behaviour: Behaviour, endpoint: str, variant: str, shared: Batch) -> None:
        limited = behaviour.max_num_seqs is not None or behaviour.kv_cache_tokens is not None
        self.behaviour = behaviour
        self.own_batch = limited
        self.batch = Batch(behaviour.max_num_seqs, behaviour.kv_cache_tokens) if limited else shared
        kv = behaviour.kv_cache_tokens
        self.prefix = (
            PrefixCache(None if kv is None else kv // PREFIX_BLOCK_TOKENS) if behaviour.prefix_caching else None
        )
        self.metrics = ServerMetrics(endpoint, variant, kv, behaviour.num_speculative_tokens > 0)

    def kv_need(self, prompt_tokens: int, output_tokens: int) -> int:
        return prompt_tokens + output_tokens if self.batch.kv_tokens is not None else 0

    def fits_at_all(self, need: int) -> bool:
        return self.batch.kv_tokens is None or need <= self.batch.kv_tokens

    @contextlib.asynccontextmanager
    async def admitted(self, words: list[str], output_tokens: int, *, stream: bool = True) -> AsyncIterator[Admission]:
        """Wait for a slot and the KV need, look the prompt up in the prefix cache; free both on the way out.
        A non-streaming request on the shared batch takes no place in it (it never slowed streams down)."""
        metrics = self.metrics
        need = self.kv_need(len(words), output_tokens)
        batch = self.batch if stream or self.own_batch else Batch(None)
        metrics.waiting += 1
        try:
            waited = await batch.enter(need)
        finally:
            metrics.waiting -= 1
        metrics.running += 1
        metrics.kv_reserved += need
        metrics.queued(waited)
        cached = self.prefix.lookup_and_insert(words) if self.prefix is not None else 0
        metrics.add("vllm:prompt_tokens_total", len(words))
        if self.prefix is not None:
            metrics.add("vllm:prefix_cache_queries_total", len(words))
            metrics.add("vllm:prefix_cache_hits_total", cached)
        try:
            yield Admission(waited, cached, len(words))
        finally:
            metrics.running -= 1
            metrics.kv_reserved -= need
            batch.leave(need)


class CaptureWriter:
    """Writes each request as SageMaker's data capture does: one JSON Lines record per request
    (optigate.bench.core.capture.capture_record) in a file under SageMaker's hourly layout (capture_key), one file per
    endpoint, variant and hour, named as the service names them (<mm>-<ss>-<mmm>-<uuid>.jsonl). Inputs only: the
    emulator's answers are not worth replaying."""

    def __init__(self, root: str, clock: Callable[[], float] = time.time) -> None:
        self.root = Path(root)
        self.clock = clock
        self.files: dict[tuple[str, str, str], Path] = {}

    def write(self, endpoint: str, variant: str, body: bytes, event_id: str, content_type: str) -> Path:
        at = self.clock()
        hour = time.strftime("%Y%m%d%H", time.gmtime(at))
        path = self.files.get((endpoint, variant, hour))
        if path is None:
            name = time.strftime("%M-%S-", time.gmtime(at)) + f"{int(at * 1000) % 1000:03d}-{uuid.uuid4()}.jsonl"
            path = self.files[(endpoint, variant, hour)] = self.root / capture_key("", endpoint, variant, at, name)
            path.parent.mkdir(parents=True, exist_ok=True)
        json_body = "json" in content_type
        record = capture_record(
            body.decode() if json_body else body,
            at,
            event_id,
            content_type=content_type,
            encoding="JSON" if json_body else "BASE64",
        )
        with path.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(record) + "\n")
        return path
