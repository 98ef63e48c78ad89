"""Captured traffic for a rehearsal's gate whose benchmark replays it or whose EAGLE head trains from it: capture
records written into moto S3 as SageMaker writes them (optigate.bench.core.capture.capture_record, in
`<prefix>/<endpoint>/<variant>/yyyy/mm/dd/hh/`), under the capture each of the gate's checks reads (its
CheckCapturedWorkload or CheckTrainingData payload, rendered)."""

from __future__ import annotations

import json
import time
from typing import Any, Final

from optigate.bench.core.capture import capture_key, capture_record
from optigate.config.models import split_s3_uri
from optigate.rehearse.asl import iter_states
from optigate.rehearse.gate_run import GateRun
from optigate.rehearse.template import render_definition

#: A rehearsal's captured requests end this long before now: inside the window the gate's check pins (it ends
#: optigate.bench.core.shard_workload.SETTLE_SECONDS before the check).
CAPTURED_BEFORE_S: Final = 20 * 60
#: A rehearsal's training records are this old: before any benchmark window (gate.benchmark.workload.window_days is at
#: most 90), so a replayed workload of the same capture neither reads nor replays them.
TRAINED_BEFORE_S: Final = 120 * 86_400
VARIANT: Final = "AllTraffic"
WORDS: Final = ("where", "is", "my", "order", "please", "check", "the", "invoice", "for", "last", "week")


def workload_checks(run: GateRun, kind: str = "workload_check") -> list[dict[str, Any]]:
    """What each of the gate's capture checks of `kind` reads, rendered: the captured workload ({source, kind,
    window_days, ...}), or with kind "training_data_check" the capture an EAGLE head trains from ({source,
    min_records})."""
    definition = render_definition(run.template, run.layout.gate, run.substitutions())
    return [
        payload[kind]
        for _, state in iter_states(definition)
        if isinstance(payload := state.get("Parameters", {}).get("Payload"), dict) and kind in payload
    ]


def captured_requests(count: int, rate_per_s: float, *, end: float) -> list[tuple[float, dict[str, Any]]]:
    """`count` OpenAI chat requests arriving at `rate_per_s`, the last at `end` (epoch seconds), of varied prompt
    and output lengths, a third of them in multi-turn sessions (shared opening messages)."""
    requests = []
    for n in range(count):
        at = end - (count - 1 - n) / rate_per_s
        words = " ".join(WORDS[(n + k) % len(WORDS)] for k in range(4 + 3 * (n % 5)))
        messages = [{"role": "user", "content": f"request {n}: {words}"}]
        if n % 3 == 0:
            messages = [
                {"role": "user", "content": "session opening"},
                {"role": "assistant", "content": "ok"},
                *messages,
            ]
        requests.append((at, {"messages": messages, "max_tokens": 8 + 4 * (n % 3)}))
    return requests


def seed_captured_workload(
    run: GateRun, *, count: int = 48, rate_per_s: float = 8.0, now: float | None = None
) -> list[str]:
    """Write `count` captured requests under each capture the gate's check reads that is empty in moto S3, one file
    per hour folder as SageMaker does. The keys written, as s3:// URIs."""
    s3 = run.harness.client("s3")
    end = (time.time() if now is None else now) - CAPTURED_BEFORE_S
    written = []
    for check in workload_checks(run):
        bucket, prefix = split_s3_uri(check["source"])
        if bucket not in {b["Name"] for b in s3.list_buckets().get("Buckets", [])}:
            s3.create_bucket(Bucket=bucket)
        if s3.list_objects_v2(Bucket=bucket, Prefix=prefix).get("KeyCount"):
            continue
        parent, _, endpoint = prefix.rstrip("/").rpartition("/")
        files: dict[str, list[str]] = {}
        for n, (at, body) in enumerate(captured_requests(count, rate_per_s, end=end)):
            key = capture_key(parent, endpoint, VARIANT, at, "rehearsal.jsonl")
            files.setdefault(key, []).append(json.dumps(capture_record(body, at, f"rehearsal-{n}")))
        for key, lines in files.items():
            s3.put_object(Bucket=bucket, Key=key, Body="\n".join(lines).encode())
            written.append(f"s3://{bucket}/{key}")
    return written


def seed_training_capture(run: GateRun, *, now: float | None = None) -> list[str]:
    """Write the records each training-data check of the gate needs (its min_records OpenAI chat requests) under the
    capture it reads, in one capture file of one hour folder TRAINED_BEFORE_S ago, unless that file is there. The
    keys written, as s3:// URIs."""
    s3 = run.harness.client("s3")
    hour = ((time.time() if now is None else now) - TRAINED_BEFORE_S) // 3600 * 3600
    written = []
    for check in workload_checks(run, "training_data_check"):
        bucket, prefix = split_s3_uri(check["source"])
        if bucket not in {b["Name"] for b in s3.list_buckets().get("Buckets", [])}:
            s3.create_bucket(Bucket=bucket)
        parent, _, endpoint = prefix.rstrip("/").rpartition("/")
        key = capture_key(parent, endpoint, VARIANT, hour, "rehearsal-training.jsonl")
        if s3.list_objects_v2(Bucket=bucket, Prefix=key).get("KeyCount"):
            continue
        count = int(check["min_records"])
        # All inside the hour: the last at its 59th minute, at least 3 a second.
        requests = captured_requests(count, max(3.0, count / 3000), end=hour + 3540)
        lines = [json.dumps(capture_record(body, at, f"training-{n}")) for n, (at, body) in enumerate(requests)]
        s3.put_object(Bucket=bucket, Key=key, Body="\n".join(lines).encode())
        written.append(f"s3://{bucket}/{key}")
    return written
