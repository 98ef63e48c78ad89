"""CloudWatch as the gate reads it: SageMaker's per-variant and per-inference-component metrics of a window, and
percentile statistics (moto knows Sum/Average/Minimum/Maximum/SampleCount only)."""

from __future__ import annotations

import datetime as _dt
import re
from typing import Any

from optigate.rehearse.context import Harness

_BATCH = 500  # PutMetricData's limit of data points per call
_COMPONENT = "InferenceComponent"  # the key of a component's published traffic (beside (endpoint, variant))


def publish_variant_traffic(harness: Harness, params: dict) -> None:
    """Scenario.variant_traffic of the variants on InService endpoints, and Scenario.component_traffic of the
    inference components serving on them, inside the window a GetMetricData request (`params`) reads, each
    variant and component once per harness."""
    scenario = harness.scenario
    if not (scenario.variant_traffic or scenario.component_traffic):
        return
    start, end = (_dt.datetime.fromisoformat(str(params[k]).replace("Z", "+00:00")) for k in ("StartTime", "EndTime"))
    # Whole seconds, as CloudWatch (and moto) align the window.
    at = start.replace(microsecond=0) + min(end - start, _dt.timedelta(seconds=1)) / 2
    # (key in harness.published_traffic, dimensions, the scenario's traffic)
    published: list[tuple[tuple[str, str], list[dict[str, Any]], dict[str, Any] | None]] = []
    backend = harness.sagemaker_backend()
    serving = {name for name, endpoint in backend.endpoints.items() if endpoint.endpoint_status == "InService"}
    for name in sorted(serving):
        endpoint = backend.endpoints[name]
        shadows = getattr(endpoint, "shadow_production_variants", None) or []
        for variant in (endpoint.production_variants or []) + shadows:
            dims = [{"Name": "EndpointName", "Value": name}, {"Name": "VariantName", "Value": variant["VariantName"]}]
            published.append(
                ((name, variant["VariantName"]), dims, scenario.variant_traffic.get(variant["VariantName"]))
            )
    # Per-component invocation metrics: namespace AWS/SageMaker (the Developer Guide's enhanced-metrics page puts
    # inference components' invocation metrics there, monitoring-cloudwatch-enhanced-metrics.html), dimension
    # InferenceComponentName (as the design contract and constructs/lora_adapters.py's alarms read it; the table of
    # monitoring-cloudwatch.html#cloudwatch-metrics-inference-component was not read offline).
    components = harness.sagemaker.region_state(backend).inference_components
    for component in components.values():
        if component["EndpointName"] in serving and component["InferenceComponentStatus"] in ("InService", "Updating"):
            component_name = component["InferenceComponentName"]
            dims = [{"Name": "InferenceComponentName", "Value": component_name}]
            published.append(((_COMPONENT, component_name), dims, scenario.component_traffic.get(component_name)))
    data: list[dict[str, Any]] = []
    for key, dims, traffic in published:
        if not traffic or key in harness.published_traffic:
            continue
        harness.published_traffic.add(key)
        for metric, value in traffic.items():
            values = value if isinstance(value, list) else [value]
            data += [{"MetricName": metric, "Dimensions": dims, "Timestamp": at, "Value": float(v)} for v in values]
    cloudwatch = harness.client("cloudwatch")
    for index in range(0, len(data), _BATCH):
        cloudwatch.put_metric_data(Namespace="AWS/SageMaker", MetricData=data[index : index + _BATCH])


def percentile_statistics(original):
    """moto's ``Statistics.get_statistics_for_type`` plus percentiles (p99, p99.9): SageMaker alarms
    and the gate read them."""

    def get_statistics_for_type(self, stat: str):
        match = re.fullmatch(r"p(\d+(?:\.\d+)?)", stat)
        if match is None:
            return original(self, stat)
        import numpy as np

        values = self.metric_single_values_list
        return float(np.percentile(values, float(match.group(1)))) if values else None

    return get_statistics_for_type
