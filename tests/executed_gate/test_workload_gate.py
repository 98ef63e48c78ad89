"""The gate benchmarks with the team's own captured traffic, executed through the harness (moto Step Functions, S3):
capture records in SageMaker's layout are replayed on their recorded schedule to both sides, and a faster candidate
is APPROVED with the workload's shape (never its text) in the decision; a missing or empty capture fails the run
closed, with its name and reason, before any optimization job or endpoint exists (no paid job wasted)."""

from __future__ import annotations

import json
import re
import time
from typing import Any

import pytest

from optigate.bench.core.capture import capture_key
from optigate.constructs.benchmark_fleet import CaptureAccess
from optigate.deployment.gate_workload import CapturePlan
from optigate.rehearse.capture_seed import seed_captured_workload, workload_checks
from optigate.rehearse.gate_handlers import evaluation_writer
from optigate.rehearse.gate_run import BUCKET, GateRun
from optigate.rehearse.harness import REGION, GateHarness
from optigate.rehearse.scenario import Scenario
from tests.fixtures.gate_thresholds import THRESHOLDS

TRAFFIC, PREFIX = "acme-traffic", "capture/chat-dev/"
SOURCE = f"s3://{TRAFFIC}/{PREFIX}"
#: A replay's throughput is the recording's on both sides (rule OG463): judged by latency, with throughput only
#: held to a non-inferiority margin (six seconds of traffic per block leave the throughput interval wide).
REPLAY_THRESHOLDS = {**THRESHOLDS, "min_throughput_gain_pct": -25.0}


@pytest.fixture(scope="module")
def replay_template(tmp_path_factory, gate_synth) -> dict[str, Any]:
    """A gate (with an optimization job) whose workload is the capture under SOURCE, replayed at its own pace; the
    fleet's workers may read that capture and nothing else of its bucket."""
    return gate_synth(
        True,
        tmp_path_factory.mktemp("gate-replay"),
        fleet_options={
            "capture": CaptureAccess(f"arn:aws:s3:::{TRAFFIC}/{PREFIX}*", f"arn:aws:s3:::{TRAFFIC}", f"{PREFIX}*")
        },
        workload=CapturePlan(source=SOURCE, kind="replay", window_days=1.0, max_requests=2000, speedup=1.0),
        thresholds=REPLAY_THRESHOLDS,
    )


def _run(template, emulators, gate_handlers, *, seed: bool, empty_file: bool = False) -> dict[str, Any]:
    scenario = Scenario(on_processing_job=evaluation_writer("pass"))
    with GateHarness(lambda_handlers=gate_handlers(emulators), scenario=scenario, region=REGION) as harness:
        s3 = harness.client("s3")
        s3.create_bucket(Bucket="acme-models")
        s3.put_object(Bucket="acme-models", Key="llama-3.1-8b/config.json", Body=b"{}")
        run = GateRun(template, harness)
        seeded = seed_captured_workload(run) if seed else []
        if empty_file:  # a capture file with nothing readable in it
            s3.create_bucket(Bucket=TRAFFIC)
            key = capture_key("capture", "chat-dev", "AllTraffic", time.time() - 1800, "x.jsonl")  # inside the window
            s3.put_object(Bucket=TRAFFIC, Key=key, Body=b"\n{}\nnot json\n")
        result = run.execute()
        history = harness.history(result["execution"]["executionArn"])
        result["seeded"] = seeded
        result["objects"] = harness.s3_objects(BUCKET)
        result["invocations"] = list(harness.lambda_invocations)  # (function role, event)
    result["called"] = [
        event["taskScheduledEventDetails"]["resource"] for event in history if "taskScheduledEventDetails" in event
    ]
    return result


