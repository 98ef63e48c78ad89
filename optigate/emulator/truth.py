"""What the emulator's latency model says a load gets: the truth a capacity search is judged against.

The emulator (optigate.emulator.sagemaker_runtime) admits a request once one of its batch slots is free
(`max_num_seqs`, and as many requests of this size as `kv_cache_tokens` holds: the slots are the smaller), then
gives it a first token after `ttft_ms + ttft_ms_per_active_stream * (running - 1)` plus the prefill of its uncached
prompt tokens, and then tokens step by step (optigate.emulator.latency_model: plain steps of `itl_ms +
itl_ms_per_active_stream * (running - 1)`, or speculative steps emitting 1..k+1 tokens). Under a closed loop of
`c` clients (optigate's own: a warm-up probe, then the clients start staggered by the probe's duration / c and each
client's first request is a warm-up) this module predicts the p99 TTFT and p99 ITL:

- c <= slots: nobody waits, `running` is c; both p99s are **analytic**: the distribution's 99th percentile plus
  the slowdown and prefill; ITL per token as the client computes it (a chunk's gap over its tokens), so a
  speculative step's gap counts once per token it carried: a mixture over the accepted drafts.
- c > slots: `running` is the slots and every request waits for one; the wait depends on how the slots'
  finishing times are spread (the clients' ramp leaves them nearly even, each request's jitter walks them apart),
  so the TTFT is a **fast simulation** of the same model at the level of whole requests (slots, FIFO queue, the
  clients' stagger, ramp and warm-ups; a request's time in its slot drawn with the model's mean and variance),
  seeded: a long run, or (`requests=`) replicate runs of the benchmark's length. Checked against the live
  emulator under optigate's client (tests/emulator/test_emulator_capacity.py): p90 within 15 %, p99 never above it
  beyond a busy host's stalls. Between the slots and twice them the p99 is the least certain (phase-dependent);
  at twice the slots every request waits one round of the batch, whatever the phases.

`capacity_truth` is the highest such concurrency whose p99s are within the SLO. Behaviours the model does not
cover (injected faults, burst writes, answer tables) are refused: a truth that is not one is worse than none.
"""

from __future__ import annotations

import heapq
import math
import random
from collections import deque
from dataclasses import dataclass
from statistics import NormalDist

from optigate.bench.core.metrics import percentile
from optigate.bench.goodput import Slo
from optigate.emulator.config import Behaviour, Distribution
from optigate.emulator.latency_model import accepted_probabilities, prefill_ms, step_overhead_ms, tokens_per_step

P99 = 0.99
P90 = 0.90
LONG_RUN = 4000  # measured requests of the long run: enough for the slots' phases to be random
POOLED = 4000  # measured requests pooled over replicates of a run of given length
_UNMODELLED = ("throttle_rate", "model_error_rate", "stream_error_rate", "reset_rate", "stall_rate")


@dataclass(frozen=True)
class Prediction:
    """The emulated server under a closed loop of `concurrency` clients."""

    concurrency: int
    running: int  # requests in the batch in the steady state
    p99_ttft_ms: float
    p99_itl_ms: float
    mean_queue_ms: float  # the wait for a slot, per request
    simulated: bool  # the TTFT from the request-level simulation (else analytic)
    mean_tpot_ms: float  # a request's mean time per output token after the first
    # The 90th percentiles: a short run's p99 is its few slowest requests, which one stall of a busy host moves;
    # its p90 checks the model where the host's noise does not reach.
    p90_ttft_ms: float
    p90_itl_ms: float
    # With `requests`, above the slots: where one run's p90 and p99 TTFT fall (the middle 95 % of the replicate
    # runs'): the slots' phases differ from run to run, so one run may land anywhere in this band.
    run_p90_ttft_ms: tuple[float, float] | None = None
    run_p99_ttft_ms: tuple[float, float] | None = None


