"""The gate's decision Lambda on inputs that fail their schema (issue 29), with S3 and CloudWatch in moto: a merged
result that fails it, one whose merge could not read a shard, an evaluation verdict that is not one. Each verdict is
INCONCLUSIVE (nothing approved, a person decides) with the object and the JSON path in the returned reasons, in the
summary the notification publishes, and in report.json and report.html; no check is computed from the inputs."""

from __future__ import annotations

import html
import importlib.util
import json

import boto3
import pytest
from moto import mock_aws

from optigate.lambdas import handler_source
from tests.fixtures.merged_result_mutants import BUCKET, MERGED, event, merged_key, shard_key

MAX_RETURN_BYTES = 3000


def _module(folder: str):
    spec = importlib.util.spec_from_file_location(f"lambda_{folder}_fails_closed", handler_source(folder))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _decide(objects: dict[str, bytes], **overrides) -> tuple[dict, dict, str]:
    """Put `objects` (key -> bytes) in moto's S3 beside the real merged pair, decide: the output, report.json and
    report.html."""
    with mock_aws():
        s3 = boto3.client("s3", region_name="us-east-1")
        s3.create_bucket(Bucket=BUCKET)
        for side in ("baseline", "candidate"):
            s3.put_object(Bucket=BUCKET, Key=merged_key(side), Body=(MERGED / f"{side}.json").read_bytes())
        for key, body in objects.items():
            s3.put_object(Bucket=BUCKET, Key=key, Body=body)
        output = _module("gate_decide").handler({**event(), **overrides}, None)
        report = json.loads(s3.get_object(Bucket=BUCKET, Key="gates/run/report.json")["Body"].read())
        page = s3.get_object(Bucket=BUCKET, Key="gates/run/report.html")["Body"].read().decode()
    return output, report, page


def _fails_closed(output: dict, report: dict, page: str, *named: str) -> None:
    assert output["approved"] is False and output["outcome"] == "INCONCLUSIVE"
    assert len(json.dumps(output)) <= MAX_RETURN_BYTES
    assert report["outcome"] == "INCONCLUSIVE" and [c["name"] for c in report["checks"]] == ["inputs"]
    assert report["levels"] == [] and report["deltas"] == []  # nothing computed from the inputs
    for text in named:
        assert text in output["summary"], output["summary"]  # what the SNS notification publishes
        assert any(text in reason for reason in output["reasons"]), output["reasons"]
        assert text in report["summary"] and any(text in reason for reason in report["reasons"])
        assert html.escape(text) in page


@pytest.mark.slow
def test_the_real_pair_is_decided():
    output, report, _ = _decide({})
    assert output["outcome"] == "REJECTED" and "inputs" not in {c["name"] for c in report["checks"]}


def test_a_merged_result_that_fails_its_schema_fails_closed_naming_the_object_and_the_path():
    data = json.loads((MERGED / "candidate.json").read_bytes())
    data["runs"][0]["samples"]["ttft_ms"][3] = "slow"
    output, report, page = _decide({merged_key("candidate"): json.dumps(data).encode()})
    _fails_closed(
        output,
        report,
        page,
        f"s3://{BUCKET}/{merged_key('candidate')}: runs[0].samples.ttft_ms[3]: expected a number",
    )
    assert output["summary"].startswith("INCONCLUSIVE chat/dev: nothing decided")


def test_a_shard_the_merge_could_not_read_fails_closed_naming_the_shard_and_its_path():
    """The real merge of a shard whose sample list holds a string: the decision re-reads the shard to say where."""
    merge = _module("benchmark_merge").handler
    shard = json.loads((MERGED / "candidate-shard-0001.json").read_bytes())
    shard["runs"][0]["samples"]["completions"][2] = [1.0, "five"]
    corrupted = {shard_key("candidate", 0): (MERGED / "candidate-shard-0000.json").read_bytes()}
    corrupted[shard_key("candidate", 1)] = json.dumps(shard).encode()
    with mock_aws():
        s3 = boto3.client("s3", region_name="us-east-1")
        s3.create_bucket(Bucket=BUCKET)
        for key, body in corrupted.items():
            s3.put_object(Bucket=BUCKET, Key=key, Body=body)
        shards = [{"bucket": BUCKET, "key": key} for key in corrupted]
        merge({"shards": shards, "bucket": BUCKET, "key": merged_key("candidate")}, None)
        merged = s3.get_object(Bucket=BUCKET, Key=merged_key("candidate"))["Body"].read()
    assert json.loads(merged)["unreadable_shards"][0]["key"] == shard_key("candidate", 1)
    output, report, page = _decide({**corrupted, merged_key("candidate"): merged})
    shard_uri = f"s3://{BUCKET}/{shard_key('candidate', 1)}"
    path = "runs[0].samples.completions[2]: expected [completed_s, output_tokens]"
    _fails_closed(output, report, page, shard_uri, path)
    assert f"merged into s3://{BUCKET}/{merged_key('candidate')}" in report["reasons"][0]


@pytest.mark.parametrize(
    ("body", "named"),
    [
        (b'{"status": "pa', "expected a JSON evaluation verdict"),
        (b'["pass"]', "expected an object (the evaluation's verdict), found a list"),
        (b'{"status": 1}', "status: expected a string"),
        (b'{"status": "pass", "reasons": 3}', "reasons: expected a list, found 3"),
    ],
)
def test_an_evaluation_verdict_that_is_not_one_fails_closed(body, named):
    output, report, page = _decide({"evaluation/verdict.json": body}, evaluation_key="evaluation/verdict.json")
    _fails_closed(output, report, page, f"s3://{BUCKET}/evaluation/verdict.json", named)


def test_a_huge_key_in_a_merged_result_keeps_the_returned_verdict_and_the_notification_small():
    """A JSON key is part of the path an error names: 300,000 characters of it must not reach the state's output
    (Step Functions: 256 KiB) nor the summary SNS publishes (256 KiB by default), or the gate ends in
    States.DataLimitExceeded instead of its named reason."""
    data = json.loads((MERGED / "candidate.json").read_bytes())
    data["runs"][0]["errors"] = {"E" * 300_000: "x"}
    output, report, page = _decide({merged_key("candidate"): json.dumps(data).encode()})
    _fails_closed(output, report, page, f"s3://{BUCKET}/{merged_key('candidate')}: runs[0].errors.EEEE")
    assert len(report["summary"]) < 2000 and all(len(reason) < 2000 for reason in report["reasons"])


def test_the_returned_summary_is_cut_whatever_a_problem_says():
    """The summary is the SNS message and the Fail state's cause: a problem of any length leaves it short, the
    returned verdict within its budget, and says where the rest is."""
    from optigate.gate.decision import unreadable_verdict

    verdict = unreadable_verdict("chat", "dev", ["s3://b/" + "k" * 5000 + ": runs: expected a list, found 3"])
    output = _module("gate_decide")._small(verdict, "reports/run/report.json")
    assert len(json.dumps(output)) <= MAX_RETURN_BYTES
    assert output["summary"].startswith("INCONCLUSIVE chat/dev: nothing decided, a file the gate reads failed")
    assert output["summary"].endswith("… (the rest in reports/run/report.json)")
