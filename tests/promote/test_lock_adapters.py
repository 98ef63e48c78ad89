"""An approved adapter version travels from the gate's model package (CustomerMetadataProperties) through the lock
to the stack, which deploys it instead of the team file's; a lock without adapters leaves the team file's."""

from __future__ import annotations

import json

import boto3
from moto import mock_aws

from optigate.config.loader import load_project
from optigate.promote.lock import (
    Lock,
    ServedPackage,
    adapters_metadata,
    package_group,
    parse_adapters,
    read_lock,
    write_lock,
)
from optigate.promote.resolve import newest_approved
from tests.conftest import CONFIG, resources_of

PROJECT = load_project(CONFIG)
DEV = PROJECT.environments.environments[0]
IMAGE = "763104351884.dkr.ecr.us-east-1.amazonaws.com/djl-inference:0.36.0-lmi27.0.0-cu130"
REPLY_V3 = "s3://acme-ml-adapters-us-east-1/support/reply-v3.tar.gz"
BASE = "s3://acme-ml-models-us-east-1/qwen2.5-7b/"


def _register(client, group: str, metadata: dict[str, str]) -> str:
    return client.create_model_package(
        ModelPackageGroupName=group,
        ModelApprovalStatus="Approved",
        CustomerMetadataProperties={"fingerprint": "f1", **metadata},
        InferenceSpecification={
            "Containers": [
                {
                    "Image": IMAGE,
                    "Environment": {"OPTION_MAX_LORA_RANK": "32"},
                    "ModelDataSource": {
                        "S3DataSource": {"S3Uri": BASE, "S3DataType": "S3Prefix", "CompressionType": "None"}
                    },
                }
            ],
            "SupportedContentTypes": ["application/json"],
            "SupportedResponseMIMETypes": ["application/json"],
        },
    )["ModelPackageArn"]


def test_the_approved_adapter_versions_go_from_the_package_into_the_lock_and_back(tmp_path):
    metadata = adapters_metadata({"reply": REPLY_V3})
    assert metadata == {"adapter:reply": REPLY_V3}
    with mock_aws():
        client = boto3.client("sagemaker", region_name=DEV.region)
        group = package_group("support", "dev")
        client.create_model_package_group(ModelPackageGroupName=group)
        _register(client, group, metadata)
        served = newest_approved(client, group)
        assert served is not None and served.adapters == {"reply": REPLY_V3}
        _register(client, group, {})  # a newer base-only approval names no adapter version
        assert newest_approved(client, group).adapters == {}
    write_lock(Lock(environment="dev", resolved_at="2026-12-01T00:00:00+00:00", teams={"support": served}), tmp_path)
    lock = read_lock(tmp_path, "dev")
    assert lock is not None and lock.teams["support"].adapters == {"reply": REPLY_V3}
    # Other metadata is no adapter.
    assert parse_adapters({"fingerprint": "f", "compiled_for": "tp=1", "adapter:": "x"}) == {}


def _synth_support(tmp_path, served: ServedPackage | None) -> dict:
    from aws_cdk import App

    from optigate.deployment import deploy, resolve_team
    from optigate.stacks.app import FEATURE_FLAGS
    from optigate.stacks.team_inference_stack import TeamInferenceStack

    app = App(outdir=str(tmp_path), context=FEATURE_FLAGS)
    deployment = deploy(resolve_team(PROJECT.teams["support"]), DEV, served)
    TeamInferenceStack(app, deployment)
    app.synth()
    return json.loads((tmp_path / f"{deployment.stack_name}.template.json").read_text())


def _artifacts(template: dict) -> dict[str, str]:
    components = resources_of(template, "AWS::SageMaker::InferenceComponent").values()
    urls = {}
    for component in components:
        container = component["Properties"]["Specification"].get("Container") or {}
        if "ArtifactUrl" in container:
            urls[container["ArtifactUrl"].rsplit("/", 1)[-1]] = container["ArtifactUrl"]
    return urls


def test_the_stack_deploys_the_locked_adapter_version_and_the_team_files_others(tmp_path):
    package = ServedPackage(
        model_package_arn="arn:aws:sagemaker:us-east-1:111111111111:model-package/optigate-support-dev/3",
        image=IMAGE,
        model_data_uri=BASE,
        adapters={"reply": REPLY_V3},
    )
    template = _synth_support(tmp_path, package)
    urls = _artifacts(template)
    assert urls["reply-v3.tar.gz"] == REPLY_V3 and "reply-v2.tar.gz" not in urls
    # The adapters the lock does not name stay as the team file says.
    assert {"triage-v3.tar.gz", "summarise-v7.tar.gz"} <= set(urls)
    # The endpoint's role may read the new archive.
    policies = json.dumps([r["Properties"] for r in resources_of(template, "AWS::IAM::Policy").values()])
    assert "support/reply-v3.tar.gz" in policies
