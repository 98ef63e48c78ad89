"""The server's own metrics: THE one table of what LMI's vLLM publishes, where SageMaker puts it in CloudWatch and
how the gate reads it over a benchmark's window. Standard library only (botocore, present in every Lambda runtime,
signs the request): the gate's reader function (optigate/lambdas/read_server_metrics) runs it beside its handler.

Where the metrics go (read offline, 2026-12):
- CreateEndpointConfig.MetricsConfig.EnableDetailedObservability (botocore 1.44.8 sagemaker service-2.json, shape
  MetricsConfig; CloudFormation AWS::SageMaker::EndpointConfig.MetricsConfig in cfn-lint 1.58's schema) makes
  SageMaker scrape the container's Prometheus endpoint; for Deep Learning Containers (LMI is one) "the endpoint path
  is determined automatically" (API_ContainerMetricsConfig.html), so no ContainerMetricsConfig is set.
- The scraped metrics are OpenTelemetry metrics stored in CloudWatch "natively ... as OTel metric data and are
  queryable using PromQL syntax" (AmazonCloudWatch/latest/monitoring/SageMaker-AI-Insights-Metrics.md): they have
  NO CloudWatch namespace and no GetMetricStatistics dimensions. They are read with CloudWatch's
  Prometheus-compatible QueryMetrics API, https://monitoring.<region>.amazonaws.com/api/v1/query, signed with SigV4
  for service "monitoring", which needs cloudwatch:GetMetricData and cloudwatch:ListMetrics
  (CloudWatch-PromQL-API-QueryMetrics.html) and, SageMaker's detailed-observability PromQL page adds,
  cloudwatch:QueryMetrics (monitoring-detailed-observability-promql.html): all three are granted. A series is picked
  by the label aws.sagemaker.endpoint.name (sagemaker/latest/dg/inference-monitoring.md, "OpenTelemetry metric
  labels"). "The expression must select a metric by name — for example, {"x"} or {__name__="x"}" (QueryMetrics): a
  regular expression on the name is not among those forms, so every selector names one metric exactly.
- The metric names are vLLM's (vllm/v1/metrics/loggers.py at 005a810b, vllm/v1/spec_decode/metrics.py at
  016a8587). AWS's metrics reference lists its dashboard aggregates (e.g. InputTokensPerSecond) but, in what could be
  read, does not document under which name a scraped vLLM series is stored: `aws_documented` is None for every row. So
  each query accepts every spelling the conversion allows, each selected by its exact name and joined with `or`: a
  counter with or without its `_total` suffix, and a
  histogram as Prometheus's classic `_bucket`/`_sum`/`_count` series `or` as one native (exponential) histogram,
  which is how CloudWatch says it stores OTel histograms (metrics-otel-histograms.html). A name that finds no series
  reads as unavailable, never as zero; the first live gate run should confirm the names (GetSeries, /api/v1/series).
- djl-serving's own Prometheus metrics (QueryTime etc., prometheus/README.md at d21927c4, behind SERVING_PROMETHEUS)
  are served at /server/metrics on its management API, not the path SageMaker scrapes; the table does not use them.
- Which containers export these series at all is optigate.serving.surfaces' to say: no LMI container does (djl-serving
  serves no /metrics), so the gate reads them only for a container whose row says it does.
"""

from __future__ import annotations

import json
import math
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

ENDPOINT_LABEL = "aws.sagemaker.endpoint.name"  # inference-monitoring.md, OpenTelemetry metric labels
QUERY_PATH = "/api/v1/query"  # CloudWatch-PromQL-API-QueryMetrics.html
SIGNING_SERVICE = "monitoring"
# What the reader function's role needs to call QueryMetrics; neither action takes a resource-level scope.
QUERY_ACTIONS = ("cloudwatch:GetMetricData", "cloudwatch:ListMetrics", "cloudwatch:QueryMetrics")

VLLM_LOGGERS = "github:vllm-project/vllm vllm/v1/metrics/loggers.py@005a810bc40faa25b8870fbc8559c3462581eee3"
VLLM_SPEC = "github:vllm-project/vllm vllm/v1/spec_decode/metrics.py@016a8587edb04ae53c913a1da9355a07dc0ca4ae"


@dataclass(frozen=True)
class ServerMetric:
    """One figure the gate reads: from which vLLM series, how over the window, and what AWS says of it."""

    figure: str  # the figure's name in results and reports
    series: tuple[str, ...]  # vLLM's exposition names the query reads
    kind: Literal["gauge", "counter", "histogram"]
    unit: str
    statistic: str  # how the window becomes one figure, in words
    promql: str  # {sel} is the label selector, {w} the window as a PromQL duration
    aws_documented: str | None  # the name AWS documents for the stored series; None: AWS documents none
    source: str


def _counter(name: str) -> str:
    """A counter's increase over the window under either stored name, each selected exactly (QueryMetrics takes a
    metric's name, not a pattern): Prometheus's exposition sample (`_total`) `or` the OpenTelemetry metric it came
    from (OTel's Prometheus receiver drops the suffix). CloudWatch documents neither; `or` keeps the first that has
    series, so the sum never counts twice."""
    return " or ".join(
        f'sum(increase({{{{__name__="{stored}",{{sel}}}}}}[{{w}}]))' for stored in (f"{name}_total", name)
    )


