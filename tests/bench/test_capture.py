"""Reading SageMaker data capture: what capture_record/capture_key write (SageMaker's record and folder layout) is
read back with its times, bodies and requested output lengths, from a folder and from S3; every layout the
service and its readers allow (JSON and BASE64, whole or fractional seconds, no output, OpenAI and LMI bodies,
inferenceId); hostile lines are skipped with a reason, never a crash."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from hypothesis import given
from hypothesis import strategies as st
from moto import mock_aws

from optigate.bench.core.capture import (
    CapturedRequest,
    Skip,
    capture_key,
    capture_record,
    parse_capture_line,
    read_capture,
)
from tests.tiers import fuzz_settings

T0 = 1_796_000_000.0  # 2026-11-30T...: a whole second
DAY = 86_400.0

LMI = {"inputs": "What is the capital of France?", "parameters": {"max_new_tokens": 64, "temperature": 0.2}}
CHAT = {"messages": [{"role": "user", "content": "Say hi"}], "max_tokens": 32, "stream": True}
CHAT_NEW = {
    "messages": [{"role": "user", "content": [{"type": "text", "text": "Hi there"}]}],
    "max_completion_tokens": 48,
}
COMPLETION = {"prompt": "Once upon a time", "max_tokens": 20}
NO_LENGTH = {"inputs": "No length asked"}


def _captures() -> list[tuple[float, dict[str, Any], dict[str, Any]]]:
    """(time, body, capture_record options): both encodings, with and without the output, every body kind; two
    records share a second and one crosses into the next hour folder."""
    return [
        (T0 + 0, LMI, {"encoding": "JSON", "output": {"generated_text": "Paris."}}),
        (T0 + 1, CHAT, {"encoding": "BASE64"}),
        (T0 + 1, CHAT_NEW, {"encoding": "JSON", "output": {"usage": {"prompt_tokens": 11, "completion_tokens": 3}}}),
        (T0 + 5, COMPLETION, {"encoding": "BASE64", "output": "plain text output"}),
        (T0 + 3600, NO_LENGTH, {"encoding": "JSON"}),
    ]


def _files(prefix: str = "datacapture") -> dict[str, str]:
    """SageMaker's layout: one file per hour folder, named as the service names them (MM-SS-mmm-uuid)."""
    files: dict[str, list[str]] = {}
    for number, (at, body, options) in enumerate(_captures()):
        record = capture_record(
            body, at, f"event-{number}", inference_id="caller-7" if number == 2 else None, **options
        )
        key = capture_key(prefix, "chat-endpoint", "AllTraffic", at, "13-20-000-5f0c1c7e.jsonl")
        files.setdefault(key, []).append(json.dumps(record))
    return {key: "\n".join(lines) + "\n" for key, lines in files.items()}


def _check_read_back(requests: tuple[CapturedRequest, ...]) -> None:
    assert [r.record for r in requests] == [
        {"inputs": LMI["inputs"]},
        {"messages": CHAT["messages"]},
        {"messages": CHAT_NEW["messages"]},
        {"inputs": COMPLETION["prompt"]},
        {"inputs": NO_LENGTH["inputs"]},
    ]
    assert [r.requested_tokens for r in requests] == [64, 32, 48, 20, None]
    # Whole-second stamps: the k-th of n records in a second sits at k/(n+1) of it, in the order written.
    assert [r.at - T0 for r in requests] == pytest.approx([0.5, 1 + 1 / 3, 1 + 2 / 3, 5.5, 3600.5])
    assert requests[2].prompt_tokens == 11  # the server's own count, from the captured response's usage
    assert requests[0].prompt_tokens == len(LMI["inputs"]) // 4  # else an estimate from the text
    assert all(":" in r.where and r.where.rsplit(":", 1)[1].isdigit() for r in requests)


