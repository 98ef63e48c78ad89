"""The check before an EAGLE head is trained from data capture (optigate.bench.core.shard_workload.check_training_data):
at least min_records records the optimization job reads (OpenAI chat or completions, ShareGPT; JSON-encoded) under the
prefix it gets, read newest first and no further than needed; fewer fail as TrainingDataUnavailable, one line naming the
prefix, the count found and needed, why records were skipped and what to do."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws

from optigate.bench.core.capture import capture_key, capture_record
from optigate.bench.core.shard_workload import CaptureUnavailable, TrainingDataUnavailable, check_training_data

HOUR = 1_780_000_000.0 // 3600 * 3600
CHAT = {"messages": [{"role": "user", "content": "Where is my order?"}], "max_tokens": 64}
COMPLETION = {"prompt": "Where is my order?", "max_tokens": 64}
SHAREGPT = {"conversations": [{"from": "human", "value": "Where is my order?"}, {"from": "gpt", "value": "Here."}]}
LMI = {"inputs": "Where is my order?", "parameters": {"max_new_tokens": 64}}
TO_DO = (
    "let the endpoint capture more OpenAI chat or completions requests sent with InvokeEndpoint (streamed calls may "
    "not be captured: OG423), train_from an S3 prefix of ShareGPT/OpenAI data, or lower "
    "gate.candidate.speculative_decoding.min_training_records"
)


def write_hours(root: Path, hours: list[list[Any]]) -> Path:
    """One capture file per hour (the first the oldest) in SageMaker's layout; each item a body (a capture record of
    it, JSON-encoded) or a str (the line as it is). The capture's prefix."""
    for index, items in enumerate(hours):
        at = HOUR + 3600 * index
        lines = [
            item if isinstance(item, str) else json.dumps(capture_record(item, at + n, f"{index}-{n}"))
            for n, item in enumerate(items)
        ]
        path = root / capture_key("capture", "chat-dev", "AllTraffic", at, "records.jsonl")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("\n".join(lines) + "\n")
    return root / "capture" / "chat-dev"


def check(source: Path | str, needed: int, s3: Any = None) -> dict[str, Any]:
    return check_training_data({"source": str(source), "min_records": needed}, s3_client=s3)


def failure(source: Path | str, needed: int, s3: Any = None) -> str:
    with pytest.raises(TrainingDataUnavailable) as raised:
        check(source, needed, s3)
    assert isinstance(raised.value, CaptureUnavailable)  # one error family with the workload's check
    message = str(raised.value)
    assert "\n" not in message and message.startswith(f"{source}: ") and message.endswith(TO_DO), message
    return message


def test_enough_records_pass_and_reading_stops_once_they_are_found(tmp_path):
    source = write_hours(tmp_path, [[CHAT] * 4, [COMPLETION] * 4, [SHAREGPT, CHAT, COMPLETION, CHAT]])
    # Newest first: the last hour's four and one of the hour before are enough; the oldest file is not read.
    assert check(source, 5) == {"source": str(source), "records": 5, "files": 2}
    assert check(source, 12) == {"source": str(source), "records": 12, "files": 3}


def test_too_few_records_fail_with_the_count_found_and_needed(tmp_path):
    source = write_hours(tmp_path, [[CHAT] * 2, [COMPLETION]])
    assert failure(source, 7_473) == (
        f"{source}: 3 readable chat record(s) found, 7,473 needed to train the EAGLE head (2 file(s) read); {TO_DO}"
    )


def test_lmi_inputs_bodies_do_not_count(tmp_path):
    source = write_hours(tmp_path, [[LMI] * 3, [LMI, CHAT]])
    message = failure(source, 2)
    assert message.startswith(f"{source}: 1 readable chat record(s) found, 2 needed to train the EAGLE head (")
    assert "skipped 4 LMI inputs body (not ShareGPT or OpenAI chat/completions) (first at AllTraffic/" in message

    only_lmi = write_hours(tmp_path / "lmi", [[LMI] * 3])
    message = failure(only_lmi, 1)
    assert message.startswith(f"{only_lmi}: 0 readable chat record(s) found, 1 needed to train the EAGLE head (")
    assert "no readable capture record in 1 file(s) (3 LMI inputs body (not ShareGPT or OpenAI" in message


def test_an_empty_or_missing_prefix_fails(tmp_path):
    (tmp_path / "capture" / "chat-dev").mkdir(parents=True)
    assert failure(tmp_path / "capture" / "chat-dev", 10) == (
        f"{tmp_path}/capture/chat-dev: 0 readable chat record(s) found, 10 needed to train the EAGLE head (no capture "
        f"files (.jsonl) found); {TO_DO}"
    )
    missing = tmp_path / "elsewhere"
    assert "0 readable chat record(s) found, 10 needed" in failure(missing, 10)
    assert "(no such file or folder)" in failure(missing, 10)


def test_unreadable_lines_are_skipped_and_named(tmp_path):
    base64_chat = json.dumps(capture_record(CHAT, HOUR, "b", encoding="BASE64"))
    lines = [CHAT, "not json", '{"captureData": {}}', base64_chat, {"messages": []}, {"prompt": ""}, SHAREGPT]
    source = write_hours(tmp_path, [lines])
    message = failure(source, 3)
    assert message.startswith(f"{source}: 2 readable chat record(s) found, 3 needed to train the EAGLE head (1 file(s)")
    assert "; skipped 1 not JSON (first at AllTraffic/" in message  # the three most frequent reasons, each once
    assert check(source, 2) == {"source": str(source), "records": 2, "files": 1}


def test_a_base64_capture_is_not_counted(tmp_path):
    line = json.dumps(capture_record(CHAT, HOUR, "b", encoding="BASE64"))
    source = write_hours(tmp_path, [[line, line]])
    assert "2 input not JSON-encoded (the job is not documented to decode BASE64)" in failure(source, 1)


def test_a_capture_in_s3_is_read_from_the_prefix_the_job_gets_and_an_empty_one_fails():
    with mock_aws():
        s3 = boto3.client("s3", region_name="us-east-1")
        s3.create_bucket(Bucket="traffic")
        source = "s3://traffic/capture/chat-dev"
        message = failure(source, 1, s3)
        assert "0 readable chat record(s) found, 1 needed" in message and "no capture files (.jsonl) found" in message
        assert "NoSuchBucket" in failure("s3://no-bucket/capture/chat-dev", 1, s3)
        key = capture_key("capture", "chat-dev", "AllTraffic", HOUR, "x.jsonl")
        s3.put_object(Bucket="traffic", Key=key, Body=json.dumps(capture_record(CHAT, HOUR, "1")).encode())
        s3.put_object(Bucket="traffic", Key="capture/chat-dev-old/x.jsonl", Body=b"a sibling: not the job's prefix")
        assert check(source, 1, s3) == {"source": source, "records": 1, "files": 1}


def test_min_records_must_be_positive(tmp_path):
    with pytest.raises(ValueError, match="min_records must be at least 1, got 0"):
        check(tmp_path, 0)
