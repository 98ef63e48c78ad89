"""LoRA residency in the runtime emulator: adapter components share an endpoint's `max_loras` GPU slots (LRU); a
request whose adapter is not resident waits `adapter_load_ms` more for its first token; the trace says which."""

from __future__ import annotations

import asyncio
import time

import aiohttp
import pytest

from optigate.bench.core.client import StreamingClient, Target
from optigate.bench.core.load import LoadSpec, run_load
from optigate.emulator.sagemaker_runtime import EmulatorConfig, emulator_of, start

LOAD_MS = 300.0  # far above the configured TTFT, so a busy host cannot blur resident and not


def _config(max_loras: int | None, adapters=("reply", "route", "triage")) -> dict:
    components = {"support-base": {}} | {name: {"base_inference_component": "support-base"} for name in adapters}
    components["triage"] = {**components.get("triage", {}), "ttft_ms": 60}  # one adapter slower than the others
    endpoint = {"ttft_ms": 20, "itl_ms": 2, "output_tokens": 4, "inference_components": components}
    if max_loras is not None:
        endpoint |= {"max_loras": max_loras, "adapter_load_ms": LOAD_MS}
    return {"endpoints": {"support": endpoint}}


async def _sequence(config: dict, components: list[str], concurrency: int = 1) -> list[dict]:
    """One request per component, in order (each after the previous one finished unless `concurrency` > 1, then
    all at once to the first component); the emulator's trace entry of each, in order."""
    runner, port = await start(EmulatorConfig.parse(config))
    url, trace = f"http://127.0.0.1:{port}", emulator_of(runner).trace
    try:
        records = []
        for component in components:
            target = Target("support", endpoint_url=url, inference_component=component)
            spec = LoadSpec(concurrency, requests=concurrency, max_new_tokens=4, prompt_tokens=8, warmup=False)
            result = await run_load(StreamingClient(target, timeout=5.0), spec)
            records += sorted(result.records, key=lambda r: r.sent_at)
        return [trace[r.request_id] for r in records]
    finally:
        await runner.cleanup()


def _server_ttft_ms(entry: dict) -> float:
    return (entry["sends"][0][0] - entry["received_at"]) * 1000


@pytest.mark.slow
def test_a_swap_costs_the_load_time_and_evicts_the_least_recently_used_adapter():
    order = ["reply", "route", "reply", "triage", "route", "support-base"]
    entries = asyncio.run(_sequence(_config(max_loras=2), order))
    assert [e["component"] for e in entries] == order
    # reply and route load; reply is resident; triage evicts route (least recently used), not reply; route
    # reloads; the base needs no slot.
    assert [e["resident"] for e in entries] == [False, False, True, False, False, None]
    ttft = [_server_ttft_ms(e) for e in entries]
    for entry, first_token in zip(entries, ttft, strict=True):
        if entry["resident"] is False:
            assert first_token >= LOAD_MS and entry["adapter_load_ms"] == LOAD_MS
        else:
            assert first_token < LOAD_MS and entry["adapter_load_ms"] == 0.0
    assert ttft[3] >= LOAD_MS + 60  # triage's own, slower behaviour on top of the swap


@pytest.mark.slow
def test_enough_slots_load_each_adapter_once():
    order = ["reply", "route", "triage", "reply", "route", "triage"]
    entries = asyncio.run(_sequence(_config(max_loras=3), order))
    assert [e["resident"] for e in entries] == [False] * 3 + [True] * 3


@pytest.mark.slow
def test_without_max_loras_adapters_never_wait():
    entries = asyncio.run(_sequence(_config(max_loras=None), ["reply", "route", "reply"]))
    assert [e["resident"] for e in entries] == [True, True, True]
    assert all(_server_ttft_ms(e) < LOAD_MS for e in entries)


def test_concurrent_requests_for_a_loading_adapter_all_wait_for_it():
    entries = asyncio.run(_sequence(_config(max_loras=1), ["reply"], concurrency=3))
    # One takes the slot and loads; the others find it loading and wait for the rest of the load.
    assert sorted(e["resident"] for e in entries) == [False, True, True]
    assert all(_server_ttft_ms(e) >= LOAD_MS * 0.9 for e in entries)


def test_a_non_streaming_invocation_pays_the_swap_too():
    async def body():
        runner, port = await start(EmulatorConfig.parse(_config(max_loras=1)))
        try:
            async with aiohttp.ClientSession() as session:
                headers = {"X-Amzn-SageMaker-Inference-Component": "reply", "Content-Type": "application/json"}
                url = f"http://127.0.0.1:{port}/endpoints/support/invocations"
                timings = []
                for _ in range(2):
                    started = time.perf_counter()
                    async with session.post(url, json={"inputs": "hi"}, headers=headers) as response:
                        assert response.status == 200
                        await response.read()
                    timings.append((time.perf_counter() - started) * 1000)
            return timings, [e["resident"] for e in emulator_of(runner).trace.values()]
        finally:
            await runner.cleanup()

    (first, second), resident = asyncio.run(body())
    assert resident == [False, True]
    assert first >= LOAD_MS > second


@pytest.mark.parametrize(
    ("endpoint", "message"),
    [
        ({"inference_components": {"reply": {"base_inference_component": "nope"}}}, "is not a base component"),
        (
            {
                "inference_components": {
                    "base": {},
                    "a": {"base_inference_component": "base"},
                    "b": {"base_inference_component": "a"},
                }
            },
            "'a' is not a base component",
        ),
        ({"max_loras": 0}, "max_loras: 0, expected a whole number"),
        ({"max_loras": 2, "adapter_load_ms": -5}, "adapter_load_ms: -5, expected >= 0"),
        ({"inference_components": {"base": {"max_loras": 2}}}, "unknown emulator setting"),
    ],
)
def test_residency_settings_are_checked(endpoint, message):
    with pytest.raises(ValueError, match=message):
        EmulatorConfig.parse({"endpoints": {"support": endpoint}})
