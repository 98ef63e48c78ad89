"""The gate in rounds (optigate.gate.decision.looks): each look spends its share of the 95 %, a clear change stops at
the first look, a borderline one goes on and ends at its budget INCONCLUSIVE, saying what more would decide."""

from __future__ import annotations

import pytest

from optigate import stats
from optigate.gate.decision.looks import BUDGET, CONTINUE, DECIDED, FAILED, Looks, judge_round, rounds_to_decide
from optigate.gate.decision.wording import CheckName
from optigate.judge import Check, Outcome
from tests.fixtures.round_inputs import inputs
from tests.fixtures.synthetic_runs import THRESHOLDS, itl_for_gain


def test_each_look_spends_an_equal_share_of_the_five_percent():
    looks = Looks(min_rounds=4, max_rounds=12)
    assert looks.count == 9
    assert looks.confidence == pytest.approx(1 - 0.05 / 9)
    assert Looks(1, 1).confidence == pytest.approx(stats.CONFIDENCE)  # one look: today's fixed design
    # 25 replicates in each tail, and the default count wherever a verdict was calibrated at it.
    assert stats.replicates_for(stats.CONFIDENCE) == stats.REPLICATES
    assert stats.replicates_for(looks.confidence) == pytest.approx(50 / (0.05 / 9), abs=1)
    for bad in ((0, 4), (5, 4)):
        with pytest.raises(ValueError, match="min_rounds"):
            Looks(*bad)
    with pytest.raises(ValueError, match="max_minutes"):
        Looks(2, 4, max_minutes=0)


def test_before_the_minimum_it_does_not_look():
    judged = judge_round(inputs(2, THRESHOLDS), Looks(3, 8))
    assert (judged.stop, judged.reason, judged.verdict) == (False, CONTINUE, None)
    assert "round 2 of at least 3" in judged.why


def test_a_clear_gain_stops_at_the_first_look():
    thresholds = {**THRESHOLDS, "min_throughput_gain_pct": 10.0}
    judged = judge_round(inputs(3, thresholds, itl_ms=itl_for_gain(0.4)), Looks(3, 10))
    assert (judged.stop, judged.reason) == (True, DECIDED), judged.why
    assert judged.benchmark_outcome == "APPROVED"
    gain = next(c for c in judged.benchmark_checks if c.name == CheckName.THROUGHPUT_GAIN)
    assert f"{100 * Looks(3, 10).confidence:.3g} % CI" in gain.detail  # the look's level, said where it is shown


def test_a_clear_loss_stops_at_the_first_look_rejected():
    thresholds = {**THRESHOLDS, "min_throughput_gain_pct": 0.0}
    judged = judge_round(inputs(3, thresholds, itl_ms=itl_for_gain(-0.4)), Looks(3, 10))
    assert (judged.stop, judged.reason) == (True, FAILED), judged.why
    assert judged.benchmark_outcome == "REJECTED"
    assert "throughput" in judged.why


def test_a_change_on_the_threshold_goes_on_then_ends_inconclusive_at_the_budget():
    # A/A against a 0 % minimum gain: the estimate sits on the threshold, no budget decides it.
    thresholds = {**THRESHOLDS, "min_throughput_gain_pct": 0.0}
    middle = judge_round(inputs(4, thresholds), Looks(3, 6))
    assert (middle.stop, middle.reason) == (False, CONTINUE), middle.why
    assert "undecided" in middle.why and "throughput" in middle.why
    end = judge_round(inputs(6, thresholds), Looks(3, 6))
    assert (end.stop, end.reason) == (True, BUDGET), end.why
    assert end.benchmark_outcome == "INCONCLUSIVE"
    assert "the budget of 6 rounds is spent; still undecided: throughput_gain@c1 (" in end.why
    assert "no practical budget" in end.why  # A/A: more rounds will not settle it
    row = next(r for r in end.to_dict()["checks"] if r["name"] == "throughput_gain")  # type: ignore[union-attr]
    assert row["ci_low"] < 0 < row["ci_high"]


def test_the_time_budget_stops_before_a_round_that_would_pass_it():
    thresholds = {**THRESHOLDS, "min_throughput_gain_pct": 0.0}
    judged = judge_round(inputs(4, thresholds), Looks(3, 8, max_minutes=10), minutes_spent=9)
    assert (judged.stop, judged.reason) == (True, BUDGET)
    assert "one more round would end at about 11 of the budget's 10 minutes" in judged.why
    assert not judge_round(inputs(4, thresholds), Looks(3, 8, max_minutes=60), minutes_spent=9).stop


def test_quality_is_not_the_rounds_to_decide():
    # No evaluation yet (it runs after the rounds): its failing check does not stop the benchmark.
    thresholds = {**THRESHOLDS, "min_throughput_gain_pct": 10.0}
    judged = judge_round(inputs(3, thresholds, itl_ms=itl_for_gain(0.4)), Looks(3, 10))
    assert judged.verdict is not None
    assert any(c.name == CheckName.QUALITY and c.outcome is Outcome.FAIL for c in judged.verdict.checks)
    assert judged.reason == DECIDED


def test_a_borderline_change_says_how_many_rounds_would_decide_it():
    # 4 % faster against a 0 % minimum: at the budget its interval still straddles, but a few budgets more would do.
    thresholds = {**THRESHOLDS, "min_throughput_gain_pct": 0.0}
    end = judge_round(inputs(4, thresholds, itl_ms=itl_for_gain(0.04)), Looks(3, 4))
    assert end.reason == BUDGET, end.why
    assert "rounds would decide it, the budget is 4" in end.why


def test_a_narrower_interval_would_decide_in_about_the_square_of_its_ratio():
    check = Check(CheckName.THROUGHPUT_GAIN, Outcome.INCONCLUSIVE, 6.0, 0.0, "", -2.0, 14.0, 1)
    assert rounds_to_decide(check, 4) == 4 * (8 / 6) ** 2 // 1 + 1  # half-width 8 must shrink to 6
    on_threshold = Check(CheckName.THROUGHPUT_GAIN, Outcome.INCONCLUSIVE, 0.0, 0.0, "", -2.0, 2.0, 1)
    assert rounds_to_decide(on_threshold, 4) is None
    assert rounds_to_decide(Check(CheckName.ERROR_RATE, Outcome.PASS, 0.0, 0.01, ""), 4) is None
