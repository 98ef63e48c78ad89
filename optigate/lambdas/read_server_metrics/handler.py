"""The gate's read of the server's own metrics: each temporary endpoint's container metrics (vLLM's, published by
SageMaker's detailed observability) over the benchmark's window, through CloudWatch's QueryMetrics
(optigate/bench/server_metrics.py, staged beside this handler: standard library, botocore to sign).

Event: {"server_metrics": {"sides": {"baseline": <twin endpoint>, "candidate": <candidate endpoint>},
"start": <ISO time or epoch s>, "end": ...}} (optigate.lambdas.events.ServerMetricsEvent, staged beside this handler,
which refuses an unknown or missing key or a value of the wrong type, naming it). Returns {"baseline": figures,
"candidate": figures}; a query that fails is a missing figure with its reason, never an error of the function.

IAM: cloudwatch:GetMetricData and cloudwatch:ListMetrics (what QueryMetrics needs), neither with a resource scope.
"""

from __future__ import annotations

from typing import Any

import boto3

try:
    from optigate.lambdas.events import ServerMetricsEvent
except ImportError:  # the function's code: optigate.lambdas.events staged beside this handler as events.py
    from events import ServerMetricsEvent  # type: ignore[no-redef]


def server_metrics() -> Any:
    """optigate.bench.server_metrics, installed or staged beside this handler."""
    try:
        from optigate.bench import server_metrics as metrics
    except ImportError:
        import server_metrics as metrics  # type: ignore[no-redef]
    return metrics


def handler(event: dict, _context=None) -> dict:
    ServerMetricsEvent.from_event(event)
    metrics = server_metrics()
    return metrics.read_sides(metrics.signed_transport(boto3.Session().region_name), event["server_metrics"])
