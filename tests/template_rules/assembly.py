"""A synthesized cloud assembly read offline: its stacks (nested stage assemblies included), their assets,
and the physical name or ARN CloudFormation gives each resource a Ref or Fn::GetAtt names."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from optigate.rehearse.template import render


@dataclass
class Stack:
    name: str
    template: dict[str, Any]
    account: str = "111111111111"
    region: str = "us-east-1"
    assets: dict[str, Path] = field(default_factory=dict)  # asset hash -> its folder


def load_stacks(outdir: Path) -> list[Stack]:
    """Every CloudFormation stack of a cloud assembly (nested stage assemblies included)."""
    stacks: list[Stack] = []
    manifest = json.loads((outdir / "manifest.json").read_text())
    for artifact_id, artifact in manifest.get("artifacts", {}).items():
        if artifact["type"] == "cdk:cloud-assembly":
            stacks += load_stacks(outdir / artifact["properties"]["directoryName"])
        if artifact["type"] != "aws:cloudformation:stack":
            continue
        properties = artifact["properties"]
        template = json.loads((outdir / properties["templateFile"]).read_text())
        _, _, env = artifact.get("environment", "aws://111111111111/us-east-1").partition("aws://")
        account, _, region = env.partition("/")
        stack = Stack(properties.get("stackName", artifact_id), template, account, region)
        assets = outdir / f"{artifact_id}.assets.json"
        if assets.exists():
            asset_manifest = json.loads(assets.read_text())
            for digest, asset in {**asset_manifest.get("files", {}), **asset_manifest.get("dockerImages", {})}.items():
                source = asset["source"].get("path") or asset["source"].get("directory")
                if source:
                    stack.assets[digest] = (outdir / source).resolve()
        stacks.append(stack)
    return stacks


_NAME_PROPERTIES: Final = {
    "AWS::IAM::Role": "RoleName",
    "AWS::IAM::ManagedPolicy": "ManagedPolicyName",
    "AWS::Lambda::Function": "FunctionName",
    "AWS::StepFunctions::StateMachine": "StateMachineName",
    "AWS::SNS::Topic": "TopicName",
    "AWS::SQS::Queue": "QueueName",
    "AWS::S3::Bucket": "BucketName",
    "AWS::Logs::LogGroup": "LogGroupName",
    "AWS::Events::Rule": "Name",
    "AWS::SageMaker::Model": "ModelName",
    "AWS::SageMaker::EndpointConfig": "EndpointConfigName",
    "AWS::SageMaker::Endpoint": "EndpointName",
    "AWS::SageMaker::ModelPackageGroup": "ModelPackageGroupName",
}


def token_values(stack: Stack) -> Callable[[str, str | None], str]:
    """What a Ref / Fn::GetAtt stands for in `stack`: the physical name or ARN CloudFormation gives the
    resource (its name property, else a stand-in derived from the logical id), the same wherever the
    token appears, so a definition and a policy that both name a resource render alike."""
    resources = stack.template.get("Resources", {})
    pseudo = {
        "AWS::Partition": "aws",
        "AWS::Region": stack.region,
        "AWS::AccountId": stack.account,
        "AWS::URLSuffix": "amazonaws.com",
        "AWS::StackName": stack.name,
        "AWS::NoValue": "",
    }
    prefix = f"arn:aws:{{}}:{stack.region}:{stack.account}:"

    def value(logical: str, attribute: str | None) -> str:
        if logical in pseudo:
            return pseudo[logical]
        resource = resources.get(logical)
        if resource is None:
            return f"unresolved:{logical}"
        kind = resource["Type"]
        given = resource.get("Properties", {}).get(_NAME_PROPERTIES.get(kind, ""))
        name = render(given, value) if given is not None else f"{stack.name}-{logical}"
        if kind.startswith(("AWS::SageMaker::", "AWS::S3::")) and given is None:
            name = name.lower()
        arn = {
            "AWS::IAM::Role": f"arn:aws:iam::{stack.account}:role/{name}",
            "AWS::IAM::ManagedPolicy": f"arn:aws:iam::{stack.account}:policy/{name}",
            "AWS::Lambda::Function": prefix.format("lambda") + f"function:{name}",
            "AWS::StepFunctions::StateMachine": prefix.format("states") + f"stateMachine:{name}",
            "AWS::SNS::Topic": prefix.format("sns") + name,
            "AWS::SQS::Queue": prefix.format("sqs") + name,
            "AWS::S3::Bucket": f"arn:aws:s3:::{name}",
            "AWS::KMS::Key": prefix.format("kms") + f"key/{logical.lower()}",
            "AWS::Logs::LogGroup": prefix.format("logs") + f"log-group:{name}:*",
            "AWS::Events::Rule": prefix.format("events") + f"rule/{name}",
            "AWS::SageMaker::Model": prefix.format("sagemaker") + f"model/{name}",
            "AWS::SageMaker::EndpointConfig": prefix.format("sagemaker") + f"endpoint-config/{name}",
            "AWS::SageMaker::Endpoint": prefix.format("sagemaker") + f"endpoint/{name}",
            "AWS::SageMaker::ModelPackageGroup": prefix.format("sagemaker") + f"model-package-group/{name}",
        }.get(kind)
        ref_is_arn = kind.startswith(("AWS::StepFunctions::", "AWS::SNS::", "AWS::SageMaker::", "AWS::IAM::Managed"))
        if attribute is None:
            if kind == "AWS::KMS::Key":
                return logical.lower()
            return arn if ref_is_arn and arn else name
        if attribute in ("Arn", "TopicArn", "ModelPackageGroupArn", "PolicyArn") and arn:
            return arn
        if attribute.endswith("Name") or attribute in ("KeyId", "QueueUrl"):
            return name
        return f"unresolved:{logical}.{attribute}"

    return value
