"""The alarms an endpoint update rolls back on: 5XX errors and p99 model latency of the production variant. One
set for both kinds of update: a model-backed endpoint's blue/green update (EndpointConfig's DeploymentConfig,
optigate.constructs.blue_green) and an adapter endpoint's rolling update of its base inference component
(optigate.constructs.lora_adapters)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cloudwatch
from constructs import Construct

#: `metric(name, statistic)`: the production variant's series of an AWS/SageMaker metric.
VariantMetric = Callable[[str, str], cloudwatch.Metric]


class Variant(Protocol):
    """What the alarms and a blue/green update read of the production variant
    (optigate.deployment.variant.VariantSettings)."""

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


#: CloudWatch: a metric math alarm "can ... contain up to 10 metrics" (alarm limits in the user guide).
MAX_METRICS_PER_ALARM = 10


def _watched(
    endpoint_name: str,
    variant: Variant,
    metric: VariantMetric,
    name: str,
    statistic: str,
    components: Sequence[str] = (),
) -> cloudwatch.IMetric:
    """What a rollback alarm reads. With instance pools every metric gains an InstanceType dimension (user guide,
    realtime-endpoints-heterogeneous, "Monitor instance pools"; AWS ML blog "Capacity-aware inference", 2026-05-04);
    whether SageMaker still publishes the {EndpointName, VariantName} series beside the per-type ones is not
    documented. On an endpoint that hosts inference components (`components`), the user guide lists
    {InferenceComponentName} beside {EndpointName, VariantName} for the invocation metrics, and a live probe of such
    an endpoint found its invocations under InferenceComponentName alone (cloud-custodian PR #11078,
    tests/terraform/sagemaker_endpoint_metrics/README.md@b3ab3e75). CloudWatch treats each dimension set as its own
    metric, so the alarm reads every one: the variant's series and the per-type or per-component series summed
    (counts) or their maximum (a percentile), whichever is higher."""
    variant_series = metric(name, statistic)
    types = variant.instance_types if variant.instance_pools else ()
    if not types and not components:
        return variant_series

    def series(key: str, value: str, **more: str) -> cloudwatch.Metric:
        return cloudwatch.Metric(
            namespace="AWS/SageMaker",
            metric_name=name,
            dimensions_map={key: value, **more},
            statistic=statistic,
            period=Duration.minutes(1),
        )

    parts = {
        f"t{i}": series("EndpointName", endpoint_name, VariantName=variant.variant_name, InstanceType=instance_type)
        for i, instance_type in enumerate(types)
    }
    parts |= {f"c{i}": series("InferenceComponentName", component) for i, component in enumerate(components)}
    # FILL over an array, SUM/MAX of an array per timestamp and IF on time series: metric math functions
    # (https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/using-metric-math.html).
    pooled = f"{'SUM' if statistic == 'Sum' else 'MAX'}(FILL([{', '.join(parts)}], 0))"
    split = "its inference components" if components else "its instance pools"
    return cloudwatch.MathExpression(
        expression=f"IF(FILL(variant, 0) > {pooled}, FILL(variant, 0), {pooled})",
        using_metrics={"variant": variant_series, **parts},
        period=Duration.minutes(1),
        label=f"{name} ({statistic}) of the variant or of {split}",
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
    components: Sequence[str] = (),
) -> list[cloudwatch.Alarm]:
    """The endpoint's 5XX and p99 model-latency alarms; `update` names what they roll back ("a blue/green update").
    `components`: the inference components the endpoint hosts, whose own series the alarms read too, in as many pairs
    of alarms as the 10 metrics an alarm may read need."""
    pools = len(variant.instance_types) if variant.instance_pools else 0
    room = MAX_METRICS_PER_ALARM - 1 - pools
    if components and room < 1:
        raise ValueError(f"{endpoint_name}: {pools} instance pools leave an alarm no room for a component's series")
    groups = [components[i : i + room] for i in range(0, len(components), room)] if components else [()]
    alarms: list[cloudwatch.Alarm] = []
    for index, group in enumerate(groups):
        suffix = "" if index == 0 else str(index + 1)
        errors = cloudwatch.Alarm(
            scope,
            f"Errors5xx{suffix}",
            metric=_watched(endpoint_name, variant, metric, "Invocation5XXErrors", "Sum", group),
            threshold=max_5xx_per_minute,
            evaluation_periods=2,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
            alarm_description=f"{endpoint_name}: model errors; rolls back {update}",
        )
        latency = cloudwatch.Alarm(
            scope,
            f"ModelLatencyP99{suffix}",
            metric=_watched(endpoint_name, variant, metric, "ModelLatency", "p99", group),
            threshold=p99_model_latency_ms * 1000,  # ModelLatency is reported in microseconds
            evaluation_periods=3,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
            alarm_description=f"{endpoint_name}: p99 model latency over budget; rolls back {update}",
        )
        alarms += [errors, latency]
    return alarms
