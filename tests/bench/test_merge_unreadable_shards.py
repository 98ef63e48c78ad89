"""The merge Lambda on shards it cannot use (issue 29): each one is recorded in the merged result with why, the file
has no run, and the Lambda returns normally; never a crash, never a merge that counts buckets across years."""

from __future__ import annotations

import importlib.util
import json

import boto3
import pytest
from moto import mock_aws

from optigate.bench.core.result_format import FORMAT_VERSION
from optigate.bench.result_file import ResultFileError, parse_merged_result
from optigate.lambdas import handler_source
from tests.fixtures.merged_result_mutants import MERGED

BUCKET = "fleet-results"


def _merge_handler():
    spec = importlib.util.spec_from_file_location("lambda_merge_unreadable", handler_source("benchmark_merge"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.handler


def _shards() -> list[bytes]:
    return [(MERGED / f"baseline-shard-{index:04d}.json").read_bytes() for index in range(2)]


def _merge(bodies: list[bytes]) -> tuple[dict, dict]:
    """Merge `bodies` as shards in moto's S3: the Lambda's output and the merged file, read through its schema."""
    with mock_aws():
        s3 = boto3.client("s3", region_name="us-east-1")
        s3.create_bucket(Bucket=BUCKET)
        shards = []
        for index, body in enumerate(bodies):
            key = f"benchmarks/r/c2/shard-{index:04d}.json"
            s3.put_object(Bucket=BUCKET, Key=key, Body=body)
            shards.append({"bucket": BUCKET, "key": key})
        output = _merge_handler()({"shards": shards, "bucket": BUCKET, "key": "benchmarks/r/result.json"}, None)
        stored = s3.get_object(Bucket=BUCKET, Key="benchmarks/r/result.json")["Body"].read()
    return output, parse_merged_result(stored, "s3://fleet-results/benchmarks/r/result.json")


def _with(body: bytes, change) -> bytes:
    data = json.loads(body)
    change(data)
    return json.dumps(data).encode()


def test_readable_shards_merge_into_a_versioned_result_naming_them():
    output, merged = _merge(_shards())
    assert merged["format_version"] == FORMAT_VERSION and merged["shards"] == 2
    assert merged["shard_keys"] == [f"benchmarks/r/c2/shard-{i:04d}.json" for i in range(2)]
    assert "unreadable_shards" not in merged and len(merged["runs"]) == 1
    assert merged["runs"][0]["concurrency"] == 2 and output["summary"]["requests"] == 24


def _set(path: tuple, value):
    def change(data):
        target = data
        for part in path[:-1]:
            target = target[part]
        target[path[-1]] = value

    return change


@pytest.mark.parametrize(
    ("corrupt", "reason"),
    [
        (lambda body: body[: len(body) // 2], "JSONDecodeError"),
        (lambda body: b"\xff" + body, "UnicodeDecodeError"),
        (lambda body: _with(body, _set(("runs", 0, "samples", "ttft_ms", 3), "slow")), "TypeError"),
        (lambda body: _with(body, _set(("runs", 0, "samples", "ttft_ms", 3), float("nan"))), "ValueError"),
        (lambda body: _with(body, _set(("format_version",), 2)), "format version 2; this merge reads version 1"),
        (lambda body: _with(body, _set(("runs",), [])), "no `runs` list"),
        (lambda body: _with(body, _set(("runs", 0, "errors"), {"Timeout": "3"})), "errors is not an object of whole"),
        (lambda body: _with(body, _set(("runs", 0, "concurrency"), "2")), "concurrency is not a whole number"),
        (lambda body: _with(body, _set(("runs", 0, "samples", "completions", 0), {})), "Error"),
        (lambda body: _with(body, _set(("runs", 0, "samples", "completions", 0), ["x", 5])), "not a number"),
        (lambda body: _with(body, _set(("runs", 0, "schedule"), {"bound_ms": "5"})), "no positive bound_ms"),
        (lambda body: b"[1, 2]", "not a bench result"),
        (lambda body: _with(body, lambda data: data["runs"].append(data["runs"][0])), "2 runs; a shard measures one"),
    ],
)
def test_a_shard_that_cannot_be_read_is_recorded_with_why_and_nothing_is_merged(corrupt, reason):
    good, bad = _shards()
    output, merged = _merge([good, corrupt(bad)])
    assert merged["runs"] == [] and merged["shards"] == 2
    assert [shard["key"] for shard in merged["unreadable_shards"]] == ["benchmarks/r/c2/shard-0001.json"]
    assert reason in merged["unreadable_shards"][0]["reason"]
    assert output["summary"]["unreadable_shards"] == merged["unreadable_shards"]
    assert output["summary"]["unreadable_shard_count"] == 1


def test_a_time_years_away_is_refused_without_counting_the_buckets_between():
    """One finish 30 years on (about 10^9 one-second buckets from the rest): named, inside its shard."""
    good, bad = _shards()
    _, merged = _merge([good, _with(bad, _set(("runs", 0, "samples", "finishes", 0), 2.7e9))])
    assert merged["runs"] == [] and "more than 6 h from its others" in merged["unreadable_shards"][0]["reason"]


def test_a_shard_hours_away_from_the_others_is_named():
    """Each shard's own times are close; one shard as a whole a day later than the other is the stray one."""

    def shift(data):
        samples = data["runs"][0]["samples"]
        day = 86_400.0
        samples["intervals"] = [[sent + day, ended + day, measured] for sent, ended, measured in samples["intervals"]]
        samples["token_arrivals"] = [[t + day, tokens] for t, tokens in samples["token_arrivals"]]
        samples["completions"] = [[t + day, tokens] for t, tokens in samples["completions"]]
        samples["finishes"] = [t + day for t in samples["finishes"]]

    good, bad = _shards()
    _, merged = _merge([good, _with(bad, shift)])
    assert merged["runs"] == []
    reasons = {shard["key"]: shard["reason"] for shard in merged["unreadable_shards"]}
    assert len(reasons) == 1 and "from the other shards'" in next(iter(reasons.values()))


def test_a_merged_result_without_its_run_or_a_reason_is_refused_naming_the_path():
    body = (MERGED / "baseline.json").read_bytes()
    with pytest.raises(ResultFileError, match=r"^s3://b/k: runs: expected one merged run"):
        parse_merged_result(_with(body, _set(("runs",), [])), "s3://b/k")
    with pytest.raises(ResultFileError, match=r"runs\[0\]\.samples\.ttft_ms\[2\]: expected a number, found \"x\""):
        parse_merged_result(_with(body, _set(("runs", 0, "samples", "ttft_ms", 2), "x")), "s3://b/k")
    two_runs = _with(body, lambda data: data["runs"].append({**data["runs"][0], "concurrency": 4}))
    with pytest.raises(ResultFileError, match=r"^s3://b/k: runs: expected a list of the documented length"):
        parse_merged_result(two_runs, "s3://b/k")


def test_a_shard_at_another_level_than_its_siblings_is_not_merged():
    """A corrupted shard's concurrency (1 -> 7) must not turn the merged level into 8, a level no shard measured."""
    good, bad = _shards()
    one_level = _with(bad, _set(("runs", 0, "concurrency"), 1))
    _, merged = _merge([good, _with(one_level, _set(("runs", 0, "concurrency"), 7))])
    assert merged["runs"] == [] and "concurrency" in merged["unreadable_shards"][0]["reason"]


def test_no_shards_fails_the_task_instead_of_writing_a_result_its_reader_refuses():
    with pytest.raises(ValueError, match="the event names no shards"):
        _merge([])
