"""The report's rounds: the headline, the cost, each look's undecided checks, and the plot of each look's interval
(from a verdict judged round by round, optigate.gate.decision.looks)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from optigate.bench.plots import png
from optigate.gate.decision.looks import Looks, judge_round, rounds_summary
from optigate.gate.report import render_html
from optigate.gate.rounds_report import _panels, rounds_figure
from tests.fixtures.round_inputs import inputs
from tests.fixtures.synthetic_runs import THRESHOLDS

AT_LEAST_AS_FAST = {**THRESHOLDS, "min_throughput_gain_pct": 0.0}


def _path_and_verdict():
    looks = Looks(3, 4)
    path = [judge_round(inputs(rounds, AT_LEAST_AS_FAST), looks) for rounds in (3, 4)]
    last = path[-1]
    summary = rounds_summary(last, looks, minutes=12.0, price_per_hour_usd=1.5, instance_count=2)
    summary["path"] = [judgement.to_dict() for judgement in path]
    assert last.verdict is not None
    return summary, last.verdict


def test_the_report_says_the_rounds_why_they_stopped_and_what_they_cost():
    summary, verdict = _path_and_verdict()
    assert summary["endpoint_minutes"] == 48.0  # 2 endpoints x 2 instances x 12 minutes
    assert summary["usd"] == pytest.approx(48 / 60 * 1.5)
    page = render_html(replace(verdict, rounds=summary))
    assert "<h2>Rounds</h2><p><b>4 of at most 4 rounds</b>: after 4 rounds (97.5 % intervals): the budget" in page
    assert "12.0 minutes of benchmark on both endpoints: 48.0 endpoint-minutes, $1.20" in page
    assert "<tr><td>3</td><td>INCONCLUSIVE</td><td>throughput_gain@c1, throughput_gain@c8</td></tr>" in page


def test_the_plot_shows_the_undecided_checks_first_with_every_look():
    summary, _ = _path_and_verdict()
    panels = _panels(summary["path"])
    assert [label for label, _, _ in panels[:2]] == ["throughput_gain at c=1", "throughput_gain at c=8"]
    _, points, threshold = panels[0]
    assert [p[0] for p in points] == [3, 4] and threshold == 0.0
    assert all(low <= estimate <= high for _, low, estimate, high in points)
    assert png(rounds_figure(summary["path"])).startswith(b"\x89PNG")
    assert rounds_figure([]) is None
    assert rounds_figure(summary["path"][-1:]) is None  # one look (a fixed size): no path to draw
