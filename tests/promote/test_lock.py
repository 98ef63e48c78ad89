"""Promotion: `optigate resolve` locks the newest gate-Approved package per team (Model Registry in
moto), and synth deploys what the lock names, or the baseline without one, by blue/green."""

from __future__ import annotations

import json

import boto3
import pytest
from moto import mock_aws

from optigate.cli import main
from optigate.config.loader import load_project
from optigate.promote.lock import Lock, ServedPackage, package_group, read_lock, write_lock
from optigate.promote.resolve import resolve
from tests.conftest import CONFIG, resources_of

PROJECT = load_project(CONFIG)
DEV = PROJECT.environments.environments[0]
OPTIMIZED = "763104351884.dkr.ecr.us-east-1.amazonaws.com/djl-inference:0.36.0-lmi27.0.0-cu130"


def _package(client, group: str, status: str, uri: str, fingerprint: str = "f1") -> str:
    return client.create_model_package(
        ModelPackageGroupName=group,
        ModelPackageDescription=f"{status} by the gate",
        ModelApprovalStatus=status,
        CustomerMetadataProperties={
            "fingerprint": fingerprint,
            "report": f"s3://gate/reports/{fingerprint}/report.json",
        },
        InferenceSpecification={
            "Containers": [
                {
                    "Image": OPTIMIZED,
                    "Environment": {"OPTION_QUANTIZE": "fp8", "OPTION_MAX_MODEL_LEN": "8192"},
                    "ModelDataSource": {
                        "S3DataSource": {"S3Uri": uri, "S3DataType": "S3Prefix", "CompressionType": "None"}
                    },
                }
            ],
            "SupportedContentTypes": ["application/json"],
            "SupportedResponseMIMETypes": ["application/json"],
        },
    )["ModelPackageArn"]


@pytest.fixture
def registry():
    with mock_aws():
        client = boto3.client("sagemaker", region_name=DEV.region)
        yield client


def test_resolve_takes_the_newest_approved_package_and_none_where_nothing_was_approved(registry):
    group = package_group("research", "dev")
    registry.create_model_package_group(ModelPackageGroupName=group)
    _package(registry, group, "Approved", "s3://gate/optimized/run-1/", "old")
    newest = _package(registry, group, "Approved", "s3://gate/optimized/run-2/", "new")
    _package(registry, group, "Rejected", "s3://gate/optimized/run-3/", "rejected")  # newer, but rejected

    lock = resolve(PROJECT, DEV, registry)

    # chat and support have a gate but no group yet: nothing approved, the team file's baseline.
    assert set(lock.teams) == {"chat", "research", "support"} and lock.teams["chat"] is None
    assert lock.teams["support"] is None
    served = lock.teams["research"]
    assert served is not None and served.model_package_arn == newest
    assert (served.model_data_uri, served.fingerprint, served.environment["OPTION_QUANTIZE"]) == (
        "s3://gate/optimized/run-2/",
        "new",
        "fp8",
    )


def test_resolve_command_writes_the_lock_that_synth_reads(registry, tmp_path, monkeypatch, capsys):
    group = package_group("chat", "dev")
    registry.create_model_package_group(ModelPackageGroupName=group)
    arn = _package(registry, group, "Approved", "s3://acme-models/llama-3.1-8b/")
    assert main(["resolve", "--env", "dev", "--config", str(CONFIG), "--out", str(tmp_path)]) == 0
    assert f"dev/chat: {arn}" in capsys.readouterr().out
    lock = read_lock(tmp_path, "dev")
    assert lock is not None and lock.teams["chat"].model_package_arn == arn and lock.teams["research"] is None
    assert read_lock(tmp_path, "staging") is None  # not resolved: staging serves baselines


def test_a_lock_for_another_environment_is_refused(tmp_path):
    write_lock(Lock(environment="dev", resolved_at="2026-11-29T00:00:00+00:00"), tmp_path)
    (tmp_path / "dev.json").rename(tmp_path / "prod.json")
    with pytest.raises(ValueError, match="not 'prod'"):
        read_lock(tmp_path, "prod")


# --------------------------------------------------------------------------- synth


