"""Merge the shards of a benchmark run (exactly, from raw samples) into one result file.

Event: {"shards": [{"bucket", "key", ...}, ...], "bucket": "...", "key": ".../result.json"}
(optigate.lambdas.events.MergeEvent, staged beside this handler, which refuses an unknown or missing key or a value of
the wrong type, naming it).
Returns the merged run's summary (without samples) and where the full result is. Shards of an inference-component
endpoint keep their adapter labels: the merged run's "adapters" merges each adapter's samples, and the result
names the mix the shards sent ("inference_components"). Shards of a replay: the merged run's schedule fidelity is
judged over every shard's sends (optigate.bench.core.schedule.judge_schedule), and it is refused when they lagged.

The merged file (optigate.bench.result_file.MergedResultFile, format_version as the bench result's) names the shards
it was given (`shard_keys`). A shard that cannot be read or merged (not JSON, another format version, values the
merge cannot add up, times hours away from the others) is listed in `unreadable_shards` ({"key", "reason"}) and the
file has no run: the gate's decision fails closed on it and re-reads the shard through the result file's schema to
say where it is wrong. This function has the standard library only (no pydantic), so its checks here are what the
merge needs not to crash or hang, not the schema.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from typing import Any

import boto3

from optigate.bench.core.metrics import RunSamples, merge
from optigate.bench.core.result_format import FORMAT_VERSION, MAX_RUN_SPAN_S
from optigate.bench.core.schedule import judge_schedule

try:
    from optigate.lambdas.events import MergeEvent, resolved
except ImportError:  # the function's code: optigate.lambdas.events staged beside this handler as events.py
    from events import MergeEvent, resolved  # type: ignore[no-redef]

#: What bad content makes reading or merging a shard raise (json, unpacking, arithmetic on the wrong types, nesting
#: past the recursion limit). Caught around each shard only: an S3 error still fails the task, which is retried.
BAD_CONTENT = (ValueError, TypeError, KeyError, IndexError, AttributeError, RecursionError, ArithmeticError)
#: The returned summary lists at most this many unreadable shards (Step Functions payloads are small; the file
#: has them all), each reason cut to REASON_CHARS.
RETURNED_SHARDS, REASON_CHARS = 5, 300


class ShardError(ValueError):
    """A shard this merge cannot use, and why."""


def _short(text: str) -> str:
    return text if len(text) <= REASON_CHARS else text[: REASON_CHARS - 1] + "…"


def _whole(value: Any, minimum: int = 0) -> bool:
    return type(value) is int and value >= minimum


def _times(run: RunSamples) -> list[float]:
    return [
        *(t for sent, ended, _ in run.intervals for t in (sent, ended)),
        *(t for t, _ in run.token_arrivals),
        *(t for t, _ in run.completions),
        *run.finishes,
    ]


def read_shard(body: bytes) -> tuple[dict[str, Any], list[RunSamples]]:
    """A shard's result and its runs' samples, each run tried on its own (its summary computed, its numbers
    finite), so a bad value is caught here, with its shard, not in the merge of all; else ShardError or one of
    BAD_CONTENT."""
    data = json.loads(body)
    if not isinstance(data, dict):
        raise ShardError(f"not a bench result (a JSON {type(data).__name__}, not an object)")
    version = data.get("format_version")
    if version is not None and not (type(version) is int and version == FORMAT_VERSION):
        raise ShardError(f"format version {json.dumps(version)[:40]}; this merge reads version {FORMAT_VERSION}")
    raw_runs = data.get("runs")
    if not isinstance(raw_runs, list) or not raw_runs:
        raise ShardError("no `runs` list with a run in it")
    if len(raw_runs) > 1:  # merged as one, two levels would add up to a level neither measured
        raise ShardError(f"{len(raw_runs)} runs; a shard measures one level (one run)")
    runs = []
    for index, raw in enumerate(raw_runs):
        if not isinstance(raw, dict):
            raise ShardError(f"runs[{index}] is not an object")
        if not _whole(raw.get("concurrency"), 1):
            raise ShardError(f"runs[{index}].concurrency is not a whole number ≥ 1")
        errors = raw.get("errors")
        if not isinstance(errors, dict) or not all(_whole(count) for count in errors.values()):
            raise ShardError(f"runs[{index}].errors is not an object of whole numbers")
        if type(raw.get("interrupted", False)) is not bool:
            raise ShardError(f"runs[{index}].interrupted is not true or false")
        schedule = raw.get("schedule")
        if schedule is not None and not (
            isinstance(schedule, dict)
            and type(schedule.get("bound_ms")) in (int, float)
            and math.isfinite(schedule["bound_ms"])
            and schedule["bound_ms"] > 0
        ):
            raise ShardError(f"runs[{index}].schedule has no positive bound_ms")
        run = RunSamples.from_result(raw)
        # allow_nan=False: NaN or infinity in a sample (or a figure computed from one) is refused here.
        json.dumps(run.to_result(), allow_nan=False)
        if not all(type(t) in (int, float) for t in _times(run)):
            raise ShardError(f"runs[{index}].samples holds a time that is not a number")
        runs.append(run)
    middle = _median(_times_of(runs))
    stray = None if middle is None else _stray(runs, middle)
    if stray is not None:
        raise ShardError(f"a time ({stray!r} s) more than {MAX_RUN_SPAN_S / 3600:g} h from its others ({middle:.3f} s)")
    return data, runs


def _stray(runs: list[RunSamples], middle: float) -> float | None:
    """A time of `runs` more than MAX_RUN_SPAN_S from `middle`, if any: throughput would count a one-second bucket
    for every second between them (the merged file's reader refuses such a run; here it is named with its shard)."""
    return next((t for run in runs for t in _times(run) if abs(t - middle) > MAX_RUN_SPAN_S), None)


def _median(values: list[float]) -> float | None:
    return sorted(values)[len(values) // 2] if values else None


def handler(event: dict, _context=None) -> dict:
    merging = MergeEvent.from_event(event)
    shards, bucket, target = resolved(merging.shards), merging.bucket, resolved(merging.key)
    s3 = boto3.client("s3")
    keys = [str(shard["key"]) for shard in shards]
    if not keys:  # the event's fault, not a shard's: fail the task rather than write a result with no run and no why
        raise ValueError("the event names no shards: nothing to merge")
    read: list[tuple[str, dict[str, Any], list[RunSamples]]] = []
    unreadable: list[dict[str, str]] = []
    for shard, key in zip(shards, keys, strict=True):
        body = s3.get_object(Bucket=shard["bucket"], Key=key)["Body"].read()
        try:
            data, runs = read_shard(body)
        except BAD_CONTENT as error:  # bad content only (see BAD_CONTENT): recorded, never a crash
            unreadable.append({"key": key, "reason": _short(f"{type(error).__name__}: {error}")})
            continue
        read.append((key, data, runs))
    # Each shard's times are within the span of their own median (read_shard); here, of the median of all shards'.
    overall = _median(_times_of([run for _, _, runs in read for run in runs]))
    for key, _, runs in read:
        stray = None if overall is None else _stray(runs, overall)
        if stray is not None:
            hours = MAX_RUN_SPAN_S / 3600
            reason = f"a time ({stray!r} s) more than {hours:g} h from the other shards' (around {overall:.3f} s)"
            unreadable.append({"key": key, "reason": reason})
    unreadable += _other_levels(read)
    result: dict[str, Any] = {"format_version": FORMAT_VERSION, "target": None, "shards": len(keys)}
    result["shard_keys"] = keys
    summary: dict[str, Any] = {}
    if not unreadable:
        try:
            result["runs"], summary = _merge(read)
        except BAD_CONTENT as error:  # shards that each read but do not add up together: none is merged
            reason = _short(f"the shards could not be merged together: {type(error).__name__}: {error}")
            unreadable = [{"key": key, "reason": reason} for key in keys]
    if unreadable:
        order = {key: index for index, key in enumerate(keys)}
        unreadable.sort(key=lambda shard: order.get(shard["key"], len(keys)))
        result.update(runs=[], unreadable_shards=unreadable)
        summary = {
            "unreadable_shards": unreadable[:RETURNED_SHARDS],
            "unreadable_shard_count": len(unreadable),
        }
    else:
        result["target"] = next((data["target"] for _, data, _ in read if data.get("target")), None)
        mix = next((data["inference_components"] for _, data, _ in read if data.get("inference_components")), None)
        if mix:
            result["inference_components"] = mix
    s3.put_object(Bucket=bucket, Key=target, Body=json.dumps(result).encode(), ContentType="application/json")
    return {"bucket": bucket, "key": target, "summary": summary}


def _other_levels(read: list[tuple[str, dict[str, Any], list[RunSamples]]]) -> list[dict[str, str]]:
    """The shards run at another concurrency than most: the fleet runs every shard at one level (`per_shard`), so
    adding a shard of another level up would report a level nobody measured."""
    levels = Counter(run.concurrency for _, _, runs in read for run in runs)
    if len(levels) < 2:
        return []
    # The most shards' level; on a tie, the first shard's.
    first = read[0][2][0].concurrency
    usual = max(levels, key=lambda level: (levels[level], level == first))
    return [
        {"key": key, "reason": f"ran at concurrency {runs[0].concurrency}, the other shards at {usual}"}
        for key, _, runs in read
        if runs[0].concurrency != usual
    ]


def _times_of(runs: list[RunSamples]) -> list[float]:
    return [t for run in runs for t in _times(run)]


def _merge(read: list[tuple[str, dict[str, Any], list[RunSamples]]]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The merged run (as the file holds it) and its summary without samples."""
    shards = [run for _, _, runs in read for run in runs]
    schedules = [raw["schedule"] for _, data, _ in read for raw in data["runs"] if raw.get("schedule")]
    runs = merge(shards)
    merged = runs.to_result()
    if schedules:  # a replay: the fidelity of every shard's sends together, refused as one run when it lagged
        judge_schedule(merged, runs, max(schedule["bound_ms"] for schedule in schedules))
    return [merged], runs.to_result(include_samples=False)
