"""Emulator-shaped benchmark blocks drawn in bulk (numpy, no event loop), for calibrating verdicts.

A closed loop at one concurrency: each worker sends requests back to back. TTFT is log-normal
around ``ttft_ms``; each request has its own speed factor (its gaps are correlated, as on a real
server) and each token gap its own noise around ``itl_ms``. A block (one run) has a drift factor
shared by all its requests, log-normal with ``drift`` as its sigma: a busy host, a warm cache, a
neighbour's load, what makes runs of the same server differ from one another.

Used by ``benchmarks/verdict_calibration.py`` and ``tests/bench/test_compare_calibration.py``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from optigate import stats
from optigate.bench.metrics import RunSamples

#: The gate's defaults: levels, requests per level (4 per stream, at least 32), tokens, blocks per side.
GATE_LEVELS = (1, 16, 64)
GATE_BLOCKS = 3
GATE_TOKENS = 256


def gate_requests(level: int, per_slot: int = 4) -> int:
    """Requests one benchmark block sends at a level (as the gate's fleet does)."""
    return max(32, per_slot * level)


@dataclass(frozen=True)
class Shape:
    """What one side's server looks like."""

    ttft_ms: float = 150.0
    itl_ms: float = 15.0
    ttft_sigma: float = 0.2
    request_sigma: float = 0.05  # per-request speed factor
    gap_sigma: float = 0.15  # per-gap noise
    drift: float = 0.02  # per-block factor (sigma of its log)


def simulated_block(
    concurrency: int, requests: int, shape: Shape, *, tokens: int = GATE_TOKENS, seed: stats.SeedLike = 0
) -> RunSamples:
    """One run (block) at one concurrency level, as `RunSamples` the comparison reads."""
    rng = stats.generator(seed)
    factor = float(np.exp(rng.normal(0, shape.drift)))
    ttft = shape.ttft_ms * factor * rng.lognormal(0, shape.ttft_sigma, requests) / 1000
    speed = shape.itl_ms * factor * rng.lognormal(0, shape.request_sigma, requests) / 1000
    gaps = speed[:, None] * rng.lognormal(0, shape.gap_sigma, (requests, tokens - 1))
    durations = ttft + gaps.sum(axis=1)
    run = RunSamples(concurrency)
    # Requests go to workers in turn; each worker sends its next one when the last completes.
    sent = np.empty(requests)
    clock = np.arange(concurrency) * 0.013
    for index in range(requests):
        worker = index % concurrency
        sent[index] = clock[worker]
        clock[worker] += durations[index]
    arrivals = sent[:, None] + np.concatenate([ttft[:, None], ttft[:, None] + np.cumsum(gaps, axis=1)], axis=1)
    completed = arrivals[:, -1]
    run.ttft_ms = (ttft * 1000).tolist()
    run.itl_ms = (gaps * 1000).ravel().tolist()
    run.chunk_gap_ms = list(run.itl_ms)
    run.itl_counts = [tokens - 1] * requests
    run.tokens_per_chunk = [1.0] * (requests * tokens)
    run.tpot_ms = ((durations - ttft) / (tokens - 1) * 1000).tolist()
    run.e2e_ms = (durations * 1000).tolist()
    run.queue_ms = [0.0] * requests
    run.completions = [(float(t), tokens) for t in completed]
    run.finishes = completed.tolist()
    run.intervals = [(float(s), float(e), True) for s, e in zip(sent, completed, strict=True)]
    run.token_arrivals = [(float(t), 1) for t in arrivals.ravel()]
    return run


def simulated_side(
    shape: Shape,
    *,
    levels: Sequence[int] = GATE_LEVELS,
    blocks: int = GATE_BLOCKS,
    tokens: int = GATE_TOKENS,
    per_slot: int = 4,
    seed: int = 0,
) -> dict[int, list[RunSamples]]:
    """One side of a comparison: `blocks` runs at each level, each with its own drift."""
    return {
        level: [
            simulated_block(level, gate_requests(level, per_slot), shape, tokens=tokens, seed=[seed, level, block])
            for block in range(blocks)
        ]
        for level in levels
    }
