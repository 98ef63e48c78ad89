"""A local SageMaker-runtime emulator for LLM endpoints (`optigate emulate`).

It serves `POST /endpoints/{name}/invocations` and `/invocations-response-stream` the way
SageMaker does: the streaming response is `application/vnd.amazon.eventstream` with real
framing (prelude, headers, both CRC32s) carrying what LMI streams in the configured engine mode for the
request's schema (optigate.bench.lmi_streams: async mode's chat chunks, the rolling batch's token lines),
errors come back with `X-Amzn-ErrorType` as boto3 expects, and the target variant and inference
component headers select per-variant behaviour. boto3 talks to it through `endpoint_url`.

Behaviour per endpoint (and per variant / inference component) is configurable: TTFT and ITL
distributions, output length, tokens per chunk (speculative decoding), frames per socket write
(a server that flushes in bursts), LMI's engine mode, and injected faults (throttling, ModelError,
ModelStreamError mid-stream, connection reset, stall). LoRA residency per endpoint: adapter components take
one of `max_loras` GPU slots (LRU); a request whose adapter is not resident waits `adapter_load_ms` more for its
first token (emulator_config.EndpointConfig).
It records when it actually sent each chunk, so a benchmark's measurement error can be computed
against the emulator's own clock (`GET /_emulator/trace`; same host, same monotonic clock).

Only ever bind it to loopback.
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

from optigate.bench.emulator_config import Behaviour, EmulatorConfig
from optigate.bench.emulator_scheduler import Batch
from optigate.bench.eventstream import payload_part, stream_exception
from optigate.bench.lmi_streams import WORDS, LmiStream

LOOPBACK = "127.0.0.1"
EMULATOR_KEY: web.AppKey[Emulator] = web.AppKey("emulator")


# ----------------------------------------------------------------------------- payloads


def _requested_tokens(body: dict[str, Any]) -> int:
    parameters = body.get("parameters") or {}
    return int(parameters.get("max_new_tokens") or body.get("max_tokens") or body.get("max_new_tokens") or 64)


# ----------------------------------------------------------------------------- answer mode

REFUSAL_TEXT = "I'm sorry, but I can't help with that request."
WRONG_TEXT = "I believe the answer is something else entirely."


class AnswerBook:
    """Answers from a table, with a deterministic share of wrong answers and refusals."""

    def __init__(self, behaviour: Behaviour) -> None:
        import hashlib

        with open(behaviour.answers_file or "", encoding="utf-8") as handle:
            rows = [json.loads(line) for line in handle if line.strip()]
        self.rows = sorted(rows, key=lambda r: -len(str(r.get("model_input") or r.get("prompt") or "")))
        self.exact = {str(r.get("model_input") or r.get("prompt") or ""): r for r in rows}
        self.outcome: dict[str, str] = {}

        def stable(row: dict) -> str:
            return hashlib.sha256(str(row.get("id")).encode()).hexdigest()

        for kind, fraction, categories in (
            ("refuse", behaviour.refuse_fraction, behaviour.refuse_categories),
            ("wrong", behaviour.wrong_fraction, behaviour.wrong_categories),
        ):
            pool = [r for r in rows if not categories or r.get("category") in categories]
            pool = [r for r in sorted(pool, key=stable) if str(r.get("id")) not in self.outcome]
            for row in pool[: round(fraction * len(pool))]:
                self.outcome[str(row.get("id"))] = kind

    def _row(self, prompt: str) -> dict | None:
        row = self.exact.get(prompt)
        if row is not None:
            return row
        return next((r for r in self.rows if str(r.get("model_input") or r.get("prompt") or "") in prompt), None)

    def answer(self, prompt: str) -> str:
        row = self._row(prompt)
        if row is None:
            return "I do not know."
        kind = self.outcome.get(str(row.get("id")))
        if kind == "refuse":
            return REFUSAL_TEXT
        if kind == "wrong":
            return WRONG_TEXT
        return str(row.get("target_output") or row.get("answer") or "").split("<OR>")[0]


def _prompt_of(body: dict[str, Any]) -> str:
    if "messages" in body:
        return " ".join(str(m.get("content", "")) for m in body["messages"] if isinstance(m, dict))
    return str(body.get("inputs") or body.get("prompt") or "")


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
        self.app.router.add_get("/ping", self.ping)
        self.active_streams = 0
        # The batches: one per endpoint and variant (or component) with max_num_seqs slots, and one unlimited batch
        # shared by every other stream (so per-active-stream slowdowns count all of them, as before slots existed).
        self.batches: dict[tuple[str, str] | None, Batch] = {None: Batch(None)}
        self.books: dict[int, AnswerBook] = {}
        # Per endpoint: the adapter components in its GPU slots, least recently used first, each with the loop time
        # its weights are loaded by. Read and updated with no await in between: safe under the one event loop.
        self.resident: dict[str, OrderedDict[str, float]] = {}

    async def ping(self, _request: web.Request) -> web.Response:
        return web.Response(text="ok")

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

    def _batch(self, behaviour: Behaviour, endpoint: str, variant: str) -> Batch:
        if behaviour.max_num_seqs is None:
            return self.batches[None]
        key = (endpoint, variant)
        batch = self.batches.get(key)
        if batch is None or batch.slots != behaviour.max_num_seqs:
            batch = self.batches[key] = Batch(behaviour.max_num_seqs)
        return batch

    def _queued(self, request_id: str, waited_s: float) -> None:
        if self.config.record_trace and request_id in self.trace:
            self.trace[request_id]["queue_ms"] = waited_s * 1000

    def _select(self, request: web.Request) -> tuple[Behaviour | None, str]:
        name = request.match_info["name"]
        variant = request.headers.get("X-Amzn-SageMaker-Target-Variant")
        component = request.headers.get("X-Amzn-SageMaker-Inference-Component")
        return self.config.behaviour_for(name, variant, component), variant or component or "AllTraffic"

    async def _prelude(self, request: web.Request) -> tuple[Behaviour | web.Response, dict[str, Any], str, str, float]:
        """The request's behaviour (or the error answer), body, id, variant label, and adapter load wait in ms."""
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
            body = json.loads(await request.read() or b"{}")
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
        batch = self._batch(behaviour, request.match_info["name"], variant) if behaviour.max_num_seqs else None
        if batch is not None:
            self._queued(request_id, await batch.enter())
        try:
            await self._answer_after(behaviour, total, load_ms)
        finally:
            if batch is not None:
                batch.leave()
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
        return book.answer(_prompt_of(body)).split() or [""]

    async def stream(self, request: web.Request) -> web.StreamResponse:
        behaviour, body, request_id, variant, load_ms = await self._prelude(request)
        if isinstance(behaviour, web.Response):
            return behaviour
        rng = self.rng
        words = self._answer_words(behaviour, body)
        total = len(words) if words else behaviour.output_tokens or _requested_tokens(body)
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
            batch = self._batch(behaviour, request.match_info["name"], variant)
            self._queued(request_id, await batch.enter())
            try:
                return await self._send_tokens(
                    request,
                    response,
                    behaviour,
                    total,
                    sends,
                    (stream_error, reset, stall),
                    words,
                    body,
                    load_ms,
                    batch,
                )
            finally:
                batch.leave()
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
        batch: Batch | None = None,
    ) -> web.StreamResponse:
        stream_error, reset, stall = faults
        lmi = LmiStream(behaviour.engine_mode, body or {}, total, words)
        rng = self.rng
        loop = asyncio.get_running_loop()
        batch = batch or self.batches[None]
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
    """Run until interrupted (the `optigate emulate` command and optigate.bench.emulator_process)."""
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


def run_loop(coroutine: Any) -> Any:
    """uvloop when installed (a faster event loop keeps timestamps honest), else asyncio."""
    try:
        import uvloop
    except ImportError:
        return asyncio.run(coroutine)
    return uvloop.run(coroutine)
