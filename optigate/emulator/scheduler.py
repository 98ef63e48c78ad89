"""The emulated server's batch: who is running and who waits (vLLM's `--max-num-seqs` and its KV cache).

A request is admitted once one of the server's `max_num_seqs` slots is free and its KV need (prompt + output
tokens, reserved whole at admission) fits in the `kv_cache_tokens` not reserved by running requests. Admission is
first come first served: a request that does not fit holds the ones behind it (vLLM's FCFS policy). The wait is part
of the request's TTFT and its queue time on the server (`vllm:request_queue_time_seconds`). A finishing request's
slot and tokens go straight to the head of the queue. Reserving the whole output up front means this server never
preempts (vLLM allocates as it decodes and preempts when it runs out; `vllm:num_preemptions` stays 0 here).
`slots` and `kv_tokens` None: every request runs at once (the emulator before batches existed).
"""

from __future__ import annotations

import asyncio
from collections import deque


class Batch:
    """One server's running requests, their reserved KV tokens, and its queue. Used from one event loop only."""

    def __init__(self, slots: int | None, kv_tokens: int | None = None) -> None:
        self.slots = slots
        self.kv_tokens = kv_tokens
        self.running = 0
        self.reserved = 0  # KV tokens held by running requests
        self.waiting: deque[tuple[asyncio.Future[None], int]] = deque()

    def _fits(self, need: int) -> bool:
        return (self.slots is None or self.running < self.slots) and (
            self.kv_tokens is None or self.reserved + need <= self.kv_tokens
        )

    def _admit(self, need: int) -> None:
        self.running += 1
        self.reserved += need

    async def enter(self, need: int = 0) -> float:
        """Take a slot and `need` KV tokens, waiting for them; returns the seconds waited. A need larger than the
        whole cache could never be admitted: ValueError."""
        if self.kv_tokens is not None and need > self.kv_tokens:
            raise ValueError(f"{need} tokens of KV cache needed, the cache holds {self.kv_tokens}")
        if not self.waiting and self._fits(need):
            self._admit(need)
            return 0.0
        loop = asyncio.get_running_loop()
        queued_at = loop.time()
        admitted: asyncio.Future[None] = loop.create_future()
        entry = (admitted, need)
        self.waiting.append(entry)
        try:
            await admitted
        except asyncio.CancelledError:
            if admitted.done() and not admitted.cancelled():  # admitted as the waiter gave up
                self.leave(need)
            else:
                self.waiting.remove(entry)
                self._admit_waiting()  # it may have held others back
            raise
        return loop.time() - queued_at

    def leave(self, need: int = 0) -> None:
        """Free a slot and `need` KV tokens; the queue's head (and those behind it, while they fit) are admitted."""
        self.running -= 1
        self.reserved -= need
        self._admit_waiting()

    def _admit_waiting(self) -> None:
        while self.waiting:
            admitted, need = self.waiting[0]
            if admitted.done():  # cancelled: gone
                self.waiting.popleft()
                continue
            if not self._fits(need):
                return
            self.waiting.popleft()
            self._admit(need)
            admitted.set_result(None)