def test_a_capture_folder_in_sagemakers_layout_is_read_back_with_times_bodies_and_requested_lengths(tmp_path):
    for key, text in _files().items():
        (tmp_path / key).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / key).write_text(text)
    assert any("/chat-endpoint/AllTraffic/2026/" in key for key in _files())

    read = read_capture(tmp_path)

    assert read.files == 2 and read.skipped == {}
    _check_read_back(read.requests)
    # The endpoint's folder alone, and one file alone, read the same way.
    assert read_capture(tmp_path / "datacapture" / "chat-endpoint").requests == read.requests
    one_file = next(iter(sorted((tmp_path / "datacapture").rglob("*.jsonl"))))
    assert len(read_capture(one_file).requests) == 4


def test_a_capture_in_s3_is_read_back_from_the_destination_prefix():
    with mock_aws():
        s3 = boto3.client("s3", region_name="us-east-1")
        s3.create_bucket(Bucket="captures")
        for key, text in _files("team/datacapture").items():
            s3.put_object(Bucket="captures", Key=key, Body=text.encode())
        s3.put_object(Bucket="captures", Key="team/datacapture/README.txt", Body=b"not a capture")
        s3.put_object(Bucket="captures", Key="team/datacapture-old/x.jsonl", Body=b"a sibling prefix: not read")
        one_key = sorted(_files("team/datacapture"))[0]

        read = read_capture("s3://captures/team/datacapture", s3_client=s3)
        endpoint_only = read_capture("s3://captures/team/datacapture/chat-endpoint/AllTraffic/", s3_client=s3)
        one_object = read_capture(f"s3://captures/{one_key}", s3_client=s3)

    assert read.files == 2 and read.skipped == {}
    _check_read_back(read.requests)
    assert endpoint_only.requests == read.requests
    assert one_object.files == 1 and len(one_object.requests) == 4
    assert read.requests[0].where.startswith("s3://captures/team/datacapture/chat-endpoint/AllTraffic/2026/")


def _line(at_text: str, body: Any, *, encoding: str = "JSON", **metadata: Any) -> str:
    data = json.dumps(body) if not isinstance(body, str) else body
    if encoding == "BASE64":
        data = base64.b64encode(data.encode()).decode()
    record = {
        "captureData": {
            "endpointInput": {
                "observedContentType": "application/json",
                "mode": "INPUT",
                "data": data,
                "encoding": encoding,
            }
        },
        "eventMetadata": {"eventId": "e", "inferenceTime": at_text, **metadata},
        "eventVersion": "0",
    }
    return json.dumps(record)


@pytest.mark.parametrize(
    ("stamp", "expected"),
    [
        ("2026-11-30T09:15:02Z", 0.5),  # the service's whole seconds: centred in the second
        ("2026-11-30T09:15:02.250Z", 0.25),  # fractional seconds are kept as they are
        ("2026-11-30T09:15:02.250000", 0.25),  # the SDK's own test writer: %f, no zone, read as UTC
        ("2026-11-30T10:15:02.250+01:00", 0.25),
        ("2026-11-30T09:15:02.000Z", 0.0),  # explicitly fractional: not spread
    ],
)
def test_inference_time_in_each_form_the_service_and_its_readers_allow(tmp_path, stamp, expected):
    path = tmp_path / "one.jsonl"
    path.write_text(_line(stamp, LMI, inferenceId="abc") + "\n")
    (request,) = read_capture(path).requests
    assert request.at - 1_796_030_102.0 == pytest.approx(expected)


def test_the_encoding_named_decides_and_base64_is_the_default_when_none_is_named(tmp_path):
    record = json.loads(_line("2026-11-30T09:15:02Z", LMI, encoding="BASE64"))
    del record["captureData"]["endpointInput"]["encoding"]
    csv = _line("2026-11-30T09:15:03Z", "1,2,3", encoding="CSV")
    (tmp_path / "c.jsonl").write_text(json.dumps(record) + "\n" + csv + "\n")
    read = read_capture(tmp_path)
    assert [r.record for r in read.requests] == [{"inputs": LMI["inputs"]}]
    assert read.skipped == {"input encoding CSV not JSON or BASE64": 1}


