"""The capture record's pydantic model (optigate.bench.capture_file) and the stdlib parser the benchmark Lambda uses
(optigate.bench.core.capture.parse_capture_line) say the same: a line the model accepts is read as a request with the
same time, prompt and output length; a line it refuses is skipped with a reason. Its errors name the line and the
JSON path; its schema is in docs/ as generated."""

from __future__ import annotations

import base64
import json
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import given

from optigate.bench.capture_file import (
    CAPTURE_SCHEMA_NAME,
    CaptureRecordError,
    decoded_body,
    read_record,
    render_capture_schema,
    request_body,
)
from optigate.bench.core.capture import Skip, capture_record, parse_capture_line
from tests.fixtures.capture_mutants import capture_lines, originals
from tests.tiers import fuzz_settings

DOCS = Path(__file__).resolve().parents[2] / "docs"


def _requested(body) -> int | None:
    names = {"ChatBody": ("max_completion_tokens", "max_tokens"), "CompletionBody": ("max_tokens",)}
    fields = body.parameters if type(body).__name__ == "LmiBody" else body
    for name in names.get(type(body).__name__, ("max_new_tokens",)):
        if getattr(fields, name) is not None:
            return getattr(fields, name)
    return None


@pytest.mark.fuzz
def test_the_model_and_the_parser_agree_on_generated_and_mutated_lines():
    outcomes: Counter[str] = Counter()
    fuzz = fuzz_settings(full=600, fast=60)

    @fuzz
    @given(capture_lines())
    def agree(line: bytes) -> None:
        try:
            request, _ = parse_capture_line(line, "f:1")
        except Skip as skip:
            request, reason = None, str(skip)
        try:
            record = read_record(line, "f:1")
        except CaptureRecordError as error:
            assert request is None, f"the model refused what the parser reads ({error}): {line[:300]!r}"
            assert reason and str(error).startswith("f:1: ")
            outcomes["refused"] += 1
            return
        assert request is not None, f"the parser skipped ({reason}) what the model accepts: {line[:300]!r}"
        captured = record.captureData.endpointInput
        decoded = decoded_body(captured.data, captured.encoding)
        body = request_body(decoded)
        stamp = datetime.fromisoformat(record.eventMetadata.inferenceTime)
        assert request.at == (stamp if stamp.tzinfo else stamp.replace(tzinfo=UTC)).timestamp()
        assert request.requested_tokens == _requested(body)
        kind = type(body).__name__
        prompt = {"ChatBody": "messages", "LmiBody": "inputs", "CompletionBody": "prompt"}[kind]
        assert request.record == {"messages" if kind == "ChatBody" else "inputs": decoded[prompt]}
        outcomes["read"] += 1

    agree()
    # Both answers occur often: the agreement is not the trivial one of a strategy that only makes one kind.
    assert outcomes["read"] >= fuzz.max_examples / 6 and outcomes["refused"] >= fuzz.max_examples / 6, outcomes


def test_every_line_of_the_real_capture_files_fits_the_model():
    lines = [line for content in originals().values() for line in content.splitlines() if line.strip()]
    assert len(lines) >= 50
    for number, line in enumerate(lines, 1):
        read_record(line, f"line {number}")
        parse_capture_line(line, f"line {number}")


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda r: r["eventMetadata"].pop("inferenceTime"),
         "f.jsonl:3: eventMetadata.inferenceTime: expected this key"),
        (lambda r: r["eventMetadata"].update(inferenceTime="2026-13-45T00:00:00Z"),
         "f.jsonl:3: eventMetadata.inferenceTime: expected an ISO 8601 time"),
        (lambda r: r["captureData"]["endpointInput"].update(encoding="CSV"),
         "f.jsonl:3: captureData.endpointInput.encoding: expected 'JSON' or 'BASE64'"),
        (lambda r: r["captureData"]["endpointInput"].update(data=json.dumps({"inputs": "x", "parameters":
                                                                             {"max_new_tokens": 2.5}})),
         "captureData.endpointInput.data: expected a request body (parameters.max_new_tokens: a whole number of "
         "tokens in 1..1000000, found 2.5)"),
        (lambda r: r["captureData"]["endpointInput"].update(data=json.dumps({"messages": [{"role": "user"}]})),
         "data: expected a request body (messages[0]: content (only an assistant's turn may have none))"),
        (lambda r: r["captureData"]["endpointInput"].update(encoding="BASE64", data="not base64!"),
         "captureData.endpointInput.data: expected BASE64 of UTF-8 text"),
    ],
)  # fmt: skip
def test_a_refused_record_is_named_by_line_and_json_path(change, message):
    record = capture_record({"inputs": "hello", "parameters": {"max_new_tokens": 8}}, 1_796_000_000.0, "e")
    change(record)
    with pytest.raises(CaptureRecordError) as refused:
        read_record(json.dumps(record).encode(), "f.jsonl:3")
    assert message in str(refused.value)
    with pytest.raises(Skip):  # and the parser skips it too
        parse_capture_line(json.dumps(record).encode(), "f.jsonl:3")


def test_a_length_is_checked_wherever_it_is_given_not_only_the_first():
    """A chat body with a valid max_completion_tokens and a malformed max_tokens is malformed: both readers skip it
    (the parser once read the first length only)."""
    body = {"messages": [{"role": "user", "content": "hi"}], "max_completion_tokens": 8, "max_tokens": "lots"}
    line = json.dumps(capture_record(body, 1_796_000_000.0, "e", encoding="BASE64")).encode()
    with pytest.raises(Skip, match="max_tokens not a number"):
        parse_capture_line(line, "f:1")
    with pytest.raises(CaptureRecordError, match="max_tokens: a number of tokens"):
        read_record(line, "f:1")
    assert base64.b64decode(json.loads(line)["captureData"]["endpointInput"]["data"])  # BASE64, as the test says


def test_the_schema_in_the_docs_is_the_models():
    schema = json.loads(render_capture_schema())
    assert (DOCS / CAPTURE_SCHEMA_NAME).read_text() == render_capture_schema(), "run `optigate schema --docs docs`"
    assert schema["required"] == ["captureData", "eventMetadata"]
    data = schema["$defs"]["EndpointInput"]["properties"]["data"]
    assert data["contentSchema"] == {"$ref": "#/$defs/RequestBody"}
    kinds = {ref["$ref"].rsplit("/", 1)[1] for ref in schema["$defs"]["RequestBody"]["anyOf"]}
    assert kinds == {"ChatBody", "LmiBody", "CompletionBody"}
