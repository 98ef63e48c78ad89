"""Pieces several constructs share: an SSL-only KMS bucket, target-tracking autoscaling on a
SageMaker scalable dimension, and the grants every SageMaker job or model role needs."""

from __future__ import annotations

from collections.abc import Iterable

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_applicationautoscaling as appscaling
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from constructs import Construct

from optigate.constructs import nag
from optigate.deployment.source_keys import key_region

#: What a caller of InvokeEndpointWithResponseStream needs: its API reference says "your IAM
#: permissions must allow the sagemaker:InvokeEndpoint action"; the streaming action is granted too.
STREAMING_INVOKE_ACTIONS = ("sagemaker:InvokeEndpoint", "sagemaker:InvokeEndpointWithResponseStream")


def secure_bucket(
    scope: Construct, construct_id: str, key: kms.IKey, *, purpose: str, expire_days: int | None = None
) -> s3.Bucket:
    """KMS-encrypted, SSL-only, no public access, retained; `purpose` says who writes to it."""
    bucket = s3.Bucket(
        scope,
        construct_id,
        encryption=s3.BucketEncryption.KMS,
        encryption_key=key,
        bucket_key_enabled=True,
        enforce_ssl=True,
        block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
        removal_policy=RemovalPolicy.RETAIN,
        lifecycle_rules=[s3.LifecycleRule(expiration=Duration.days(expire_days))] if expire_days else None,
    )
    nag.acknowledge(
        bucket,
        "AwsSolutions-S1",
        f"Only {purpose} write here; reads are audited with CloudTrail S3 data events, which platform "
        "accounts enable organisation-wide.",
    )
    return bucket


def target_tracking(
    scope: Construct,
    *,
    resource_id: str,
    dimension: str,
    min_capacity: int,
    max_capacity: int,
    metric: str,
    target_value: float,
    policy_name: str,
    cooldowns: tuple[int, int],
    depends_on: Construct,
) -> appscaling.CfnScalableTarget:
    """A scalable target and a target-tracking policy on a predefined SageMaker metric."""
    target = appscaling.CfnScalableTarget(
        scope,
        "ScalableTarget",
        service_namespace="sagemaker",
        resource_id=resource_id,
        scalable_dimension=dimension,
        min_capacity=min_capacity,
        max_capacity=max_capacity,
    )
    target.node.add_dependency(depends_on)
    scale_in, scale_out = cooldowns
    appscaling.CfnScalingPolicy(
        scope,
        "TargetTracking",
        policy_name=policy_name,
        policy_type="TargetTrackingScaling",
        scaling_target_id=target.ref,
        target_tracking_scaling_policy_configuration=appscaling.CfnScalingPolicy.TargetTrackingScalingPolicyConfigurationProperty(
            target_value=target_value,
            predefined_metric_specification=appscaling.CfnScalingPolicy.PredefinedMetricSpecificationProperty(
                predefined_metric_type=metric
            ),
            scale_in_cooldown=scale_in,
            scale_out_cooldown=scale_out,
        ),
    )
    return target


def allow_ecr_token_and_sagemaker_metrics(role: iam.IRole) -> None:
    """ecr:GetAuthorizationToken and PutMetricData: neither has a resource scope."""
    nag.allow(
        role,
        ["ecr:GetAuthorizationToken"],
        ["*"],
        why_wildcard="ecr:GetAuthorizationToken has no resource scope; image pulls are limited to one repository.",
    )
    nag.allow(
        role,
        ["cloudwatch:PutMetricData"],
        ["*"],
        conditions={"StringLike": {"cloudwatch:namespace": ["/aws/sagemaker/*"]}},
        why_wildcard="PutMetricData has no resource scope; the namespace condition limits it to SageMaker's.",
    )


def allow_source_decrypt(role: iam.IRole, key_arns: Iterable[str]) -> None:
    """kms:Decrypt of the customer-managed keys that encrypt S3 objects `role` reads (optigate.deployment.source_keys),
    nothing more: a source is only read. Through S3 only (kms:ViaService of the key's region, where its bucket is),
    as the benchmark's capture key: not anything else the key encrypts. Nothing without keys."""
    by_region: dict[str, list[str]] = {}
    for arn in sorted(set(key_arns)):
        by_region.setdefault(key_region(arn), []).append(arn)
    for region, arns in by_region.items():
        nag.allow(
            role,
            ["kms:Decrypt"],
            arns,
            conditions={"StringEquals": {"kms:ViaService": f"s3.{region}.amazonaws.com"}},
        )


def function_role(scope: Construct, name: str) -> tuple[iam.Role, logs.LogGroup]:
    """A Lambda function's own role (`<name>Role`) and log group (`<name>Logs`, a month's retention), the
    role allowed to write only that group's streams. Grant the rest with nag.allow."""
    log_group = logs.LogGroup(
        scope, f"{name}Logs", retention=logs.RetentionDays.ONE_MONTH, removal_policy=RemovalPolicy.DESTROY
    )
    role = iam.Role(scope, f"{name}Role", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"))
    # LogGroup.log_group_arn ends in ":*", which covers the group's streams.
    nag.allow(
        role,
        ["logs:CreateLogStream", "logs:PutLogEvents"],
        [log_group.log_group_arn],
        why_wildcard="The function's own log group and its streams.",
    )
    return role, log_group
