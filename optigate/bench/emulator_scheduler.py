"""The emulated server's batch: who is running and who waits for a slot (vLLM's `--max-num-seqs`).

A request takes one of the server's `max_num_seqs` slots before its prefill; when all are taken it waits, first
come first served, and that wait is part of its TTFT and of its queue time on the server (vLLM's
`vllm:request_queue_time_seconds`). A slot freed by a finishing request goes straight to the head of the queue.
`slots` None: every request runs at once (the emulator's behaviour before slots existed).
"""

from __future__ import annotations

import asyncio
from collections import deque


class Batch:
    """One server's running requests and its queue. Used from one event loop only."""

    def __init__(self, slots: int | None) -> None:
        self.slots = slots
        self.running = 0
        self.waiting: deque[asyncio.Future[None]] = deque()

    async def enter(self) -> float:
        """Take a slot, waiting for one when all are taken; returns the seconds waited."""
        if self.slots is None or (self.running < self.slots and not self.waiting):
            self.running += 1
            return 0.0
        loop = asyncio.get_running_loop()
        queued_at = loop.time()
        handed: asyncio.Future[None] = loop.create_future()
        self.waiting.append(handed)
        try:
            await handed
        except asyncio.CancelledError:
            if handed.done() and not handed.cancelled():  # the slot was handed over as the waiter gave up
                self.leave()
            else:
                self.waiting.remove(handed)
            raise
        return loop.time() - queued_at

    def leave(self) -> None:
        """Free a slot: the first request still waiting takes it (`running` unchanged), else it is free."""
        while self.waiting:
            handed = self.waiting.popleft()
            if not handed.done():
                handed.set_result(None)
                return
        self.running -= 1
