"""Benchmark worker: runs one shard (one concurrency level, c streams) against an endpoint and
writes its raw samples to S3. The Distributed Map runs N of these side by side.

Event:
  {"endpoint_name": "...", "region": "us-east-1", "endpoint_url": null, "target_variant": null,
   "inference_component": null, "concurrency": 16, "requests": 64 | "duration_s": 120,
   "prompt_tokens": 1024, "max_new_tokens": 256, "timeout_s": 120, "engine_mode": "async" | "rolling-batch",
   "shard": 0, "run_id": "...", "bucket": "...", "prefix": "benchmarks/",
   "inference_components": [{"name": "...", "adapter": "base" | "<adapter>", "weight": 3.0}, ...]}
`engine_mode` is LMI's engine mode of the endpoint's container as the gate resolved it: it decides the request
schema and how the stream is read (optigate.bench.core.payloads); without it the worker refuses to run.
`inference_components` (optional; absent or empty: a model-backed endpoint): each request goes to one
component in a weighted order drawn from the shard's seed (optigate.bench.core.load.ComponentSchedule), the same
for the baseline and the candidate of a block; the shard's result names the mix ("inference_components") and
splits each run's samples by adapter ("adapters"), and the summary counts the requests per adapter.
`workload` (optional): the team's captured traffic, {source, kind, window_days, max_requests, speedup, until,
digest}, read here inside the account (optigate.bench.core.shard_workload): the worker rebuilds the requests the gate's
check pinned, refuses (WorkloadChanged) when they differ, and sends its share (`shard` of `shards`); a replay runs
on the recorded schedule, every shard from one start (`schedule_entered` + SHARED_START_LEAD_S). `synthetic`
(optional): {prompt_tokens: [...], max_new_tokens: [...], shared_prefix_share, prefix_tokens}, lengths drawn from
those values. The summary describes the workload by its shape, never its text.
`workload_check` (instead of a benchmark): the gate's check before anything is paid for, returning {until, digest,
shape}, or failing as CaptureUnavailable / ReplayTooLong with the reason. `training_data_check` (instead of a
benchmark): {source, min_records}, the gate's check before an EAGLE head is trained from data capture, returning
{source, records, files}, or failing as TrainingDataUnavailable with the count found and needed.
Returns a small summary and where the shard's samples are (Step Functions payloads are small).
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Awaitable, Callable
from datetime import datetime

import boto3

from optigate.bench.core.client import Target
from optigate.bench.core.load import DEFAULT_MAX_LAG_MS, ComponentShare, LoadSpec
from optigate.bench.core.runner import run_levels
from optigate.bench.core.shard_workload import check_capture, check_training_data, worker_workload
from optigate.bench.core.workload import Workload, shape

#: Seconds from the fan-out to a replay's shared start: room for every worker's cold start, its read of the capture
#: and its connections; with optigate.bench.core.shard_workload.MAX_REPLAY_SECONDS (12 min) and a request's timeout (at
#: most 2 min) it stays inside Lambda's 15 minutes.
SHARED_START_LEAD_S = 45.0


def shard_key(event: dict) -> str:
    prefix = event.get("prefix", "benchmarks/").rstrip("/")
    return f"{prefix}/{event['run_id']}/c{event['concurrency']}/shard-{int(event['shard']):04d}.json"


def handler(event: dict, _context=None) -> dict:
    if event.get("workload_check"):
        return check_capture(event["workload_check"])
    if event.get("training_data_check"):
        return check_training_data(event["training_data_check"])
    if not event.get("engine_mode"):
        raise ValueError("the benchmark event names no engine_mode: the stream of the endpoint cannot be read")
    target = Target(
        endpoint_name=event["endpoint_name"],
        region=event.get("region") or os.environ.get("AWS_REGION", "us-east-1"),
        endpoint_url=event.get("endpoint_url"),
        target_variant=event.get("target_variant"),
        inference_component=event.get("inference_component"),
    )
    workload = worker_workload(event)
    replayed = workload is not None and workload.scheduled
    spec = LoadSpec(
        concurrency=int(event["concurrency"]),
        requests=request_count(event, workload),
        duration_s=event.get("duration_s"),
        prompt_tokens=int(event.get("prompt_tokens", 1024)),
        max_new_tokens=int(event.get("max_new_tokens", 256)),
        engine_mode=str(event["engine_mode"]),
        seed=int(event.get("shard", 0)) * 100_003,
        components=components(event.get("inference_components")),
        workload=workload,
        mode="replay" if replayed else "closed",
        # A replay's schedule bound: the fleet sends none (the runner's 5 ms); an offline rehearsal on a shared host
        # widens it, as it widens the latency budgets (optigate.rehearse.gate_handlers).
        max_lag_ms=float(event.get("max_lag_ms") or DEFAULT_MAX_LAG_MS),
    )
    start = shared_start(event) if replayed else None
    result = asyncio.run(
        run_levels(target, [spec.concurrency], spec, timeout=float(event.get("timeout_s", 120)), start_at=start)
    )
    result["shard"] = int(event["shard"])
    key = shard_key(event)
    boto3.client("s3").put_object(
        Bucket=event["bucket"], Key=key, Body=json.dumps(result).encode(), ContentType="application/json"
    )
    run = result["runs"][0]
    summary = {
        "bucket": event["bucket"],
        "key": key,
        "shard": result["shard"],
        "requests": run["requests"],
        "errors": run["errors"],
        "interrupted": result["interrupted"],
    }
    if workload is not None:
        summary["workload"] = shape(workload)
    if spec.components:
        summary["requests_by_adapter"] = {name: sub["requests"] for name, sub in run.get("adapters", {}).items()}
    return summary


def shared_start(event: dict) -> Callable[[], Awaitable[float]] | None:
    """The start every shard of a replay sends on: SHARED_START_LEAD_S after the fleet fanned out
    (`schedule_entered`, the ShardIndexes state's entry time), so together the workers send the recorded arrival
    process, not one shifted by each worker's cold start. A worker ready after it starts late: its sends lag the
    schedule, and the run is refused (optigate.bench.core.schedule.judge_schedule). None without it: the worker's
    own."""
    entered = event.get("schedule_entered")
    if not entered:
        return None
    start = datetime.fromisoformat(str(entered).replace("Z", "+00:00")).timestamp() + SHARED_START_LEAD_S

    async def start_at() -> float:
        return start

    return start_at


def request_count(event: dict, workload: Workload | None) -> int | None:
    """A replay sends its share of the recorded schedule once; otherwise the event's count (a closed loop takes a
    workload's requests in order), none with a duration."""
    if workload is not None and workload.scheduled:
        return len(workload.requests)
    return None if event.get("duration_s") else event.get("requests")


def components(items: list[dict] | None) -> tuple[ComponentShare, ...]:
    """The event's inference components; a malformed entry is refused (never a guess at the mix)."""
    if not items:
        return ()
    if not isinstance(items, list) or not all(isinstance(item, dict) for item in items):
        raise ValueError(f"inference_components must be a list of {{name, adapter, weight}}, got {items!r}")
    refused = [item for item in items if set(item) != {"name", "adapter", "weight"}]
    if refused:
        raise ValueError(f"each inference component has exactly name, adapter and weight, got {refused[0]!r}")
    return tuple(ComponentShare(str(i["name"]), str(i["adapter"]), i["weight"]) for i in items)
