"""chat's gate trains an EAGLE head from its environment's data capture: rehearsed with that capture empty (a new
environment, or clients whose streamed calls were not captured), the run fails as TrainingDataUnavailable, naming the
prefix and the count found and needed, before CreateOptimizationJob or anything else is created or paid for. The
rehearsal otherwise seeds the records the check needs (tests/executed_gate/test_rehearse.py: chat APPROVED)."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from optigate.bench.core.shard_workload import check_training_data
from optigate.rehearse.capture_seed import seed_captured_workload, seed_training_capture, workload_checks
from optigate.rehearse.gate_run import GateRun
from optigate.rehearse.harness import REGION, GateHarness
from optigate.rehearse.scenario import Scenario

# Both tests execute the gate up to its training-data check: the slow tier (tests/tiers.py).
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def chat(example_config) -> tuple[dict[str, Any], Any]:
    from optigate.rehearse.rehearsal import synthesize_team

    return synthesize_team("chat", "dev", example_config)


def test_the_rehearsal_seeds_the_records_the_check_counts_in_one_file(chat):
    with GateHarness(lambda_handlers={}, scenario=Scenario(), region=REGION) as harness:
        run = GateRun(chat[0], harness)
        (check,) = workload_checks(run, "training_data_check")
        assert check["min_records"] == 7_473 and re.fullmatch(r"s3://[^/]+/capture/chat-dev/", check["source"])
        assert seed_captured_workload(run) == []  # chat's benchmark replays no capture
        (written,) = seed_training_capture(run)
        assert written.startswith(f"{check['source']}AllTraffic/") and written.endswith("/rehearsal-training.jsonl")
        counted = check_training_data(check, s3_client=harness.client("s3"))
        assert counted == {"source": check["source"], "records": 7_473, "files": 1}
        # Seeded once: neither seeding writes again into a capture that holds it.
        assert seed_training_capture(run) == [] and run.seed_training_data() == []


def test_chat_with_an_empty_capture_fails_before_the_optimization_job_and_leaves_nothing(chat):
    from optigate.rehearse.rehearsal import rehearse

    result = rehearse(*chat, "faster", seed_training_data=False)
    execution = result["execution"]
    assert execution["status"] == "FAILED", execution
    failure = json.loads(execution["cause"])  # the gate's failure: the failed state's error and cause
    assert failure["Error"] == "TrainingDataUnavailable", failure
    message = json.loads(failure["Cause"])["errorMessage"]  # the worker's error, as Lambda reports it
    assert re.fullmatch(
        r"s3://[^/\s]+/capture/chat-dev/: 0 readable chat record\(s\) found, 7,473 needed to train the EAGLE head "
        r"\(no capture files \(\.jsonl\) found\); let the endpoint capture more OpenAI chat or completions requests "
        r"sent with InvokeEndpoint \(streamed calls may not be captured: OG423\), train_from an S3 prefix of "
        r"ShareGPT/OpenAI data, or lower gate\.candidate\.speculative_decoding\.min_training_records",
        message,
    ), message
    # The check ran right after the proof check; no optimization job, model, endpoint or benchmark followed.
    states = result["states"]
    assert states[: states.index("CheckTrainingData") + 1] == [
        "Init",
        "FindLastProof",
        "ProvenBefore?",
        "CheckTrainingData",
    ]
    called = [e["taskScheduledEventDetails"]["resource"] for e in result["history"] if "taskScheduledEventDetails" in e]
    # Only the proof check and the worker's count, then the failure's notification: nothing was created, so nothing
    # is stopped or deleted (calls that could only fail, and did in every such run).
    assert called == ["listModelPackages", "invoke", "publish"], called
    assert states[-2:] == ["NotifyFailure", "GateFailed"]
    assert "CreateOptimizationJob" not in states and result["benchmarked"] == [] and result["packages"] == []
    # Nothing left behind, nothing CloudFormation owns removed, and the team was told why.
    assert result["left"] == {kind: [] for kind in result["left"]} and result["owned_missing"] == []
    assert "TrainingDataUnavailable" in json.dumps(result["messages"])
    live = result["live"]["chat-dev"]
    assert live["status"] == "InService" and live["config"] == live["original_config"]
