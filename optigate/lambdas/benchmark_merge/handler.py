"""Merge the shards of a benchmark run (exactly, from raw samples) into one result file.

Event: {"shards": [{"bucket", "key", ...}, ...], "bucket": "...", "key": ".../result.json"}
Returns the merged run's summary (without samples) and where the full result is.
"""

from __future__ import annotations

import json

import boto3

from optigate.bench.metrics import RunSamples, merge


def handler(event: dict, _context=None) -> dict:
    s3 = boto3.client("s3")
    shards = []
    target = None
    for shard in event["shards"]:
        data = json.loads(s3.get_object(Bucket=shard["bucket"], Key=shard["key"])["Body"].read())
        target = target or data.get("target")
        shards += [RunSamples.from_result(run) for run in data["runs"]]
    merged = merge(shards).to_result()
    result = {"target": target, "shards": len(event["shards"]), "runs": [merged]}
    s3.put_object(
        Bucket=event["bucket"], Key=event["key"], Body=json.dumps(result).encode(), ContentType="application/json"
    )
    summary = {k: v for k, v in merged.items() if k != "samples"}
    return {"bucket": event["bucket"], "key": event["key"], "summary": summary}
