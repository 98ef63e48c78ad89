"""The alarms an endpoint update rolls back on: 5XX errors and p99 model latency of the production variant. One
set for both kinds of update: a model-backed endpoint's blue/green update (EndpointConfig's DeploymentConfig,
optigate.constructs.blue_green) and an adapter endpoint's rolling update of its base inference component
(optigate.constructs.lora_adapters)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cloudwatch
from constructs import Construct

#: `metric(name, statistic)`: the production variant's series of an AWS/SageMaker metric.
VariantMetric = Callable[[str, str], cloudwatch.Metric]


class Variant(Protocol):
    """What the alarms and a blue/green update read of the production variant (tuned_endpoint.VariantSettings)."""

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


def variant_metric(endpoint_name: str, variant_name: str, name: str, statistic: str = "Sum") -> cloudwatch.Metric:
    """A production variant's series of an AWS/SageMaker invocation metric: the {EndpointName, VariantName}
    dimensions, which the user guide lists for endpoint invocation metrics beside {InferenceComponentName}
    (https://docs.aws.amazon.com/sagemaker/latest/dg/monitoring-cloudwatch.html, "Dimensions for endpoint
    invocation metrics"); on an adapter endpoint the variant's series counts the base and every adapter."""
    return cloudwatch.Metric(
        namespace="AWS/SageMaker",
        metric_name=name,
        dimensions_map={"EndpointName": endpoint_name, "VariantName": variant_name},
        statistic=statistic,
        period=Duration.minutes(1),
    )


def _watched(
    endpoint_name: str, variant: Variant, metric: VariantMetric, name: str, statistic: str
) -> cloudwatch.IMetric:
    """What a rollback alarm reads. With instance pools every metric gains an InstanceType dimension (user guide,
    realtime-endpoints-heterogeneous, "Monitor instance pools"; AWS ML blog "Capacity-aware inference", 2026-05-04);
    whether SageMaker still publishes the {EndpointName, VariantName} series beside the per-type ones is not
    documented. CloudWatch treats each dimension set as its own metric, so the alarm reads both: the variant's
    series and the per-type series summed (counts) or their maximum (a percentile), whichever is higher."""
    variant_series = metric(name, statistic)
    types = variant.instance_types if variant.instance_pools else ()
    if not types:
        return variant_series
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
        using_metrics={"variant": variant_series, **per_type},
        period=Duration.minutes(1),
        label=f"{name} ({statistic}) of the variant or of its instance pools",
    )


def rollback_alarms(
    scope: Construct,
    endpoint_name: str,
    variant: Variant,
    metric: VariantMetric,
    *,
    max_5xx_per_minute: int,
    p99_model_latency_ms: float,
    update: str,
) -> list[cloudwatch.Alarm]:
    """The endpoint's 5XX and p99 model-latency alarms; `update` names what they roll back ("a blue/green update")."""
    errors = cloudwatch.Alarm(
        scope,
        "Errors5xx",
        metric=_watched(endpoint_name, variant, metric, "Invocation5XXErrors", "Sum"),
        threshold=max_5xx_per_minute,
        evaluation_periods=2,
        comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
        treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
        alarm_description=f"{endpoint_name}: model errors; rolls back {update}",
    )
    latency = cloudwatch.Alarm(
        scope,
        "ModelLatencyP99",
        metric=_watched(endpoint_name, variant, metric, "ModelLatency", "p99"),
        threshold=p99_model_latency_ms * 1000,  # ModelLatency is reported in microseconds
        evaluation_periods=3,
        comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
        treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
        alarm_description=f"{endpoint_name}: p99 model latency over budget; rolls back {update}",
    )
    return [errors, latency]
