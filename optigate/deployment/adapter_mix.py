"""The traffic mix of an adapter team's gate benchmark: which share of the requests each inference component
gets (pure: no AWS calls, no aws_cdk).

The mix is `gate.benchmark.adapter_mix` (relative weights by adapter name, `base` the base model's own
component) when the team sets it, else the shares the live endpoint's components were invoked in over the
last :data:`HISTORY_DAYS` days, read from CloudWatch; with neither, the gate refuses to guess.

CloudWatch: SageMaker publishes the invocation metrics of an endpoint with inference components in the
`AWS/SageMaker` namespace per component, dimension `InferenceComponentName`; `Invocations` counts the
requests sent (the Sum statistic is the total)
(https://docs.aws.amazon.com/sagemaker/latest/dg/monitoring-cloudwatch.html, "SageMaker AI endpoint
invocation metrics"). GetMetricData's request shape (MetricDataQueries of Id, MetricStat {Metric {Namespace,
MetricName, Dimensions [{Name, Value}]}, Period, Stat}, Label, ReturnData; an Id starts with a lower-case
letter and holds letters, digits and underscores) is botocore's cloudwatch 2010-08-01 model.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

#: How far back the default mix looks.
HISTORY_DAYS = 7
#: The base model's own component in a mix (beside the team's adapters).
BASE = "base"
NAMESPACE = "AWS/SageMaker"
METRIC = "Invocations"
DIMENSION = "InferenceComponentName"


class NoInvocationHistory(ValueError):
    """The live endpoint's components recorded no invocation in the window: there is no mix to read."""


def mix_from_invocations(counts: Mapping[str, float]) -> dict[str, float]:
    """Each adapter's share of the invocations (summing to 1), from its component's invocation count.

    Raises :class:`NoInvocationHistory` when there are no counts or they add up to 0 (no traffic is no
    evidence of a mix: the gate refuses rather than guess), ValueError on a negative or non-finite count."""
    for adapter, count in counts.items():
        if not (isinstance(count, int | float) and math.isfinite(count) and count >= 0):
            raise ValueError(f"invocations of {adapter}: expected a finite count >= 0, got {count!r}")
    total = float(sum(counts.values()))
    if not counts or total <= 0:
        raise NoInvocationHistory(
            f"no invocations of the live endpoint's inference components in the last {HISTORY_DAYS} days "
            "(CloudWatch AWS/SageMaker Invocations per InferenceComponentName): set gate.benchmark.adapter_mix"
        )
    return {adapter: count / total for adapter, count in counts.items() if count > 0}


def resolved_mix(adapter_mix: Mapping[str, float], adapters: Sequence[str]) -> dict[str, float]:
    """`gate.benchmark.adapter_mix` as shares summing to 1, in the mix's order; an adapter left out gets no
    request. Raises ValueError on a name that is neither `base` nor an adapter, or a weight that is not a
    finite number above 0 (the config rules OG430/OG431 refuse both first)."""
    known = [BASE, *adapters]
    for name, weight in adapter_mix.items():
        if name not in known:
            raise ValueError(f"adapter_mix names '{name}', which is neither `base` nor one of {', '.join(adapters)}")
        if not (isinstance(weight, int | float) and math.isfinite(weight) and weight > 0):
            raise ValueError(f"adapter_mix weight of '{name}' must be a finite number above 0, got {weight!r}")
    total = float(sum(adapter_mix.values()))
    if not adapter_mix:
        raise ValueError("adapter_mix is empty: name at least one of " + ", ".join(known))
    return {name: weight / total for name, weight in adapter_mix.items()}


def query_id(index: int) -> str:
    """A MetricDataQuery Id for the index-th component (component names have hyphens, which Ids may not)."""
    return f"ic{index}"


def invocations_query(
    components: Mapping[str, str],
    *,
    end: datetime | None = None,
    days: int = HISTORY_DAYS,
) -> dict[str, Any]:
    """GetMetricData's request for each component's Invocations over `days` days, one datapoint each
    (Period: the whole window, Stat Sum), labelled by adapter. `components` maps adapter to component name.
    With `end`, StartTime and EndTime are filled in (ISO 8601); without it, only the queries (a Step Functions
    state supplies the times)."""
    if not components:
        raise ValueError("no inference components to read invocations of")
    period = days * 24 * 3600
    queries = [
        {
            "Id": query_id(index),
            "Label": adapter,
            "ReturnData": True,
            "MetricStat": {
                "Metric": {
                    "Namespace": NAMESPACE,
                    "MetricName": METRIC,
                    "Dimensions": [{"Name": DIMENSION, "Value": component}],
                },
                "Period": period,
                "Stat": "Sum",
            },
        }
        for index, (adapter, component) in enumerate(components.items())
    ]
    request: dict[str, Any] = {"MetricDataQueries": queries, "ScanBy": "TimestampAscending"}
    if end is not None:
        request["StartTime"] = (end - timedelta(days=days)).isoformat()
        request["EndTime"] = end.isoformat()
    return request


def invocations_from_metric_data(response: Mapping[str, Any], components: Mapping[str, str]) -> dict[str, float]:
    """Each adapter's invocation count from GetMetricData's answer to :func:`invocations_query` (same
    `components`, same order). MetricDataResults and a result's Values are optional in the answer: a component
    without a datapoint had no invocation (0), so an answer without any is all zeros, which
    :func:`mix_from_invocations` refuses."""
    by_id = {result.get("Id"): result for result in response.get("MetricDataResults") or []}
    counts = {}
    for index, adapter in enumerate(components):
        values = (by_id.get(query_id(index)) or {}).get("Values") or []
        counts[adapter] = float(sum(values))
    return counts


def benchmark_components(shares: Mapping[str, float], components: Mapping[str, str]) -> list[dict[str, Any]]:
    """The benchmark worker's `inference_components` event key: a component per adapter of the mix, with its
    share as weight (optigate.lambdas.benchmark). Raises ValueError when an adapter of the mix has no component."""
    missing = [adapter for adapter in shares if adapter not in components]
    if missing:
        raise ValueError(f"no inference component for {', '.join(missing)} of the mix")
    return [{"name": components[adapter], "adapter": adapter, "weight": share} for adapter, share in shares.items()]
