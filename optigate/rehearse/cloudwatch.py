"""CloudWatch as the gate reads it: SageMaker's per-variant metrics of a mirror window, and percentile
statistics (moto knows Sum/Average/Minimum/Maximum/SampleCount only)."""

from __future__ import annotations

import datetime as _dt
import re
from typing import Any

from optigate.rehearse.context import Harness

_BATCH = 500  # PutMetricData's limit of data points per call


def publish_variant_traffic(harness: Harness, params: dict) -> None:
    """Scenario.variant_traffic of the variants on InService endpoints, inside the window a GetMetricData
    request (`params`) reads, each variant once per harness."""
    if not harness.scenario.variant_traffic:
        return
    start, end = (_dt.datetime.fromisoformat(str(params[k]).replace("Z", "+00:00")) for k in ("StartTime", "EndTime"))
    # Whole seconds, as CloudWatch (and moto) align the window.
    at = start.replace(microsecond=0) + min(end - start, _dt.timedelta(seconds=1)) / 2
    data: list[dict[str, Any]] = []
    for endpoint in harness.sagemaker_backend().endpoints.values():
        if endpoint.endpoint_status != "InService":
            continue
        shadows = getattr(endpoint, "shadow_production_variants", None) or []
        for variant in (endpoint.production_variants or []) + shadows:
            traffic = harness.scenario.variant_traffic.get(variant["VariantName"])
            key = (endpoint.endpoint_name, variant["VariantName"])
            if not traffic or key in harness.published_traffic:
                continue
            harness.published_traffic.add(key)
            dims = [
                {"Name": "EndpointName", "Value": endpoint.endpoint_name},
                {"Name": "VariantName", "Value": variant["VariantName"]},
            ]
            for name, value in traffic.items():
                values = value if isinstance(value, list) else [value]
                data += [{"MetricName": name, "Dimensions": dims, "Timestamp": at, "Value": float(v)} for v in values]
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