def _synth_chat(tmp_path, served: ServedPackage | None) -> dict:
    from aws_cdk import App

    from optigate.deployment import deploy, resolve_team
    from optigate.stacks.app import FEATURE_FLAGS
    from optigate.stacks.team_inference_stack import TeamInferenceStack

    app = App(outdir=str(tmp_path), context=FEATURE_FLAGS)
    deployment = deploy(resolve_team(PROJECT.teams["chat"]), DEV, served)
    TeamInferenceStack(app, deployment)
    app.synth()
    return json.loads((tmp_path / f"{deployment.stack_name}.template.json").read_text())


def _model_and_endpoint(template: dict) -> tuple[dict, dict]:
    models = [r["Properties"] for r in resources_of(template, "AWS::SageMaker::Model").values()]
    (endpoint,) = [r["Properties"] for r in resources_of(template, "AWS::SageMaker::Endpoint").values()]
    (model,) = [m for m in models if "PrimaryContainer" in m]  # the gate creates its models at run time
    return model, endpoint


@pytest.fixture(scope="module")
def served_and_baseline(tmp_path_factory):
    package = ServedPackage(
        model_package_arn="arn:aws:sagemaker:us-east-1:111111111111:model-package/optigate-chat-dev/7",
        image=OPTIMIZED,
        model_data_uri="s3://optigate-gate-results-dev/optimized/4f1c/",
        environment={
            "OPTION_QUANTIZE": "fp8",
            "OPTION_MAX_MODEL_LEN": "8192",
            "OPTION_SPECULATIVE_CONFIG": '{"method": "ngram"}',
        },
        fingerprint="abc",
    )
    return (
        package,
        _synth_chat(tmp_path_factory.mktemp("served"), package),
        _synth_chat(tmp_path_factory.mktemp("baseline"), None),
    )


def test_a_lock_naming_an_approved_package_deploys_that_package(served_and_baseline):
    package, served, _ = served_and_baseline
    model, _ = _model_and_endpoint(served)
    container = model["PrimaryContainer"]
    assert container["Image"] == package.image
    assert container["ModelDataSource"]["S3DataSource"]["S3Uri"] == package.model_data_uri
    assert container["Environment"] == package.environment
    assert served["Outputs"]["ServedModel"]["Value"] == package.model_package_arn
    # The model role may read the package's weights (and only its own prefixes).
    policies = json.dumps([r["Properties"] for r in resources_of(served, "AWS::IAM::Policy").values()])
    assert "optigate-gate-results-dev/optimized/4f1c/*" in policies


def test_without_a_lock_the_baseline_of_the_team_file_is_deployed(served_and_baseline):
    package, _, baseline = served_and_baseline
    model, _ = _model_and_endpoint(baseline)
    container = model["PrimaryContainer"]
    assert container["Image"] != package.image or container["Environment"] != package.environment
    assert (
        container["ModelDataSource"]["S3DataSource"]["S3Uri"] == "s3://acme-ml-models-us-east-1/llama-3.1-8b-instruct/"
    )
    assert baseline["Outputs"]["ServedModel"]["Value"] == "baseline"


def test_the_cut_over_is_blue_green_with_automatic_rollback(served_and_baseline):
    _, served, baseline = served_and_baseline
    for template in (served, baseline):
        _, endpoint = _model_and_endpoint(template)
        config = endpoint["DeploymentConfig"]
        assert config["BlueGreenUpdatePolicy"]["TrafficRoutingConfiguration"]["Type"] in ("CANARY", "ALL_AT_ONCE")
        assert config["BlueGreenUpdatePolicy"]["MaximumExecutionTimeoutInSeconds"] > 0
        # Both rollback alarms exist in the stack and watch the endpoint's errors and latency.
        watched = {
            template["Resources"][a["AlarmName"]["Ref"]]["Properties"]["MetricName"]
            for a in config["AutoRollbackConfiguration"]["Alarms"]
        }
        assert watched == {"Invocation5XXErrors", "ModelLatency"}
    # A new package is a new model: CloudFormation replaces the model and updates the endpoint (blue/green).
    assert _model_and_endpoint(served)[0] != _model_and_endpoint(baseline)[0]
