"""The gate benchmark's traffic mix for adapter teams: shares from CloudWatch's per-component invocations (a
refusal without history), the GetMetricData request in botocore's shape, and the configured mix normalised."""

from __future__ import annotations

import math
from datetime import UTC, datetime

import botocore.session
import pytest
from botocore.validate import ParamValidator

from optigate.deployment.adapter_mix import (
    NoInvocationHistory,
    benchmark_components,
    invocations_from_metric_data,
    invocations_query,
    mix_from_invocations,
    resolved_mix,
)

COMPONENTS = {"base": "support-prod-base", "reply": "support-prod-reply", "summarize": "support-prod-summarize"}


def test_shares_follow_the_invocation_counts():
    assert mix_from_invocations({"base": 100, "reply": 300, "summarize": 0}) == {"base": 0.25, "reply": 0.75}


@pytest.mark.parametrize("counts", [{}, {"base": 0, "reply": 0}])
def test_no_history_is_refused_never_guessed(counts):
    with pytest.raises(NoInvocationHistory, match="adapter_mix"):
        mix_from_invocations(counts)


@pytest.mark.parametrize("bad", [-1, math.nan, math.inf])
def test_a_count_must_be_finite_and_not_negative(bad):
    with pytest.raises(ValueError, match="finite count"):
        mix_from_invocations({"base": 10, "reply": bad})


def test_the_query_reads_seven_days_of_invocations_per_component_in_botocore_s_shape():
    end = datetime(2026, 12, 1, tzinfo=UTC)
    request = invocations_query(COMPONENTS, end=end)
    model = botocore.session.get_session().get_service_model("cloudwatch")
    report = ParamValidator().validate(request, model.operation_model("GetMetricData").input_shape)
    assert not report.has_errors(), report.generate_report()
    [first, *_] = request["MetricDataQueries"]
    assert first["MetricStat"]["Metric"] == {
        "Namespace": "AWS/SageMaker",
        "MetricName": "Invocations",
        "Dimensions": [{"Name": "InferenceComponentName", "Value": "support-prod-base"}],
    }
    assert first["MetricStat"]["Period"] == 7 * 24 * 3600 and first["MetricStat"]["Stat"] == "Sum"
    assert request["StartTime"] == "2026-11-24T00:00:00+00:00"
    ids = [query["Id"] for query in request["MetricDataQueries"]]
    assert len(set(ids)) == 3 and all(i[0].islower() and i.replace("_", "").isalnum() for i in ids)
    assert "StartTime" not in invocations_query(COMPONENTS)  # the state machine supplies the window


def test_the_answer_reads_back_to_counts_and_an_empty_answer_is_no_history():
    request = invocations_query(COMPONENTS)
    ids = [query["Id"] for query in request["MetricDataQueries"]]
    answer = {"MetricDataResults": [{"Id": ids[0], "Values": [40.0]}, {"Id": ids[1], "Values": [120.0]}]}
    counts = invocations_from_metric_data(answer, COMPONENTS)
    assert counts == {"base": 40.0, "reply": 120.0, "summarize": 0.0}
    assert mix_from_invocations(counts) == {"base": 0.25, "reply": 0.75}
    with pytest.raises(NoInvocationHistory):
        mix_from_invocations(invocations_from_metric_data({}, COMPONENTS))


def test_the_configured_mix_is_normalised_and_checked():
    assert resolved_mix({"base": 1, "reply": 3}, ["reply", "summarize"]) == {"base": 0.25, "reply": 0.75}
    with pytest.raises(ValueError, match="neither `base`"):
        resolved_mix({"base": 1, "replay": 3}, ["reply"])
    with pytest.raises(ValueError, match="finite number above 0"):
        resolved_mix({"base": 1, "reply": math.inf}, ["reply"])


def test_the_worker_event_gets_one_component_per_adapter_of_the_mix():
    event = benchmark_components({"base": 0.25, "reply": 0.75}, COMPONENTS)
    assert event == [
        {"name": "support-prod-base", "adapter": "base", "weight": 0.25},
        {"name": "support-prod-reply", "adapter": "reply", "weight": 0.75},
    ]
    with pytest.raises(ValueError, match="no inference component for triage"):
        benchmark_components({"triage": 1.0}, COMPONENTS)