@pytest.mark.slow
def test_a_replayed_capture_approves_a_faster_candidate_with_its_shape_and_no_text(
    replay_template, emulators, gate_handlers, nothing_left
):
    result = _run(replay_template, emulators, gate_handlers, seed=True)
    assert result["seeded"], "no capture was seeded"
    checks = {c["name"]: (c["outcome"], c.get("detail")) for c in (result["report"] or {}).get("checks", [])}
    assert result["execution"]["status"] == "SUCCEEDED", (result["execution"].get("cause"), checks)
    assert [p["ModelApprovalStatus"] for p in result["packages"]] == ["Approved"]
    nothing_left(result)
    # The check ran first, before the optimization job and any endpoint.
    states = result["states"]
    assert states.index("CheckCapturedWorkload") < states.index("CreateOptimizationJob")
    # Both sides, every block, were benchmarked; each worker rebuilt the checked requests (else WorkloadChanged).
    runs = list(dict.fromkeys((b["run_id"], b["baseline"]) for b in result["benchmarked"]))
    assert [baseline for _, baseline in runs] == [True, False] * 3
    # One check; every worker of both sides got the requests it pinned (window end and digest), each its share.
    (check,) = [event for name, event in result["invocations"] if "workload_check" in event]
    workers = [event for name, event in result["invocations"] if name == "worker" and "endpoint_name" in event]
    assert len(workers) == 2 * 3 * 2  # two sides, three blocks, two shards
    assert {(e["workload"]["until"], e["workload"]["digest"], e["workload"]["source"]) for e in workers} == {
        (e["workload"]["until"], e["workload"]["digest"], SOURCE) for e in workers[:1]
    }
    assert sorted({(e["shard"], e["shards"]) for e in workers}) == [(0, 2), (1, 2)]
    assert check["workload_check"]["source"] == SOURCE
    # The decision gets the workload's shape: 48 captured requests, replayed; no text.
    (decide,) = [event for name, event in result["invocations"] if name == "decide"]
    assert decide["workload"]["requests"] == 48 and decide["workload"]["kind"] == "replay"
    assert "request 1:" not in json.dumps(decide)
    # The workers' shard results carry the replay's shape; no object the gate wrote holds a captured prompt.
    shards = [json.loads(body) for key, body in result["objects"].items() if "/shard-" in key]
    assert shards and all(b"request 1:" not in body for body in result["objects"].values())
    assert all(b"session opening" not in body for body in result["objects"].values())
    report = json.dumps(result["report"])
    assert "request 1:" not in report


@pytest.mark.slow
@pytest.mark.parametrize("empty_file", [False, True], ids=["no capture", "nothing readable"])
def test_a_missing_or_empty_capture_fails_closed_before_any_job(replay_template, emulators, gate_handlers, empty_file):
    result = _run(replay_template, emulators, gate_handlers, seed=False, empty_file=empty_file)
    execution = result["execution"]
    assert execution["status"] == "FAILED"
    failure = json.loads(execution["cause"])  # the gate's failure: the failed state's error and cause
    assert failure["Error"] == "CaptureUnavailable", execution
    assert SOURCE in failure["Cause"]
    expected = "no readable capture record" if empty_file else "NoSuchBucket"
    assert expected in failure["Cause"], failure["Cause"]
    # Nothing was created or paid for: no optimization job, no model, no endpoint, no benchmark.
    assert not [c for c in result["called"] if "sagemaker" in c], result["called"]
    assert "CreateOptimizationJob" not in result["states"]
    assert result["benchmarked"] == [] and result["packages"] == []


@pytest.mark.slow
def test_the_seeded_capture_is_what_the_check_reads(replay_template, emulators, gate_handlers):
    with GateHarness(lambda_handlers=gate_handlers(emulators), scenario=Scenario(), region=REGION) as harness:
        run = GateRun(replay_template, harness)
        (check,) = workload_checks(run)
        assert check["source"] == SOURCE and check["kind"] == "replay"
        written = seed_captured_workload(run)
        # SageMaker's layout: <prefix>/<endpoint>/<variant>/yyyy/mm/dd/hh/<file>.jsonl
        layout = re.compile(rf"{re.escape(SOURCE)}AllTraffic/\d{{4}}/\d{{2}}/\d{{2}}/\d{{2}}/[\w-]+\.jsonl")
        assert written and all(layout.fullmatch(uri) for uri in written), written
        assert seed_captured_workload(run) == []  # a capture that holds traffic is left as it is
