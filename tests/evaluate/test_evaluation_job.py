"""EvaluationJob: cfn-lint, cdk-nag, least privilege, and its request against botocore."""

from __future__ import annotations

import json

import pytest

from optigate.rehearse.asl import sdk_calls
from optigate.rehearse.template import placeholder_definition
from optigate.rehearse.validation import parameter_errors as validate


@pytest.fixture(scope="module")
def synthesized(tmp_path_factory):
    from aws_cdk import App, Stack
    from aws_cdk import aws_kms as kms
    from aws_cdk import aws_stepfunctions as sfn

    from optigate.config.models import EvaluationGate
    from optigate.constructs.benchmark_fleet import generated_policy_reason
    from optigate.constructs.evaluation_job import EvaluationJob, results_bucket
    from optigate.constructs.nag import acknowledge_generated_wildcards
    from optigate.stacks.app import FEATURE_FLAGS, enable_nag

    outdir = tmp_path_factory.mktemp("evaluation")
    app = App(outdir=str(outdir), context=FEATURE_FLAGS)
    stack = Stack(app, "Evaluation", env={"account": "111111111111", "region": "us-east-1"})
    key = kms.Key(stack, "Key", enable_key_rotation=True)
    job = EvaluationJob(
        stack,
        "Job",
        endpoints=["chat-dev", "chat-dev-candidate"],
        dataset_uri="s3://acme-eval/chat/",
        output_bucket=results_bucket(stack, "Results", key),
        encryption_key=key,
        thresholds=EvaluationGate(max_metric_drop_abs=0.02),
        image_uri="111111111111.dkr.ecr.us-east-1.amazonaws.com/optigate-evaluate:1",
    )
    task = job.task(
        stack,
        "Evaluate",
        job_name="States.Format('eval-{}', $$.Execution.Name)",
        baseline="chat-dev",
        candidate="chat-dev-candidate",
    )
    machine = sfn.StateMachine(
        stack,
        "Machine",
        definition_body=sfn.DefinitionBody.from_chainable(task),
        tracing_enabled=True,
        logs=sfn.LogOptions(
            destination=__import__("aws_cdk.aws_logs", fromlist=["LogGroup"]).LogGroup(stack, "Logs"),
            level=sfn.LogLevel.ALL,
        ),
    )
    job.grant_run(machine.role)
    acknowledge_generated_wildcards(machine, generated_policy_reason)
    enable_nag(app)
    app.synth()  # fails on any unacknowledged cdk-nag finding
    return json.loads((outdir / "Evaluation.template.json").read_text())


def test_evaluation_stack_passes_cfn_lint(synthesized):
    from cfnlint.api import ManualArgs, lint

    matches = lint(json.dumps(synthesized), config=ManualArgs(regions=["us-east-1"]))
    assert [f"{m.rule.id} {m.message}" for m in matches if m.rule.id.startswith("E")] == []


def test_processing_request_validates_against_botocore(synthesized):
    calls = list(sdk_calls(placeholder_definition(synthesized)))
    assert [(call.service, call.operation) for call in calls] == [("sagemaker", "CreateProcessingJob")]
    parameters = calls[0].parameters
    assert validate("sagemaker", "CreateProcessingJob", parameters) == []
    arguments = parameters["AppSpecification"]["ContainerArguments"]
    assert arguments[arguments.index("--max-metric-drop-abs") + 1] == "0.02"
    # A fail or cannot-resolve verdict is read by the gate's decision, so it must not fail the job.
    assert "--exit-zero-on-verdict" in arguments
    assert parameters["ProcessingOutputConfig"]["KmsKeyId"]


def test_a_broken_request_is_caught_by_the_validator():
    errors = validate(
        "sagemaker",
        "CreateProcessingJob",
        {
            "ProcessingJobName.$": "$.x",
            "RoleArn": "arn:aws:iam::1:role/r",
            "AppSpecification": {"ImageUri": "i", "ContainerEntrypoint": "not-a-list"},
            "ProcessingResources": {
                "ClusterConfig": {"InstanceCount": 1, "InstanceType": "ml.m5.xlarge", "VolumeSizeInGB": 30}
            },
        },
    )
    assert any("AppSpecification.ContainerEntrypoint" in e and "valid types" in e for e in errors)
    assert validate("sagemaker", "CreateProcessingJob", {"ProcessingJobName": "x", "Typo": 1}) != []


def test_job_role_invokes_only_the_two_endpoints(synthesized):
    statements = [
        s
        for r in synthesized["Resources"].values()
        if r["Type"] == "AWS::IAM::Policy"
        for s in r["Properties"]["PolicyDocument"]["Statement"]
    ]
    invoke = [s for s in statements if "sagemaker:InvokeEndpoint" in json.dumps(s["Action"])]
    resources = json.dumps([s["Resource"] for s in invoke])
    assert "endpoint/chat-dev" in resources and "endpoint/chat-dev-candidate" in resources
    assert '"sagemaker:*"' not in json.dumps(statements) and "AmazonSageMakerFullAccess" not in json.dumps(synthesized)


def test_default_image_is_built_from_the_dockerfile_at_deploy_time(tmp_path):
    from aws_cdk import App, Stack
    from aws_cdk import aws_kms as kms

    from optigate.constructs.evaluation_job import EvaluationJob, results_bucket

    app = App(outdir=str(tmp_path))
    stack = Stack(app, "Image", env={"account": "111111111111", "region": "us-east-1"})
    key = kms.Key(stack, "Key", enable_key_rotation=True)
    EvaluationJob(
        stack,
        "Job",
        endpoints=["e"],
        dataset_uri="s3://b/d/",
        output_bucket=results_bucket(stack, "R", key),
        encryption_key=key,
    )
    app.synth()  # no Docker needed: the context is only staged
    assets = json.loads((tmp_path / "Image.assets.json").read_text())
    (image,) = assets["dockerImages"].values()
    assert image["source"]["dockerFile"] == "Dockerfile"
    staged = tmp_path / image["source"]["directory"]
    assert "SageMaker Processing" in (staged / "Dockerfile").read_text()
    assert (staged / "requirements.txt").exists() and (staged / "optigate" / "evaluate" / "job.py").exists()
    assert not (staged / ".venv").exists() and not (staged / "node_modules").exists()
