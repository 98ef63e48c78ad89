"""A streaming client for SageMaker's InvokeEndpointWithResponseStream, built for measuring.

Why not boto3 in a thread pool: at high concurrency the threads contend for the GIL and the
client measures itself (hundreds of ms of p99 TTFT on two cores). Here one asyncio loop owns
every connection and the hot path does nothing but note the arrival time of each received
segment: decoding the event stream (with botocore's parser) and the payload happens after the
request completed. The client needs only the standard library and botocore (SigV4 signing,
event-stream decoding), so it also runs in a Lambda function without packaging anything.
"""

from __future__ import annotations

import asyncio
import functools
import json
import ssl
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, urlsplit

from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from optigate.bench.core.eventstream import IncrementalDecoder
from optigate.bench.core.payloads import PayloadParser

STREAM_PATH = "/endpoints/{name}/invocations-response-stream"


@dataclass(frozen=True)
class Target:
    """Where requests go and how they are addressed."""

    endpoint_name: str
    region: str = "us-east-1"
    endpoint_url: str | None = None  # default: https://runtime.sagemaker.<region>.amazonaws.com
    target_variant: str | None = None
    inference_component: str | None = None
    custom_attributes: str | None = None

    @property
    def url(self) -> str:
        return self.endpoint_url or f"https://runtime.sagemaker.{self.region}.amazonaws.com"


def request_body(prompt: str, max_new_tokens: int, schema: str, extra: dict | None = None) -> bytes:
    """Request bodies for LMI's `inputs` + `parameters` schema or its `messages` (OpenAI) schema; `messages` asks
    for the usage on every chunk, which tells the tokens a chunk carried (optigate.bench.core.payloads)."""
    if schema == "messages":
        body: dict = {
            "messages": [{"role": "user", "content": prompt}],
            "max_tokens": max_new_tokens,
            "stream": True,
            "stream_options": {"include_usage": True, "continuous_usage_stats": True},
        }
    else:
        body = {"inputs": prompt, "parameters": {"max_new_tokens": max_new_tokens, "details": True}, "stream": True}
    body.update(extra or {})
    return json.dumps(body).encode()


@dataclass
class Exchange:
    """One HTTP request/response; body segments are kept raw with their arrival times."""

    sent_at: float = 0.0
    status: int | None = None
    headers: dict[str, str] = field(default_factory=dict)
    segments: list[tuple[float, bytes]] = field(default_factory=list)  # decoded body bytes
    error: str | None = None
    error_detail: str | None = None  # what the error class stands for here, e.g. the refused connection
    done: asyncio.Future | None = None
    keep_alive: bool = True
    # incremental HTTP framing state
    _head: bytes = b""
    _chunked: bool = False
    _remaining: int = 0  # content-length left, or bytes left in the current chunk
    _buffer: bytes = b""
    _trailer: bool = False

    def finish(self, error: str | None = None) -> None:
        if error and not self.error:
            self.error = error
        if self.done is not None and not self.done.done():
            self.done.set_result(self)

    def on_data(self, now: float, data: bytes) -> None:
        if self.status is None:
            self._head += data
            end = self._head.find(b"\r\n\r\n")
            if end < 0:
                return
            head, data = self._head[:end].decode("latin-1"), self._head[end + 4 :]
            lines = head.split("\r\n")
            self.status = int(lines[0].split(" ", 2)[1])
            for line in lines[1:]:
                name, _, value = line.partition(":")
                self.headers[name.strip().lower()] = value.strip()
            self.keep_alive = self.headers.get("connection", "").lower() != "close"
            self._chunked = "chunked" in self.headers.get("transfer-encoding", "").lower()
            if not self._chunked:
                self._remaining = int(self.headers.get("content-length", "0"))
            if not data and not self._chunked and self._remaining == 0:
                self.finish()
                return
        if self._chunked:
            self._on_chunked(now, data)
        else:
            take = data[: self._remaining]
            if take:
                self.segments.append((now, take))
            self._remaining -= len(take)
            if self._remaining <= 0:
                self.finish()

    def _on_chunked(self, now: float, data: bytes) -> None:
        """Incremental chunked transfer decoding; `_remaining` counts a chunk's data and its CRLF."""
        buffer = self._buffer + data
        out = bytearray()
        while buffer:
            if self._trailer:  # after the 0-size chunk: optional trailer lines, then CRLF
                if buffer.startswith(b"\r\n"):
                    buffer = b""
                    self._buffer = b""
                    if out:
                        self.segments.append((now, bytes(out)))
                    self.finish()
                    return
                end = buffer.find(b"\r\n")
                if end < 0:
                    break
                buffer = buffer[end + 2 :]
                continue
            if not self._remaining:
                end = buffer.find(b"\r\n")
                if end < 0:
                    break
                size = int(buffer[:end].split(b";")[0], 16)
                buffer = buffer[end + 2 :]
                if size == 0:
                    self._trailer = True
                    continue
                self._remaining = size + 2
            take = buffer[: self._remaining]
            buffer = buffer[len(take) :]
            out += take[: max(0, self._remaining - 2)]
            self._remaining -= len(take)
        self._buffer = buffer
        if out:
            self.segments.append((now, bytes(out)))


