"""The emulator as the gate tests and `optigate rehearse` run it, a process: clients that hang up mid-stream (a
timed-out request, a cancelled benchmark) are routine and must neither fill its log nor stop it serving."""

from __future__ import annotations

import json
import socket
import struct
import time
import urllib.request

import pytest

from optigate.emulator.process import emulator_process

#: More hang-ups than a 64 KB pipe holds of the tracebacks aiohttp logged for each before the emulator caught them.
HANG_UPS = 120


def _hang_up_mid_stream(port: int) -> None:
    """Start a stream, read its first bytes, then reset the connection (SO_LINGER 0: an RST, as a killed client)."""
    body = json.dumps({"inputs": "hello there", "parameters": {"max_new_tokens": 64}}).encode()
    head = (
        "POST /endpoints/demo/invocations-response-stream HTTP/1.1\r\nHost: emulator\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    with socket.create_connection(("127.0.0.1", port), timeout=30) as connection:
        connection.sendall(head.encode() + body)
        assert connection.recv(64).startswith(b"HTTP/1.1 200")
        connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))


@pytest.mark.slow
def test_clients_hanging_up_mid_stream_leave_the_emulator_serving():
    with emulator_process({"default": {"ttft_ms": 5, "itl_ms": 20}}) as url:
        port = int(url.rsplit(":", 1)[1])
        for _ in range(HANG_UPS):
            _hang_up_mid_stream(port)
        time.sleep(0.5)  # the emulator notices the last resets while it writes their next tokens
        request = urllib.request.Request(
            f"{url}/endpoints/demo/invocations",
            data=json.dumps({"inputs": "hello", "parameters": {"max_new_tokens": 4}}).encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            assert response.status == 200 and json.loads(response.read())
