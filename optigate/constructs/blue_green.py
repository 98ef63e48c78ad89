"""Blue/green updates of a TunedEndpoint: the canary traffic shift and the 5XX and p99-latency alarms that roll
it back (EndpointConfig's DeploymentConfig)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_sagemaker as sagemaker
from constructs import Construct

#: The API maximum of BlueGreenUpdatePolicy.MaximumExecutionTimeoutInSeconds (botocore's SageMaker model).
MAX_BLUE_GREEN_SECONDS = 28800


@dataclass(frozen=True)
class BlueGreenSettings:
    """Blue/green updates: a new fleet, traffic shifted in a canary step, rolled back on alarms.

    :param canary_percentage: share of capacity that takes traffic first. @default 10
    :param wait_minutes: bake time after each shift and before the old fleet goes. @default 10
    :param auto_rollback: roll back when the 5XX or latency alarm fires. @default True
    :param max_5xx_per_minute: errors per minute that count as failure. @default 1
    :param p99_model_latency_ms: p99 ModelLatency that counts as failure. @default 60000
    """

    canary_percentage: int = 10
    wait_minutes: int = 10
    auto_rollback: bool = True
    max_5xx_per_minute: int = 1
    p99_model_latency_ms: float = 60000


class Variant(Protocol):
    """What a blue/green update reads of the production variant (tuned_endpoint.VariantSettings)."""

    @property
    def variant_name(self) -> str: ...
    @property
    def instance_count(self) -> int: ...
    @property
    def instance_pools(self) -> tuple[tuple[str, int], ...]: ...
    @property
    def instance_types(self) -> tuple[str, ...]: ...
    @property
    def model_data_download_timeout_seconds(self) -> int: ...
    @property
    def container_startup_health_check_timeout_seconds(self) -> int: ...


def _watched(
    endpoint_name: str, variant: Variant, metric: Callable[[str, str], cloudwatch.Metric], name: str, statistic: str
) -> cloudwatch.IMetric:
    """What a rollback alarm reads. With instance pools every metric gains an InstanceType dimension (user guide,
    realtime-endpoints-heterogeneous, "Monitor instance pools"; AWS ML blog "Capacity-aware inference", 2026-05-04);
    whether SageMaker still publishes the {EndpointName, VariantName} series beside the per-type ones is not
    documented. CloudWatch treats each dimension set as its own metric, so the alarm reads both: the variant's
    series and the per-type series summed (counts) or their maximum (a percentile), whichever is higher."""
    variant_metric = metric(name, statistic)
    types = variant.instance_types if variant.instance_pools else ()
    if not types:
        return variant_metric
    per_type = {
        f"t{i}": cloudwatch.Metric(
            namespace="AWS/SageMaker",
            metric_name=name,
            dimensions_map={
                "EndpointName": endpoint_name,
                "VariantName": variant.variant_name,
                "InstanceType": instance_type,
            },
            statistic=statistic,
            period=Duration.minutes(1),
        )
        for i, instance_type in enumerate(types)
    }
    # FILL over an array, SUM/MAX of an array per timestamp and IF on time series: metric math functions
    # (https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/using-metric-math.html).
    pooled = f"{'SUM' if statistic == 'Sum' else 'MAX'}(FILL([{', '.join(per_type)}], 0))"
    return cloudwatch.MathExpression(
        expression=f"IF(FILL(variant, 0) > {pooled}, FILL(variant, 0), {pooled})",
        using_metrics={"variant": variant_metric, **per_type},
        period=Duration.minutes(1),
        label=f"{name} ({statistic}) of the variant or of its instance pools",
    )


def rollback_alarms(
    scope: Construct,
    endpoint_name: str,
    variant: Variant,
    blue_green: BlueGreenSettings | None,
    metric: Callable[[str, str], cloudwatch.Metric],
) -> list[cloudwatch.Alarm]:
    """The endpoint's 5XX and p99 model-latency alarms (made without blue/green too, at the default thresholds);
    `metric(name, statistic)` is the variant's series of an AWS/SageMaker metric."""
    settings = blue_green or BlueGreenSettings()
    errors = cloudwatch.Alarm(
        scope,
        "Errors5xx",
        metric=_watched(endpoint_name, variant, metric, "Invocation5XXErrors", "Sum"),
        threshold=settings.max_5xx_per_minute,
        evaluation_periods=2,
        comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
        treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
        alarm_description=f"{endpoint_name}: model errors; rolls back a blue/green update",
    )
    latency = cloudwatch.Alarm(
        scope,
        "ModelLatencyP99",
        metric=_watched(endpoint_name, variant, metric, "ModelLatency", "p99"),
        threshold=settings.p99_model_latency_ms * 1000,  # ModelLatency is reported in microseconds
        evaluation_periods=3,
        comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
        treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
        alarm_description=f"{endpoint_name}: p99 model latency over budget; rolls back a blue/green update",
    )
    return [errors, latency]


def deployment_config(
    variant: Variant, blue_green: BlueGreenSettings | None, alarms: list[cloudwatch.Alarm]
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
