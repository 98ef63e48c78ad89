"""Whether an endpoint publishes the server's own metrics: CreateEndpointConfig's MetricsConfig (botocore 1.44.8
sagemaker service-2.json: EnableDetailedObservability, MetricPublishFrequencyInSeconds in 10, 30, 60, 120, 180, 240,
300), which CloudFormation's AWS::SageMaker::EndpointConfig accepts too (cfn-lint 1.58's schema has MetricsConfig).

The per-container ContainerMetricsConfig (ContainerDefinition in CreateModel, botocore 1.44.8) is not set: LMI is a
Deep Learning Container, for which "the endpoint path is determined automatically and this configuration is
optional" (API_ContainerMetricsConfig.html), and CloudFormation's AWS::SageMaker::Model has no such property (cfn-lint
1.58's schema), so production models could not carry it anyway.

AWS: "For endpoint configurations created after June 17, 2026, EnableDetailedObservability defaults to true"
(monitoring-detailed-observability-getting-started.md); optigate states it either way, so a team's switch is what
the config says, whatever the default of the day."""

from __future__ import annotations

from typing import Any

PUBLISH_FREQUENCIES_S = (10, 30, 60, 120, 180, 240, 300)
# The gate's temporary endpoints publish at the shortest interval: a benchmark of a few minutes still has many points.
GATE_PUBLISH_SECONDS = 10


def metrics_config(enabled: bool, publish_seconds: int | None = None) -> dict[str, Any]:
    """CreateEndpointConfig's MetricsConfig (API form)."""
    if publish_seconds is not None and publish_seconds not in PUBLISH_FREQUENCIES_S:
        raise ValueError(f"MetricPublishFrequencyInSeconds must be one of {PUBLISH_FREQUENCIES_S}: {publish_seconds}")
    config: dict[str, Any] = {"EnableDetailedObservability": enabled}
    if enabled and publish_seconds is not None:
        config["MetricPublishFrequencyInSeconds"] = publish_seconds
    return config


def gate_metrics_config() -> dict[str, Any]:
    """What the gate's twin and candidate endpoint configs send: always on (the verdict reads the figures)."""
    return metrics_config(True, GATE_PUBLISH_SECONDS)
