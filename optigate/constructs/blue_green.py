"""Blue/green updates of a TunedEndpoint: the canary traffic shift and the 5XX and p99-latency alarms that roll
it back (EndpointConfig's DeploymentConfig)."""

from __future__ import annotations

from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_sagemaker as sagemaker
from constructs import Construct

from optigate.constructs.rollback_alarms import Variant, VariantMetric, rollback_alarms
from optigate.deployment.endpoint import BlueGreen

#: The API maximum of BlueGreenUpdatePolicy.MaximumExecutionTimeoutInSeconds (botocore's SageMaker model).
MAX_BLUE_GREEN_SECONDS = 28800


def blue_green_alarms(
    scope: Construct,
    endpoint_name: str,
    variant: Variant,
    blue_green: BlueGreen | None,
    metric: VariantMetric,
) -> list[cloudwatch.Alarm]:
    """The endpoint's rollback alarms (made without blue/green too, at the default thresholds)."""
    settings = blue_green or BlueGreen()
    return rollback_alarms(
        scope,
        endpoint_name,
        variant,
        metric,
        max_5xx_per_minute=settings.max_5xx_per_minute,
        p99_model_latency_ms=settings.p99_model_latency_ms,
        update="a blue/green update",
    )


def deployment_config(
    variant: Variant, blue_green: BlueGreen | None, alarms: list[cloudwatch.Alarm]
) -> sagemaker.CfnEndpoint.DeploymentConfigProperty | None:
    """The endpoint's DeploymentConfig: None (all at once, no rollback) without blue/green."""
    if blue_green is None:
        return None
    wait = blue_green.wait_minutes * 60
    count = variant.instance_count
    if count >= 2:
        # INSTANCE_COUNT so the canary is at least one whole instance and at most half the fleet.
        canary = max(1, min(count // 2, round(count * blue_green.canary_percentage / 100)))
        routing = sagemaker.CfnEndpoint.TrafficRoutingConfigProperty(
            type="CANARY",
            canary_size=sagemaker.CfnEndpoint.CapacitySizeProperty(type="INSTANCE_COUNT", value=canary),
            wait_interval_in_seconds=wait,
        )
    else:
        # A single instance cannot be split: shift at once, bake, and keep the old fleet until then.
        routing = sagemaker.CfnEndpoint.TrafficRoutingConfigProperty(type="ALL_AT_ONCE", wait_interval_in_seconds=wait)
    startup = variant.model_data_download_timeout_seconds + variant.container_startup_health_check_timeout_seconds
    timeout = min(MAX_BLUE_GREEN_SECONDS, startup + 3 * wait + 1800)
    return sagemaker.CfnEndpoint.DeploymentConfigProperty(
        blue_green_update_policy=sagemaker.CfnEndpoint.BlueGreenUpdatePolicyProperty(
            traffic_routing_configuration=routing,
            termination_wait_in_seconds=wait,
            maximum_execution_timeout_in_seconds=timeout,
        ),
        auto_rollback_configuration=(
            sagemaker.CfnEndpoint.AutoRollbackConfigProperty(
                alarms=[sagemaker.CfnEndpoint.AlarmProperty(alarm_name=alarm.alarm_name) for alarm in alarms]
            )
            if blue_green.auto_rollback
            else None
        ),
    )
