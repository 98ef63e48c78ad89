"""AWS event-stream framing (application/vnd.amazon.eventstream).

Encoding is used by the emulator; decoding uses botocore's own `EventStreamBuffer`, so every
frame the emulator sends is checked by an independent implementation of the format:

    prelude  = total length (4 B) | headers length (4 B) | CRC32 of those 8 bytes (4 B)
    headers  = name length (1 B) | name | value type (1 B) | value (type 7: 2 B length + UTF-8)
    payload
    message CRC32 over everything before it (4 B)
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass

from botocore.eventstream import EventStreamBuffer

STRING_HEADER_TYPE = 7
PRELUDE_LENGTH = 12
CRC_LENGTH = 4


def encode_headers(headers: dict[str, str]) -> bytes:
    out = bytearray()
    for name, value in headers.items():
        name_bytes, value_bytes = name.encode(), value.encode()
        out += struct.pack("!B", len(name_bytes)) + name_bytes
        out += struct.pack("!BH", STRING_HEADER_TYPE, len(value_bytes)) + value_bytes
    return bytes(out)


def encode_message(headers: dict[str, str], payload: bytes) -> bytes:
    header_bytes = encode_headers(headers)
    total = PRELUDE_LENGTH + len(header_bytes) + len(payload) + CRC_LENGTH
    prelude = struct.pack("!II", total, len(header_bytes))
    prelude += struct.pack("!I", zlib.crc32(prelude) & 0xFFFFFFFF)
    body = prelude + header_bytes + payload
    return body + struct.pack("!I", zlib.crc32(body) & 0xFFFFFFFF)


def payload_part(payload: bytes) -> bytes:
    """A `PayloadPart` event as SageMaker's InvokeEndpointWithResponseStream sends it."""
    return encode_message(
        {":event-type": "PayloadPart", ":content-type": "application/octet-stream", ":message-type": "event"}, payload
    )


def stream_exception(error_type: str, message: str, error_code: str = "ModelStreamError") -> bytes:
    """An exception event mid-stream (e.g. ModelStreamError, InternalStreamFailure)."""
    import json

    payload = json.dumps({"Message": message, "ErrorCode": error_code}).encode()
    return encode_message(
        {":exception-type": error_type, ":content-type": "application/json", ":message-type": "exception"}, payload
    )


@dataclass(frozen=True)
class Event:
    """A decoded event: `kind` is 'PayloadPart', or 'exception:<type>' for an exception event."""

    kind: str
    payload: bytes


def decode_events(data: bytes) -> list[Event]:
    """Decode every complete event in `data` with botocore's parser (raises on a bad CRC)."""
    return IncrementalDecoder().feed(data)


class IncrementalDecoder:
    """Feed bytes as they arrive; get back the events each feed completed."""

    def __init__(self) -> None:
        self._buffer = EventStreamBuffer()

    def feed(self, data: bytes) -> list[Event]:
        self._buffer.add_data(data)
        events = []
        for message in self._buffer:
            headers = message.headers
            kind = headers.get(":message-type")
            if kind in ("exception", "error"):
                name = headers.get(":exception-type") or headers.get(":error-code") or "Unknown"
                events.append(Event(f"exception:{name}", message.payload))
            else:
                events.append(Event(str(headers.get(":event-type", "")), message.payload))
        return events
