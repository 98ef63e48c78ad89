"""Batch slots (max_num_seqs) in the emulator, and the capacity truth its latency model gives, checked against the
live emulator measured by optigate's own closed-loop client."""

from __future__ import annotations

import asyncio

import pytest

from optigate.bench.client import Target
from optigate.bench.emulator_config import Behaviour, Distribution, EmulatorConfig
from optigate.bench.emulator_scheduler import Batch
from optigate.bench.emulator_truth import capacity_truth, predict, quantile
from optigate.bench.goodput import Slo
from optigate.bench.load import LoadSpec
from optigate.bench.runner import run_levels
from optigate.bench.runtime_emulator import emulator_of, start


def test_a_full_batch_queues_first_come_first_served_and_hands_freed_slots_over():
    async def body():
        batch = Batch(2)
        order: list[str] = []

        async def request(name: str, hold: float) -> float:
            waited = await batch.enter()
            order.append(name)
            await asyncio.sleep(hold)
            batch.leave()
            return waited

        tasks = [asyncio.create_task(request(name, 0.05)) for name in "abcd"]
        waits = await asyncio.gather(*tasks)
        return order, waits, batch.running

    order, waits, running = asyncio.run(body())
    assert order == list("abcd") and running == 0
    assert waits[0] == waits[1] == 0.0 and all(0.04 <= wait <= 0.09 for wait in waits[2:])


def test_a_waiter_that_gives_up_leaves_the_queue_and_the_slot_count_intact():
    async def body():
        batch = Batch(1)
        await batch.enter()
        waiter = asyncio.create_task(batch.enter())
        await asyncio.sleep(0)
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter
        batch.leave()
        return batch.running, len(batch.waiting)

    assert asyncio.run(body()) == (0, 0)


@pytest.mark.parametrize("slots", [0, -1, 2.5, True, "4"])
def test_max_num_seqs_must_be_a_whole_number_of_slots(slots):
    with pytest.raises(ValueError, match="max_num_seqs"):
        EmulatorConfig.parse({"default": {"max_num_seqs": slots}})


def test_requests_beyond_the_slots_wait_for_one_and_the_wait_is_in_their_ttft_and_queue_time():
    """Two slots, four requests at once, each 10 tokens of 10 ms after a 20 ms TTFT: two wait a whole request."""
    config = EmulatorConfig.parse({"default": {"ttft_ms": 20, "itl_ms": 10, "output_tokens": 10, "max_num_seqs": 2}})

    async def body():
        runner, port = await start(config)
        try:
            spec = LoadSpec(concurrency=4, requests=4, max_new_tokens=10, prompt_tokens=8, warmup=False)
            data = await run_levels(Target("demo", endpoint_url=f"http://127.0.0.1:{port}"), [4], spec, timeout=10)
            return data["runs"][0], emulator_of(runner).trace
        finally:
            await runner.cleanup()

    run, trace = asyncio.run(body())
    ttfts = sorted(run["samples"]["ttft_ms"])
    queued = sorted(entry["queue_ms"] for entry in trace.values())
    assert ttfts[1] < 60 and 100 + 20 <= ttfts[2] < 200  # in-slot: 20 + 9 x 10 = 110 ms before a slot frees
    assert queued[:2] == [0.0, 0.0] and all(100 <= wait < 180 for wait in queued[2:])


def test_without_slots_nothing_queues():
    config = EmulatorConfig.parse({"default": {"ttft_ms": 20, "itl_ms": 10, "output_tokens": 10}})

    async def body():
        runner, port = await start(config)
        try:
            spec = LoadSpec(concurrency=4, requests=4, max_new_tokens=10, prompt_tokens=8, warmup=False)
            data = await run_levels(Target("demo", endpoint_url=f"http://127.0.0.1:{port}"), [4], spec, timeout=10)
            return data["runs"][0]
        finally:
            await runner.cleanup()

    assert max(asyncio.run(body())["samples"]["ttft_ms"]) < 80


def test_capacity_truth_is_the_slowdown_bound_when_slots_are_plenty():
    """ttft 100 ms + 10 ms per other stream: p99 TTFT <= 300 ms holds up to 21 clients (analytic)."""
    behaviour = Behaviour(ttft_ms=Distribution(100.0), itl_ms=Distribution(5.0), ttft_ms_per_active_stream=10.0)
    slo = Slo(p99_ttft_ms=300)
    assert capacity_truth(behaviour, slo, prompt_tokens=64, max_new_tokens=32) == 21
    limited = Behaviour(ttft_ms=Distribution(100.0), itl_ms=Distribution(5.0), itl_ms_per_active_stream=2.0)
    assert capacity_truth(limited, Slo(p99_itl_ms=25), prompt_tokens=64, max_new_tokens=32) == 11


