"""The emulated managed benchmark (optigate.rehearse.sagemaker.benchmarks): AI workload configs and AI benchmark
jobs answer and progress as the service does, and a Completed job leaves an export the gate can read."""

from __future__ import annotations

import json

import pytest
from botocore.exceptions import ClientError

from optigate.gate.cross_check import parse_profile, read_archive
from optigate.rehearse.harness import ACCOUNT_ID, GateHarness
from optigate.rehearse.sagemaker.benchmarks import ai_benchmark_jobs
from optigate.rehearse.scenario import Outcome, Scenario

ROLE = f"arn:aws:iam::{ACCOUNT_ID}:role/xc"
IMAGE = "763104351884.dkr.ecr.us-east-1.amazonaws.com/djl-inference:0.36.0-lmi27.0.0-cu130"
WORKLOAD = {
    "benchmark": {"type": "aiperf"},
    "parameters": {"concurrency": 8, "request_count": 64, "output_tokens_mean": 128, "tokenizer": "a/b"},
}


def _endpoint(h: GateHarness, name: str = "e1") -> None:
    sm = h.client("sagemaker")
    sm.create_model(ModelName="m1", ExecutionRoleArn=ROLE, PrimaryContainer={"Image": IMAGE})
    sm.create_endpoint_config(
        EndpointConfigName="c1",
        ProductionVariants=[
            {"VariantName": "AllTraffic", "ModelName": "m1", "InitialInstanceCount": 1, "InstanceType": "ml.g5.2xlarge"}
        ],
    )
    sm.create_endpoint(EndpointName=name, EndpointConfigName="c1")


def _job(h: GateHarness, name: str = "j1", endpoint: str = "e1", config: str = "w1") -> dict:
    return h.client("sagemaker").create_ai_benchmark_job(
        AIBenchmarkJobName=name,
        BenchmarkTarget={"Endpoint": {"Identifier": endpoint}},
        OutputConfig={"S3OutputLocation": "s3://results/crosscheck/run/baseline-c8/"},
        AIWorkloadConfigIdentifier=config,
        RoleArn=ROLE,
    )


def _ready(h: GateHarness) -> None:
    h.client("s3").create_bucket(Bucket="results")
    sm = h.client("sagemaker")
    sm.create_ai_workload_config(
        AIWorkloadConfigName="w1", AIWorkloadConfigs={"WorkloadSpec": {"Inline": json.dumps(WORKLOAD)}}
    )
    _endpoint(h)
    while sm.describe_endpoint(EndpointName="e1")["EndpointStatus"] != "InService":
        pass


def test_a_job_runs_in_progress_then_completes_and_writes_the_aiperf_export():
    scenario = Scenario(
        ai_benchmark_job=Outcome("Completed", after=2), ai_benchmark_figures=lambda r: {"ttft_p99_ms": 80}
    )
    with GateHarness(scenario=scenario) as h:
        _ready(h)
        arn = _job(h)["AIBenchmarkJobArn"]
        assert arn.endswith(":ai-benchmark-job/j1")
        sm = h.client("sagemaker")
        statuses = [sm.describe_ai_benchmark_job(AIBenchmarkJobName="j1")["AIBenchmarkJobStatus"] for _ in range(3)]
        assert statuses == ["InProgress", "InProgress", "Completed"]
        keys = [o["Key"] for o in h.client("s3").list_objects_v2(Bucket="results")["Contents"]]
        assert keys == ["crosscheck/run/baseline-c8/j1/output/output.tar.gz"]
        body = h.client("s3").get_object(Bucket="results", Key=keys[0])["Body"].read()
        profile = read_archive(body)
        assert parse_profile(profile).ttft_p99_ms == 80 and profile["request_count"]["avg"] == 64


