"""CloudWatch as the gate reads it: SageMaker's per-variant and per-inference-component metrics of a window,
percentile statistics (moto knows Sum/Average/Minimum/Maximum/SampleCount only), and the container metrics
detailed observability publishes (QueryMetrics, which moto does not know: answered from the emulators' /metrics)."""

from __future__ import annotations

import datetime as _dt
import re
from collections.abc import Callable, Mapping
from typing import Any

from optigate.bench.server_metrics import Transport, figure_of
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


# --------------------------------------------------------------------------- the container metrics (QueryMetrics)

_SAMPLE = re.compile(r"^(?P<name>[A-Za-z_:][A-Za-z0-9_:]*)(?:\{(?P<labels>[^}]*)\})?\s+(?P<value>\S+)")


def prometheus_samples(text: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    """Prometheus's text exposition (as vLLM's /metrics serves it) by sample name: (labels, value) pairs."""
    samples: dict[str, list[tuple[dict[str, str], float]]] = {}
    for line in text.splitlines():
        match = _SAMPLE.match(line.strip())
        if match is None or line.startswith("#"):
            continue
        labels = dict(re.findall(r'([A-Za-z_][A-Za-z0-9_]*)="((?:[^"\\]|\\.)*)"', match.group("labels") or ""))
        try:
            samples.setdefault(match.group("name"), []).append((labels, float(match.group("value"))))
        except ValueError:
            continue
    return samples


def _total(samples: dict[str, list[tuple[dict[str, str], float]]], name: str) -> float | None:
    found = samples.get(name)
    return sum(value for _, value in found) if found else None


def _ratio(top: float | None, bottom: float | None) -> float | None:
    return top / bottom if top is not None and bottom else None


def _quantile(samples: dict[str, list[tuple[dict[str, str], float]]], name: str, q: float) -> float | None:
    """Prometheus's histogram_quantile over `name`'s buckets, summed over series (linear inside the bucket)."""
    buckets: dict[float, float] = {}
    for labels, value in samples.get(f"{name}_bucket", []):
        bound = float(labels.get("le", "nan"))
        buckets[bound] = buckets.get(bound, 0.0) + value
    bounds = sorted(b for b in buckets if b == b)
    if not bounds or not buckets[bounds[-1]]:
        return None
    rank, below, lower = q * buckets[bounds[-1]], 0.0, 0.0
    for bound in bounds:
        if buckets[bound] >= rank:
            if bound == float("inf"):
                return lower
            return lower + (bound - lower) * (rank - below) / max(buckets[bound] - below, 1e-12)
        below, lower = buckets[bound], bound
    return None


def figures_from_exposition(text: str) -> dict[str, float | None]:
    """The table's figures (optigate.bench.server_metrics) from one scrape: counters as totals since the emulator
    started (the rehearsal's emulators serve one gate run at a time), gauges as scraped."""
    s = prometheus_samples(text)
    kv = _total(s, "vllm:kv_cache_usage_perc")
    return {
        "spec_acceptance": _ratio(
            _total(s, "vllm:spec_decode_num_accepted_tokens_total"),
            _total(s, "vllm:spec_decode_num_draft_tokens_total"),
        ),
        "kv_cache_usage_max": kv,
        "kv_cache_usage_mean": kv,
        "preemptions": _total(s, "vllm:num_preemptions_total"),
        "queue_time_p99_s": _quantile(s, "vllm:request_queue_time_seconds", 0.99),
        "queue_time_mean_s": _ratio(
            _total(s, "vllm:request_queue_time_seconds_sum"), _total(s, "vllm:request_queue_time_seconds_count")
        ),
        "prefix_cache_hit_rate": _ratio(
            _total(s, "vllm:prefix_cache_hits_total"), _total(s, "vllm:prefix_cache_queries_total")
        ),
        "running_max": _total(s, "vllm:num_requests_running"),
        "waiting_max": _total(s, "vllm:num_requests_waiting"),
    }


def emulated_query_metrics(url_of: Callable[[str], str | None], *, timeout_s: float = 5.0) -> Transport:
    """CloudWatch's QueryMetrics as the rehearsal answers it: the figure a query asks for, scraped from the
    /metrics of the emulator serving the endpoint it names (`url_of`); an endpoint without one, an emulator without
    /metrics or a figure it does not publish answers an empty vector, as CloudWatch does for a series it lacks."""
    import urllib.request

    empty = {"status": "success", "data": {"resultType": "vector", "result": []}}

    def query(promql: str, at: float) -> Mapping[str, Any]:
        asked = figure_of(promql)
        url = url_of(asked[1]) if asked is not None else None
        if asked is None or url is None:
            return empty
        try:
            with urllib.request.urlopen(f"{url.rstrip('/')}/metrics", timeout=timeout_s) as response:
                text = response.read().decode()
        except OSError:
            return empty
        value = figures_from_exposition(text).get(asked[0])
        if value is None:
            return empty
        sample = {"metric": {}, "value": [at, str(value)]}
        return {"status": "success", "data": {"resultType": "vector", "result": [sample]}}

    return query
