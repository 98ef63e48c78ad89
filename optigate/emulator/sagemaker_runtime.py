# Over 400 lines: the runtime's routes (invoke, stream, metrics, trace) share one request path and its faults.
"""A local SageMaker-runtime emulator for LLM endpoints (`optigate emulate`). Only ever bind it to loopback.

`POST /endpoints/{name}/invocations` and `/invocations-response-stream` as SageMaker serves them: the stream is
`application/vnd.amazon.eventstream` with real framing (prelude, headers, both CRC32s) carrying what LMI streams in the
engine mode for the request's schema (optigate.emulator.lmi_streams), errors carry `X-Amzn-ErrorType` as boto3 expects,
and the target variant and inference component headers select the behaviour. Per endpoint, variant or component:
TTFT and ITL distributions, output length, tokens per chunk, frames per socket write, the engine mode, faults
(throttling, ModelError, ModelStreamError mid-stream, reset, stall), and LoRA residency (`max_loras` slots, LRU,
`adapter_load_ms`: optigate.emulator.config.EndpointConfig). Each server is a batch (optigate.emulator.server): slots
(`max_num_seqs`), KV admission (`kv_cache_tokens`), prefill per uncached prompt token with prefix caching, speculative
steps; optigate.emulator.truth predicts it. `capture_dir` receives each InvokeEndpoint request (streamed ones
too with `capture_streams`: an assumed surface) as SageMaker's data capture writes it. Each server stands for a
container (`container`) and publishes only what optigate.serving.surfaces says it does
(optigate.emulator.emulated_surfaces: no `GET /metrics` on LMI). It records when it sent each chunk
(`GET /_emulator/trace`, the same monotonic clock), so a benchmark's measurement error can be computed against the
emulator's own clock.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import random
import time
import uuid
from collections import OrderedDict
from typing import Any

from aiohttp import web

from optigate.bench.core.event_loop import run_loop
from optigate.bench.core.eventstream import payload_part, stream_exception
from optigate.emulator.answers import AnswerBook
from optigate.emulator.config import Behaviour, EmulatorConfig
from optigate.emulator.emulated_surfaces import metrics_page, stream_form
from optigate.emulator.latency_model import draw_accepted, prefill_ms, prompt_text, prompt_words, step_overhead_ms
from optigate.emulator.lmi_streams import WORDS, LmiStream
from optigate.emulator.scheduler import Batch
from optigate.emulator.server import Admission, CaptureWriter, Server

LOOPBACK = "127.0.0.1"
EMULATOR_KEY: web.AppKey[Emulator] = web.AppKey("emulator")


# ----------------------------------------------------------------------------- payloads


def _requested_tokens(body: dict[str, Any]) -> int:
    parameters = body.get("parameters") or {}
    return int(parameters.get("max_new_tokens") or body.get("max_tokens") or body.get("max_new_tokens") or 64)


# ----------------------------------------------------------------------------- server


class Emulator:
    def __init__(self, config: EmulatorConfig) -> None:
        self.config = config
        self.rng = random.Random(config.seed)
        self.trace: dict[str, dict[str, Any]] = {}
        self.app = web.Application()
        self.app[EMULATOR_KEY] = self
        self.app.router.add_post("/endpoints/{name}/invocations-response-stream", self.stream)
        self.app.router.add_post("/endpoints/{name}/invocations", self.invoke)
        self.app.router.add_get("/_emulator/trace", self.get_trace)
        self.app.router.add_delete("/_emulator/trace", self.clear_trace)
        self.app.router.add_get("/metrics", self.get_metrics)
        self.app.router.add_get("/_emulator/metrics", self.get_metrics)
        self.active_streams = 0
        # One emulated server per endpoint and variant (or component); those without max_num_seqs or
        # kv_cache_tokens share one unlimited batch (per-active-stream slowdowns count all of them, as ever).
        self.shared_batch = Batch(None)
        self.servers: dict[tuple[str, str], Server] = {}
        self.capture = CaptureWriter(config.capture_dir) if config.capture_dir else None
        self.books: dict[int, AnswerBook] = {}
        # Per endpoint: the adapter components in its GPU slots, least recently used first, each with the loop time
        # its weights are loaded by. Read and updated with no await in between: safe under the one event loop.
        self.resident: dict[str, OrderedDict[str, float]] = {}

    async def get_metrics(self, request: web.Request) -> web.Response:
        """The container metrics of each server whose container serves them (none on LMI: 404, as djl-serving
        answers), or at /_emulator/metrics every server's state, for tests (optigate.emulator.emulated_surfaces)."""
        text = metrics_page(self.servers, request.query.get("endpoint"), own=request.path.startswith("/_emulator/"))
        if text is None:
            return web.Response(status=404, text="Resource not found")  # djl-serving's InvalidRequestHandler
        return web.Response(text=text, content_type="text/plain", charset="utf-8")

    async def get_trace(self, _request: web.Request) -> web.Response:
        return web.json_response(self.trace)

    async def clear_trace(self, _request: web.Request) -> web.Response:
        self.trace.clear()
        return web.json_response({"cleared": True})

    def _error(self, status: int, error_type: str, message: str, request_id: str) -> web.Response:
        return web.json_response(
            {"message": message, "ErrorCode": error_type},
            status=status,
            headers={
                "X-Amzn-ErrorType": f"{error_type}:http://internal.amazon.com/coral/com.amazon.coral.service/",
                "x-amzn-RequestId": request_id,
            },
        )

    def _adapter_slot(self, endpoint: str, component: str | None) -> tuple[bool | None, float]:
        """(resident, ms before the first token can come) for a request to `component`: None for a request that
        needs no adapter slot (the base, a variant); an adapter not in the endpoint's `max_loras` slots takes one,
        evicting the least recently used, and waits `adapter_load_ms`; one still loading waits for the rest."""
        config = self.config.endpoints.get(endpoint)
        if config is None or component is None or component not in config.adapter_bases:
            return None, 0.0
        if config.max_loras is None:
            return True, 0.0
        slots = self.resident.setdefault(endpoint, OrderedDict())
        now = asyncio.get_running_loop().time()
        if component in slots:
            slots.move_to_end(component)
            return True, max(0.0, slots[component] - now) * 1000
        load_ms = config.adapter_load_ms.sample(self.rng)
        while len(slots) >= config.max_loras:
            slots.popitem(last=False)
        slots[component] = now + load_ms / 1000
        return False, load_ms

    def _server(self, behaviour: Behaviour, endpoint: str, variant: str) -> Server:
        server = self.servers.get((endpoint, variant))
        if server is None:
            server = self.servers[(endpoint, variant)] = Server(behaviour, endpoint, variant, self.shared_batch)
        return server

    def _admitted(self, request_id: str, admission: Admission) -> None:
        if self.config.record_trace and request_id in self.trace:
            self.trace[request_id]["queue_ms"] = admission.waited_s * 1000
            self.trace[request_id]["cached_prompt_tokens"] = admission.cached_tokens

    def _select(self, request: web.Request) -> tuple[Behaviour | None, str]:
        name = request.match_info["name"]
        variant = request.headers.get("X-Amzn-SageMaker-Target-Variant")
        component = request.headers.get("X-Amzn-SageMaker-Inference-Component")
        return self.config.behaviour_for(name, variant, component), variant or component or "AllTraffic"

    async def _prelude(
        self, request: web.Request, streamed: bool = False
    ) -> tuple[Any, dict[str, Any], str, str, float]:
        """The request's behaviour (or the error answer), body, id, variant label, and adapter load wait in ms; a
        `streamed` one captured only with `capture_streams` (optigate.serving.surfaces: an assumed surface)."""
        received = time.perf_counter()
        request_id = str(uuid.uuid4())
        behaviour, variant = self._select(request)
        if behaviour is None:
            return (
                self._error(
                    400,
                    "ValidationError",
                    f"Endpoint {request.match_info['name']} (variant {variant}) not found.",
                    request_id,
                ),
                {},
                request_id,
                variant,
                0.0,
            )
        try:
            raw = await request.read()
            body = json.loads(raw or b"{}")
        except ValueError:
            error = self._error(400, "ValidationError", "Request body is not JSON.", request_id)
            return error, {}, request_id, variant, 0.0
        if self.rng.random() < behaviour.throttle_rate:
            return self._error(429, "ThrottlingException", "Rate exceeded", request_id), body, request_id, variant, 0.0
        if self.rng.random() < behaviour.model_error_rate:
            return (
                self._error(
                    424,
                    "ModelError",
                    'Received server error (500) from primary with message "CUDA out of memory".',
                    request_id,
                ),
                body,
                request_id,
                variant,
                0.0,
            )
        component = request.headers.get("X-Amzn-SageMaker-Inference-Component")
        if self.capture is not None and (self.config.capture_streams or not streamed):  # what reached the model
            variant_name = request.headers.get("X-Amzn-SageMaker-Target-Variant") or "AllTraffic"
            content_type = request.headers.get("Content-Type", "application/json")
            self.capture.write(request.match_info["name"], variant_name, raw, request_id, content_type)
        resident, load_ms = self._adapter_slot(request.match_info["name"], component)
        if self.config.record_trace:
            self.trace[request_id] = {
                "endpoint": request.match_info["name"],
                "variant": variant,
                "component": component,
                "resident": resident,  # None: no adapter slot needed (the base, a variant)
                "adapter_load_ms": load_ms,
                "received_at": received,
                "sends": [],
            }
        return behaviour, body, request_id, variant, load_ms

    async def invoke(self, request: web.Request) -> web.Response:
        behaviour, body, request_id, variant, load_ms = await self._prelude(request)
        if isinstance(behaviour, web.Response):
            return behaviour
        words = self._answer_words(behaviour, body)
        total = len(words) if words else behaviour.output_tokens or _requested_tokens(body)
        server = self._server(behaviour, request.match_info["name"], variant)
        words_in = prompt_words(body)
        if not server.fits_at_all(server.kv_need(len(words_in), total)):
            return self._too_long(request_id, server, len(words_in), total)
        async with server.admitted(words_in, total, stream=False) as admission:
            self._admitted(request_id, admission)
            await self._answer_after(behaviour, total, load_ms + prefill_ms(behaviour, admission.uncached_tokens))
            server.metrics.add("vllm:generation_tokens_total", total)
        text = " ".join(words) if words else "".join(" " + WORDS[i % len(WORDS)] for i in range(total))
        if "messages" in body:
            payload: dict[str, Any] = {
                "object": "chat.completion",
                "choices": [{"index": 0, "message": {"role": "assistant", "content": text}}],
                "usage": {"completion_tokens": total},
            }
        else:
            payload = {"generated_text": text}
        return web.json_response(
            payload, headers={"x-amzn-RequestId": request_id, "x-Amzn-Invoked-Production-Variant": variant}
        )

    def _too_long(self, request_id: str, server: Server, prompt: int, output: int) -> web.Response:
        message = (
            f'Received client error (400) from primary with message "{prompt} prompt + {output} output tokens '
            f'exceed the KV cache of {server.batch.kv_tokens} tokens".'
        )
        return self._error(424, "ModelError", message, request_id)

    async def _answer_after(self, behaviour: Behaviour, total: int, load_ms: float) -> None:
        """Wait as long as the whole answer takes (a non-streaming invocation)."""
        delay = (
            load_ms
            + behaviour.ttft_ms.sample(self.rng)
            + sum(behaviour.itl_ms.sample(self.rng) for _ in range(total - 1))
        )
        await asyncio.sleep(delay / 1000)

    def _answer_words(self, behaviour: Behaviour, body: dict[str, Any]) -> list[str] | None:
        if not behaviour.answers_file:
            return None
        book = self.books.get(id(behaviour))
        if book is None:
            book = self.books[id(behaviour)] = AnswerBook(behaviour)
        return book.answer(prompt_text(body)).split() or [""]

    async def stream(self, request: web.Request) -> web.StreamResponse:
        behaviour, body, request_id, variant, load_ms = await self._prelude(request, True)
        if isinstance(behaviour, web.Response):
            return behaviour
        form = stream_form(behaviour, body)
        if isinstance(form, str):
            return self._error(400, "ValidationError", form, request_id)
        rng = self.rng
        words = self._answer_words(behaviour, body)
        total = len(words) if words else behaviour.output_tokens or _requested_tokens(body)
        server = self._server(behaviour, request.match_info["name"], variant)
        prompt = prompt_words(body)
        if not server.fits_at_all(server.kv_need(len(prompt), total)):
            return self._too_long(request_id, server, len(prompt), total)
        stream_error = rng.random() < behaviour.stream_error_rate
        reset = rng.random() < behaviour.reset_rate
        stall = rng.random() < behaviour.stall_rate
        response = web.StreamResponse(
            headers={
                "Content-Type": "application/vnd.amazon.eventstream",
                "X-Amzn-SageMaker-Content-Type": "application/jsonlines",
                "x-amzn-RequestId": request_id,
                "x-Amzn-Invoked-Production-Variant": variant,
            }
        )
        response.enable_chunked_encoding()
        await response.prepare(request)
        sends = self.trace[request_id]["sends"] if self.config.record_trace else None
        asyncio.get_running_loop()
        self.active_streams += 1
        try:
            async with server.admitted(prompt, total) as admission:
                self._admitted(request_id, admission)
                load_ms += prefill_ms(behaviour, admission.uncached_tokens)
                faults = (stream_error, reset, stall)
                return await self._send_tokens(
                    request, response, behaviour, total, sends, faults, words, body, load_ms, server, sse=form
                )
        except ConnectionResetError:
            # The client went away mid-stream (its timeout, a cancelled benchmark): nothing left to send, and no
            # traceback either, as a server does not log its clients' hang-ups as its own errors.
            return response
        finally:
            self.active_streams -= 1

    async def _send_tokens(
        self,
        request,
        response,
        behaviour: Behaviour,
        total: int,
        sends,
        faults,
        words=None,
        body=None,
        load_ms=0.0,
        server: Server | None = None,
        sse: bool = False,
    ) -> web.StreamResponse:
        stream_error, reset, stall = faults
        lmi = LmiStream(behaviour.engine_mode, body or {}, total, words, sse=sse)
        rng = self.rng
        loop = asyncio.get_running_loop()
        batch = server.batch if server is not None else self.shared_batch
        metrics = server.metrics if server is not None else None
        load = batch.running - 1
        first_token_ms = load_ms + behaviour.ttft_ms.sample(rng) + behaviour.ttft_ms_per_active_stream * load
        due = loop.time() + first_token_ms / 1000
        sent = 0
        sizes = itertools.cycle(behaviour.tokens_per_chunk)
        count = min(next(sizes), total)
        burst: list[tuple[bytes, int]] = []  # frames due but not written yet (frames_per_write > 1)

        async def flush() -> None:
            if not burst:
                return
            if sends is not None:
                # Stamped as the frames are handed to the transport: `write` may then wait for the
                # socket to drain, and that wait is not part of when the server produced the token.
                now = time.perf_counter()
                sends.extend((now, tokens) for _, tokens in burst)
            data = b"".join(frame for frame, _ in burst)
            burst.clear()
            await response.write(data)

        while sent < total:
            delay = due - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            if sent >= behaviour.fault_after_tokens and (stream_error or reset or stall):
                await flush()
                if stream_error:
                    await response.write(stream_exception("ModelStreamError", "Model stream error: generation failed"))
                    break
                if reset:
                    if request.transport is not None:  # already gone: nothing to reset
                        request.transport.abort()
                    return response
                await asyncio.sleep(behaviour.stall_seconds)  # a stall: the client must time out
                stall = False
            burst.append((payload_part(lmi.chunk(sent, count)), count))
            if len(burst) >= behaviour.frames_per_write:
                await flush()
            sent += count
            if metrics is not None:
                metrics.add("vllm:generation_tokens_total", count)
            if behaviour.num_speculative_tokens and sent < total:
                # One speculative step: the accepted drafts and the target's own token, after one step's time.
                accepted = draw_accepted(behaviour, rng)
                count = min(accepted + 1, total - sent)
                due += (behaviour.itl_ms.sample(rng) + step_overhead_ms(behaviour, batch.running)) / 1000
                if metrics is not None:
                    metrics.add("vllm:spec_decode_num_drafts_total", 1)
                    metrics.add("vllm:spec_decode_num_draft_tokens_total", behaviour.num_speculative_tokens)
                    metrics.add("vllm:spec_decode_num_accepted_tokens_total", count - 1)
                continue
            # A chunk of k tokens takes k decode steps: it is due k inter-token latencies later.
            count = min(next(sizes), total - sent)
            slowdown = behaviour.itl_ms_per_active_stream * (batch.running - 1)
            due += sum(behaviour.itl_ms.sample(rng) + slowdown for _ in range(count)) / 1000
        await flush()
        await response.write_eof()
        return response


async def start(config: EmulatorConfig, host: str = LOOPBACK, port: int = 0) -> tuple[web.AppRunner, int]:
    """Start the emulator in the running loop; returns the runner and the bound port."""
    emulator = Emulator(config)
    runner = web.AppRunner(emulator.app, access_log=None, handle_signals=False)
    await runner.setup()
    site = web.TCPSite(runner, host, port, backlog=2048)
    await site.start()
    bound = runner.addresses[0][1]
    return runner, bound


def emulator_of(runner: web.AppRunner) -> Emulator:
    return runner.app[EMULATOR_KEY]


def serve(config: EmulatorConfig, host: str = LOOPBACK, port: int = 8080, ready: Any = None) -> None:
    """Run until interrupted (the `optigate emulate` command and optigate.emulator.process)."""
    if host not in (LOOPBACK, "localhost", "::1"):
        raise ValueError("the emulator binds to loopback only")

    async def main() -> None:
        runner, bound = await start(config, host, port)
        if ready is not None:
            ready(bound)
        try:
            await asyncio.Event().wait()
        finally:
            await runner.cleanup()

    run_loop(main())
