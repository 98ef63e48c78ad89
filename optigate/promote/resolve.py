"""Resolve a lock from the Model Registry: per team, the newest Approved package of its gate's
group in the environment's account and region (a group ARN, so the pipeline's tools account can
read it through the group's resource policy)."""

from __future__ import annotations

import datetime as dt
from typing import Any

from botocore.exceptions import ClientError

from optigate.config.loader import Project
from optigate.config.models import Environment
from optigate.promote.lock import Lock, ServedPackage, package_group


def _group_arn(environment: Environment, group: str, partition: str = "aws") -> str:
    return f"arn:{partition}:sagemaker:{environment.region}:{environment.account}:model-package-group/{group}"


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
    (container,) = package["InferenceSpecification"]["Containers"][:1]
    source = container.get("ModelDataSource", {}).get("S3DataSource", {}).get("S3Uri") or container.get("ModelDataUrl")
    if not source:
        raise ValueError(f"{package['ModelPackageArn']}: the package names no model data")
    metadata = package.get("CustomerMetadataProperties") or {}
    return ServedPackage(
        model_package_arn=package["ModelPackageArn"],
        image=container["Image"],
        model_data_uri=source,
        environment=container.get("Environment") or {},
        fingerprint=metadata.get("fingerprint"),
        report=metadata.get("report"),
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
