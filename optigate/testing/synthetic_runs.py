"""Synthetic benchmark results from a seeded RNG (no endpoint): the gate decision's tests and its
Lambda's tests judge these, and calibration scripts can draw A/A and A/B pairs from them."""

from __future__ import annotations

import itertools

from optigate import stats
from optigate.bench.metrics import RequestRecord, RunSamples

TOKENS = 32
BASE_TTFT_MS, BASE_ITL_MS = 150.0, 15.0


def synthetic_run(
    concurrency: int,
    *,
    requests: int = 120,
    ttft_ms: float = BASE_TTFT_MS,
    itl_ms: float = BASE_ITL_MS,
    tokens: int = TOKENS,
    tokens_per_chunk: tuple[int, ...] = (1,),
    ttft_sigma: float = 0.25,
    tail_prob: float = 0.0,
    tail_ms: float = 0.0,
    error_every: int = 0,
    all_fail: bool = False,
    seed: int = 0,
) -> dict:
    """A closed loop: `concurrency` workers, each a warm-up request and then requests back to back.
    TTFT is log-normal around `ttft_ms` (plus an optional tail), each chunk of k tokens arrives
    k × ITL later; `tokens_per_chunk` is cycled (multi-token chunks emulate speculative decoding)."""
    rng = stats.generator(seed)  # numpy's default_rng, drawn from one place
    records: list[RequestRecord] = []
    per_worker = -(-requests // concurrency)
    sent_count = 0
    for worker in range(concurrency):
        t = worker * 0.013
        records.append(RequestRecord(t, t, t + 0.1, t + 0.2, [(t + 0.1, 1), (t + 0.2, 1)], 2, warmup=True))
        t += 0.2
        for _ in range(per_worker):
            if sent_count >= requests:
                break
            sent_count += 1
            sent = t
            if all_fail or (error_every and sent_count % error_every == 0):
                records.append(RequestRecord(sent, sent, error="ModelError"))
                t = sent + 0.05
                continue
            sizes = itertools.cycle(tokens_per_chunk)
            first_size = min(next(sizes), tokens)
            ttft = ttft_ms / 1000 * rng.lognormal(0, ttft_sigma)  # drawn before the tail: seeded runs stay the same
            first = sent + ttft + (tail_ms / 1000 if rng.random() < tail_prob else 0.0)
            chunks, now, got = [(first, first_size)], first, first_size
            while got < tokens:
                k = min(next(sizes), tokens - got)
                now += k * itl_ms / 1000 * rng.lognormal(0, 0.15)
                chunks.append((now, k))
                got += k
            records.append(RequestRecord(sent, sent, first, now, chunks, tokens))
            t = now
    return RunSamples.from_records(concurrency, records).to_result()


def itl_for_gain(gain: float) -> float:
    """The ITL that makes a request `gain` faster end to end than the baseline (closed loop)."""
    base = BASE_TTFT_MS + (TOKENS - 1) * BASE_ITL_MS
    return (base / (1 + gain) - BASE_TTFT_MS) / (TOKENS - 1)


def bench(*runs: dict) -> dict:
    return {"runs": list(runs)}


PASS = {"status": "pass", "passed": True, "reasons": [], "warnings": [], "checks": []}
THRESHOLDS = {
    "concurrency": [4],
    "p99_ttft_ms_budget": 600.0,
    "p99_itl_ms_budget": 40.0,
    "min_throughput_gain_pct": 10.0,
    "max_error_rate": 0.01,
    "min_tokens_per_chunk_gain_pct": 20.0,
    "prompt_tokens": 1024,
    "max_new_tokens": 256,
}


#: The workload a synthetic report side says it ran (bench's `load`).
REPORT_LOAD = {
    "requests": 120,
    "duration_s": None,
    "max_new_tokens": 32,
    "prompt_tokens": 1024,
    "schema": "inputs",
    "mode": "closed",
    "rate": None,
}


def report_side(gain: float, seed: int, port: int, levels: tuple[int, ...] = (1, 4)) -> dict:
    """A whole bench result (levels 1 and 4) of endpoint chat-dev on an emulator at `port`, `gain` faster
    than gain 0: what the report tests render."""
    data = bench(*(synthetic_run(c, itl_ms=itl_for_gain(gain), seed=seed + c) for c in levels))
    data["load"] = dict(REPORT_LOAD)
    data["target"] = {"endpoint_name": "chat-dev", "region": "us-east-1", "endpoint_url": f"http://127.0.0.1:{port}"}
    return data
