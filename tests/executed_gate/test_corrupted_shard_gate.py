"""A benchmark shard corrupted after its worker wrote it, in the team's real gate executed in moto's Step Functions
(issue 29): the merge records it as unreadable, the decision fails closed naming the shard's S3 object and the JSON
path that is wrong (in report.json and in the notification), the package waits for a person (PendingManualApproval:
nothing promoted) and nothing the run created is left running."""

from __future__ import annotations

import json

import boto3
import pytest

from optigate.rehearse.gate_layout import MERGE

# Every test here executes a gate (tens of seconds each): the slow tier (tests/tiers.py).
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def chat(example_config):
    from optigate.rehearse.rehearsal import synthesize_team

    return synthesize_team("chat", "dev", example_config)


def corrupting_first_shard(corrupted: list[dict]):
    """A wrapper of the merge handler: before the first merge reads its shards, the first shard object is overwritten
    with the worker's own result with a string in its TTFT samples (as a hand edit or another writer might)."""

    def wrap(merge):
        def handler(event, context):
            if not corrupted:
                shard = event["shards"][0]
                s3 = boto3.client("s3")
                data = json.loads(s3.get_object(Bucket=shard["bucket"], Key=shard["key"])["Body"].read())
                data["runs"][0]["samples"]["ttft_ms"][0] = "fast"
                s3.put_object(Bucket=shard["bucket"], Key=shard["key"], Body=json.dumps(data).encode())
                corrupted.append({"bucket": shard["bucket"], "key": shard["key"], "merged": event["key"]})
            return merge(event, context)

        return handler

    return wrap


def test_a_corrupted_shard_fails_the_gate_closed_with_its_object_and_path_and_leaves_nothing(chat):
    from optigate.rehearse.rehearsal import rehearse

    corrupted: list[dict] = []
    result = rehearse(*chat, "faster", wrap_handlers={MERGE: corrupting_first_shard(corrupted)})
    [shard] = corrupted
    where = f's3://{shard["bucket"]}/{shard["key"]}: runs[0].samples.ttft_ms[0]: expected a number, found "fast"'

    execution = result["execution"]
    assert execution["status"] == "FAILED" and execution["error"] == "Inconclusive", execution
    assert "DecideVerdict" in result["states"] and "RecordInconclusive" in result["states"]
    report = result["report"]
    assert report["outcome"] == "INCONCLUSIVE" and [c["name"] for c in report["checks"]] == ["inputs"]
    assert report["levels"] == []  # no figure computed from the benchmark results
    assert where in report["reasons"][0] and where in report["summary"]
    assert any(where in message["Message"] for message in result["messages"]), result["messages"]
    assert where in execution["cause"]
    # Nothing promoted: the package waits for a person, never Approved.
    assert [p["ModelApprovalStatus"] for p in result["packages"]] == ["PendingManualApproval"]
    # Nothing the run created is left; the live endpoint is untouched.
    assert {kind: names for kind, names in result["left"].items() if names} == {}
    assert result["owned_missing"] == []
    assert {name: (e["status"], e["config"] == e["original_config"]) for name, e in result["live"].items()} == {
        "chat-dev": ("InService", True)
    }
