"""A replay split across the gate's benchmark workers (each a Lambda of its own): every shard sends on one start
(the fan-out's time + a lead), so together they send the recorded arrival process even when one worker is ready
later; a worker ready after that start lags its schedule, the merged run is refused, and the gate cannot judge it.
The handlers run in-process against the emulator, with S3 in moto."""

from __future__ import annotations

import importlib.util
import json
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

import boto3
import pytest
from moto import mock_aws

from optigate.bench.core.capture import capture_key, capture_record
from optigate.lambdas import handler_source

#: Recorded offsets (s) of the captured requests, whole seconds as SageMaker records inferenceTime; uneven gaps, so a
#: shifted shard would show. Replayed at SPEEDUP.
OFFSETS = (0, 1, 2, 4, 5, 7)
SPEEDUP = 4.0


def _module(folder: str):
    spec = importlib.util.spec_from_file_location(f"lambda_{folder}_replay", handler_source(folder))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def capture(tmp_path: Path) -> str:
    """Requests captured an hour ago at OFFSETS, in SageMaker's layout."""
    first = float(int(time.time()) - 3600)
    lines: dict[str, list[str]] = {}
    for n, offset in enumerate(OFFSETS):
        at = first + offset
        body = {"inputs": f"question {n}", "parameters": {"max_new_tokens": 3}}
        key = capture_key("capture", "ok", "AllTraffic", at, "capture.jsonl")
        lines.setdefault(key, []).append(json.dumps(capture_record(body, at, str(n))))
    for key, records in lines.items():
        path = tmp_path / key
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("\n".join(records) + "\n")
    return str(tmp_path / "capture")


def _iso(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).isoformat().replace("+00:00", "Z")


def _replay(emulator_url: str, capture: str, entered: float, delays: tuple[float, ...]) -> dict:
    """Each shard's worker in its own thread, starting after its delay; the merged result."""
    worker, merger = _module("benchmark"), _module("benchmark_merge")
    s3 = boto3.client("s3", region_name="us-east-1")
    s3.create_bucket(Bucket="results")
    spec = {"source": capture, "kind": "replay", "window_days": 1.0, "max_requests": 100, "speedup": SPEEDUP}
    pinned = worker.handler({"workload_check": spec}, None)
    base = {
        "endpoint_name": "ok",
        "endpoint_url": emulator_url,
        "engine_mode": "async",
        "region": "us-east-1",
        "concurrency": 2,
        "max_new_tokens": 3,
        "run_id": "replay",
        "bucket": "results",
        "prefix": "benchmarks",
        "workload": {**spec, "until": pinned["until"], "digest": pinned["digest"]},
        "shards": len(delays),
        "schedule_entered": _iso(entered),
    }
    outputs: list[dict] = [{} for _ in delays]

    def run(shard: int) -> None:
        time.sleep(delays[shard])
        outputs[shard] = worker.handler({**base, "shard": shard}, None)

    threads = [threading.Thread(target=run, args=(shard,)) for shard in range(len(delays))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    merger.handler({"shards": outputs, "bucket": "results", "key": "benchmarks/replay/result.json"}, None)
    body = s3.get_object(Bucket="results", Key="benchmarks/replay/result.json")["Body"].read()
    return json.loads(body)["runs"][0]


@pytest.mark.slow
@mock_aws
def test_shards_ready_at_different_times_send_the_recorded_arrivals_from_one_start(emulator_url, capture):
    lead = _module("benchmark").SHARED_START_LEAD_S
    start = time.time() + 5.0  # the shared start, whatever each worker's readiness (room for a busy host)
    run = _replay(emulator_url, capture, start - lead, delays=(0.0, 0.6))  # the second worker ready 0.6 s later
    sent = sorted(begin for begin, _, measured in run["samples"]["intervals"] if measured)
    assert len(sent) == len(OFFSETS) and run["requests"] == len(OFFSETS)
    # Every request left at its recorded offset from the one start: the second shard's later readiness (0.6 s) does
    # not shift its share (on its own clock, its sends would be 0.6 s late against the first shard's).
    errors = [abs((at - start) - offset / SPEEDUP) for at, offset in zip(sent, OFFSETS, strict=True)]
    assert max(errors) < 0.2, errors  # a shard on its own clock would be 0.6 s off; gaps are 0.25 s or more
    assert "schedule" in run


@mock_aws
def test_a_worker_ready_after_the_shared_start_is_refused_and_the_gate_cannot_judge_it(emulator_url, capture):
    from optigate.gate import GateInputs, decide

    lead = _module("benchmark").SHARED_START_LEAD_S
    run = _replay(emulator_url, capture, time.time() - lead - 2.0, delays=(0.0,))  # the start passed 2 s ago
    assert run["schedule"]["p99_lag_ms"] > 1000 and run["schedule"]["client_bound"]
    assert "fell behind the recorded schedule" in run["refused"]
    result = {"runs": [run]}
    verdict = decide(
        GateInputs(
            team="t",
            environment="e",
            baseline_benchmark=result,
            candidate_benchmark=result,
            thresholds={"concurrency": [run["concurrency"]]},
        )
    )
    assert verdict.outcome != "APPROVED"
    schedule = [c for c in verdict.checks if c.name == "schedule"]
    assert [c.outcome.value for c in schedule] == ["inconclusive", "inconclusive"]  # both sides' runs
    assert any("fell behind the recorded schedule" in reason for reason in verdict.reasons)