def quantile(distribution: Distribution, q: float) -> float:
    """The q-quantile of what `distribution.sample` draws."""
    if distribution.jitter <= 0 or distribution.kind == "fixed":
        return distribution.mean
    z = NormalDist().inv_cdf(q)
    if distribution.kind == "lognormal":
        sigma2 = math.log(1 + (distribution.jitter / distribution.mean) ** 2)
        return math.exp(math.log(distribution.mean) - sigma2 / 2 + z * math.sqrt(sigma2))
    return max(0.0, distribution.mean + z * distribution.jitter)


def _mixture_quantile(parts: list[tuple[float, float, float]], q: float) -> float:
    """The q-quantile of a mixture of normals given as (weight, mean, standard deviation), by bisection."""
    total = sum(weight for weight, _, _ in parts)

    def cdf(x: float) -> float:
        return (
            sum(weight * (float(x >= mean) if sd <= 0 else NormalDist(mean, sd).cdf(x)) for weight, mean, sd in parts)
            / total
        )

    low = min(mean - 10 * sd for _, mean, sd in parts)
    high = max(mean + 10 * sd for _, mean, sd in parts)
    for _ in range(100):
        middle = (low + high) / 2
        if cdf(middle) < q:
            low = middle
        else:
            high = middle
    return max(0.0, high)


def _check_modelled(behaviour: Behaviour, mode: str) -> None:
    if mode != "closed":
        raise ValueError(f"capacity truth: mode {mode!r} is not modelled (closed only)")
    unmodelled = [name for name in _UNMODELLED if getattr(behaviour, name) > 0]
    if behaviour.frames_per_write != 1:
        unmodelled.append("frames_per_write")
    if behaviour.answers_file:
        unmodelled.append("answers_file")
    if unmodelled:
        raise ValueError(f"capacity truth: the latency model does not cover {', '.join(unmodelled)}")


def _sd(distribution: Distribution) -> float:
    return 0.0 if distribution.kind == "fixed" else distribution.jitter


def _itl_quantile(behaviour: Behaviour, running: int, q: float) -> float:
    """Per token as the client computes it: a chunk arriving `gap` after the last one counts gap / tokens for each
    of its tokens. Plain decoding: a chunk of k tokens is k draws (chunk sizes cycle: a mixture weighted by size).
    Speculation: a step's gap carries j + 1 tokens with probability P(j) (a mixture weighted by (j + 1) P(j))."""
    itl = behaviour.itl_ms
    drafts = behaviour.num_speculative_tokens
    if drafts:
        step = itl.mean + step_overhead_ms(behaviour, running)
        probabilities = accepted_probabilities(behaviour.acceptance_rate, drafts)
        parts = [((j + 1) * p, step / (j + 1), _sd(itl) / (j + 1)) for j, p in enumerate(probabilities) if p > 0]
        return _mixture_quantile(parts, q)
    slowdown = behaviour.itl_ms_per_active_stream * (running - 1)
    sizes = behaviour.tokens_per_chunk
    if len(set(sizes)) == 1 and sizes[0] == 1:
        return quantile(itl, q) + slowdown
    parts = [(float(k), itl.mean + slowdown, _sd(itl) / math.sqrt(k)) for k in sizes]
    return _mixture_quantile(parts, q)


def _decode_ms(behaviour: Behaviour, tokens: int, running: int) -> tuple[float, float]:
    """Mean and variance of the time from a request's first token to its last."""
    itl, later = behaviour.itl_ms, tokens - 1
    drafts = behaviour.num_speculative_tokens
    if not drafts:
        return later * (itl.mean + behaviour.itl_ms_per_active_stream * (running - 1)), later * _sd(itl) ** 2
    step = itl.mean + step_overhead_ms(behaviour, running)
    probabilities = accepted_probabilities(behaviour.acceptance_rate, drafts)
    per_step = tokens_per_step(behaviour.acceptance_rate, drafts)
    spread = sum((j + 1 - per_step) ** 2 * p for j, p in enumerate(probabilities))
    steps = later / per_step
    # Renewal count: steps to emit `later` tokens has variance later * spread / per_step^3.
    return steps * step, steps * _sd(itl) ** 2 + step**2 * later * spread / per_step**3


