"""What a benchmark sends: a workload of requests, each with its own body and requested output length, and (for
a replay) its time on a recorded schedule. Built from captured traffic (optigate.bench.core.capture) or synthesized
with length distributions and a shared-prefix share; the load (optigate.bench.core.load) sends it.

Reports describe a workload by its :meth:`Workload.shape` (counts, lengths, rate): never by its text, since
prompts never leave the team's account.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any

from optigate.bench.core.capture import CHARS_PER_TOKEN, CapturedRequest, CaptureRead

#: How a workload was made: replayed on its recorded schedule, sampled from captured sessions, drawn from the
#: captured length distributions, or synthesized.
WORKLOAD_KINDS = ("replay", "sessions", "distribution", "synthetic")


@dataclass(frozen=True)
class WorkloadRequest:
    """One request: its prompt record as :func:`optigate.bench.core.load.load_prompts` reads one (``{"inputs": text}``
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


# ---------------------------------------------------------------------------------------------------------------
# Builders: from a capture (replay, sessions, distribution) and synthetic; and a workload's shape, never its text

#: Kinds a capture can be turned into.
CAPTURE_KINDS = ("replay", "sessions", "distribution")
#: Words of a synthetic prompt: about one token each in Llama/Qwen/Mistral tokenizers, so N words ~ N tokens.
SYNTHETIC_WORDS = ("the", "cat", "sat", "on", "a", "mat", "and", "then", "it", "ran", "to", "see", "what", "was", "new")
#: Tokens a prompt must share with another before a prefix cache can serve them: vLLM caches whole KV blocks,
#: 16 tokens by default (vllm/config/cache.py, block_size).
PREFIX_BLOCK_TOKENS = 16


def synthetic_words(count: int, rng: random.Random) -> str:
    """`count` common words (about `count` tokens) drawn from `rng`."""
    return " ".join(rng.choice(SYNTHETIC_WORDS) for _ in range(max(1, count)))


def from_capture(
    read: CaptureRead,
    *,
    kind: str = "replay",
    speedup: float = 1.0,
    max_requests: int | None = None,
    seed: int = 0,
    default_max_new_tokens: int = 256,
    source: str = "capture",
) -> Workload:
    """A workload from captured requests. ``replay``: the first `max_requests` in arrival order on their recorded
    schedule (offsets from the first, divided by `speedup`). ``sessions``: whole sessions in a seeded random order,
    as many as fit in `max_requests`, no schedule. ``distribution``: `max_requests` (default: as many as captured)
    synthetic prompts whose prompt and output lengths are drawn, in pairs, from the captured ones. A request that
    named no output length gets `default_max_new_tokens`."""
    if kind not in CAPTURE_KINDS:
        raise ValueError(f"workload kind {kind!r} from a capture: expected one of {', '.join(CAPTURE_KINDS)}")
    if not (math.isfinite(speedup) and speedup > 0):
        raise ValueError(f"speedup must be a positive number, got {speedup}")
    if max_requests is not None and max_requests < 1:
        raise ValueError(f"max_requests must be at least 1, got {max_requests}")
    if default_max_new_tokens < 1:
        raise ValueError(f"default_max_new_tokens must be at least 1, got {default_max_new_tokens}")
    captured = sorted(read.requests, key=lambda request: request.at)
    if not captured:
        raise ValueError(f"workload from {source}: the capture holds no request")

    def output(requested: int | None) -> int:
        return default_max_new_tokens if requested is None else requested

    if kind == "replay":
        chosen = captured[:max_requests]
        first = chosen[0].at
        requests = [
            WorkloadRequest(c.record, output(c.requested_tokens), c.prompt_tokens, (c.at - first) / speedup, c.session)
            for c in chosen
        ]
    elif kind == "sessions":
        requests = [
            WorkloadRequest(c.record, output(c.requested_tokens), c.prompt_tokens, None, c.session)
            for c in _whole_sessions(captured, max_requests, seed)
        ]
    else:
        requests = _drawn_from(captured, max_requests or len(captured), seed, output)
    return Workload(tuple(requests), kind, source)


def _drawn_from(
    captured: list[CapturedRequest], count: int, seed: int, output: Callable[[int | None], int]
) -> list[WorkloadRequest]:
    """`count` synthetic requests, each standing for a captured one drawn at random: its prompt and output length,
    and, when its opening (a KV block) is shared with other captured requests, a synthetic prefix as long as their
    common prefix, shared the same way, so the prefix cache serves the synthetic workload as it served the capture."""
    words = [_prompt_words(c.record) for c in captured]
    groups: dict[tuple[str, ...], list[int]] = {}
    for index, prompt in enumerate(words):
        if len(prompt) >= PREFIX_BLOCK_TOKENS:
            groups.setdefault(tuple(prompt[:PREFIX_BLOCK_TOKENS]), []).append(index)
    prefixes: dict[int, tuple[str, int]] = {}  # captured index -> (synthetic prefix, its tokens)
    for number, members in enumerate(m for m in groups.values() if len(m) > 1):
        common = words[members[0]]
        for index in members[1:]:
            common = _common_prefix(common, words[index])
        tokens = max(PREFIX_BLOCK_TOKENS, len(" ".join(common)) // CHARS_PER_TOKEN)
        prefix = synthetic_words(tokens, random.Random(f"{seed}/{number}"))
        prefixes.update((index, (prefix, tokens)) for index in members)
    rng = random.Random(seed)
    drawn = []
    for _ in range(count):
        index = rng.randrange(len(captured))
        prompt_tokens, max_new_tokens = captured[index].prompt_tokens, output(captured[index].requested_tokens)
        if index in prefixes:
            prefix, tokens = prefixes[index]
            rest = max(1, prompt_tokens - tokens)
            text, prompt_tokens = f"{prefix} {synthetic_words(rest, rng)}", tokens + rest
        else:
            text = synthetic_words(prompt_tokens, rng)
        drawn.append(WorkloadRequest({"inputs": text}, max_new_tokens, prompt_tokens))
    return drawn


def _whole_sessions(captured: list[CapturedRequest], max_requests: int | None, seed: int) -> list[CapturedRequest]:
    """Sessions (a request without one is its own) in a seeded order, each whole and in its own arrival order,
    while they fit in `max_requests`; a session larger than what is left is passed over, never cut."""
    sessions: dict[str, list[CapturedRequest]] = {}
    for request in captured:
        sessions.setdefault(request.session or f"\x00{request.where}", []).append(request)
    order = sorted(sessions)
    random.Random(seed).shuffle(order)
    chosen: list[CapturedRequest] = []
    for key in order:
        if max_requests is None or len(chosen) + len(sessions[key]) <= max_requests:
            chosen.extend(sessions[key])
    if not chosen:
        smallest = min(len(turns) for turns in sessions.values())
        raise ValueError(f"no whole session fits in {max_requests} requests: the smallest has {smallest}")
    return chosen


def synthetic(
    count: int,
    *,
    prompt_tokens: int | Sequence[int],
    max_new_tokens: int | Sequence[int],
    shared_prefix_share: float = 0.0,
    prefix_tokens: int = 0,
    seed: int = 0,
) -> Workload:
    """`count` synthetic requests. `prompt_tokens` and `max_new_tokens` are one value or a distribution given as
    values, each request drawing one uniformly (repeat a value to weight it: ``(128, 128, 512)``). A share
    `shared_prefix_share` of the requests (chosen at random, rounded to whole requests) opens with one common
    prefix of `prefix_tokens` words, the rest of each prompt its own, so a prefix cache is measured rather than
    assumed away; `prompt_tokens` counts the whole prompt, prefix included."""
    prompts, outputs = _lengths("prompt_tokens", prompt_tokens), _lengths("max_new_tokens", max_new_tokens)
    if isinstance(count, bool) or count < 1:
        raise ValueError(f"count must be at least 1, got {count}")
    if not 0.0 <= shared_prefix_share <= 1.0:
        raise ValueError(f"shared_prefix_share must be within 0..1, got {shared_prefix_share}")
    if prefix_tokens < 0 or (shared_prefix_share > 0 and not 0 < prefix_tokens < min(prompts)):
        raise ValueError(
            f"prefix_tokens {prefix_tokens}: a shared prefix needs 1..{min(prompts) - 1} tokens, "
            f"shorter than the shortest prompt ({min(prompts)})"
        )
    rng = random.Random(seed)
    prefixed = set(rng.sample(range(count), round(shared_prefix_share * count)))
    prefix = synthetic_words(prefix_tokens, rng) if prefixed else ""
    requests = []
    for index in range(count):
        length, output = rng.choice(prompts), rng.choice(outputs)
        if index in prefixed:
            text = f"{prefix} {synthetic_words(length - prefix_tokens, rng)}"
        else:
            text = synthetic_words(length, rng)
        requests.append(WorkloadRequest({"inputs": text}, output, length))
    return Workload(tuple(requests), "synthetic", "synthetic")


def lengths_from_percentiles(p50: int, p90: int, *, values: int = 100) -> tuple[int, ...]:
    """A length distribution given by its median and 90th percentile, as `values` lengths to draw uniformly from
    (what :func:`synthetic` takes): the quantiles (i + 0.5) / values of the log-normal with that median and 90th
    percentile (request lengths are right-skewed: a long tail, never below 1)."""
    if isinstance(p50, bool) or isinstance(p90, bool) or not 1 <= p50 <= p90:
        raise ValueError(f"lengths need 1 <= p50 <= p90, got p50={p50}, p90={p90}")
    if values < 1:
        raise ValueError(f"values must be at least 1, got {values}")
    normal = NormalDist()
    sigma = math.log(p90 / p50) / normal.inv_cdf(0.9)
    return tuple(max(1, round(p50 * math.exp(sigma * normal.inv_cdf((i + 0.5) / values)))) for i in range(values))


def _lengths(name: str, value: int | Sequence[int]) -> tuple[int, ...]:
    values = (value,) if isinstance(value, int) else tuple(value)
    if not values or any(isinstance(v, bool) or not isinstance(v, int) or v < 1 for v in values):
        raise ValueError(f"{name} must be a whole number >= 1 or a list of them, got {value!r}")
    return values


def digest(workload: Workload) -> str:
    """A fingerprint of the requests (bodies, output lengths, schedule) in order: equal only for the same requests."""
    hashed = hashlib.sha256()
    for request in workload.requests:
        hashed.update(
            json.dumps([request.body, request.max_new_tokens, request.offset_s], sort_keys=True).encode() + b"\n"
        )
    return hashed.hexdigest()


def shape(workload: Workload) -> dict[str, Any]:
    """What a report may say about a workload: counts, length percentiles, sessions, the recorded schedule's
    duration and mean rate (replay), and the share of requests whose first KV block is shared with another
    request. Never any text."""
    requests = workload.requests
    sessions = {r.session for r in requests if r.session is not None}
    offsets = [r.offset_s for r in requests if r.offset_s is not None]
    duration = max(offsets) - min(offsets) if workload.scheduled and offsets else None
    return {
        "requests": len(requests),
        "kind": workload.kind,
        "source": workload.source,
        "prompt_tokens": _percentiles([r.prompt_tokens for r in requests]),
        "max_new_tokens": _percentiles([r.max_new_tokens for r in requests]),
        "sessions": len(sessions),
        "duration_s": None if duration is None else round(duration, 3),
        "mean_rate_per_s": round((len(requests) - 1) / duration, 3) if duration else None,
        "shared_prefix_share": round(shared_prefix_share(workload), 4),
    }


def _percentiles(values: list[int]) -> dict[str, int]:
    """p50/p90/p99/max by nearest rank: values that occurred, so no length is invented."""
    ordered = sorted(values)
    rank = {q: ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)] for q in (50, 90, 99)}
    return {"p50": rank[50], "p90": rank[90], "p99": rank[99], "max": ordered[-1]}


