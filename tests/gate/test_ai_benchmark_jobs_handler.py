"""The cross-check's job function (optigate/lambdas/ai_benchmark_jobs): it passes each request to SageMaker as
given, answers Describe with the gate's {status, output, reason}, and fails closed: an error, an answer without a
status, or a Completed job without its output raises (the gate's Catch then stops the job and reports the
cross-check unavailable)."""

from __future__ import annotations

import importlib.util
from datetime import UTC, datetime

import boto3
import pytest
from botocore.stub import Stubber

from optigate.lambdas import handler_source

NAME = {"AIBenchmarkJobName": "chat-dev-xc-1a2b3c4d-c4"}
ARN = "arn:aws:sagemaker:us-east-1:111111111111:ai-benchmark-job/chat-dev-xc-1a2b3c4d-c4"


@pytest.fixture
def module():
    spec = importlib.util.spec_from_file_location("lambda_ai_benchmark_jobs", handler_source("ai_benchmark_jobs"))
    assert spec and spec.loader
    loaded = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(loaded)
    return loaded


@pytest.fixture
def sagemaker(module, monkeypatch):
    """A real SageMaker client whose answers the test gives (botocore validates each request against the model)."""
    client = boto3.client("sagemaker", region_name="us-east-1")
    monkeypatch.setattr(module.boto3, "client", lambda service: client)
    with Stubber(client) as stubber:
        yield stubber
        stubber.assert_no_pending_responses()


def _described(status: str, **extra) -> dict:
    return {
        "AIBenchmarkJobName": NAME["AIBenchmarkJobName"],
        "AIBenchmarkJobArn": ARN,
        "AIBenchmarkJobStatus": status,
        "AIWorkloadConfigIdentifier": "chat-dev-aiperf-c4-0123abcd",
        "BenchmarkTarget": {"Endpoint": {"Identifier": "chat-dev-cand-1a2b3c4d"}},
        "OutputConfig": {"S3OutputLocation": "s3://results/crosscheck/1a2b3c4d/candidate-c4/"},
        "RoleArn": "arn:aws:iam::111111111111:role/xc",
        "CreationTime": datetime(2026, 1, 1, tzinfo=UTC),
        **extra,
    }


def test_create_passes_the_request_and_answers_the_arn(module, sagemaker):
    request = {
        **NAME,
        "BenchmarkTarget": {"Endpoint": {"Identifier": "chat-dev-cand-1a2b3c4d"}},
        "OutputConfig": {"S3OutputLocation": "s3://results/crosscheck/1a2b3c4d/candidate-c4/"},
        "AIWorkloadConfigIdentifier": "chat-dev-aiperf-c4-0123abcd",
        "RoleArn": "arn:aws:iam::111111111111:role/xc",
    }
    sagemaker.add_response("create_ai_benchmark_job", {"AIBenchmarkJobArn": ARN}, request)
    assert module.handler({"operation": "CreateAIBenchmarkJob", "request": request}) == {"arn": ARN}


def test_describe_answers_status_output_and_reason(module, sagemaker):
    sagemaker.add_response("describe_ai_benchmark_job", _described("Completed"), NAME)
    sagemaker.add_response("describe_ai_benchmark_job", _described("Failed", FailureReason="ClientError: 424"), NAME)
    sagemaker.add_response("describe_ai_benchmark_job", _described("InProgress"), NAME)
    event = {"operation": "DescribeAIBenchmarkJob", "request": NAME}
    assert module.handler(event) == {
        "status": "Completed",
        "output": "s3://results/crosscheck/1a2b3c4d/candidate-c4/",
        "reason": None,
    }
    assert module.handler(event)["reason"] == "ClientError: 424"
    assert module.handler(event)["status"] == "InProgress"


def test_stop_passes_the_name(module, sagemaker):
    sagemaker.add_response("stop_ai_benchmark_job", {"AIBenchmarkJobArn": ARN}, NAME)
    assert module.handler({"operation": "StopAIBenchmarkJob", "request": NAME}) == {}


def test_an_api_error_is_raised(module, sagemaker):
    sagemaker.add_client_error("stop_ai_benchmark_job", "ValidationException", "the job is not running")
    with pytest.raises(Exception, match="the job is not running"):
        module.handler({"operation": "StopAIBenchmarkJob", "request": NAME})


@pytest.mark.parametrize(
    ("answer", "said"),
    [
        ({"AIBenchmarkJobName": "x"}, "without AIBenchmarkJobStatus"),
        ({"AIBenchmarkJobStatus": ""}, "without AIBenchmarkJobStatus"),
        ({"AIBenchmarkJobStatus": "Completed"}, "Completed without OutputConfig.S3OutputLocation"),
        ({"AIBenchmarkJobStatus": "Completed", "OutputConfig": {"S3OutputLocation": ""}}, "Completed without"),
        ({"AIBenchmarkJobStatus": {"Name": "Completed"}}, "without AIBenchmarkJobStatus"),
    ],
)
def test_an_answer_the_gate_cannot_read_is_refused(module, answer, said):
    with pytest.raises(module.UnexpectedAnswer, match=said):
        module.describe(answer)


@pytest.mark.parametrize(
    "event",
    [
        {},
        {"operation": "DeleteAIBenchmarkJob", "request": NAME},  # the gate never deletes a job
        {"operation": "DescribeAIBenchmarkJob"},
        {"operation": "DescribeAIBenchmarkJob", "request": "chat"},
    ],
)
def test_anything_but_the_three_operations_with_a_request_is_refused(module, event):
    with pytest.raises(ValueError, match="expected an operation"):
        module.handler(event)