def _mean_tpot(behaviour: Behaviour, running: int) -> float:
    drafts = behaviour.num_speculative_tokens
    if not drafts:
        return behaviour.itl_ms.mean + behaviour.itl_ms_per_active_stream * (running - 1)
    return (behaviour.itl_ms.mean + step_overhead_ms(behaviour, running)) / tokens_per_step(
        behaviour.acceptance_rate, drafts
    )


def batch_slots(behaviour: Behaviour, prompt_tokens: int, output_tokens: int) -> int | None:
    """How many requests of this size run at once: `max_num_seqs`, or fewer when the KV cache holds fewer."""
    limits = []
    if behaviour.max_num_seqs is not None:
        limits.append(behaviour.max_num_seqs)
    if behaviour.kv_cache_tokens is not None:
        limits.append(behaviour.kv_cache_tokens // (prompt_tokens + output_tokens))
    return min(limits) if limits else None


def _service_ms(
    behaviour: Behaviour, tokens: int, running: int, prefill: float, rng: random.Random
) -> tuple[float, float]:
    """(time to the first token, time in the slot) of one request among `running`, drawn."""
    ttft = behaviour.ttft_ms.sample(rng) + behaviour.ttft_ms_per_active_stream * (running - 1) + prefill
    mean, variance = _decode_ms(behaviour, tokens, running)
    decode = max(0.0, rng.gauss(mean, math.sqrt(variance))) if variance > 0 else mean
    return ttft, ttft + decode


def _simulated_ttfts(
    behaviour: Behaviour, concurrency: int, slots: int, tokens: int, prefill: float, seed: int, measured: int
) -> tuple[list[float], float]:
    """TTFTs (ms) of `measured` requests after the warm-ups and their mean wait, for concurrency > slots."""
    rng = random.Random(seed)
    # The client's warm-up probe, alone on the server, sets the stagger.
    probe = behaviour.ttft_ms.mean + prefill + _decode_ms(behaviour, tokens, 1)[0]
    stagger = probe / concurrency
    arrivals: list[tuple[float, int, int]] = [(position * stagger, 0, position) for position in range(concurrency)]
    heapq.heapify(arrivals)
    finishing: list[tuple[float, int]] = []
    queue: deque[tuple[float, int]] = deque()
    sent = [0] * concurrency
    running = 0
    ttfts: list[float] = []
    waits: list[float] = []

    def begin(now: float, arrived: float, client: int) -> None:
        # Those running as it starts (fewer while the clients ramp up) set its slowdowns.
        ttft, in_slot = _service_ms(behaviour, tokens, running, prefill, rng)
        if sent[client] > 1:  # each client's first request is its warm-up
            ttfts.append(now - arrived + ttft)
            waits.append(now - arrived)
        heapq.heappush(finishing, (now + in_slot, client))

    order = 0
    while len(ttfts) < measured:
        if finishing and (not arrivals or finishing[0][0] <= arrivals[0][0]):
            now, client = heapq.heappop(finishing)
            if queue:  # the freed slot goes to the head of the queue before the client's next request arrives
                arrived, waiting = queue.popleft()
                begin(now, arrived, waiting)
            else:
                running -= 1
            order += 1
            heapq.heappush(arrivals, (now, order, client))
            continue
        now, _, client = heapq.heappop(arrivals)
        sent[client] += 1
        if running < slots and not queue:
            running += 1
            begin(now, now, client)
        else:
            queue.append((now, client))
    return ttfts, sum(waits) / len(waits)


def predict(
    behaviour: Behaviour,
    concurrency: int,
    *,
    prompt_tokens: int,
    max_new_tokens: int,
    mode: str = "closed",
    seed: int = 0,
    cached_prompt_tokens: int = 0,
    requests: int | None = None,
) -> Prediction:
    """The p99 TTFT and ITL of the emulated server under a closed loop of `concurrency` clients whose requests
    carry `prompt_tokens` (words), `cached_prompt_tokens` of them found in the prefix cache (optigate's synthetic
    prompts share none), and ask `max_new_tokens`.

    Above the slots the wait depends on the slots' phases: the clients' ramp leaves them nearly even, and each
    request's jitter then walks them apart, so a run's p99 grows with its length until the phases are random.
    `requests`: predict runs of that many measured requests (pooled over replicate runs); None: the long run."""
    _check_modelled(behaviour, mode)
    if concurrency < 1:
        raise ValueError(f"concurrency {concurrency}: expected >= 1")
    if not 0 <= cached_prompt_tokens <= prompt_tokens:
        raise ValueError(f"cached_prompt_tokens {cached_prompt_tokens}: expected 0..{prompt_tokens}")
    tokens = behaviour.output_tokens or max_new_tokens
    prefill = prefill_ms(behaviour, prompt_tokens - (cached_prompt_tokens if behaviour.prefix_caching else 0))
    slots = batch_slots(behaviour, prompt_tokens, tokens)
    if slots == 0:
        raise ValueError(f"a request of {prompt_tokens} + {tokens} tokens never fits the KV cache")
    if slots is None or concurrency <= slots:
        base = behaviour.ttft_ms_per_active_stream * (concurrency - 1) + prefill
        return Prediction(
            concurrency,
            concurrency,
            quantile(behaviour.ttft_ms, P99) + base,
            _itl_quantile(behaviour, concurrency, P99),
            0.0,
            False,
            _mean_tpot(behaviour, concurrency),
            quantile(behaviour.ttft_ms, P90) + base,
            _itl_quantile(behaviour, concurrency, P90),
        )
    bands: dict[int, tuple[float, float]] = {}
    if requests is None:
        long_run = max(LONG_RUN, 40 * concurrency)  # 40 rounds per client at least
        ttfts, mean_wait = _simulated_ttfts(behaviour, concurrency, slots, tokens, prefill, seed, long_run)
    else:
        ttfts, waits, per_run = [], [], []
        for replicate in range(max(1, math.ceil(POOLED / requests))):
            run, wait = _simulated_ttfts(behaviour, concurrency, slots, tokens, prefill, seed + replicate, requests)
            ttfts += run
            waits.append(wait)
            per_run.append(sorted(run))
        mean_wait = sum(waits) / len(waits)
        for q in (90, 99):
            values = sorted(percentile(run, q) for run in per_run)
            bands[q] = (percentile(values, 2.5), percentile(values, 97.5))
    ttfts.sort()
    return Prediction(
        concurrency,
        slots,
        percentile(ttfts, 99),
        _itl_quantile(behaviour, slots, P99),
        mean_wait,
        True,
        _mean_tpot(behaviour, slots),
        percentile(ttfts, 90),
        _itl_quantile(behaviour, slots, P90),
        bands.get(90),
        bands.get(99),
    )


def _within(prediction: Prediction, slo: Slo) -> bool:
    return (slo.p99_ttft_ms is None or prediction.p99_ttft_ms <= slo.p99_ttft_ms) and (
        slo.p99_itl_ms is None or prediction.p99_itl_ms <= slo.p99_itl_ms
    )


def capacity_truth(
    behaviour: Behaviour,
    slo: Slo,
    *,
    prompt_tokens: int,
    max_new_tokens: int,
    mode: str = "closed",
    max_concurrency: int = 4096,
    cached_prompt_tokens: int = 0,
    requests: int | None = None,
) -> int:
    """The highest closed-loop concurrency whose p99 TTFT and p99 ITL are within `slo` (0: not even one client),
    for runs of `requests` measured requests (see `predict`; None: the long run, the lowest capacity).
    The model's latencies grow with concurrency, so it brackets by doubling and bisects."""

    def holds(concurrency: int) -> bool:
        prediction = predict(
            behaviour,
            concurrency,
            prompt_tokens=prompt_tokens,
            max_new_tokens=max_new_tokens,
            mode=mode,
            cached_prompt_tokens=cached_prompt_tokens,
            requests=requests,
        )
        return _within(prediction, slo)

    if not holds(1):
        return 0
    low, high = 1, 2
    while high <= max_concurrency and holds(high):
        low, high = high, high * 2
    if high > max_concurrency:
        if holds(max_concurrency):
            return max_concurrency
        high = max_concurrency
    while high - low > 1:  # holds(low), not holds(high)
        middle = (low + high) // 2
        low, high = (middle, high) if holds(middle) else (low, middle)
    return low
