"""Two sides compared round by round (optigate.bench.sequential): a real change is found within a few rounds,
identical sides are almost never called better or worse however often the comparison is read, and a round a side
could not serve never decides."""

from __future__ import annotations

import math

import pytest

from optigate.bench.core.metrics import RunSamples
from optigate.bench.sequential import FIGURES, compare_rounds, round_logs
from optigate.judge import Outcome
from tests.fixtures.simulated_blocks import Shape, simulated_block

LEVEL = 16
REQUESTS = 32


def _rounds(shape: Shape, rounds: int, seed: int) -> list[RunSamples]:
    return [simulated_block(LEVEL, REQUESTS, shape, seed=[seed, r]) for r in range(rounds)]


def _verdicts(deltas, metric: str) -> set[Outcome]:
    return {delta.verdict for delta in deltas if delta.metric == metric}


def test_a_30_percent_faster_decode_is_better_in_itl_and_throughput_within_six_rounds_and_nothing_is_worse():
    twin, candidate = _rounds(Shape(), 6, 1), _rounds(Shape(itl_ms=15 * 0.7), 6, 2)
    deltas = compare_rounds({LEVEL: twin}, {LEVEL: candidate})
    assert _verdicts(deltas, "itl_ms") == {Outcome.BETTER}
    assert _verdicts(deltas, "output_tokens_per_s") == {Outcome.BETTER}
    assert Outcome.WORSE not in {delta.verdict for delta in deltas}
    itl_p99 = next(d for d in deltas if d.metric == "itl_ms" and d.statistic == "p99")
    assert itl_p99.low_pct <= -30 <= itl_p99.high_pct and itl_p99.rounds == 6


def test_before_the_sequence_can_bound_anything_nothing_is_decided():
    """Three rounds: even a 30 % change is inconclusive (the interval is unbounded before its fourth round)."""
    twin, candidate = _rounds(Shape(), 3, 1), _rounds(Shape(itl_ms=15 * 0.7), 3, 2)
    assert {delta.verdict for delta in compare_rounds({LEVEL: twin}, {LEVEL: candidate})} == {Outcome.INCONCLUSIVE}


def test_at_holms_levels_the_first_figure_is_decided_in_round_five_with_one_level():
    """What `bench compare --rounds --help` says: 13 figures at one level put the first test at 1 - 0.05 / 13, where
    the sequence is unbounded until round 5; a 30 % faster decode is decided there, not before."""
    twin, candidate = _rounds(Shape(), 5, 1), _rounds(Shape(itl_ms=15 * 0.7), 5, 2)
    at_four = compare_rounds({LEVEL: twin[:4]}, {LEVEL: candidate[:4]})
    assert len(at_four) == 13 and {delta.verdict for delta in at_four} == {Outcome.INCONCLUSIVE}
    assert Outcome.BETTER in _verdicts(compare_rounds({LEVEL: twin}, {LEVEL: candidate}), "itl_ms")


@pytest.mark.slow  # 200 comparisons of simulated blocks: 8 s
def test_identical_sides_read_after_every_round_are_rarely_better_or_worse():
    """A/A, read after each of 8 rounds (Holm over the 13 figures): a better or worse word at any look in at most
    5 % of 40 runs (0 measured; benchmarks/sequential_rounds.py prints the full study)."""
    labelled = 0
    for run in range(40):
        twin, candidate = _rounds(Shape(), 8, 100 + run), _rounds(Shape(), 8, 500 + run)
        for rounds in range(4, 9):
            deltas = compare_rounds({LEVEL: twin[:rounds]}, {LEVEL: candidate[:rounds]})
            if any(delta.verdict in (Outcome.BETTER, Outcome.WORSE) for delta in deltas):
                labelled += 1
                break
    assert labelled <= 2


def test_a_round_whose_candidate_served_nothing_never_decides():
    """Fail closed: a candidate block without a successful request has no figure; that figure cannot tell."""
    twin, candidate = _rounds(Shape(), 6, 1), _rounds(Shape(itl_ms=15 * 0.7), 6, 2)
    candidate[2] = RunSamples(LEVEL)
    deltas = compare_rounds({LEVEL: twin}, {LEVEL: candidate})
    itl = [delta for delta in deltas if delta.metric == "itl_ms"]
    assert itl and all(delta.verdict is Outcome.INCONCLUSIVE and math.isnan(delta.low_pct) for delta in itl)


def test_rounds_pair_blocks_in_order_and_count_while_both_sides_have_one():
    twin, candidate = _rounds(Shape(), 5, 1), _rounds(Shape(), 3, 2)
    [(_, _, _, figure)] = [entry for entry in FIGURES if entry[:2] == ("ttft_ms", "p50")]
    logs = round_logs(twin, candidate, figure)
    assert len(logs) == 3
    assert logs[1] == pytest.approx(math.log(figure(candidate[1]) / figure(twin[1])))


def test_each_interval_is_shown_at_the_confidence_holm_tested_it_at():
    twin, candidate = _rounds(Shape(), 6, 1), _rounds(Shape(itl_ms=15 * 0.7), 6, 2)
    deltas = compare_rounds({LEVEL: twin}, {LEVEL: candidate})
    by_p = sorted(deltas, key=lambda delta: delta.p_value)
    assert by_p[0].confidence == pytest.approx(1 - 0.05 / len(deltas))
    assert all(delta.confidence >= 0.95 for delta in deltas)
    decided = [delta for delta in deltas if delta.verdict is Outcome.BETTER]
    assert all(delta.p_value <= 1 - delta.confidence for delta in decided)
