"""A fast, seeded version of benchmarks/verdict_calibration.py: identical sides (A/A) are rarely
labelled, and a true 10 % ITL improvement is (smaller samples than the gate's: two levels, 64 tokens).

Why these bounds: the seeds are fixed, so each test is deterministic; the bounds are chosen so that
a calibrated method passes for almost any seeds and a broken one does not. If the chance of any
better/worse in an A/A pair is at most 5 %, at most 3 of 16 pairs are flagged with probability
0.99 (binomial); the comparison this replaced flagged 4 of 4. If the chance of labelling the
10 % change correctly is at least 95 %, at least 6 of 8 pairs are correct with probability 0.994.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from optigate.bench.compare import compare_levels
from tests.fixtures.simulated_blocks import Shape, simulated_side

# Both tests compare hundreds of simulated runs: the slow tier (tests/tiers.py).
pytestmark = pytest.mark.slow

LEVELS = (1, 16)
TOKENS = 64


def _pair(baseline: Shape, candidate: Shape, seed: int):
    base = simulated_side(baseline, levels=LEVELS, tokens=TOKENS, seed=2 * seed)
    cand = simulated_side(candidate, levels=LEVELS, tokens=TOKENS, seed=2 * seed + 1)
    return compare_levels(base, cand, seed=seed)


def test_identical_sides_are_rarely_labelled():
    shape = Shape(drift=0.02)
    flagged = [seed for seed in range(16) if any(d.verdict in ("better", "worse") for d in _pair(shape, shape, seed))]
    assert len(flagged) <= 3, flagged


def test_a_true_ten_percent_itl_improvement_is_found():
    shape = Shape(drift=0.02)
    faster = replace(shape, itl_ms=shape.itl_ms * 0.9)
    correct = 0
    for seed in range(100, 108):
        deltas = _pair(shape, faster, seed)
        itl = [d for d in deltas if d.metric == "itl_ms"]
        correct += any(d.verdict == "better" for d in itl) and not any(d.verdict == "worse" for d in deltas)
    assert correct >= 6
