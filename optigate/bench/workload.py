"""What a benchmark sends: a workload of requests, each with its own body and requested output length, and (for
a replay) its time on a recorded schedule. Built from captured traffic (optigate.bench.capture) or synthesized
with length distributions and a shared-prefix share; the load (optigate.bench.load) sends it.

Reports describe a workload by its :meth:`Workload.shape` (counts, lengths, rate): never by its text, since
prompts never leave the team's account.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

#: How a workload was made: replayed on its recorded schedule, sampled from captured sessions, drawn from the
#: captured length distributions, or synthesized.
WORKLOAD_KINDS = ("replay", "sessions", "distribution", "synthetic")


@dataclass(frozen=True)
class WorkloadRequest:
    """One request: its prompt record as :func:`optigate.bench.load.load_prompts` reads one (``{"inputs": text}``
    or ``{"messages": [...]}``; the load renders it in the target's schema with ``max_new_tokens``), the output
    length the caller asked for, an estimate of its prompt's tokens, and, in a replay, when to send it (seconds
    after the first request, already divided by any speed-up)."""

    body: dict[str, Any]
    max_new_tokens: int
    prompt_tokens: int
    offset_s: float | None = None
    session: str | None = None


@dataclass(frozen=True)
class Workload:
    """The requests, in the order (and for a replay, on the schedule) they are sent."""

    requests: tuple[WorkloadRequest, ...]
    kind: str
    source: str  # where it came from (a capture location, "synthetic"): never prompt text

    def __post_init__(self) -> None:
        if self.kind not in WORKLOAD_KINDS:
            raise ValueError(f"workload kind {self.kind!r}: expected one of {', '.join(WORKLOAD_KINDS)}")
        if not self.requests:
            raise ValueError(f"workload from {self.source}: no requests")
        if self.kind == "replay" and any(r.offset_s is None for r in self.requests):
            raise ValueError("a replayed workload needs every request's offset_s")

    @property
    def scheduled(self) -> bool:
        """Whether the requests carry a schedule (an open loop on recorded times) rather than a send order."""
        return self.kind == "replay"
