"""The server-metrics table and its reading: PromQL per figure, QueryMetrics answers to figures, missing never zero."""

from __future__ import annotations

import pytest

from optigate.bench import server_metrics as sm


def vector(value: str) -> dict:
    return {"status": "success", "data": {"resultType": "vector", "result": [{"metric": {}, "value": [1.0, value]}]}}


EMPTY = {"status": "success", "data": {"resultType": "vector", "result": []}}


def test_every_figure_has_a_query_on_the_endpoint_label_over_the_window():
    found = sm.queries("optigate-team-cand-r1", 1000.0, 1300.5)
    assert set(found) == set(sm.FIGURES)
    for figure, promql in found.items():
        assert '"aws.sagemaker.endpoint.name"="optigate-team-cand-r1"' in promql, figure
        assert "[301s]" in promql, figure
    # A counter under either stored name (Prometheus's `_total` sample or the OTel metric), each exactly.
    import re

    names = re.findall(r'__name__="([^"]+)"', found["spec_acceptance"])
    assert names == [
        "vllm:spec_decode_num_accepted_tokens_total",
        "vllm:spec_decode_num_accepted_tokens",
        "vllm:spec_decode_num_draft_tokens_total",
        "vllm:spec_decode_num_draft_tokens",
    ]
    # A histogram as classic buckets or, failing those, one native histogram.
    assert '"vllm:request_queue_time_seconds_bucket"' in found["queue_time_p99_s"]
    assert ' or histogram_quantile(0.99, sum(increase({"vllm:request_queue_time_seconds",' in found["queue_time_p99_s"]


def test_every_selector_names_its_metric_exactly_as_cloudwatchs_queryMetrics_requires():
    """QueryMetrics: "The expression must select a metric by name — for example, {"x"} or {__name__="x"}. Selecting
    series only by labels, without a metric name, is not supported" (CloudWatch-PromQL-API-QueryMetrics.html). A
    regular expression on __name__ is not among those forms: a refusal would read as a missing figure."""
    import re

    exact = re.compile(r'^(?:"[^"]+"|__name__="[^"]+"),"aws\.sagemaker\.endpoint\.name"="ep"$')
    for figure, promql in sm.queries("ep", 0.0, 60.0).items():
        selectors = re.findall(r"\{([^{}]*)\}", promql)
        assert selectors, figure
        for selector in selectors:
            assert exact.match(selector), (figure, selector)


def test_the_reader_may_call_everything_queryMetrics_is_documented_to_need():
    """CloudWatch's QueryMetrics page names GetMetricData and ListMetrics; SageMaker's detailed-observability PromQL
    page adds QueryMetrics (monitoring-detailed-observability-promql.html): all three."""
    assert set(sm.QUERY_ACTIONS) == {"cloudwatch:GetMetricData", "cloudwatch:ListMetrics", "cloudwatch:QueryMetrics"}


def test_the_table_says_aws_documents_no_stored_name_and_cites_vllm():
    assert all(metric.aws_documented is None for metric in sm.TABLE)
    assert all("vllm-project/vllm" in metric.source for metric in sm.TABLE)
    names = {name for metric in sm.TABLE for name in metric.series}
    assert {"vllm:kv_cache_usage_perc", "vllm:num_preemptions", "vllm:request_queue_time_seconds"} <= names


def test_a_window_that_ends_before_it_starts_is_refused():
    with pytest.raises(ValueError, match="ends"):
        sm.window_duration(10.0, 10.0)


@pytest.mark.parametrize(
    ("answer", "why"),
    [
        (EMPTY, "no series"),
        (vector("NaN"), "0/0"),
        ({"status": "error", "errorType": "bad_data", "error": "parse error"}, "bad_data"),
        ({"status": "success", "data": {"resultType": "matrix", "result": []}}, "unexpected"),
        (vector("x"), "unreadable"),
        (
            {"status": "success", "data": {"resultType": "vector", "result": [{"value": [1, "1"]}] * 2}},
            "2 series",
        ),
    ],
)
def test_unusable_answers_are_missing_with_a_reason_never_zero(answer, why):
    value, reason = sm.scalar_of(answer)
    assert value is None
    assert why in reason


def test_read_window_turns_answers_into_figures_and_a_failing_query_into_a_missing_one():
    asked: list[tuple[str, float]] = []

    def transport(promql: str, at: float):
        asked.append((promql, at))
        if "spec_decode" in promql:
            raise ConnectionError("refused")
        if "kv_cache_usage_perc" in promql and promql.startswith("max"):
            return vector("0.97")
        return EMPTY

    figures = sm.read_window(transport, "ep", 100.0, 400.0)
    assert figures["kv_cache_usage_max"] == pytest.approx(0.97)
    assert figures["spec_acceptance"] is None
    assert "ConnectionError" in figures["missing"]["spec_acceptance"]
    assert figures["preemptions"] is None and figures["missing"]["preemptions"] == "no series in the window"
    assert {at for _, at in asked} == {400.0}
    assert len(asked) == len(sm.FIGURES)


def test_read_sides_reads_both_endpoints_from_step_functions_times():
    seen: set[str] = set()

    def transport(promql: str, at: float):
        seen.add(promql.split('"aws.sagemaker.endpoint.name"=')[1].split('"')[1])
        return vector("0.5")

    out = sm.read_sides(
        transport,
        {"sides": {"baseline": "twin", "candidate": "cand"}, "start": "2026-12-01T00:00:00Z", "end": 1796083260.0},
    )
    assert seen == {"twin", "cand"}
    assert out["candidate"]["start"] == pytest.approx(1796083200.0)
    assert out["baseline"]["prefix_cache_hit_rate"] == pytest.approx(0.5)


def test_the_signed_transport_posts_a_sigv4_signed_query_to_cloudwatchs_promql_endpoint(monkeypatch):
    import io
    import urllib.request

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    sent: list[urllib.request.Request] = []

    def urlopen(request, timeout):
        sent.append(request)
        return io.BytesIO(b'{"status": "success", "data": {"resultType": "vector", "result": []}}')

    monkeypatch.setattr(urllib.request, "urlopen", urlopen)
    answer = sm.signed_transport("eu-west-1")('{"vllm:kv_cache_usage_perc"}', 1796083200.0)
    assert answer["status"] == "success"
    (request,) = sent
    assert request.full_url == "https://monitoring.eu-west-1.amazonaws.com/api/v1/query"
    assert request.get_method() == "POST"
    authorization = request.get_header("Authorization")
    assert "AWS4-HMAC-SHA256" in authorization and "/eu-west-1/monitoring/aws4_request" in authorization
    assert b"time=1796083200.000" in request.data and b"query=" in request.data


def test_the_reader_function_answers_its_server_metrics_event(monkeypatch):
    from optigate.rehearse.gate_handlers import load_handler

    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setattr(sm, "signed_transport", lambda region: lambda promql, at: vector("0.25"))
    out = load_handler("read_server_metrics")(
        {"server_metrics": {"sides": {"baseline": "t", "candidate": "c"}, "start": 0.0, "end": 60.0}}, None
    )
    assert out["candidate"]["kv_cache_usage_mean"] == pytest.approx(0.25) and out["baseline"]["endpoint"] == "t"