def test_a_job_on_an_endpoint_not_in_service_is_refused_like_the_service():
    scenario = Scenario(endpoint=Outcome("InService", after=5))
    with GateHarness(scenario=scenario) as h:
        h.client("sagemaker").create_ai_workload_config(
            AIWorkloadConfigName="w1", AIWorkloadConfigs={"WorkloadSpec": {"Inline": json.dumps(WORKLOAD)}}
        )
        _endpoint(h)
        with pytest.raises(ClientError, match="e1 is Creating; a benchmark job needs an InService endpoint") as caught:
            _job(h)
        assert caught.value.response["Error"]["Code"] == "ValidationException"
        with pytest.raises(ClientError, match="nope does not exist"):
            _job(h, "j2", endpoint="nope")


def test_an_unknown_workload_config_and_a_duplicate_job_are_refused():
    with GateHarness() as h:
        _ready(h)
        with pytest.raises(ClientError, match="Could not find AI workload config"):
            _job(h, config="missing")
        _job(h)
        with pytest.raises(ClientError, match="already exists") as caught:
            _job(h)
        assert caught.value.response["Error"]["Code"] == "ResourceInUse"


def test_a_workload_that_is_not_aiperf_is_refused():
    with GateHarness() as h, pytest.raises(ClientError, match=r"benchmark\.type must be aiperf"):
        h.client("sagemaker").create_ai_workload_config(
            AIWorkloadConfigName="w2",
            AIWorkloadConfigs={"WorkloadSpec": {"Inline": json.dumps({"benchmark": {"type": "genai-perf"}})}},
        )


def test_delete_lowercases_the_name_so_a_capitalised_config_cannot_be_deleted():
    with GateHarness() as h:
        sm = h.client("sagemaker")
        spec = {"WorkloadSpec": {"Inline": json.dumps(WORKLOAD)}}
        sm.create_ai_workload_config(AIWorkloadConfigName="Upper", AIWorkloadConfigs=spec)
        with pytest.raises(ClientError, match="Could not find AI workload config"):
            sm.delete_ai_workload_config(AIWorkloadConfigName="Upper")
        sm.create_ai_workload_config(AIWorkloadConfigName="lower", AIWorkloadConfigs=spec)
        sm.delete_ai_workload_config(AIWorkloadConfigName="lower")


def test_a_stopped_job_reports_stopped_and_a_failed_one_its_reason():
    scenario = Scenario(
        ai_benchmark_job=lambda r: (
            Outcome("Failed", after=0, failure_reason="ClientError: HTTP 424")
            if r["AIBenchmarkJobName"] == "bad"
            else Outcome("Completed", after=3)
        )
    )
    with GateHarness(scenario=scenario) as h:
        _ready(h)
        sm = h.client("sagemaker")
        _job(h)
        sm.stop_ai_benchmark_job(AIBenchmarkJobName="j1")
        assert sm.describe_ai_benchmark_job(AIBenchmarkJobName="j1")["AIBenchmarkJobStatus"] == "Stopped"
        with pytest.raises(ClientError, match="already Stopped"):
            sm.stop_ai_benchmark_job(AIBenchmarkJobName="j1")
        _job(h, "bad")
        failed = sm.describe_ai_benchmark_job(AIBenchmarkJobName="bad")
        assert (failed["AIBenchmarkJobStatus"], failed["FailureReason"]) == ("Failed", "ClientError: HTTP 424")
        assert {n: j["status"] for n, j in ai_benchmark_jobs(h).items()} == {"j1": "Stopped", "bad": "Failed"}
        assert "Contents" not in h.client("s3").list_objects_v2(Bucket="results")  # nothing written
        sm.delete_ai_benchmark_job(AIBenchmarkJobName="bad")
        assert set(ai_benchmark_jobs(h)) == {"j1"}


def test_a_job_whose_endpoint_goes_away_fails():
    with GateHarness(scenario=Scenario(ai_benchmark_job=Outcome("Completed", after=1))) as h:
        _ready(h)
        sm = h.client("sagemaker")
        _job(h)
        sm.delete_endpoint(EndpointName="e1")
        sm.describe_ai_benchmark_job(AIBenchmarkJobName="j1")
        done = sm.describe_ai_benchmark_job(AIBenchmarkJobName="j1")
        assert done["AIBenchmarkJobStatus"] == "Failed" and "not InService" in done["FailureReason"]