TABLE: tuple[ServerMetric, ...] = (
    ServerMetric(
        "spec_acceptance",
        ("vllm:spec_decode_num_accepted_tokens", "vllm:spec_decode_num_draft_tokens"),
        "counter",
        "share 0-1",
        "accepted / drafted tokens over the window (vLLM's own PromQL, SpecDecodingProm's docstring)",
        f"({_counter('vllm:spec_decode_num_accepted_tokens')}) / ({_counter('vllm:spec_decode_num_draft_tokens')})",
        None,
        VLLM_SPEC,
    ),
    ServerMetric(
        "kv_cache_usage_max",
        ("vllm:kv_cache_usage_perc",),
        "gauge",
        "share 0-1",
        "highest sample in the window, over instances",
        'max(max_over_time({{"vllm:kv_cache_usage_perc",{sel}}}[{w}]))',
        None,
        VLLM_LOGGERS,
    ),
    ServerMetric(
        "kv_cache_usage_mean",
        ("vllm:kv_cache_usage_perc",),
        "gauge",
        "share 0-1",
        "mean of the samples in the window, over instances",
        'avg(avg_over_time({{"vllm:kv_cache_usage_perc",{sel}}}[{w}]))',
        None,
        VLLM_LOGGERS,
    ),
    ServerMetric(
        "preemptions",
        ("vllm:num_preemptions",),
        "counter",
        "requests",
        "preempted requests over the window, summed over instances",
        _counter("vllm:num_preemptions"),
        None,
        VLLM_LOGGERS,
    ),
    ServerMetric(
        "queue_time_p99_s",
        ("vllm:request_queue_time_seconds",),
        "histogram",
        "seconds",
        "p99 of the time requests waited before running (histogram buckets over the window)",
        'histogram_quantile(0.99, sum by (le) (increase({{"vllm:request_queue_time_seconds_bucket",{sel}}}[{w}]))) '
        'or histogram_quantile(0.99, sum(increase({{"vllm:request_queue_time_seconds",{sel}}}[{w}])))',
        None,
        VLLM_LOGGERS,
    ),
    ServerMetric(
        "queue_time_mean_s",
        ("vllm:request_queue_time_seconds",),
        "histogram",
        "seconds",
        "mean time requests waited before running (histogram sum / count over the window)",
        '(sum(increase({{"vllm:request_queue_time_seconds_sum",{sel}}}[{w}])) / '
        'sum(increase({{"vllm:request_queue_time_seconds_count",{sel}}}[{w}]))) '
        'or (histogram_sum(sum(increase({{"vllm:request_queue_time_seconds",{sel}}}[{w}]))) / '
        'histogram_count(sum(increase({{"vllm:request_queue_time_seconds",{sel}}}[{w}]))))',
        None,
        VLLM_LOGGERS,
    ),
    ServerMetric(
        "prefix_cache_hit_rate",
        ("vllm:prefix_cache_hits", "vllm:prefix_cache_queries"),
        "counter",
        "share 0-1",
        "cached / queried prompt tokens over the window",
        f"({_counter('vllm:prefix_cache_hits')}) / ({_counter('vllm:prefix_cache_queries')})",
        None,
        VLLM_LOGGERS,
    ),
    ServerMetric(
        "running_max",
        ("vllm:num_requests_running",),
        "gauge",
        "requests",
        "most requests in the batch at once on one instance",
        'max(max_over_time({{"vllm:num_requests_running",{sel}}}[{w}]))',
        None,
        VLLM_LOGGERS,
    ),
    ServerMetric(
        "waiting_max",
        ("vllm:num_requests_waiting",),
        "gauge",
        "requests",
        "most requests waiting at once, summed over instances",
        'sum(max_over_time({{"vllm:num_requests_waiting",{sel}}}[{w}]))',
        None,
        VLLM_LOGGERS,
    ),
)
FIGURES = tuple(metric.figure for metric in TABLE)


def window_duration(start: float, end: float) -> str:
    """The window as a PromQL duration (whole seconds, at least one)."""
    if not end > start:
        raise ValueError(f"the window ends ({end}) before it starts ({start})")
    return f"{max(1, math.ceil(end - start))}s"


def selector(endpoint: str) -> str:
    """The label matcher picking one endpoint's series (the value quoted as PromQL's strings are: JSON-style)."""
    return f'"{ENDPOINT_LABEL}"={json.dumps(endpoint)}'


def queries(endpoint: str, start: float, end: float) -> dict[str, str]:
    """Each figure's PromQL instant query, evaluated at `end`, over [start, end] of `endpoint`'s series."""
    sel, window = selector(endpoint), window_duration(start, end)
    return {metric.figure: metric.promql.format(sel=sel, w=window) for metric in TABLE}