class _Protocol(asyncio.Protocol):
    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.exchange: Exchange | None = None
        self.open = True

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        now = time.perf_counter()
        if self.exchange is not None:
            self.exchange.on_data(now, data)

    def connection_lost(self, exc: Exception | None) -> None:
        self.open = False
        if self.exchange is not None and not (self.exchange.done and self.exchange.done.done()):
            if not self.exchange.error:
                self.exchange.error_detail = "the server closed the connection" + (f": {exc}" if exc else "")
            self.exchange.finish("ConnectionError")


class Connection:
    """One keep-alive HTTP/1.1 connection, reused request after request."""

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        self.host = parts.hostname or "localhost"
        self.tls = parts.scheme == "https"
        self.port = parts.port or (443 if self.tls else 80)
        self.authority = parts.netloc
        self._protocol: _Protocol | None = None

    async def _connect(self) -> _Protocol:
        loop = asyncio.get_running_loop()
        context = ssl.create_default_context() if self.tls else None
        _, protocol = await loop.create_connection(
            _Protocol, self.host, self.port, ssl=context, server_hostname=self.host if self.tls else None
        )
        return protocol

    async def connect(self, timeout: float) -> None:
        """Open the connection now, before a schedule starts, so its first request does not pay the handshake on
        the clock; a failure is left for that request to meet and report."""
        if self._protocol is None or not self._protocol.open:
            try:
                self._protocol = await asyncio.wait_for(self._connect(), timeout)
            except (OSError, TimeoutError):
                self._protocol = None

    async def exchange(self, method: str, path: str, headers: dict[str, str], body: bytes, timeout: float) -> Exchange:
        if self._protocol is None or not self._protocol.open:
            try:
                self._protocol = await asyncio.wait_for(self._connect(), timeout)
            except (OSError, TimeoutError) as error:
                # Refused, unresolvable host, TLS failure, connect timeout: a failed request of its
                # class, counted like a connection that broke mid-stream (never an exception out of the level).
                failed = Exchange(sent_at=time.perf_counter())
                failed.error = "ConnectionError"
                reason = str(error) or type(error).__name__
                failed.error_detail = f"cannot connect to {self.authority}: {reason}"
                self._protocol = None
                return failed
        protocol = self._protocol
        done = asyncio.get_running_loop().create_future()
        exchange = Exchange(done=done)
        protocol.exchange = exchange
        head = f"{method} {path} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n"
        exchange.sent_at = time.perf_counter()
        if protocol.transport is None or not protocol.open:  # closed between connect and write
            exchange.finish("ConnectionError")
            exchange.error_detail = f"{self.authority} closed the connection before the request was sent"
            self._protocol = None
            protocol.exchange = None
            return exchange
        protocol.transport.write(head.encode("latin-1") + body)
        try:
            await asyncio.wait_for(asyncio.shield(done), timeout)
        except TimeoutError:
            exchange.finish("Timeout")
            self.close()
        if exchange.error or not exchange.keep_alive:
            self.close()
        protocol.exchange = None
        return exchange

    def close(self) -> None:
        if self._protocol is not None and self._protocol.transport is not None:
            self._protocol.transport.close()
        self._protocol = None


@functools.cache
def _process_session() -> Any:
    """One botocore session for the process, as boto3's default session is: making one registers its handlers (a
    tenth of a second of CPU each benchmark worker would spend before its first request), and it resolves the
    credentials once, refreshing refreshable ones itself."""
    import botocore.session

    return botocore.session.get_session()


class Signer:
    """SigV4 for the `sagemaker` service, from botocore (the emulator ignores the signature)."""

    def __init__(self, region: str, credentials: Credentials | None = None) -> None:
        if credentials is None:
            credentials = _process_session().get_credentials()
        self._auth = SigV4Auth(credentials or Credentials("anonymous", "anonymous"), "sagemaker", region)

    def headers(self, url: str, headers: dict[str, str], body: bytes) -> dict[str, str]:
        request = AWSRequest(method="POST", url=url, data=body, headers=headers)
        self._auth.add_auth(request)
        return dict(request.headers.items())


@dataclass
class StreamResult:
    """A finished streaming request, decoded: what `metrics.RequestRecord` is built from.

    `chunks` holds one `(arrival, tokens)` per token-carrying event-stream frame (`PayloadPart`),
    stamped with the arrival of the socket read that completed the frame. `coalesced_frames`
    counts the token-carrying frames that a read completed together with another one.
    """

    sent_at: float
    completed_at: float | None
    chunks: list[tuple[float, int]]
    output_tokens: int
    error: str | None
    request_id: str | None
    coalesced_frames: int = 0


