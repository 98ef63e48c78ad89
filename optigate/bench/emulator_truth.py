"""What the emulator's latency model says a load gets: the truth a capacity search is judged against.

The emulator (optigate.bench.runtime_emulator) gives a request, once it holds one of `max_num_seqs` slots,
a first token after `ttft_ms + ttft_ms_per_active_stream * (running - 1)` and each further token after
`itl_ms + itl_ms_per_active_stream * (running - 1)`. Under a closed loop of `c` clients (optigate's own:
a warm-up probe, then the clients start staggered by the probe's duration / c and each client's first request is
a warm-up) this module predicts the p99 TTFT and p99 ITL:

- c <= max_num_seqs (or no slots): nobody waits, `running` is c; both p99s are **analytic**: the distribution's
  99th percentile plus the slowdown (ITL per token as the client computes it: a chunk's gap over its tokens).
- c > max_num_seqs: `running` is max_num_seqs and every request waits for a slot; the wait depends on how the
  slots' finishing times are spread (the clients' stagger sets it), so the TTFT is a **fast simulation** of the
  same model at the level of whole requests (slots, FIFO queue, the clients' stagger and warm-ups; a request's
  time in its slot drawn from the same distributions), seeded, over enough requests for a steady p99.

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

from optigate.bench.emulator_config import Behaviour, Distribution
from optigate.bench.goodput import Slo
from optigate.bench.metrics import percentile

P99 = 0.99
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


def _p99_itl(behaviour: Behaviour, running: int) -> float:
    """Per token as the client computes it: a chunk of k tokens arrives k draws after the last one, and each of
    its tokens counts gap / k; chunk sizes cycle, so tokens are a mixture weighted by the chunk sizes."""
    slowdown = behaviour.itl_ms_per_active_stream * (running - 1)
    itl = behaviour.itl_ms
    sizes = behaviour.tokens_per_chunk
    if len(set(sizes)) == 1 and sizes[0] == 1:
        return quantile(itl, P99) + slowdown
    sd = 0.0 if itl.kind == "fixed" else itl.jitter
    parts = [(float(k), itl.mean + slowdown, sd / math.sqrt(k)) for k in sizes]
    return _mixture_quantile(parts, P99)


def _service_ms(behaviour: Behaviour, tokens: int, running: int, rng: random.Random) -> tuple[float, float]:
    """(time to the first token, time in the slot) of one request among `running`, drawn."""
    ttft = behaviour.ttft_ms.sample(rng) + behaviour.ttft_ms_per_active_stream * (running - 1)
    itl = behaviour.itl_ms
    steps = tokens - 1
    sd = 0.0 if itl.kind == "fixed" else itl.jitter * math.sqrt(steps)
    decode = max(0.0, rng.gauss(itl.mean * steps, sd)) if sd > 0 else itl.mean * steps
    return ttft, ttft + decode + behaviour.itl_ms_per_active_stream * (running - 1) * steps


def _simulated_ttfts(behaviour: Behaviour, concurrency: int, tokens: int, seed: int) -> tuple[list[float], float]:
    """TTFTs (ms) of the measured requests and their mean wait, for concurrency > max_num_seqs."""
    slots = int(behaviour.max_num_seqs or concurrency)
    rng = random.Random(seed)
    probe = behaviour.ttft_ms.mean + behaviour.itl_ms.mean * (tokens - 1)  # the client's warm-up probe, alone
    stagger = probe / concurrency
    measured_target = max(2000, 40 * concurrency)
    arrivals: list[tuple[float, int, int]] = [(position * stagger, 0, position) for position in range(concurrency)]
    heapq.heapify(arrivals)
    finishing: list[tuple[float, int]] = []
    queue: deque[tuple[float, int]] = deque()
    sent = [0] * concurrency
    running = 0
    ttfts: list[float] = []
    waits: list[float] = []

    def begin(now: float, arrived: float, client: int) -> None:
        ttft, in_slot = _service_ms(behaviour, tokens, slots, rng)
        if sent[client] > 1:  # each client's first request is its warm-up
            ttfts.append(now - arrived + ttft)
            waits.append(now - arrived)
        heapq.heappush(finishing, (now + in_slot, client))

    order = 0
    while len(ttfts) < measured_target:
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
) -> Prediction:
    """The p99 TTFT and ITL of the emulated server under a closed loop of `concurrency` clients."""
    _check_modelled(behaviour, mode)
    if concurrency < 1:
        raise ValueError(f"concurrency {concurrency}: expected >= 1")
    del prompt_tokens  # the prompt's length costs nothing until a prefill cost per token is modelled
    tokens = behaviour.output_tokens or max_new_tokens
    slots = behaviour.max_num_seqs
    if slots is None or concurrency <= slots:
        ttft = quantile(behaviour.ttft_ms, P99) + behaviour.ttft_ms_per_active_stream * (concurrency - 1)
        return Prediction(concurrency, concurrency, ttft, _p99_itl(behaviour, concurrency), 0.0, False)
    ttfts, mean_wait = _simulated_ttfts(behaviour, concurrency, tokens, seed)
    p99_ttft = percentile(sorted(ttfts), 99)
    return Prediction(concurrency, slots, p99_ttft, _p99_itl(behaviour, slots), mean_wait, True)


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
) -> int:
    """The highest closed-loop concurrency whose p99 TTFT and p99 ITL are within `slo` (0: not even one client).
    The model's latencies grow with concurrency, so it brackets by doubling and bisects."""

    def holds(concurrency: int) -> bool:
        return _within(
            predict(behaviour, concurrency, prompt_tokens=prompt_tokens, max_new_tokens=max_new_tokens, mode=mode),
            slo,
        )

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
