"""Resolve a lock from the Model Registry: per team, the newest Approved package of its gate's
group in the environment's account and region (a group ARN, so the pipeline's tools account can
read it through the group's resource policy)."""

from __future__ import annotations

import datetime as dt
from typing import Any

from botocore.exceptions import ClientError

from optigate.config.loader import Project
from optigate.config.models import Environment
from optigate.promote.lock import Lock, ServedPackage, package_group, parse_adapters, parse_compiled_for


def _group_arn(environment: Environment, group: str, partition: str = "aws") -> str:
    return f"arn:{partition}:sagemaker:{environment.region}:{environment.account}:model-package-group/{group}"


#: What a team stack cannot deploy as the package says (LmiModel: one container, one uncompressed S3 prefix):
#: more model data (CloudFormation's AWS::SageMaker::Model has no AdditionalModelDataSources), and a ModelDataUrl,
#: which "must point to a single gzip compressed tar archive" (botocore, ModelPackageContainerDefinition).
UNDEPLOYABLE_MEMBERS = ("ModelDataUrl", "AdditionalModelDataSources", "AdditionalS3DataSource")


def deployable_container(package: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """The package's container and its S3 prefix, when the team stack deploys exactly that (image, environment
    and every file under the prefix, such as a staged EAGLE-3 head); else ValueError: an Approved package the
    stack would deploy differently from what was proven must stop the promotion, not change on the way."""
    arn = package["ModelPackageArn"]
    containers = package.get("InferenceSpecification", {}).get("Containers", [])
    if len(containers) != 1:
        raise ValueError(f"{arn}: {len(containers)} containers; a team stack deploys exactly one")
    (container,) = containers
    extra = [member for member in UNDEPLOYABLE_MEMBERS if container.get(member)]
    if extra:
        raise ValueError(f"{arn}: the container has {', '.join(extra)}, which a team stack cannot deploy unchanged")
    data = container.get("ModelDataSource", {}).get("S3DataSource", {})
    if not data.get("S3Uri"):
        raise ValueError(f"{arn}: the package names no model data")
    if (data.get("S3DataType"), data.get("CompressionType")) != ("S3Prefix", "None"):
        raise ValueError(
            f"{arn}: model data {data.get('S3DataType')}/{data.get('CompressionType')}; a team stack deploys an "
            "uncompressed S3 prefix (S3Prefix/None)"
        )
    return container, data["S3Uri"]


def newest_approved(client: Any, group: str) -> ServedPackage | None:
    """The newest Approved package of `group` (name or ARN), or None when it has none or does not exist."""
    try:
        summaries = client.list_model_packages(
            ModelPackageGroupName=group,
            ModelApprovalStatus="Approved",
            SortBy="CreationTime",
            SortOrder="Descending",
            MaxResults=1,
        )["ModelPackageSummaryList"]
    except ClientError as error:
        if error.response["Error"]["Code"] in ("ValidationException", "ResourceNotFound", "ResourceNotFoundException"):
            return None  # no group yet: the gate never ran there
        raise
    if not summaries:
        return None
    package = client.describe_model_package(ModelPackageName=summaries[0]["ModelPackageArn"])
    container, source = deployable_container(package)
    metadata = package.get("CustomerMetadataProperties") or {}
    return ServedPackage(
        model_package_arn=package["ModelPackageArn"],
        image=container["Image"],
        model_data_uri=source,
        environment=container.get("Environment") or {},
        fingerprint=metadata.get("fingerprint"),
        report=metadata.get("report"),
        compiled_for=parse_compiled_for(metadata.get("compiled_for")),
        adapters=parse_adapters(metadata),
    )


def resolve(project: Project, environment: Environment, client: Any, *, partition: str = "aws") -> Lock:
    """The lock of `environment`: every team with a gate, its newest Approved package or None."""
    teams: dict[str, ServedPackage | None] = {}
    for name, team in sorted(project.teams.items()):
        if not team.gate.candidate:
            continue  # no gate, nothing is ever approved: the team file is what it serves
        teams[name] = newest_approved(client, _group_arn(environment, package_group(name, environment.name), partition))
    return Lock(
        environment=environment.name, resolved_at=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"), teams=teams
    )