def test_each_unreadable_line_is_counted_by_reason_and_the_rest_are_read(tmp_path):
    stamp = "2026-11-30T09:15:02Z"
    lines = [
        _line(stamp, LMI),
        "{not json",
        json.dumps({**json.loads(_line(stamp, LMI)), "eventMetadata": {"eventId": "e"}}),
        _line("yesterday", LMI),
        _line(stamp, {"inputs": ["batched", "prompts"]}),
        _line(stamp, {"inputs": "x", "parameters": {"max_new_tokens": -5}}),
        _line(stamp, {"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "u"}}]}]}),
        _line(stamp, {"instances": [1, 2]}),
        _line(stamp, {"inputs": "lone \ud800 surrogate"}),
        _line(stamp, LMI, encoding="BASE64")
        .replace('"encoding": "BASE64"', '"encoding": "BASE64", "x": 0')
        .replace(base64.b64encode(json.dumps(LMI).encode()).decode(), "not base64 !!"),
        json.dumps(
            {
                "captureData": {"endpointOutput": {"data": "{}", "encoding": "JSON"}},
                "eventMetadata": {"inferenceTime": stamp},
            }
        ),
        "",
    ]
    path = tmp_path / "mixed.jsonl"
    path.write_bytes("\n".join(lines).encode() + b"\n\xff\xfe broken\n")

    read = read_capture(path, min_readable_share=0)

    assert [r.record for r in read.requests] == [{"inputs": LMI["inputs"]}]
    assert read.first_skipped["not JSON"] == "line 2" and read.first_skipped["not UTF-8"] == "line 13"
    assert read.skipped == {
        "not JSON": 1,
        "no inferenceTime": 1,
        "bad inferenceTime": 1,
        "inputs not one prompt string": 1,
        "max_new_tokens not a whole number in 1..1000000": 1,
        "message content other than text": 1,
        "no messages, inputs or prompt": 1,
        "bad BASE64 input": 1,
        "input not captured": 1,
        "not UTF-8": 1,
        "text not valid Unicode": 1,
    }


def test_no_readable_record_fails_naming_the_source_and_the_top_reasons(tmp_path):
    (tmp_path / "a.jsonl").write_text("nope\n" * 3 + _line("2026-11-30T09:15:02Z", {"instances": []}) + "\n")
    with pytest.raises(
        ValueError,
        match=r"no readable capture record in 1 file\(s\) \(3 not JSON \(first at a.jsonl:1\), 1 no messages",
    ):
        read_capture(tmp_path)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ValueError, match="empty: no capture files"):
        read_capture(empty)
    with pytest.raises(ValueError, match="no such file or folder"):
        read_capture(tmp_path / "missing")


def test_a_capture_mostly_unreadable_fails_closed_and_a_few_bad_records_are_skipped_and_counted(tmp_path):
    """A file may end in a record cut short (skipped, counted, its line named); when most records cannot be read
    (another body format, a corrupted file) the rest would not stand for the traffic: refused, saying why."""
    stamp = "2026-11-30T09:15:02Z"
    good = [_line(stamp, LMI)] * 3
    cut = _line(stamp, LMI)[:40]
    (tmp_path / "mostly-good.jsonl").write_text("\n".join([*good, cut]))
    read = read_capture(tmp_path / "mostly-good.jsonl")
    assert len(read.requests) == 3 and read.skipped == {"not JSON": 1}
    assert read.skipped_note() == "1 not JSON (first at line 4)"

    (tmp_path / "mostly-bad.jsonl").write_text("\n".join([good[0], cut, cut, _line(stamp, {"instances": [1]})]))
    with pytest.raises(ValueError, match=r"only 1 of 4 capture records are readable requests \(2 not JSON \(first at "
                       r"line 2\), 1 no messages, inputs or prompt \(first at line 4\)\); fewer than 50%"):  # fmt: skip
        read_capture(tmp_path / "mostly-bad.jsonl")
    assert len(read_capture(tmp_path / "mostly-bad.jsonl", min_readable_share=0.25).requests) == 1
    # Records outside the window are fine records: they do not count against the capture.
    old = _line("2020-01-01T00:00:00Z", LMI)
    (tmp_path / "old.jsonl").write_text("\n".join([good[0], old, old, old]))
    recent = read_capture(tmp_path / "old.jsonl", window_days=365, now=T0)
    assert len(recent.requests) == 1 and recent.skipped == {"before the window": 3}


def test_the_window_keeps_recent_days_and_max_requests_the_newest(tmp_path):
    for day in range(10):
        at = T0 + day * DAY
        key = capture_key("cap", "ep", "AllTraffic", at, "00-00-000-x.jsonl")
        (tmp_path / key).parent.mkdir(parents=True)
        (tmp_path / key).write_text(json.dumps(capture_record({**LMI, "inputs": f"day {day}"}, at, str(day))) + "\n")
    now = T0 + 9 * DAY + 60

    recent = read_capture(tmp_path, window_days=3, now=now)
    newest = read_capture(tmp_path, max_requests=2)

    assert [r.record["inputs"] for r in recent.requests] == ["day 7", "day 8", "day 9"]
    # Hour folders ended well before the window are not even opened (day 6's, within the hour of slack, is).
    assert recent.files == 4 and recent.skipped == {"before the window": 1}
    assert [r.record["inputs"] for r in newest.requests] == ["day 8", "day 9"] and newest.files == 2
    with pytest.raises(ValueError, match=r"\(1 before the window\)"):
        read_capture(tmp_path / key, window_days=1, now=now + 30 * DAY)


def test_chat_turns_that_share_their_opening_share_a_session_and_it_is_a_digest(tmp_path):
    first = {"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Plan a trip"}]}
    second = {"messages": first["messages"] + [{"role": "assistant", "content": "Where?"},
                                               {"role": "user", "content": "Rome"}]}  # fmt: skip
    other = {"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Cook pasta"}]}
    stamp = "2026-11-30T09:15:02Z"
    (tmp_path / "s.jsonl").write_text("\n".join(_line(stamp, b) for b in (first, second, other, LMI)))
    sessions = [r.session for r in read_capture(tmp_path).requests]
    assert sessions[0] == sessions[1] != sessions[2] and sessions[3] is None
    assert "trip" not in sessions[0] and len(sessions[0]) == 16