def shared_prefix_share(workload: Workload, block_tokens: int = PREFIX_BLOCK_TOKENS) -> float:
    """Share of requests whose prompt opens with the same first `block_tokens` words as another request's: what a
    prefix cache of whole blocks could serve (words stand for tokens here; digests, never text, are compared)."""
    openings = [_opening(r.body, block_tokens) for r in workload.requests]
    counts: dict[str | None, int] = {}
    for opening in openings:
        counts[opening] = counts.get(opening, 0) + 1
    shared = sum(1 for opening in openings if opening is not None and counts[opening] > 1)
    return shared / len(openings)


def _opening(body: dict[str, Any], block_tokens: int) -> str | None:
    words = _prompt_words(body)
    if len(words) < block_tokens:
        return None
    return hashlib.sha256(" ".join(words[:block_tokens]).encode("utf-8", "surrogatepass")).hexdigest()


def _common_prefix(first: list[str], second: list[str]) -> list[str]:
    for position, (a, b) in enumerate(zip(first, second, strict=False)):
        if a != b:
            return first[:position]
    return first[: len(second)]


def _prompt_words(body: dict[str, Any]) -> list[str]:
    """The words of a prompt record, chat messages' text content in order."""
    if "messages" in body:
        text = " ".join(_content_text(m.get("content")) for m in body["messages"] if isinstance(m, dict))
    else:
        text = str(body.get("inputs", body.get("prompt", "")))
    return text.split()


def _content_text(content: Any) -> str:
    if isinstance(content, list):
        return " ".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return content if isinstance(content, str) else ""