def test_capacity_truth_stops_at_the_slots_when_a_wait_breaks_the_slo():
    """16 slots; a request holds its slot ~1 s, so one client more waits ~60 ms for one: over a 250 ms budget with
    200 ms used, the capacity is exactly the slots, though the slowdown alone would allow 51 clients."""
    behaviour = Behaviour(
        ttft_ms=Distribution(150.0), itl_ms=Distribution(8.0), ttft_ms_per_active_stream=1.0, max_num_seqs=16
    )
    slo = Slo(p99_ttft_ms=250)
    assert capacity_truth(behaviour, slo, prompt_tokens=64, max_new_tokens=128) == 16
    unlimited = Behaviour(ttft_ms=Distribution(150.0), itl_ms=Distribution(8.0), ttft_ms_per_active_stream=1.0)
    assert capacity_truth(unlimited, slo, prompt_tokens=64, max_new_tokens=128) == 101
    at_17 = predict(behaviour, 17, prompt_tokens=64, max_new_tokens=128)
    assert at_17.simulated and at_17.running == 16 and at_17.mean_queue_ms > 50


def test_capacity_truth_is_zero_when_one_client_already_misses_and_refuses_what_it_does_not_model():
    assert (
        capacity_truth(Behaviour(ttft_ms=Distribution(900.0)), Slo(p99_ttft_ms=800), prompt_tokens=8, max_new_tokens=8)
        == 0
    )
    with pytest.raises(ValueError, match="reset_rate"):
        capacity_truth(Behaviour(reset_rate=0.1), Slo(p99_ttft_ms=800), prompt_tokens=8, max_new_tokens=8)
    with pytest.raises(ValueError, match="mode"):
        predict(Behaviour(), 1, prompt_tokens=8, max_new_tokens=8, mode="open")


def test_quantiles_of_the_emulators_distributions():
    assert quantile(Distribution(100.0, 10.0), 0.99) == pytest.approx(123.26, abs=0.01)
    assert quantile(Distribution(100.0, 10.0, "fixed"), 0.99) == 100.0
    lognormal = Distribution(100.0, 30.0, "lognormal")
    import random

    rng = random.Random(1)
    draws = sorted(lognormal.sample(rng) for _ in range(200_000))
    assert quantile(lognormal, 0.99) == pytest.approx(draws[int(0.99 * len(draws))], rel=0.02)


# The live check: optigate's client, closed loop, against the emulator on loopback; below, at and above the slots.
LIVE = Behaviour(
    ttft_ms=Distribution(30.0, 3.0),
    itl_ms=Distribution(10.0, 1.0),
    ttft_ms_per_active_stream=4.0,
    itl_ms_per_active_stream=0.5,
    max_num_seqs=4,
)
LIVE_TOKENS = 10


def test_the_live_emulator_agrees_with_the_truths_p99_below_at_and_above_the_slots():
    levels = [2, 4, 7]
    config = EmulatorConfig(default=LIVE, seed=3)

    async def body():
        runner, port = await start(config)
        try:
            spec = LoadSpec(concurrency=1, requests=50, max_new_tokens=LIVE_TOKENS, prompt_tokens=16)
            return await run_levels(Target("demo", endpoint_url=f"http://127.0.0.1:{port}"), levels, spec, timeout=10)
        finally:
            await runner.cleanup()

    data = asyncio.run(body())
    for level, run in zip(levels, data["runs"], strict=True):
        truth = predict(LIVE, level, prompt_tokens=16, max_new_tokens=LIVE_TOKENS)
        measured_ttft, measured_itl = run["ttft_ms"]["p99"], run["itl_ms"]["p99"]
        # The client adds a few ms on loopback (more on a busy machine); a p99 of 50 requests is a noisy estimate.
        assert measured_ttft == pytest.approx(truth.p99_ttft_ms, rel=0.15, abs=6), (level, run["ttft_ms"], truth)
        # A gap's p99 is a handful of the ~450 gaps: one stall of a busy machine moves it up, never below the model.
        # The median gap shows the batch the server ran (the slowdown counts `running`, capped by the slots).
        assert measured_itl >= truth.p99_itl_ms - 2, (level, run["itl_ms"], truth)
        median_model = LIVE.itl_ms.mean + LIVE.itl_ms_per_active_stream * (truth.running - 1)
        assert run["itl_ms"]["p50"] == pytest.approx(median_model, abs=1.5), (level, run["itl_ms"], truth)
