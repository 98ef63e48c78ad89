"""Server figures in the verdict: speculation below break-even (or unpublished) is a reason; the rest is reported."""

from __future__ import annotations

from optigate.gate.server_metrics import figures_to_report, server_metric_reasons

SPECULATING = {"speculative_decoding": {"method": "eagle3", "num_speculative_tokens": 4}}


def side(**values) -> dict:
    figures = {
        "spec_acceptance": None,
        "kv_cache_usage_max": 0.5,
        "kv_cache_usage_mean": 0.3,
        "preemptions": 0.0,
        "queue_time_p99_s": 0.02,
        "queue_time_mean_s": 0.01,
        "prefix_cache_hit_rate": 0.2,
        "waiting_max": 1.0,
        "missing": {},
        "endpoint": "ep",
        "start": 1.0,
        "end": 2.0,
    }
    figures.update(values)
    return figures


def test_acceptance_below_break_even_is_named_in_the_reasons():
    reasons = server_metric_reasons({"baseline": side(), "candidate": side(spec_acceptance=0.31)}, SPECULATING)
    assert len(reasons) == 1
    assert "31%" in reasons[0] and "40%" in reasons[0] and "eagle3" in reasons[0]


def test_acceptance_above_break_even_gives_no_reason():
    assert server_metric_reasons({"baseline": side(), "candidate": side(spec_acceptance=0.62)}, SPECULATING) == []


def test_a_planner_break_even_replaces_the_rule_of_thumb():
    figures = {"baseline": side(), "candidate": side(spec_acceptance=0.5)}
    assert server_metric_reasons(figures, SPECULATING, break_even=0.55)
    assert not server_metric_reasons(figures, SPECULATING, break_even=0.45)


def test_speculation_without_published_acceptance_fails_closed():
    missing = side(missing={"spec_acceptance": "no series in the window"})
    reasons = server_metric_reasons({"baseline": side(), "candidate": missing}, SPECULATING)
    assert len(reasons) == 1 and "no series in the window" in reasons[0]
    assert server_metric_reasons(None, SPECULATING)
    assert server_metric_reasons({"candidate": "garbage"}, SPECULATING)


def test_no_speculation_no_reason_whatever_the_figures():
    assert server_metric_reasons(None, {"quantization": "fp8"}) == []
    assert server_metric_reasons(None, {"speculative_decoding": "none"}) == []


def test_report_has_both_sides_per_figure_and_findings():
    report = figures_to_report(
        {
            "baseline": side(),
            "candidate": side(
                kv_cache_usage_max=0.98,
                preemptions=12.0,
                prefix_cache_hit_rate=0.6,
                waiting_max=None,
                missing={"waiting_max": "no series in the window"},
            ),
        }
    )
    assert report["available"] is True
    rows = {row["figure"]: row for row in report["rows"]}
    assert rows["kv_cache_usage_max"]["baseline"] == 0.5 and rows["kv_cache_usage_max"]["candidate"] == 0.98
    assert report["missing"]["candidate"]["waiting_max"] == "no series in the window"
    assert "spec_acceptance" in report["missing"]["baseline"]
    text = " ".join(report["findings"])
    assert "98%" in text and "preempted 12" in text and "60%" in text


def test_report_without_figures_says_so():
    assert figures_to_report(None)["available"] is False
    assert figures_to_report({"baseline": 3})["available"] is False