class _DeniedS3:
    """An S3 client that lists the capture but may not read it (no kms:Decrypt): each file counted, then the
    error names the reason."""

    def get_paginator(self, _name):
        class Pages:
            def paginate(self, **_kwargs):
                return [{"Contents": [{"Key": "p/ep/AllTraffic/2026/11/30/09/a.jsonl"}]}]

        return Pages()

    def get_object(self, **_kwargs):
        raise ClientError({"Error": {"Code": "AccessDenied", "Message": "kms"}}, "GetObject")


def test_a_capture_that_cannot_be_read_fails_closed_with_the_reason():
    with pytest.raises(
        ValueError, match=r"no readable capture record in 1 file\(s\) \(1 file unreadable \(AccessDenied"
    ):
        read_capture("s3://bucket/p", s3_client=_DeniedS3())


# Hostile lines: random bytes, random JSON, and capture records with any field replaced by a hostile value.
_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
_hostile_value = (
    _json
    | st.sampled_from(["", "\ud800", "Infinity", "2026-13-45T99:99:99Z", "9" * 5000, "=" * 7, "JSON", "BASE64"])
    | st.sampled_from([10**30, 10**400, -(10**400)])
    | st.just(float("nan"))
)
_paths = st.sampled_from(
    [
        ("captureData",), ("eventMetadata",), ("eventMetadata", "inferenceTime"), ("captureData", "endpointInput"),
        ("captureData", "endpointInput", "data"), ("captureData", "endpointInput", "encoding"),
        ("captureData", "endpointOutput"), ("captureData", "endpointOutput", "data"), ("body", "messages"),
        ("body", "inputs"), ("body", "parameters"), ("body", "parameters", "max_new_tokens"), ("body", "max_tokens"),
        ("body", "max_completion_tokens"), ("body", "prompt"), ("body", "messages", 0),
        ("body", "messages", 0, "content"),
    ]
)  # fmt: skip


