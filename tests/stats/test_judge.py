"""optigate.judge: one rule (an interval against a threshold, with its direction) and one Outcome, read
by `bench compare`, the gate's checks and the quality evaluation; each consumer's verdicts on fixed
inputs are what they were before the judge existed.

verdicts_before_the_judge.json holds those verdicts as the package wrote them at commit 5d24b44 (three
judges, before optigate.judge): tests/fixtures/verdict_scenarios.py was run against that commit's optigate/, unchanged
but for one alias (bench.compare's Holm function was called ``judge`` there, ``holm_verdicts`` now).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from optigate.evaluate.quality_verdict import status
from optigate.gate.decision.checks import quality_check
from optigate.gate.decision.wording import WORDS, CheckName
from optigate.judge import EVALUATION_WORDS, Check, Direction, Outcome, classify, compare_change, estimate_only
from optigate.stats import Interval
from tests.fixtures import verdict_scenarios

NAN = math.nan
PASS, FAIL, UNSURE = Outcome.PASS, Outcome.FAIL, Outcome.INCONCLUSIVE
AT_MOST, AT_LEAST = Direction.AT_MOST, Direction.AT_LEAST
BEFORE = json.loads((Path(__file__).parent / "verdicts_before_the_judge.json").read_text())


@pytest.mark.parametrize(
    ("low", "high", "threshold", "direction", "expected"),
    [
        # A budget (at most): the whole interval at or under it passes, wholly over it fails.
        (80.0, 90.0, 100.0, AT_MOST, PASS),
        (80.0, 100.0, 100.0, AT_MOST, PASS),  # the upper end touching the budget
        (90.0, 110.0, 100.0, AT_MOST, UNSURE),  # straddling: cannot tell
        (100.0, 110.0, 100.0, AT_MOST, UNSURE),  # the lower end touching it: not wholly over
        (100.5, 110.0, 100.0, AT_MOST, FAIL),
        # A minimum (at least): the mirror image.
        (12.0, 20.0, 10.0, AT_LEAST, PASS),
        (10.0, 20.0, 10.0, AT_LEAST, PASS),  # the lower end touching the minimum
        (5.0, 15.0, 10.0, AT_LEAST, UNSURE),
        (5.0, 10.0, 10.0, AT_LEAST, UNSURE),  # the upper end touching it: not wholly under
        (5.0, 9.5, 10.0, AT_LEAST, FAIL),
        # Negative thresholds (a tolerated drop) and zero-width intervals (a figure without one).
        (-0.004, -0.001, -0.01, AT_LEAST, PASS),
        (-0.03, -0.02, -0.01, AT_LEAST, FAIL),
        (0.01, 0.01, 0.01, AT_MOST, PASS),
        (0.02, 0.02, 0.01, AT_MOST, FAIL),
        # Missing evidence never passes: NaN anywhere, including an empty sample's interval.
        (NAN, NAN, 100.0, AT_MOST, UNSURE),
        (NAN, 90.0, 100.0, AT_MOST, UNSURE),
        (80.0, NAN, 100.0, AT_MOST, UNSURE),
        (80.0, 90.0, NAN, AT_MOST, UNSURE),
        (NAN, NAN, 10.0, AT_LEAST, UNSURE),
        (5.0, 9.0, NAN, AT_LEAST, UNSURE),
        # Infinite ends are evidence of a kind: wholly on one side still decides.
        (-math.inf, 90.0, 100.0, AT_MOST, PASS),
        (101.0, math.inf, 100.0, AT_MOST, FAIL),
    ],
)
def test_classify(low, high, threshold, direction, expected):
    point = low if math.isnan(high) else high if math.isnan(low) else (low + high) / 2
    assert classify(Interval(point, low, high), threshold, direction) is expected


def test_the_estimate_is_not_what_is_judged_only_the_ends():
    assert classify(Interval(NAN, 80.0, 90.0), 100.0, AT_MOST) is PASS
    assert classify(Interval(150.0, 80.0, 90.0), 100.0, AT_MOST) is PASS


def test_a_figure_without_an_interval_passes_or_fails():
    assert classify(estimate_only(0.01), 0.01, AT_MOST) is PASS
    assert classify(estimate_only(0.0101), 0.01, AT_MOST) is FAIL
    assert classify(estimate_only(NAN), 0.01, AT_MOST) is UNSURE


@pytest.mark.parametrize(
    ("point", "low", "high", "margin", "direction", "expected"),
    [
        # Latency (lower is better), margin 3: a shown change beyond the margin is labelled.
        (-10.0, -14.0, -6.0, 3.0, AT_MOST, Outcome.BETTER),
        (10.0, 6.0, 14.0, 3.0, AT_MOST, Outcome.WORSE),
        (-2.0, -2.5, -1.5, 3.0, AT_MOST, Outcome.EQUIVALENT),  # a real change too small to matter
        (-2.5, -3.4, -0.5, 3.0, AT_MOST, Outcome.INCONCLUSIVE),  # shown, inside the margin, not within it
        (-4.0, -8.0, 0.5, 3.0, AT_MOST, Outcome.INCONCLUSIVE),  # beyond the margin, not shown
        (-4.0, -8.0, 0.0, 3.0, AT_MOST, Outcome.INCONCLUSIVE),  # touching no change is not excluding it
        (-3.0, -3.5, -2.5, 3.0, AT_MOST, Outcome.INCONCLUSIVE),  # the estimate on the margin is not beyond it
        (0.0, -3.0, 3.0, 3.0, AT_MOST, Outcome.EQUIVALENT),  # both ends touching the margins
        # Throughput (higher is better): the same intervals, the words swapped.
        (-10.0, -14.0, -6.0, 3.0, AT_LEAST, Outcome.WORSE),
        (10.0, 6.0, 14.0, 3.0, AT_LEAST, Outcome.BETTER),
        (-2.0, -2.5, -1.5, 3.0, AT_LEAST, Outcome.EQUIVALENT),
        # No margin: any shown change is labelled; no evidence labels nothing.
        (0.5, 0.1, 0.9, 0.0, AT_MOST, Outcome.WORSE),
        (0.0, 0.0, 0.0, 0.0, AT_MOST, Outcome.EQUIVALENT),
        (NAN, NAN, NAN, 3.0, AT_MOST, Outcome.INCONCLUSIVE),
        (NAN, -14.0, -6.0, 3.0, AT_MOST, Outcome.INCONCLUSIVE),  # shown, but no estimate to weigh
        (-10.0, -14.0, -6.0, NAN, AT_MOST, Outcome.INCONCLUSIVE),
    ],
)
def test_compare_change(point, low, high, margin, direction, expected):
    assert compare_change(Interval(point, low, high), margin, direction) is expected


def test_outcomes_are_the_words_reports_write():
    assert [str(o) for o in Outcome] == ["pass", "fail", "inconclusive", "better", "worse", "equivalent"]
    assert json.dumps({"verdict": Outcome.BETTER}) == '{"verdict": "better"}' and f"{Outcome.FAIL}" == "fail"


def test_the_evaluation_says_unresolved_and_the_gate_reads_it_back():
    assert dict(EVALUATION_WORDS) == {PASS: "pass", FAIL: "fail", UNSURE: "unresolved"}
    for outcome, word in EVALUATION_WORDS.items():
        assert status(Check("qa_f1", outcome, 0.0, 0.01)) == word
        assert quality_check({"status": word, "reasons": []}).outcome is outcome
    assert quality_check({"status": "inconclusive"}).outcome is FAIL  # not the evaluation's word: fails closed


def test_one_check_at_a_time_has_one_outcome():
    check = Check("p99_ttft", UNSURE, 101.0, 100.0, low=90.0, high=110.0, concurrency=4)
    assert check.inconclusive and not check.passed
    assert Check("quality", PASS, "pass", "pass").passed


def test_every_check_name_has_its_words_in_the_order_checks_were_listed():
    # The order before CheckName (gate.decision.checks.CHECK_ORDER): it is part of each check's seed.
    before = (
        "coverage",
        "p99_ttft",
        "p99_itl",
        "throughput_gain",
        "error_rate",
        "tokens_per_chunk_gain",
        "shadow_traffic",
        "shadow_error_rate",
        "quality",
    )
    # The checks at the SLO, then the server's acceptance, a replay's schedule and the inputs' schemas came later:
    # appended, so no earlier check's seed moved.
    assert tuple(CheckName) == (*before, "goodput", "capacity", "speculative_acceptance", "schedule", "inputs")
    assert list(WORDS) == list(CheckName)


@pytest.mark.slow
@pytest.mark.parametrize("consumer", ["bench", "gate", "evaluation"])
def test_each_consumer_gives_the_verdicts_it_gave_before_the_judge(consumer):
    found = json.loads(json.dumps(getattr(verdict_scenarios, f"{consumer}_verdicts")()))
    if consumer == "gate":  # the checks at the SLO and the acceptance came later; the rest and every outcome stay
        later = ("goodput", "capacity", "speculative_acceptance")
        found = {
            name: [outcome, [row for row in rows if row[0] not in later]] for name, (outcome, rows) in found.items()
        }
    assert found == BEFORE[consumer]


def test_the_fixed_inputs_reach_every_outcome():
    """The comparison above would catch a changed verdict of any kind: each word occurs."""
    bench = {row[3] for rows in BEFORE["bench"].values() for row in rows}
    gate = {row[2] for _, rows in BEFORE["gate"].values() for row in rows}
    evaluation = {row[2] for _, rows in BEFORE["evaluation"].values() for row in rows}
    assert bench == {"better", "worse", "equivalent", "inconclusive"}
    assert gate == {"pass", "fail", "inconclusive"} and evaluation == {"pass", "fail", "unresolved"}
    assert {outcome for outcome, _ in BEFORE["gate"].values()} == {"APPROVED", "REJECTED", "INCONCLUSIVE"}


@pytest.mark.parametrize(
    "outcomes, expected",
    [
        ([], Outcome.FAIL),  # no evidence never passes
        ([Outcome.PASS, Outcome.PASS], Outcome.PASS),
        ([Outcome.PASS, Outcome.INCONCLUSIVE], Outcome.INCONCLUSIVE),
        ([Outcome.INCONCLUSIVE, Outcome.FAIL, Outcome.PASS], Outcome.FAIL),
    ],
)
def test_several_requirements_fail_on_any_failure_and_pass_only_when_all_pass(outcomes, expected):
    from optigate.judge import overall

    assert overall(iter(outcomes)) is expected
