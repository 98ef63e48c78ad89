"""What the benchmark measures, defined next to the code that computes it (pure, stdlib only).

All times come from one monotonic clock (`time.perf_counter`) on the client.

- **queue time**: `sent_at - scheduled_at`. When the load model wanted a request out (a free
  slot in the closed loop, a Poisson arrival in the open loop) until its first byte was written.
  Reported separately and never part of TTFT, so a saturated client cannot hide in it.
- **chunk**: one event-stream frame (`PayloadPart`) that carried tokens, stamped with the arrival
  of the socket read that completed it (`client.decode_stream`). The frame is the unit, not the
  read: frames that one read completed together are separate chunks with the same stamp.
- **TTFT**: `first_token_at - sent_at`: request sent until the first chunk carrying a token
  arrives. Role-only or empty chunks (OpenAI streams) are not tokens.
- **ITL (per token)**: for consecutive token-carrying chunks arriving Δt apart, the later one
  with k tokens contributes k gaps of Δt/k. Multi-token chunks (speculative decoding, batching
  in the container) therefore do not inflate ITL. Extra tokens in the first chunk arrived with
  the first token; they add no gap. A chunk completed by the same read as the one before it
  has Δt = 0: its gaps are 0, and the wait before the read stays whole on the earlier chunk.
- **chunk gap**: the raw Δt between consecutive token-carrying chunks, one sample per chunk.
- **TPOT** per request: `(e2e - ttft) / (output_tokens - 1)`, for requests with ≥ 2 tokens.
- **E2E**: `completed_at - sent_at`.
- **output tokens**: the server-reported count (LMI `details.generated_tokens`, OpenAI
  `usage.completion_tokens`) when present, else the number of tokens counted in the stream.
- **tokens per chunk** (= tokens per frame): tokens each token-carrying frame held: a client-side
  proxy for speculative-decoding acceptance, since SageMaker exposes no acceptance metric.
  Counted per frame, so reads that coalesce frames do not inflate it.
- **coalesced frame share**: the share of token-carrying frames that a read completed together
  with another one. The server writes frames one decode step apart; when several land in one
  read, the client (or the network) was behind, and their arrival times say less about when
  they were sent. Above `COALESCED_WARN_SHARE` the run carries a warning.
- **measurement window**: from the first to the last send of a measured request, the steady
  state in which the load model keeps its concurrency; the drain after the last send is left
  out (a run too short to have one falls back to the last completion).
- **throughput**: tokens arriving inside the window (each chunk's tokens at its arrival) and
  requests completing inside it, divided by the window.
- **achieved concurrency**: the time measured requests spent in flight inside the window,
  divided by the window (Little's law): compare it with the concurrency asked for.
- **errors**: measured requests that failed, by class (HTTP error type, stream exception,
  connection error, timeout).
- **outcomes**: one ``[ttft_ms, tpot_ms]`` per measured request in the order they were measured, ``None``
  where the request failed (both) or had one token (TPOT): what goodput (optigate.bench.goodput) judges each
  request by against an SLO. Results written before it existed have none: their goodput is unknown.

Warm-up requests (sent before the warm-up ended) are excluded from every figure. Percentiles
are computed from raw samples with linear interpolation (numpy's default), so shard results
merge exactly by concatenating samples.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

PERCENTILES = (50, 90, 95, 99)
# Warn when more than this share of token frames arrived coalesced. A bunch of b frames in one
# read puts one stretched gap (the wait for the whole bunch) and b - 1 zeros into the ITL samples,
# so at 5 % coalesced (bunches of two) 2.5 % of the gaps are stretched: more than the 1 % above
# p99, so p99 ITL, the gate's figure, is set by the bunching: real if the server sent in bursts,
# an artefact if the client or the network fell behind, and the client cannot tell which. A client
# that keeps up on a quiet loopback sees 0-1.5 % (benchmarks/bench_accuracy.py prints it per level).
COALESCED_WARN_SHARE = 0.05
SAMPLE_KEYS = ("ttft_ms", "itl_ms", "chunk_gap_ms", "tpot_ms", "e2e_ms", "queue_ms", "tokens_per_chunk")


@dataclass
class RequestRecord:
    """One request as the client saw it (times in seconds on the client's monotonic clock)."""

    scheduled_at: float
    sent_at: float
    first_token_at: float | None = None
    completed_at: float | None = None
    chunks: list[tuple[float, int]] = field(default_factory=list)  # (arrival, tokens) of token chunks
    output_tokens: int = 0
    error: str | None = None
    request_id: str | None = None
    warmup: bool = False
    coalesced_frames: int = 0  # chunks that a read completed together with another chunk
    adapter: str | None = None  # the adapter whose inference component served it (None: no components)

    @property
    def ok(self) -> bool:
        return self.error is None and self.completed_at is not None


def percentile(sorted_values: list[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default method)."""
    if not sorted_values:
        return math.nan
    position = (len(sorted_values) - 1) * q / 100
    low = math.floor(position)
    high = min(low + 1, len(sorted_values) - 1)
    return sorted_values[low] + (sorted_values[high] - sorted_values[low]) * (position - low)


def summarize(values: list[float]) -> dict[str, float | None]:
    if not values:
        return {**{f"p{q}": None for q in PERCENTILES}, "mean": None, "max": None}
    ordered = sorted(values)
    summary: dict[str, float | None] = {f"p{q}": percentile(ordered, q) for q in PERCENTILES}
    summary["mean"] = sum(ordered) / len(ordered)
    summary["max"] = ordered[-1]
    return summary


@dataclass
class RunSamples:
    """Raw samples of one run (or several merged shards); everything else derives from these."""

    concurrency: int
    ttft_ms: list[float] = field(default_factory=list)
    itl_ms: list[float] = field(default_factory=list)
    chunk_gap_ms: list[float] = field(default_factory=list)
    tpot_ms: list[float] = field(default_factory=list)
    e2e_ms: list[float] = field(default_factory=list)
    queue_ms: list[float] = field(default_factory=list)
    tokens_per_chunk: list[float] = field(default_factory=list)
    itl_counts: list[int] = field(default_factory=list)  # ITL samples per request, in order (for a cluster bootstrap)
    coalesced_counts: list[int] = field(default_factory=list)  # coalesced chunks per request, same order
    completions: list[tuple[float, int]] = field(default_factory=list)  # (completed_at, output tokens)
    # Every request in flight, warm-up included, for throughput and concurrency inside the window:
    intervals: list[tuple[float, float, bool]] = field(default_factory=list)  # (sent, ended, measured)
    token_arrivals: list[tuple[float, int]] = field(default_factory=list)  # (arrival, tokens)
    finishes: list[float] = field(default_factory=list)  # completion times of successful requests
    errors: dict[str, int] = field(default_factory=dict)
    interrupted: bool = False
    # The same requests split by the adapter label of their inference component (empty: no labels), so
    # per-adapter figures come from raw samples as the overall ones do; written as "adapters" when present.
    by_adapter: dict[str, RunSamples] = field(default_factory=dict)
    # Per measured request (failed ones too), [ttft_ms, tpot_ms] (None where unknown): goodput's input.
    outcomes: list[tuple[float | None, float | None]] = field(default_factory=list)

    @classmethod
    def from_records(cls, concurrency: int, records: list[RequestRecord]) -> RunSamples:
        run = cls(concurrency)
        for record in records:
            run.add(record)
        return run

    def add(self, record: RequestRecord) -> None:
        """A measured request adds samples; a warm-up request only its share of the load. A labelled
        request adds them to its adapter's run too."""
        if record.adapter is not None:
            self.by_adapter.setdefault(record.adapter, RunSamples(self.concurrency))._add(record)
        self._add(record)

    def _add(self, record: RequestRecord) -> None:
        end = record.completed_at
        if end is None:
            end = record.chunks[-1][0] if record.chunks else record.sent_at
        self.intervals.append((record.sent_at, end, not record.warmup))
        self.token_arrivals.extend(record.chunks)
        if record.ok:
            self.finishes.append(end)
        if record.warmup:
            return
        self.queue_ms.append((record.sent_at - record.scheduled_at) * 1000)
        if record.error is not None:
            self.errors[record.error] = self.errors.get(record.error, 0) + 1
            self.outcomes.append((None, None))
            return
        if record.first_token_at is None or record.completed_at is None:
            self.errors["NoTokens"] = self.errors.get("NoTokens", 0) + 1
            self.outcomes.append((None, None))
            return
        ttft = record.first_token_at - record.sent_at
        e2e = record.completed_at - record.sent_at
        self.ttft_ms.append(ttft * 1000)
        self.e2e_ms.append(e2e * 1000)
        previous = None
        itl_before = len(self.itl_ms)
        for arrival, tokens in record.chunks:
            self.tokens_per_chunk.append(tokens)
            if previous is not None:
                gap = arrival - previous
                self.chunk_gap_ms.append(gap * 1000)
                self.itl_ms.extend([gap / tokens * 1000] * tokens)
            previous = arrival
        self.itl_counts.append(len(self.itl_ms) - itl_before)
        self.coalesced_counts.append(record.coalesced_frames)
        tpot = (e2e - ttft) / (record.output_tokens - 1) * 1000 if record.output_tokens > 1 else None
        if tpot is not None:
            self.tpot_ms.append(tpot)
        self.outcomes.append((ttft * 1000, tpot))
        self.completions.append((record.completed_at, record.output_tokens))

    def decode_steps(self) -> list[tuple[int, int]] | None:
        """(tokens, chunks) of each successful request between its first and its last chunk, in order: under LMI's
        async mode a chunk is one engine step, so tokens / chunks is the mean tokens a whole step yields (1 + the
        drafts accepted, a speculative server's acceptance length). The first chunk carries the prefill's token and
        the last may be cut short (max_tokens, end of sequence): both are left out. Read from the per-chunk token
        counts and each request's ITL count (the tokens after its first chunk); None when the two do not add up
        (samples cut or merged out of order)."""
        chunks, index, steps = self.tokens_per_chunk, 0, []
        for count in self.itl_counts:
            if index >= len(chunks):
                return None
            index += 1  # the first chunk
            sizes: list[int] = []
            while sum(sizes) < count and index < len(chunks):
                sizes.append(int(chunks[index]))
                index += 1
            if sum(sizes) != count:
                return None
            whole = sizes[:-1]  # the last chunk may be cut short
            steps.append((sum(whole), len(whole)))
        return steps if index == len(chunks) else None

    def window(self) -> tuple[float, float] | None:
        measured = [(sent, ended) for sent, ended, is_measured in self.intervals if is_measured]
        if not measured:
            return None
        start = min(sent for sent, _ in measured)
        end = max(sent for sent, _ in measured)
        if end - start <= 0:
            end = max(ended for _, ended in measured)
        return (start, end) if end > start else None

    @property
    def requests(self) -> int:
        return len(self.queue_ms)

    def coalesced_share(self) -> float | None:
        """Share of token frames that arrived coalesced; None when unknown (no frames, or shards
        written before the count existed)."""
        if not self.tokens_per_chunk or len(self.coalesced_counts) != len(self.itl_counts):
            return None
        return sum(self.coalesced_counts) / len(self.tokens_per_chunk)

    def warnings(self) -> list[str]:
        share = self.coalesced_share()
        if share is not None and share > COALESCED_WARN_SHARE:
            return [
                f"c={self.concurrency}: {share:.0%} of token frames arrived coalesced (several in one socket read; "
                f"warning above {COALESCED_WARN_SHARE:.0%}): the client or the network fell behind the stream (or the "
                "server writes frames in bursts), so gaps inside a read are 0 ms and ITL tails are blurred; "
                "use fewer streams per client (more shards) or a less loaded machine"
            ]
        return []

    def to_result(self, include_samples: bool = True) -> dict[str, Any]:
        """The JSON contract of one run (docs/guide.md, the streaming benchmark); raw samples make shards mergeable."""
        bounds = self.window()
        window = bounds[1] - bounds[0] if bounds else 0.0
        tokens_in_window = completed_in_window = busy = 0.0
        if bounds:
            start, end = bounds
            tokens_in_window = sum(tokens for arrival, tokens in self.token_arrivals if start <= arrival <= end)
            completed_in_window = sum(1 for done in self.finishes if start <= done <= end)
            busy = sum(max(0.0, min(ended, end) - max(sent, start)) for sent, ended, _ in self.intervals)
        output_tokens = sum(tokens for _, tokens in self.completions)
        result: dict[str, Any] = {
            "concurrency": self.concurrency,
            "requests": self.requests,
            "successful_requests": len(self.completions),
            **{key: summarize(getattr(self, key)) for key in SAMPLE_KEYS},
            "output_tokens": output_tokens,
            "output_tokens_per_s": tokens_in_window / window if window else 0.0,
            "requests_per_s": completed_in_window / window if window else 0.0,
            "achieved_concurrency": busy / window if window else 0.0,
            "window_s": window,
            "token_frames": len(self.tokens_per_chunk),
            "coalesced_frames": sum(self.coalesced_counts),
            "coalesced_frame_share": self.coalesced_share(),
            "errors": dict(sorted(self.errors.items())),
            "interrupted": self.interrupted,
            "warnings": self.warnings(),
        }
        if include_samples:
            result["samples"] = {key: getattr(self, key) for key in SAMPLE_KEYS}
            result["samples"]["completions"] = self.completions
            result["samples"]["intervals"] = self.intervals
            result["samples"]["token_arrivals"] = self.token_arrivals
            result["samples"]["finishes"] = self.finishes
            result["samples"]["itl_counts"] = self.itl_counts
            result["samples"]["coalesced_counts"] = self.coalesced_counts
            result["samples"]["outcomes"] = self.outcomes
        if self.by_adapter:
            result["adapters"] = {name: run.to_result(include_samples) for name, run in sorted(self.by_adapter.items())}
        return result

    @classmethod
    def from_result(cls, result: dict[str, Any]) -> RunSamples:
        samples = result["samples"]
        lists: dict[str, Any] = {key: list(samples[key]) for key in SAMPLE_KEYS}
        run = cls(result["concurrency"], **lists)
        run.completions = [tuple(c) for c in samples["completions"]]
        run.intervals = [tuple(i) for i in samples["intervals"]]
        run.token_arrivals = [tuple(t) for t in samples["token_arrivals"]]
        run.finishes = list(samples["finishes"])
        run.itl_counts = list(samples["itl_counts"])
        run.coalesced_counts = list(samples.get("coalesced_counts", []))  # absent in older results: share unknown
        # absent in older results: goodput unknown (never a pass)
        run.outcomes = [(o[0], o[1]) for o in samples.get("outcomes", [])]
        run.errors = dict(result["errors"])
        run.interrupted = result.get("interrupted", False)
        run.by_adapter = {name: cls.from_result(sub) for name, sub in (result.get("adapters") or {}).items()}
        return run


def merge(runs: list[RunSamples]) -> RunSamples:
    """Shards of one run (same concurrency level, run side by side): exact, from raw samples."""
    if not runs:
        raise ValueError("nothing to merge")
    merged = RunSamples(sum(run.concurrency for run in runs))
    for run in runs:
        for key in SAMPLE_KEYS:
            getattr(merged, key).extend(getattr(run, key))
        merged.completions.extend(run.completions)
        merged.intervals.extend(run.intervals)
        merged.token_arrivals.extend(run.token_arrivals)
        merged.finishes.extend(run.finishes)
        merged.itl_counts.extend(run.itl_counts)
        merged.coalesced_counts.extend(run.coalesced_counts)
        merged.outcomes.extend(run.outcomes)
        for name, count in run.errors.items():
            merged.errors[name] = merged.errors.get(name, 0) + count
        merged.interrupted |= run.interrupted
    for name in sorted({name for run in runs for name in run.by_adapter}):
        merged.by_adapter[name] = merge([run.by_adapter[name] for run in runs if name in run.by_adapter])
        merged.by_adapter[name].concurrency = merged.concurrency  # the level's streams, as the overall run's
    return merged


def to_epoch(records: list[RequestRecord], wall_offset: float) -> list[RequestRecord]:
    """Shift monotonic times to epoch seconds, so shards from different machines merge."""
    shifted = []
    for r in records:
        shifted.append(
            RequestRecord(
                scheduled_at=r.scheduled_at + wall_offset,
                sent_at=r.sent_at + wall_offset,
                first_token_at=None if r.first_token_at is None else r.first_token_at + wall_offset,
                completed_at=None if r.completed_at is None else r.completed_at + wall_offset,
                chunks=[(t + wall_offset, k) for t, k in r.chunks],
                output_tokens=r.output_tokens,
                error=r.error,
                request_id=r.request_id,
                warmup=r.warmup,
                coalesced_frames=r.coalesced_frames,
                adapter=r.adapter,
            )
        )
    return shifted
