"""Merge the shards of a benchmark run (exactly, from raw samples) into one result file.

Event: {"shards": [{"bucket", "key", ...}, ...], "bucket": "...", "key": ".../result.json"}
Returns the merged run's summary (without samples) and where the full result is. Shards of an inference-component
endpoint keep their adapter labels: the merged run's "adapters" merges each adapter's samples, and the result
names the mix the shards sent ("inference_components"). Shards of a replay: the merged run's schedule fidelity is
judged over every shard's sends (optigate.bench.schedule.judge_schedule), and it is refused when they lagged.
"""

from __future__ import annotations

import json

import boto3

from optigate.bench.metrics import RunSamples, merge
from optigate.bench.schedule import judge_schedule


def handler(event: dict, _context=None) -> dict:
    s3 = boto3.client("s3")
    shards = []
    schedules: list[dict] = []
    target = mix = None
    for shard in event["shards"]:
        data = json.loads(s3.get_object(Bucket=shard["bucket"], Key=shard["key"])["Body"].read())
        target = target or data.get("target")
        mix = mix or data.get("inference_components")
        shards += [RunSamples.from_result(run) for run in data["runs"]]
        schedules += [run["schedule"] for run in data["runs"] if run.get("schedule")]
    runs = merge(shards)
    merged = runs.to_result()
    if schedules:  # a replay: the fidelity of every shard's sends together, refused as one run when it lagged
        judge_schedule(merged, runs, max(schedule["bound_ms"] for schedule in schedules))
    result = {"target": target, "shards": len(event["shards"]), "runs": [merged]}
    if mix:
        result["inference_components"] = mix
    s3.put_object(
        Bucket=event["bucket"], Key=event["key"], Body=json.dumps(result).encode(), ContentType="application/json"
    )
    summary = runs.to_result(include_samples=False)
    return {"bucket": event["bucket"], "key": event["key"], "summary": summary}