def figure_of(promql: str) -> tuple[str, str] | None:
    """(figure, endpoint) a query of `queries` asks for, or None: what an emulated CloudWatch answers by."""
    import re

    label = f'"{re.escape(ENDPOINT_LABEL)}"='
    for metric in TABLE:
        pattern = re.escape(metric.promql.format(sel="SELECTOR", w="WINDOW")).replace("WINDOW", "[0-9]+s")
        pattern = pattern.replace("SELECTOR", label + '(?P<endpoint>"(?:[^"\\\\]|\\\\.)*")', 1)
        match = re.fullmatch(pattern.replace("SELECTOR", label + "(?P=endpoint)"), promql)
        if match is not None:
            return metric.figure, json.loads(match.group("endpoint"))
    return None


def scalar_of(answer: Mapping[str, Any]) -> tuple[float | None, str | None]:
    """One number from a QueryMetrics answer (Prometheus's JSON: status, data.resultType, data.result) and why not.
    An empty vector (no such series), NaN (0/0: nothing drafted, no query) or an error answer is (None, why)."""
    if answer.get("status") != "success":
        return None, f"query failed: {answer.get('errorType', 'error')}: {answer.get('error', 'no reason given')}"
    data = answer.get("data") or {}
    kind, result = data.get("resultType"), data.get("result")
    sample: Any
    if kind == "scalar" and isinstance(result, list) and len(result) == 2:
        sample = result
    elif kind == "vector" and isinstance(result, list):
        if not result:
            return None, "no series in the window"
        if len(result) > 1:
            return None, f"{len(result)} series where the query sums to one"
        sample = (result[0] or {}).get("value")
    else:
        return None, f"unexpected answer of type {kind!r}"
    try:
        value = float(sample[1])
    except (TypeError, ValueError, IndexError):
        return None, f"unreadable value {sample!r}"
    if not math.isfinite(value):
        return None, "no data to divide (0/0) in the window"
    return value, None


def figures_from_answers(answers: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """Figures of one side from the QueryMetrics answers by figure: {figure: value or None, "missing": {figure: why}}.
    A figure without an answer is missing, never zero."""
    figures: dict[str, Any] = {}
    missing: dict[str, str] = {}
    for figure in FIGURES:
        answer = answers.get(figure)
        value, why = (None, "not queried") if answer is None else scalar_of(answer)
        figures[figure] = value
        if why is not None:
            missing[figure] = why
    figures["missing"] = missing
    return figures


Transport = Callable[[str, float], Mapping[str, Any]]  # (PromQL, evaluation time) -> the decoded answer


def signed_transport(region: str, *, timeout_s: float = 30.0) -> Transport:
    """QueryMetrics over HTTPS, signed with the caller's credentials (botocore's SigV4, service "monitoring")."""
    import boto3
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest

    url = f"https://monitoring.{region}.amazonaws.com{QUERY_PATH}"
    credentials = boto3.Session().get_credentials()
    if credentials is None:
        raise RuntimeError("no AWS credentials to sign CloudWatch's QueryMetrics with")

    def query(promql: str, at: float) -> Mapping[str, Any]:
        body = urllib.parse.urlencode({"query": promql, "time": f"{at:.3f}"})
        request = AWSRequest(
            method="POST", url=url, data=body, headers={"Content-Type": "application/x-www-form-urlencoded"}
        )
        SigV4Auth(credentials.get_frozen_credentials(), SIGNING_SERVICE, region).add_auth(request)
        prepared = urllib.request.Request(url, data=body.encode(), headers=dict(request.headers), method="POST")
        try:
            with urllib.request.urlopen(prepared, timeout=timeout_s) as response:
                return json.loads(response.read())
        except urllib.error.HTTPError as error:  # Prometheus's error answers are JSON too
            try:
                return json.loads(error.read())
            except ValueError:
                return {"status": "error", "errorType": f"HTTP {error.code}", "error": str(error.reason)}

    return query


def epoch(value: float | str) -> float:
    """Epoch seconds from a number or an ISO 8601 time (Step Functions' $$.Execution.StartTime, EnteredTime)."""
    if isinstance(value, int | float):
        return float(value)
    from datetime import datetime

    return datetime.fromisoformat(str(value).replace("Z", "+00:00")).timestamp()


def read_window(transport: Transport, endpoint: str, start: float, end: float) -> dict[str, Any]:
    """One endpoint's figures over [start, end] (epoch seconds). A query that raises is missing with its reason."""
    answers: dict[str, Mapping[str, Any]] = {}
    for figure, promql in queries(endpoint, start, end).items():
        try:
            answers[figure] = transport(promql, end)
        except Exception as error:  # any failure of one query: that figure missing, said why
            answers[figure] = {"status": "error", "errorType": type(error).__name__, "error": str(error)}
    return {"endpoint": endpoint, "start": start, "end": end, **figures_from_answers(answers)}


def read_sides(transport: Transport, event: Mapping[str, Any]) -> dict[str, Any]:
    """The reader function's server_metrics event: {"sides": {"baseline": endpoint, "candidate": endpoint},
    "start": time, "end": time} -> each side's figures over the window (optigate.gate.server_metrics reads them)."""
    start, end = epoch(event["start"]), epoch(event["end"])
    return {side: read_window(transport, str(name), start, end) for side, name in dict(event["sides"]).items()}