def decode_stream(exchange: Exchange, engine_mode: str, schema: str) -> StreamResult:
    """Turn raw segments into token-carrying frames, each stamped when the read that completed it arrived.

    A segment is what one socket read delivered. The frame is the unit, not the read: two frames
    completed by one read are two entries with the same stamp (the second one's gap is ~0, it does
    not take a share of the first one's), and a frame split across reads is stamped at the read
    that completed it. Tokens are attributed to the frame that completed their line. The payload is read as
    `engine_mode` streams it for a `schema` request (optigate.bench.core.payloads): another stream is an error.
    """
    request_id = exchange.headers.get("x-amzn-requestid")
    completed = exchange.segments[-1][0] if exchange.segments else None
    if exchange.status is not None and exchange.status >= 300:
        body = b"".join(segment for _, segment in exchange.segments)
        error_type = exchange.headers.get("x-amzn-errortype", "").split(":")[0]
        if not error_type:
            try:
                error_type = json.loads(body or b"{}").get("__type", "").split("#")[-1]
            except ValueError:
                error_type = ""
        return StreamResult(exchange.sent_at, completed, [], 0, error_type or f"HTTP{exchange.status}", request_id)
    decoder, parser = IncrementalDecoder(), PayloadParser(engine_mode, schema)
    chunks: list[tuple[float, int]] = []
    reads: list[int] = []  # which read completed each entry of `chunks`
    error = exchange.error
    last_has_entry = False  # whether the last PayloadPart is the last entry of `chunks`
    last_frame: tuple[float, int] | None = None  # (arrival, read) of the last PayloadPart
    for read, (arrival, segment) in enumerate(exchange.segments):
        try:
            events = decoder.feed(segment)
        except Exception:  # a broken frame: CRC or length mismatch
            error = error or "EventStreamDecodeError"
            break
        for event in events:
            if event.kind.startswith("exception:"):
                error = error or event.kind.split(":", 1)[1]
            elif event.kind == "PayloadPart":
                last_frame = (arrival, read)
                tokens = parser.feed(event.payload)
                last_has_entry = tokens > 0
                if tokens:
                    chunks.append((arrival, tokens))
                    reads.append(read)
    last = parser.finish()
    if last and last_frame is not None:
        # A last line without a newline came in the last frame: it adds to that frame's entry,
        # or makes one if the frame carried no other token.
        if last_has_entry:
            chunks[-1] = (chunks[-1][0], chunks[-1][1] + last)
        else:
            chunks.append((last_frame[0], last))
            reads.append(last_frame[1])
    per_read = Counter(reads)
    coalesced = sum(1 for read in reads if per_read[read] > 1)
    counted = sum(tokens for _, tokens in chunks)
    if error is None and parser.errors:
        error = parser.errors[0]
    output_tokens = parser.reported_total if parser.reported_total is not None else counted
    return StreamResult(exchange.sent_at, completed, chunks, output_tokens, error, request_id, coalesced)


class StreamingClient:
    """Sends streaming invocations to one target over a connection per concurrent slot."""

    def __init__(self, target: Target, *, timeout: float = 120.0, credentials: Credentials | None = None) -> None:
        self.target = target
        self.timeout = timeout
        self._signer = Signer(target.region, credentials)
        parts = urlsplit(target.url)
        self._base = f"{parts.scheme}://{parts.netloc}"
        self.path = STREAM_PATH.format(name=quote(target.endpoint_name, safe=""))

    def new_connection(self) -> Connection:
        return Connection(self._base)

    def prepare(
        self, body: bytes, accept: str = "application/jsonlines", inference_component: str | None = None
    ) -> dict[str, str]:
        """Signed headers for one request (signing happens before the clock starts); ``inference_component``
        addresses this request to a component other than the target's."""
        headers = {
            "Content-Type": "application/json",
            "X-Amzn-SageMaker-Accept": accept,
            "Host": urlsplit(self._base).netloc,
        }
        if self.target.target_variant:
            headers["X-Amzn-SageMaker-Target-Variant"] = self.target.target_variant
        component = inference_component or self.target.inference_component
        if component:
            headers["X-Amzn-SageMaker-Inference-Component"] = component
        if self.target.custom_attributes:
            headers["X-Amzn-SageMaker-Custom-Attributes"] = self.target.custom_attributes
        signed = self._signer.headers(self._base + self.path, headers, body)
        signed["Content-Length"] = str(len(body))
        return signed

    async def invoke(self, connection: Connection, body: bytes, headers: dict[str, str]) -> Exchange:
        return await connection.exchange("POST", self.path, headers, body, self.timeout)
