"""SageMaker data capture as the service writes it: one JSON Lines record per captured invocation, files
partitioned by hour under ``<DestinationS3Uri>/<endpoint>/<variant>/yyyy/mm/dd/hh/<file>.jsonl``.

Record (https://docs.aws.amazon.com/sagemaker/latest/dg/model-monitor-data-capture-endpoint.html)::

    {"captureData": {"endpointInput": {"observedContentType": "application/json", "mode": "INPUT",
                                       "data": "<body>", "encoding": "JSON" | "BASE64" | "CSV"},
                     "endpointOutput": {... "mode": "OUTPUT" ...}},
     "eventMetadata": {"eventId": "<uuid>", "inferenceTime": "2026-11-30T09:15:02Z"},
     "eventVersion": "0"}

Writing (the emulator and the rehearsal write what SageMaker writes) and reading (workloads from capture) live
here, in one place.
"""

from __future__ import annotations

import base64
import json
import time
from typing import Any

CAPTURE_EVENT_VERSION = "0"


def inference_time(at: float) -> str:
    """``inferenceTime`` of a record: UTC, to the second, as in AWS's documented examples."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(at))


def capture_record(
    body: bytes | str | dict[str, Any],
    at: float,
    event_id: str,
    *,
    output: bytes | str | dict[str, Any] | None = None,
    content_type: str = "application/json",
    encoding: str = "JSON",
) -> dict[str, Any]:
    """One capture record for a request `body` received at epoch seconds `at` (and its `output`, when captured):
    ``encoding`` JSON keeps the body as text, BASE64 encodes it (the service's choice for content types not
    listed in CaptureContentTypeHeader)."""

    def part(data: bytes | str | dict[str, Any], mode: str) -> dict[str, str]:
        raw = json.dumps(data).encode() if isinstance(data, dict) else data.encode() if isinstance(data, str) else data
        text = base64.b64encode(raw).decode() if encoding == "BASE64" else raw.decode()
        return {"observedContentType": content_type, "mode": mode, "data": text, "encoding": encoding}

    capture: dict[str, Any] = {"endpointInput": part(body, "INPUT")}
    if output is not None:
        capture["endpointOutput"] = part(output, "OUTPUT")
    return {
        "captureData": capture,
        "eventMetadata": {"eventId": event_id, "inferenceTime": inference_time(at)},
        "eventVersion": CAPTURE_EVENT_VERSION,
    }


def capture_key(prefix: str, endpoint: str, variant: str, at: float, file_name: str) -> str:
    """Where the service puts a capture file written at `at`: ``prefix/endpoint/variant/yyyy/mm/dd/hh/file``."""
    hour = time.strftime("%Y/%m/%d/%H", time.gmtime(at))
    return f"{prefix.strip('/')}/{endpoint}/{variant}/{hour}/{file_name}".lstrip("/")