def _set(target: Any, path: tuple[Any, ...], value: Any) -> None:
    for step in path[:-1]:
        if isinstance(target, dict):
            target = target.setdefault(step, {})
        elif isinstance(target, list) and isinstance(step, int) and step < len(target):
            target = target[step]
    if isinstance(target, dict) or (isinstance(target, list) and isinstance(path[-1], int) and path[-1] < len(target)):
        target[path[-1]] = value


@st.composite
def _mutated_record(draw) -> bytes:
    """A valid record (any body kind, either encoding) with one to three fields replaced by hostile values."""
    body = json.loads(json.dumps(draw(st.sampled_from([LMI, CHAT, CHAT_NEW, COMPLETION]))))
    mutations = [(draw(_paths), draw(_hostile_value)) for _ in range(draw(st.integers(1, 3)))]
    for path, value in mutations:
        if path[0] == "body":
            _set(body, path[1:], value)
    encoding = draw(st.sampled_from(["JSON", "BASE64"]))
    record = capture_record(json.dumps(body).encode("utf-8", "surrogatepass"), T0, "e", encoding=encoding,
                            output={"usage": {"prompt_tokens": 3}})  # fmt: skip
    for path, value in mutations:
        if path[0] != "body":
            _set(record, path, value)
    return json.dumps(record).encode("utf-8", "surrogatepass")


_hostile_line = st.binary(max_size=200) | _json.map(lambda v: json.dumps(v).encode()) | _mutated_record()


@pytest.mark.fuzz
@fuzz_settings(full=400, fast=40)
@given(st.lists(_hostile_line, min_size=1, max_size=6))
def test_hostile_capture_lines_never_crash_each_is_read_or_skipped_with_a_reason(tmp_path_factory, lines):
    for number, line in enumerate(lines, 1):
        if b"\n" in line or not line.strip():
            continue
        try:
            request, _ = parse_capture_line(line, f"f:{number}")
        except Skip as skip:
            assert str(skip)  # a reason to count
        else:  # what is read is a request the load can send
            assert set(request.record) in ({"inputs"}, {"messages"}) and request.prompt_tokens >= 1
            json.dumps(request.record, ensure_ascii=False).encode("utf-8")
    path = tmp_path_factory.mktemp("hostile") / "h.jsonl"
    good = json.dumps(capture_record(LMI, T0, "good")).encode()
    path.write_bytes(b"\n".join([*lines, good]))
    read = read_capture(path, min_readable_share=0)
    nonblank = sum(1 for line in b"\n".join([*lines, good]).split(b"\n") if line.strip())
    assert len(read.requests) + sum(read.skipped.values()) == nonblank
    assert all(reason and count > 0 for reason, count in read.skipped.items())


def test_a_capture_folder_may_hold_other_files_that_are_not_read(tmp_path):
    (tmp_path / "notes.txt").write_text("hello")
    (tmp_path / "dir.jsonl").mkdir()
    (tmp_path / "c.jsonl").write_text(_line("2026-11-30T09:15:02Z", COMPLETION))
    read = read_capture(Path(tmp_path))
    assert read.files == 1 and [r.record for r in read.requests] == [{"inputs": COMPLETION["prompt"]}]


def test_millisecond_stamps_keep_exact_gaps_and_whole_seconds_are_what_the_service_writes(tmp_path):
    gaps = [0.0, 0.013, 0.25, 0.251, 1.999]
    lines = [json.dumps(capture_record(LMI, T0 + g, str(i), whole_seconds=False)) for i, g in enumerate(gaps)]
    (tmp_path / "ms.jsonl").write_text("\n".join(lines))
    read = read_capture(tmp_path)
    assert [r.at - T0 for r in read.requests] == pytest.approx(gaps, abs=1e-6)
    assert capture_record(LMI, T0 + 0.75, "e")["eventMetadata"]["inferenceTime"] == "2026-11-30T00:53:20Z"
    assert capture_record(LMI, T0 + 0.75, "e", whole_seconds=False)["eventMetadata"]["inferenceTime"] == (
        "2026-11-30T00:53:20.750Z"
    )
