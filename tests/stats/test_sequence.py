"""The anytime-valid interval (optigate.stats.t_confidence_sequence): it holds its confidence at every look, it
finds a real difference, and it never claims what too few or degenerate rounds cannot show."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy import stats as scipy_stats

from optigate.stats import (
    CONFIDENCE,
    SEQUENCE_PRIOR,
    sequence_half_width,
    t_confidence_sequence,
    t_sequence_p_value,
)

ROUNDS = 30


def _ever_excludes(rounds: np.ndarray, mean: float) -> bool:
    interval = t_confidence_sequence(rounds)
    return not interval.low <= mean <= interval.high


def test_it_holds_its_confidence_at_every_look():
    """Identical sides (the figure's mean is the truth): looked at after each of 30 rounds, the interval excludes
    the truth at some look in at most 1 - CONFIDENCE of runs (binomial slack of three standard errors)."""
    runs = 4000
    draws = np.random.default_rng(7).normal(0.3, 2.0, (runs, ROUNDS))
    missed = sum(_ever_excludes(rounds, 0.3) for rounds in draws) / runs
    alpha = 1 - CONFIDENCE
    assert missed <= alpha + 3 * math.sqrt(alpha * (1 - alpha) / runs)


def test_a_fixed_interval_looked_at_every_round_does_not():
    """The reason for the sequence: the fixed-size t interval, looked at after every round, excludes the truth at
    some look far more often than its 5 % (the same runs as above)."""
    runs = 4000
    draws = np.random.default_rng(7).normal(0.3, 2.0, (runs, ROUNDS))
    missed = np.zeros(runs, dtype=bool)
    for n in range(2, ROUNDS + 1):
        half = scipy_stats.t.ppf(0.5 + CONFIDENCE / 2, n - 1) * draws[:, :n].std(axis=1, ddof=1) / math.sqrt(n)
        missed |= np.abs(draws[:, :n].mean(axis=1) - 0.3) > half
    assert missed.mean() > 3 * (1 - CONFIDENCE)


def test_it_finds_a_difference_of_one_spread():
    """A figure whose mean is one standard deviation from 0: the interval leaves 0 behind within 30 rounds in at
    least 90 % of runs (97 % measured)."""
    draws = np.random.default_rng(11).normal(1.0, 1.0, (1000, ROUNDS))
    found = sum(t_confidence_sequence(rounds).low > 0 for rounds in draws)
    assert found >= 900


def test_it_only_narrows_from_look_to_look():
    rounds = np.random.default_rng(3).normal(0, 1, ROUNDS)
    intervals = [t_confidence_sequence(rounds[:n]) for n in range(2, ROUNDS + 1)]
    for before, after in itertools.pairwise(intervals):
        assert after.low >= before.low and after.high <= before.high


@pytest.mark.parametrize("rounds", [[], [1.0], [2.0, 2.0, 2.0, 2.0], [1.0, float("nan"), 2.0]])
def test_too_few_or_degenerate_rounds_cannot_tell(rounds):
    """No round, one round, rounds without spread or a missing figure: no bound is claimed (the judge reads
    infinite or NaN ends as INCONCLUSIVE)."""
    interval = t_confidence_sequence(rounds)
    assert not (math.isfinite(interval.low) and math.isfinite(interval.high))


@given(st.lists(st.floats(-1e6, 1e6), min_size=2, max_size=40))
def test_any_figures_give_an_ordered_interval_within_the_last_looks_or_none(rounds):
    """Whatever the figures: both ends NaN (an empty intersection) or an ordered interval inside the last look's."""
    point, low, high = t_confidence_sequence(rounds)
    assert point == pytest.approx(float(np.mean(rounds)))
    assert math.isnan(low) == math.isnan(high)
    if not math.isnan(low):
        assert low <= high
        spread = float(np.std(rounds, ddof=1))
        if spread > 0 and math.isfinite(half := spread * sequence_half_width(len(rounds))):
            slack = 1e-9 * max(1.0, abs(point), half)
            assert point - half - slack <= low and high <= point + half + slack


def test_the_half_width_matches_the_mixture_ratio_it_solves():
    """At the half-width, the mixture's likelihood ratio is 1 / (1 - confidence), computed directly."""
    for n in (4, 6, 10, 25):
        t = sequence_half_width(n) * math.sqrt(n)
        g, v = SEQUENCE_PRIOR, n - 1
        ratio = (1 + n * g) ** -0.5 * ((1 + t * t / v) / (1 + t * t / (v * (1 + n * g)))) ** (n / 2)
        assert ratio == pytest.approx(1 / (1 - CONFIDENCE), rel=1e-9)
    assert sequence_half_width(1) == math.inf and sequence_half_width(3) == math.inf


def test_the_prior_suits_the_rounds_a_gate_can_afford():
    """SEQUENCE_PRIOR's claim: over rounds 4 to 10 its half-widths add up to within 1 % of the least any prior
    from 1 to 50 gives."""

    def total(prior: float) -> float:
        return sum(sequence_half_width(n, prior=prior) for n in range(4, 11))

    least = min(total(prior) for prior in np.arange(1.0, 50.5, 0.5))
    assert total(SEQUENCE_PRIOR) <= 1.01 * least


def test_the_p_value_is_below_alpha_exactly_when_the_interval_excludes_the_null():
    """The anytime p-value and the sequence are one construction: p <= 1 - c iff the interval at c leaves the null
    out (checked on runs with and without a change, at two confidences)."""
    rng = np.random.default_rng(5)
    for shift in (0.0, 0.4, 1.0):
        for rounds in rng.normal(shift, 1.0, (200, 12)):
            p = t_sequence_p_value(rounds)
            for confidence in (0.95, 0.99):
                interval = t_confidence_sequence(rounds, confidence=confidence)
                excluded = not interval.low <= 0.0 <= interval.high
                if abs(p - (1 - confidence)) > 1e-9:
                    assert excluded == (p <= 1 - confidence), (shift, p, interval)


def test_the_p_value_stopped_at_any_round_is_valid():
    """Identical sides, stopped at the first round the p-value reaches 5 % or at 30: rejected in at most 5 % of
    runs."""
    runs = 2000
    draws = np.random.default_rng(9).normal(0.0, 1.0, (runs, ROUNDS))
    rejected = sum(t_sequence_p_value(rounds) <= 0.05 for rounds in draws) / runs
    assert rejected <= 0.05 + 3 * math.sqrt(0.05 * 0.95 / runs)
