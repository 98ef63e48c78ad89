"""Server figures in the verdict: speculation below break-even fails, unpublished cannot pass; the rest is reported."""

from __future__ import annotations

import pytest

from optigate.gate.decision.wording import reason
from optigate.gate.server_metrics import acceptance_check, figures_to_report
from optigate.judge import Outcome

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


def check(figures, change=SPECULATING, **kwargs):
    return acceptance_check(figures, change, **kwargs)


def test_acceptance_below_break_even_fails_and_the_reason_names_it():
    result = check({"baseline": side(), "candidate": side(spec_acceptance=0.31)})
    assert result.outcome is Outcome.FAIL and result.measured == 0.31 and result.threshold == 0.40
    text = reason(result)
    assert "31%" in text and "40%" in text and "eagle3" in text


def test_acceptance_at_or_above_break_even_passes():
    assert check({"baseline": side(), "candidate": side(spec_acceptance=0.62)}).outcome is Outcome.PASS
    assert check({"baseline": side(), "candidate": side(spec_acceptance=0.40)}).outcome is Outcome.PASS


def test_a_planner_break_even_replaces_the_rule_of_thumb():
    figures = {"baseline": side(), "candidate": side(spec_acceptance=0.5)}
    assert check(figures, break_even=0.55).outcome is Outcome.FAIL
    assert check(figures, break_even=0.45).outcome is Outcome.PASS


@pytest.mark.parametrize(
    "figures",
    [
        {"baseline": side(), "candidate": side(missing={"spec_acceptance": "no series in the window"})},
        None,
        {},
        {"candidate": "garbage"},
        {"candidate": side(spec_acceptance="0.9")},
        {"candidate": side(spec_acceptance=True)},
    ],
)
def test_speculation_without_published_acceptance_is_never_a_pass(figures):
    result = check(figures)
    assert result.outcome is Outcome.INCONCLUSIVE and result.measured is None
    assert "published no acceptance" in reason(result)


def test_no_speculation_no_check_whatever_the_figures():
    assert check(None, {"quantization": "fp8"}) is None
    assert check({"candidate": side(spec_acceptance=0.1)}, {"speculative_decoding": "none"}) is None


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
