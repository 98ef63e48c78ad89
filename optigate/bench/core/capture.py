# Over 400 lines: SageMaker capture written and read in one stdlib module, the one the benchmark Lambda ships
"""SageMaker data capture as the service writes it: one JSON Lines record per captured invocation, files
partitioned by hour under ``<DestinationS3Uri>/<endpoint>/<variant>/yyyy/mm/dd/hh/<file>.jsonl``.

Record (https://docs.aws.amazon.com/sagemaker/latest/dg/model-monitor-data-capture-endpoint.html)::

    {"captureData": {"endpointInput": {"observedContentType": "application/json", "mode": "INPUT",
                                       "data": "<body>", "encoding": "JSON" | "BASE64" | "CSV"},
                     "endpointOutput": {... "mode": "OUTPUT" ...}},
     "eventMetadata": {"eventId": "<uuid>", "inferenceTime": "2026-11-30T09:15:02Z"},
     "eventVersion": "0"}

Writing (the emulator and the rehearsal write what SageMaker writes) and reading (workloads from capture) live
here, in one place. Reading follows what the service writes and what readers of it accept (ai-dynamo/aiperf
src/aiperf/dataset/loader/sagemaker_data_capture.py @1acb369: JSON and BASE64 encodings, BASE64 when none is named,
``max_tokens`` then ``max_completion_tokens``, ``endpointOutput`` optional since streamed responses are not captured;
aws/sagemaker-python-sdk v2.257.6 tests/integ/test_model_quality_monitor.py writes ``inferenceTime`` as
``%Y-%m-%dT%H:%M:%S.%f`` without a zone, which Model Monitor reads as UTC). The service itself stamps whole seconds
(AWS's examples; aiperf's "known limitations"), so same-second records are spread evenly inside their second.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import math
import re
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

CAPTURE_EVENT_VERSION = "0"


def inference_time(at: float, *, whole_seconds: bool = True) -> str:
    """``inferenceTime`` of a record: UTC, to the second as the service stamps it (AWS's documented examples), or
    to the millisecond (a form readers accept: tests that need exact gaps)."""
    if whole_seconds:
        return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(at))
    return datetime.fromtimestamp(at, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def capture_record(
    body: bytes | str | dict[str, Any],
    at: float,
    event_id: str,
    *,
    output: bytes | str | dict[str, Any] | None = None,
    content_type: str = "application/json",
    encoding: str = "JSON",
    inference_id: str | None = None,
    whole_seconds: bool = True,
) -> dict[str, Any]:
    """One capture record for a request `body` received at epoch seconds `at` (and its `output`, when captured):
    ``encoding`` JSON keeps the body as text, BASE64 encodes it (the service's choice for content types not
    listed in CaptureContentTypeHeader); `inference_id` is the caller's InvokeEndpoint ``InferenceId``, which the
    service adds to the record's metadata; `whole_seconds` False stamps milliseconds (see :func:`inference_time`)."""

    def part(data: bytes | str | dict[str, Any], mode: str) -> dict[str, str]:
        raw = json.dumps(data).encode() if isinstance(data, dict) else data.encode() if isinstance(data, str) else data
        text = base64.b64encode(raw).decode() if encoding == "BASE64" else raw.decode()
        return {"observedContentType": content_type, "mode": mode, "data": text, "encoding": encoding}

    capture: dict[str, Any] = {"endpointInput": part(body, "INPUT")}
    if output is not None:
        capture["endpointOutput"] = part(output, "OUTPUT")
    metadata = {"eventId": event_id, "inferenceTime": inference_time(at, whole_seconds=whole_seconds)}
    if inference_id is not None:
        metadata["inferenceId"] = inference_id
    return {"captureData": capture, "eventMetadata": metadata, "eventVersion": CAPTURE_EVENT_VERSION}


def capture_key(prefix: str, endpoint: str, variant: str, at: float, file_name: str) -> str:
    """Where the service puts a capture file written at `at`: ``prefix/endpoint/variant/yyyy/mm/dd/hh/file``."""
    hour = time.strftime("%Y/%m/%d/%H", time.gmtime(at))
    return f"{prefix.strip('/')}/{endpoint}/{variant}/{hour}/{file_name}".lstrip("/")


# ---------------------------------------------------------------------------------------------------------------
# Reading: capture files -> requests (record, requested output length, time), every unreadable line counted by reason


@dataclass(frozen=True)
class CapturedRequest:
    """One captured invocation: when it arrived (epoch seconds), its prompt as a load record (``{"inputs": text}``
    or ``{"messages": [...]}``), the output length the caller asked for (None: the server's default), an estimate
    of its prompt's tokens (the response's ``usage.prompt_tokens`` when captured), its session (chat turns that
    share their opening messages; None for single prompts) and where it was read (``file:line``)."""

    at: float
    record: dict[str, Any]
    requested_tokens: int | None
    prompt_tokens: int
    session: str | None
    where: str


@dataclass(frozen=True)
class CaptureRead:
    """What a capture location held: the readable requests in arrival order, the count of lines skipped per reason
    (and where each reason was first met, ``file:line``) and how many capture files were read."""

    requests: tuple[CapturedRequest, ...]
    skipped: dict[str, int]
    files: int
    first_skipped: dict[str, str] = field(default_factory=dict)

    def skipped_note(self, limit: int = 3) -> str:
        """The skipped records in a few words, most frequent reason first: "3 not JSON (first at f.jsonl:7), ..."."""
        reasons = sorted(self.skipped.items(), key=lambda item: -item[1])[:limit]
        return ", ".join(
            f"{count} {reason}" + (f" (first at {self.first_skipped[reason]})" if reason in self.first_skipped else "")
            for reason, count in reasons
        )


#: Characters a token, about, in English for Llama-, Qwen- and Mistral-style tokenizers (optigate.evaluate.scoring's
#: rule; restated because the benchmark Lambda ships optigate.bench alone, standard library only).
CHARS_PER_TOKEN = 4
#: Largest output length accepted from a body: anything above is a malformed value, not a request.
MAX_REQUESTED_TOKENS = 1_000_000
#: The least share of a capture's records (those in the window) that must be readable. SageMaker writes whole
#: records, but a file may end in one cut short, and an endpoint may serve bodies optigate does not replay (images,
#: batches): a few are skipped and counted; when most are, the readable rest would not stand for the traffic.
MIN_READABLE_SHARE = 0.5
#: Reasons that say nothing of the capture's quality: the record is fine, only outside what was asked for.
NOT_COUNTED_AGAINST = frozenset({"before the window"})
_HOUR_FOLDER = re.compile(r"(?:^|/)(\d{4})/(\d{2})/(\d{2})/(\d{2})/[^/]*$")


class Skip(Exception):
    """A capture line that cannot be a request; its message is the reason counted in ``CaptureRead.skipped``."""


def read_capture(
    source: str | Path,
    *,
    s3_client: Any = None,
    window_days: float | None = None,
    max_requests: int | None = None,
    now: float | None = None,
    min_readable_share: float = MIN_READABLE_SHARE,
    parse: Callable[[bytes, str], tuple[CapturedRequest, bool]] | None = None,
) -> CaptureRead:
    """The requests captured under `source`: a ``.jsonl`` file, a folder or an ``s3://bucket/prefix`` walked
    recursively (SageMaker's ``endpoint/variant/yyyy/mm/dd/hh/`` layout or any part of it). `window_days` keeps the
    requests of the last days before `now`; `max_requests` keeps the newest ones (files are read newest first and
    reading stops once enough are read). A record that cannot be a request is skipped and counted by reason
    (``CaptureRead.skipped``). ValueError, naming the source and the top skip reasons, when none is readable or
    fewer than `min_readable_share` of the records read are. `parse` reads one line (:func:`parse_capture_line`
    unless given: :func:`parse_training_line` reads what an EAGLE-training job reads)."""
    if max_requests is not None and max_requests < 1:
        raise ValueError(f"max_requests must be at least 1, got {max_requests}")
    if window_days is not None and not (math.isfinite(window_days) and window_days > 0):
        raise ValueError(f"window_days must be a positive number, got {window_days}")
    since = None if window_days is None else (time.time() if now is None else now) - window_days * 86400
    skipped: Counter[str] = Counter()
    first_skipped: dict[str, str] = {}
    found: list[tuple[CapturedRequest, bool, int, int]] = []
    files = 0
    for name, read in _capture_files(str(source), s3_client, since):
        files += 1  # read newest first: -files orders the files oldest first
        try:
            content = read()
        except OSError as error:
            reason = f"file unreadable ({error.strerror or error})"
            skipped[reason] += 1
            first_skipped.setdefault(reason, _within(name, str(source)))
            continue
        for number, line in enumerate(content.split(b"\n"), 1):
            if not line.strip():
                continue
            try:
                request, whole_second = (parse or parse_capture_line)(line, f"{name}:{number}")
            except Skip as skip:
                skipped[str(skip)] += 1
                first_skipped.setdefault(str(skip), _within(f"{name}:{number}", str(source)))
                continue
            if since is not None and request.at < since:
                skipped["before the window"] += 1
                continue
            found.append((request, whole_second, -files, number))
        if max_requests is not None and len(found) >= max_requests:
            break
    result = CaptureRead(requests=(), skipped=dict(skipped), files=files, first_skipped=first_skipped)
    if not found:
        raise ValueError(
            f"{source}: no readable capture record in {files} file(s) ({result.skipped_note() or 'every file empty'})"
            if files
            else f"{source}: no capture files (.jsonl) found"
        )
    unreadable = sum(count for reason, count in skipped.items() if reason not in NOT_COUNTED_AGAINST)
    if len(found) < min_readable_share * (len(found) + unreadable):
        raise ValueError(
            f"{source}: only {len(found)} of {len(found) + unreadable} capture records are readable requests "
            f"({result.skipped_note()}); fewer than {min_readable_share:.0%} would not stand for the traffic: check "
            "what the endpoint is sent and that the files are whole"
        )
    requests = _spread_whole_seconds(found)
    if max_requests is not None:
        requests = requests[-max_requests:]
    return replace(result, requests=tuple(requests))


def _within(where: str, source: str) -> str:
    """`where` (``file:line``) as a message naming `source` shows it: the line alone for a file, else relative."""
    if where.startswith(source + ":"):
        return f"line {where[len(source) + 1 :]}"
    return where[len(source) :].lstrip("/") if where.startswith(source.rstrip("/") + "/") else where


def _spread_whole_seconds(found: list[tuple[CapturedRequest, bool, int, int]]) -> list[CapturedRequest]:
    """Arrival order, with records stamped to the same whole second placed evenly inside it: the k-th of n at
    k/(n+1) of the second (the expected position of uniform arrivals), in the order they were written."""
    found = sorted(found, key=lambda item: (item[0].at, item[2], item[3]))
    same_second: Counter[float] = Counter(request.at for request, whole, _, _ in found if whole)
    seen: Counter[float] = Counter()
    placed = []
    for request, whole, _, _ in found:
        if whole:
            seen[request.at] += 1
            at = request.at + seen[request.at] / (same_second[request.at] + 1)
            request = replace(request, at=at)
        placed.append(request)
    return sorted(placed, key=lambda request: request.at)


def _capture_files(source: str, s3_client: Any, since: float | None) -> Iterator[tuple[str, Callable[[], bytes]]]:
    """(name, reader) of each capture file under `source`, newest first (SageMaker's keys sort by hour, then by
    the ``MM-SS-mmm-<uuid>.jsonl`` name); files of hours wholly before `since` are not read."""
    if source.startswith("s3://"):
        yield from _s3_files(source, s3_client, since)
        return
    path = Path(source)
    if path.is_file():
        yield str(path), path.read_bytes
        return
    if not path.is_dir():
        raise ValueError(f"{source}: no such file or folder")
    for file in sorted(path.rglob("*.jsonl"), reverse=True):
        if file.is_file() and not _hour_before(file.relative_to(path).as_posix(), since):
            yield str(file), file.read_bytes


def _s3_files(source: str, s3_client: Any, since: float | None) -> Iterator[tuple[str, Callable[[], bytes]]]:
    from botocore.exceptions import BotoCoreError, ClientError  # only a capture in S3 needs boto

    bucket, _, prefix = source[len("s3://") :].partition("/")
    if not bucket:
        raise ValueError(f"{source}: expected s3://bucket/prefix")
    if s3_client is None:
        import boto3

        s3_client = boto3.client("s3")
    folder = prefix.rstrip("/") + "/"  # a folder's keys, not its siblings' (prefix "cap" is not "cap-old/")
    try:
        keys = [
            item["Key"]
            for page in s3_client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
            for item in page.get("Contents", [])
            if item["Key"].endswith(".jsonl")
            and (item["Key"] == prefix or not prefix or item["Key"].startswith(folder))
        ]
    except (BotoCoreError, ClientError) as error:
        raise ValueError(f"{source}: cannot list the capture: {error}") from error

    def read(key: str) -> bytes:
        try:
            return s3_client.get_object(Bucket=bucket, Key=key)["Body"].read()
        except ClientError as error:  # e.g. AccessDenied, or KMS refusing to decrypt: named, counted
            raise OSError(error.response.get("Error", {}).get("Code", "error")) from error
        except BotoCoreError as error:
            raise OSError(type(error).__name__) from error

    for key in sorted(keys, reverse=True):
        if not _hour_before(key, since):
            yield f"s3://{bucket}/{key}", partial(read, key)


def _hour_before(key: str, since: float | None) -> bool:
    """Whether `key` sits in an hour folder that ended before `since` (an hour of slack for late writes)."""
    match = _HOUR_FOLDER.search(key)
    if since is None or not match:
        return False
    try:
        year, month, day, hour = (int(part) for part in match.groups())
        start = datetime(year, month, day, hour, tzinfo=UTC).timestamp()
    except ValueError:
        return False
    return start + 2 * 3600 <= since


def parse_capture_line(line: bytes, where: str) -> tuple[CapturedRequest, bool]:
    """One capture line as a request and whether its time was stamped to a whole second; :class:`Skip` naming why
    it cannot be one."""
    event, at, whole_second, captured = _envelope(line)
    body = _decoded(captured)
    output = event["captureData"].get("endpointOutput")
    record, requested, text = _request(body)
    _sendable(record)
    return (
        CapturedRequest(
            at=at,
            record=record,
            requested_tokens=requested,
            prompt_tokens=_usage_prompt_tokens(output) or max(1, len(text) // CHARS_PER_TOKEN),
            session=_session(record),
            where=where,
        ),
        whole_second,
    )


def _envelope(line: bytes) -> tuple[dict[str, Any], float, bool, dict[str, Any]]:
    """A capture line's record, its time (epoch seconds, whether stamped to a whole second) and its
    ``endpointInput``; :class:`Skip` naming why it is not a capture record with an input."""
    try:
        event = json.loads(line.decode("utf-8"))
    except UnicodeDecodeError:
        raise Skip("not UTF-8") from None
    except (ValueError, RecursionError):
        raise Skip("not JSON") from None
    if not isinstance(event, dict) or not isinstance(event.get("captureData"), dict):
        raise Skip("not a capture record")
    metadata = event.get("eventMetadata")
    if not isinstance(metadata, dict) or "inferenceTime" not in metadata:
        raise Skip("no inferenceTime")
    at, whole_second = _inference_time(metadata["inferenceTime"])
    captured = event["captureData"].get("endpointInput")
    if not isinstance(captured, dict):
        raise Skip("input not captured")
    return event, at, whole_second, captured


def _sendable(record: dict[str, Any]) -> None:
    try:  # a lone surrogate (JSON allows "\\ud800") cannot be sent as UTF-8
        json.dumps(record, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        raise Skip("text not valid Unicode") from None


#: Why an LMI body does not count as training data: the job reads ShareGPT, OpenAI Completions or OpenAI Chat
#: Completions only (API_ModelSpeculativeDecodingConfig), and LMI's {inputs, parameters} is none of them.
NOT_TRAINABLE_LMI = "LMI inputs body (not ShareGPT or OpenAI chat/completions)"


def parse_training_line(line: bytes, where: str) -> tuple[CapturedRequest, bool]:
    """One capture line as a record an EAGLE-training optimization job reads, and whether its time was stamped to a
    whole second; :class:`Skip` naming why it is not one. What the job reads is "ShareGPT, OpenAI Completions or
    OpenAI Chat Completions", or "unencrypted captured data from a SageMaker endpoint as long as the endpoint uses
    one of the above formats" (https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_ModelSpeculativeDecodingConfig.html):
    a JSON-encoded input (whether the job decodes BASE64 is undocumented: optigate.config.rules.cross_file) whose
    body is OpenAI chat ``messages``, an OpenAI completions ``prompt`` or ShareGPT ``conversations`` (a list of
    ``{"from", "value"}``). LMI's ``inputs`` bodies are not counted. The record is the body's training part."""
    _, at, whole_second, captured = _envelope(line)
    if captured.get("encoding", "BASE64") != "JSON":
        raise Skip("input not JSON-encoded (the job is not documented to decode BASE64)")
    body = _decoded(captured)
    if "messages" in body:
        record, _, text = _request({"messages": body["messages"]})
    elif "prompt" in body:
        prompt = body["prompt"]
        if not isinstance(prompt, str) or not prompt:
            raise Skip("prompt not one prompt string")
        record, text = {"prompt": prompt}, prompt
    elif "conversations" in body:
        turns = body["conversations"]
        if not isinstance(turns, list) or not turns:
            raise Skip("conversations not a list of turns")
        if not all(
            isinstance(t, dict) and isinstance(t.get("from"), str) and isinstance(t.get("value"), str) for t in turns
        ):
            raise Skip("conversation turn without from and value")
        record, text = {"conversations": turns}, "\n".join(t["value"] for t in turns)
    elif "inputs" in body:
        raise Skip(NOT_TRAINABLE_LMI)
    else:
        raise Skip("no messages, prompt or conversations")
    _sendable(record)
    request = CapturedRequest(
        at=at,
        record=record,
        requested_tokens=None,
        prompt_tokens=max(1, len(text) // CHARS_PER_TOKEN),
        session=None,
        where=where,
    )
    return request, whole_second


def _inference_time(value: Any) -> tuple[float, bool]:
    """Epoch seconds of an ``inferenceTime`` (ISO 8601; no zone means UTC, as Model Monitor reads it)."""
    if not isinstance(value, str) or not 10 <= len(value) <= 64:
        raise Skip("bad inferenceTime")
    try:
        stamp = datetime.fromisoformat(value)
        at = (stamp if stamp.tzinfo else stamp.replace(tzinfo=UTC)).timestamp()
    except (OverflowError, ValueError, OSError):
        raise Skip("bad inferenceTime") from None
    return at, "." not in value and "," not in value  # no fraction written: a whole-second stamp


def _decoded(captured: dict[str, Any]) -> dict[str, Any]:
    """The request body of an ``endpointInput``: JSON text, or BASE64 of it (the service's default encoding)."""
    data, encoding = captured.get("data"), captured.get("encoding", "BASE64")
    if not isinstance(data, str):
        raise Skip("no input data")
    if encoding == "BASE64":
        try:
            data = base64.b64decode(data, validate=True).decode("utf-8")
        except (binascii.Error, ValueError):
            raise Skip("bad BASE64 input") from None
    elif encoding != "JSON":
        raise Skip(f"input encoding {str(encoding)[:20]} not JSON or BASE64")
    try:
        body = json.loads(data)
    except (ValueError, RecursionError):
        raise Skip("input not JSON") from None
    if not isinstance(body, dict):
        raise Skip("input not a JSON object")
    return body


def _request(body: dict[str, Any]) -> tuple[dict[str, Any], int | None, str]:
    """(load record, requested output tokens, prompt text) of an LMI, OpenAI chat or OpenAI completions body."""
    if "messages" in body:
        messages = body["messages"]
        if not isinstance(messages, list) or not messages:
            raise Skip("messages not a list of messages")
        text = "\n".join(_message_text(message) for message in messages)
        requested = _tokens(body, "max_completion_tokens", "max_tokens")
        return {"messages": messages}, requested, text
    if "inputs" in body:  # LMI (and TGI): {"inputs": text, "parameters": {"max_new_tokens": n}}
        inputs = body["inputs"]
        if not isinstance(inputs, str) or not inputs:
            raise Skip("inputs not one prompt string")
        parameters = body.get("parameters", {})
        if not isinstance(parameters, dict):
            raise Skip("parameters not an object")
        return {"inputs": inputs}, _tokens(parameters, "max_new_tokens"), inputs
    if "prompt" in body:  # OpenAI completions
        prompt = body["prompt"]
        if not isinstance(prompt, str) or not prompt:
            raise Skip("prompt not one prompt string")
        return {"inputs": prompt}, _tokens(body, "max_tokens"), prompt
    raise Skip("no messages, inputs or prompt")


def _message_text(message: Any) -> str:
    if not isinstance(message, dict) or not isinstance(message.get("role"), str):
        raise Skip("message without a role")
    content = message.get("content")
    if isinstance(content, str):
        return content
    if content is None and message["role"] == "assistant":
        return ""  # a tool-calling turn
    if isinstance(content, list) and all(
        isinstance(part, dict) and part.get("type") == "text" and isinstance(part.get("text"), str) for part in content
    ):
        return "\n".join(part["text"] for part in content)
    raise Skip("message content other than text")


def _tokens(fields: dict[str, Any], *names: str) -> int | None:
    """The first of `names` present in `fields` as a whole number of tokens; Skip when any present is malformed
    (a body with a malformed length is not a request to replay, whichever length the server would have used)."""
    found = None
    for name in names:
        if fields.get(name) is None:
            continue
        value = fields[name]
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise Skip(f"{name} not a number")
        if not 1 <= value <= MAX_REQUESTED_TOKENS or value != int(value):  # NaN fails the range, inf too
            raise Skip(f"{name} not a whole number in 1..{MAX_REQUESTED_TOKENS}")
        found = int(value) if found is None else found
    return found


def _usage_prompt_tokens(output: Any) -> int | None:
    """``usage.prompt_tokens`` of a captured OpenAI-style response (the server's own count), when there is one."""
    if not isinstance(output, dict):
        return None
    try:
        response = _decoded(output)
    except Skip:
        return None
    usage = response.get("usage")
    count = usage.get("prompt_tokens") if isinstance(usage, dict) else None
    return count if isinstance(count, int) and not isinstance(count, bool) and count > 0 else None


def _session(record: dict[str, Any]) -> str | None:
    """A chat's turns resend its opening (system and first user message): their hash names the session, so
    sampling keeps a conversation whole. A digest, never the text."""
    messages = record.get("messages")
    if not messages:
        return None
    opening = []
    for message in messages:
        opening.append([message["role"], _message_text(message)])
        if message["role"] == "user":
            break
    return hashlib.sha256(json.dumps(opening).encode()).hexdigest()[:16]
