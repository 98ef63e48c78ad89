"""The emulator serves only what optigate.serving.surfaces says the emulated container and service publish: a route or
stream without a row fails here, and an LMI container serves no /metrics (djl-serving answers 404)."""

from __future__ import annotations

import asyncio

import aiohttp
import pytest

from optigate.bench.core.payloads import SCHEMAS
from optigate.emulator.config import DEFAULT_CONTAINER, EmulatorConfig, emulated_container
from optigate.emulator.container_metrics import COUNTERS, GAUGES, QUEUE_TIME
from optigate.emulator.emulated_surfaces import CONTAINER, ROUTE_SURFACES
from optigate.emulator.lmi_streams import LmiStream
from optigate.emulator.sagemaker_runtime import Emulator
from optigate.serving import surfaces
from tests.fixtures.emulation import serve


def _routes() -> set[str]:
    app = Emulator(EmulatorConfig()).app
    return {f"{route.method} {route.resource.canonical}" for route in app.router.routes() if route.resource}


def test_every_route_the_emulator_serves_emulates_a_surface_with_a_row():
    routes = {route for route in _routes() if route.split(" ")[0] != "HEAD"}
    own = {route for route in routes if route.split(" ", 1)[1].startswith("/_emulator/")}
    assert routes - own == set(ROUTE_SURFACES), "name the surface of each route in ROUTE_SURFACES"
    for route, (publisher, kind, name) in ROUTE_SURFACES.items():
        # A container route: a row for every family the emulator can stand for (present or, as sourced, absent).
        for who in surfaces.FAMILIES if publisher == CONTAINER else (publisher,):
            rows = [row for row in surfaces.TABLE if row.key == (who, kind, name)]
            assert rows, f"{route}: no row for {who} {kind} {name!r}"


def test_every_stream_the_emulator_can_emit_for_its_default_container_has_a_row():
    container = emulated_container(DEFAULT_CONTAINER)
    emitted = {(mode, schema) for mode, schemas in SCHEMAS.items() for schema in schemas}
    emitted |= {("async", "inputs")}  # LmiStream writes it too (the benchmark refuses to measure it)
    for mode, schema in sorted(emitted):
        assert LmiStream(mode, {"messages": []} if schema == "messages" else {"inputs": "x"}, 2).chunk(0, 1)
        name = surfaces.stream_name(mode, schema)
        row = surfaces.resolve(container, "stream", name) or surfaces.resolve(
            container, "stream", name + " (server-sent events)"
        )
        assert row is not None, f"{container}: no row for the stream {name!r}"


def test_the_metrics_the_emulator_can_render_are_rows_of_every_container_that_serves_them():
    rendered = {name.removesuffix("_total") for name, _ in (*GAUGES, *COUNTERS)} | {QUEUE_TIME}
    serving = [c for c in surfaces.CONTAINERS if any(r.key == (c, "route", surfaces.METRICS_ROUTE) and r.present
                                                    for r in surfaces.TABLE)]  # fmt: skip
    assert serving == [surfaces.VLLM_DLC]
    named = {row.name for row in surfaces.TABLE if row.publisher == surfaces.VLLM_DLC and row.kind == "metric"}
    # What the gate reads is a row; the rest of the emulator's state is its own (/_emulator/metrics).
    assert {surfaces.SPEC_ACCEPTED, surfaces.SPEC_DRAFTED, "vllm:kv_cache_usage_perc"} <= named & rendered


def test_an_emulated_lmi_container_answers_get_metrics_404_as_djl_serving_does():
    config = EmulatorConfig.parse({"default": {"ttft_ms": 5, "itl_ms": 1, "output_tokens": 3,
                                               "num_speculative_tokens": 2, "acceptance_rate": 0.5}})  # fmt: skip

    async def body(url, _):
        async with aiohttp.ClientSession() as session:
            streamed = await session.post(
                f"{url}/endpoints/chat/invocations-response-stream",
                json={"messages": [{"role": "user", "content": "hi"}], "max_tokens": 3, "stream": True},
            )
            await streamed.read()
            async with session.get(f"{url}/metrics") as scraped:
                container = scraped.status, await scraped.text()
            async with session.get(f"{url}/_emulator/metrics") as own:
                internal = await own.text()
        return streamed.status, container, internal

    status, (metrics_status, text), internal = asyncio.run(serve(config, body))
    assert status == 200 and metrics_status == 404 and "vllm:" not in text
    assert "vllm:spec_decode_num_draft_tokens_total" in internal  # the emulator's own state, for tests


@pytest.mark.parametrize(
    "container, mode, message",
    [("lmi-trtllm:0.33.0-tensorrtllm0.21.0-cu128", "async", "async messages")],
)
def test_a_stream_no_row_says_the_container_publishes_is_refused_naming_the_row(container, mode, message):
    config = EmulatorConfig.parse({"default": {"ttft_ms": 5, "itl_ms": 1, "output_tokens": 3,
                                               "container": container, "engine_mode": mode}})  # fmt: skip

    async def body(url, _):
        async with aiohttp.ClientSession() as session:
            answer = await session.post(
                f"{url}/endpoints/chat/invocations-response-stream",
                json={"messages": [{"role": "user", "content": "hi"}], "max_tokens": 3},
            )
            return answer.status, await answer.json()

    status, answer = asyncio.run(serve(config, body))
    assert status == 400 and message in answer["message"] and "container-surfaces.md" in answer["message"]


@pytest.mark.parametrize("text", ["vllm-dlc:0.11.0", "lmi", "tgi:2.0"])
def test_the_emulator_emulates_optigates_families_only(text):
    with pytest.raises(ValueError, match="expected <family>:<image tag>"):
        EmulatorConfig.parse({"default": {"container": text}})


@pytest.mark.parametrize(
    "container, sse", [("lmi:0.36.0-lmi27.0.0-cu130", True), ("lmi:0.35.0-lmi17.0.0-cu128", False)]
)
def test_the_rolling_batchs_chat_stream_is_server_sent_events_from_lmi26_on(container, sse):
    """djl-serving's rolling-batch chat stream: JSON lines up to lmi25, `data: {...}` events and `data: [DONE]` from
    lmi26 (optigate.serving.surfaces' rows); the benchmark's parser refuses the events (StreamFormatMismatch)."""
    from optigate.bench.core.eventstream import decode_events

    config = EmulatorConfig.parse({"default": {"ttft_ms": 5, "itl_ms": 1, "output_tokens": 3,
                                               "container": container, "engine_mode": "rolling-batch"}})  # fmt: skip

    async def body(url, _):
        async with aiohttp.ClientSession() as session:
            answer = await session.post(
                f"{url}/endpoints/chat/invocations-response-stream",
                json={"messages": [{"role": "user", "content": "hi"}], "max_tokens": 3},
            )
            return answer.status, await answer.read()

    status, raw = asyncio.run(serve(config, body))
    text = b"".join(event.payload for event in decode_events(raw)).decode()
    assert status == 200 and text.startswith("data: {") is sse and text.endswith("data: [DONE]\n\n") is sse
    assert text.count("chat.completion.chunk") == 3
