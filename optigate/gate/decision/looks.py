"""A gate in rounds: after each round of the benchmark (at every level a block of the baseline twin, then one of the
candidate) the gate looks at everything measured so far and stops as soon as every benchmark check is decided, or
when its budget of rounds is spent.

**Why looking again is allowed.** Each look runs the gate's own checks (:func:`optigate.gate.decision.verdict.decide`)
on the rounds so far, but at a stricter confidence: the budget's looks (rounds ``min_rounds`` to ``max_rounds``) share
the gate's 5 % equally (Bonferroni), so a look's intervals are at ``1 - 0.05 / looks``. By the union bound, the chance
that any look's interval misses its figure is at most 5 % whatever the looks' dependence: a false pass or fail at any
look is as rare as at one fixed-size look today. Each check keeps the construction it was calibrated with (two-level
percentile bootstraps, the throughput ratio's normal interval, Holm across adapters); only its level changes.

Why not a mixture confidence sequence (``optigate.stats.t_confidence_sequence``, which ``bench compare --rounds`` uses
for an open-ended number of rounds): the gate's looks are bounded by its budget, so spending over them costs little,
and the gate's checks are not all means of a round's figure: a p99 within a budget is a quantile of the pooled
requests (a round's own p99, from a few dozen requests, sits below the true p99 on average), a goodput or error share
is often the same in every round (a t-sequence then has no spread and never decides).

**Stopping** (:func:`judge_round`): before ``min_rounds`` the gate goes on (a bootstrap over fewer blocks cannot show
their drift). Then it stops when a benchmark check fails (a REJECTED verdict cannot be rescued by more rounds), when
every benchmark check is decided, or when the budget is spent (``max_rounds``, or ``max_minutes`` when the next round
would pass it): the verdict is then INCONCLUSIVE, and each undecided check says how many more rounds would likely
decide it if its estimate holds. The quality evaluation and a shadow's checks are not the benchmark's: they are
judged once, after it."""

from __future__ import annotations

import math
from dataclasses import dataclass

from optigate import stats
from optigate.gate.decision.checks import check_dict
from optigate.gate.decision.inputs import GateInputs, blocks_by_level
from optigate.gate.decision.verdict import GateVerdict, decide, outcome_of
from optigate.gate.decision.wording import CheckName, label
from optigate.judge import Check, Outcome

#: The checks the benchmark's rounds decide; the others (quality, shadow, inputs) are judged once, after the rounds.
BENCHMARK_CHECKS = frozenset(
    {
        CheckName.COVERAGE,
        CheckName.P99_TTFT,
        CheckName.P99_ITL,
        CheckName.THROUGHPUT_GAIN,
        CheckName.ERROR_RATE,
        CheckName.TOKENS_PER_CHUNK_GAIN,
        CheckName.GOODPUT,
        CheckName.CAPACITY,
        CheckName.SPECULATIVE_ACCEPTANCE,
        CheckName.SCHEDULE,
    }
)
#: Rounds to decide beyond this many budgets are no practical budget (said so instead of a count to pay for).
HOPELESS = 4
#: Why the rounds went on or stopped.
CONTINUE, DECIDED, FAILED, BUDGET = "continue", "decided", "failed", "budget"


@dataclass(frozen=True)
class Looks:
    """The gate's budget of rounds: it looks after each round from `min_rounds` to `max_rounds`; `max_minutes`
    (optional) stops it earlier when the next round would end past it."""

    min_rounds: int
    max_rounds: int
    max_minutes: float | None = None

    def __post_init__(self) -> None:
        if not 1 <= self.min_rounds <= self.max_rounds:
            raise ValueError(f"rounds {self.min_rounds}..{self.max_rounds}: expected 1 <= min_rounds <= max_rounds")
        if self.max_minutes is not None and not self.max_minutes > 0:
            raise ValueError(f"max_minutes {self.max_minutes!r}: expected a positive number")

    @property
    def count(self) -> int:
        """How many looks the budget allows: one after each round from min_rounds to max_rounds."""
        return self.max_rounds - self.min_rounds + 1

    @property
    def confidence(self) -> float:
        """Each look's confidence: the gate's 5 % shared equally by the looks (see the module)."""
        return 1 - (1 - stats.CONFIDENCE) / self.count


@dataclass(frozen=True)
class RoundJudgement:
    """What the gate saw after `rounds` rounds: the verdict at the look's confidence (None before min_rounds),
    whether to stop, and why (`reason` one of CONTINUE, DECIDED, FAILED, BUDGET; `why` in words)."""

    rounds: int
    stop: bool
    reason: str
    why: str
    confidence: float
    verdict: GateVerdict | None

    @property
    def benchmark_checks(self) -> tuple[Check, ...]:
        return () if self.verdict is None else tuple(c for c in self.verdict.checks if c.name in BENCHMARK_CHECKS)

    @property
    def benchmark_outcome(self) -> str | None:
        """APPROVED, REJECTED or INCONCLUSIVE on the benchmark's checks alone (None before the first look)."""
        return None if self.verdict is None else outcome_of(self.benchmark_checks)

    def to_dict(self) -> dict[str, object]:
        """What the state machine reads (`stop`) and the report shows; the verdict's own dict is written apart."""
        return {
            "rounds": self.rounds,
            "stop": self.stop,
            "reason": self.reason,
            "why": self.why,
            "confidence": self.confidence,
            "outcome": self.benchmark_outcome,
            "checks": [check_dict(c) for c in self.benchmark_checks],  # as the report writes a check
        }


def rounds_measured(inputs: GateInputs) -> int:
    """The rounds both benchmarks completed at every level they share (a round is a block index)."""
    base = blocks_by_level(inputs.baseline_benchmark, "baseline")
    cand = blocks_by_level(inputs.candidate_benchmark, "candidate")
    common = set(base) & set(cand)
    return min((min(len(base[level]), len(cand[level])) for level in common), default=0)


def judge_round(inputs: GateInputs, looks: Looks, *, minutes_spent: float | None = None) -> RoundJudgement:
    """Whether the gate stops after the rounds `inputs` hold (see the module). `minutes_spent`: the benchmark's
    time so far, against ``looks.max_minutes`` (the next round is assumed to take as long as the mean round)."""
    rounds = rounds_measured(inputs)
    confidence = looks.confidence
    if rounds < looks.min_rounds:
        why = f"round {rounds} of at least {looks.min_rounds}: too few rounds to look"
        return RoundJudgement(rounds, False, CONTINUE, why, confidence, None)
    verdict = decide(inputs, confidence=confidence)
    judged = [c for c in verdict.checks if c.name in BENCHMARK_CHECKS]
    failed = [c for c in judged if c.outcome is Outcome.FAIL]
    open_checks = [c for c in judged if c.outcome is Outcome.INCONCLUSIVE]
    at = f"after {rounds} round{'s' if rounds != 1 else ''} ({_percent(confidence)} intervals)"
    if failed:
        names = ", ".join(dict.fromkeys(label(c) for c in failed))
        return RoundJudgement(rounds, True, FAILED, f"{at}: {names} failed", confidence, verdict)
    if not open_checks:
        why = f"{at}: all {len(judged)} benchmark checks decided"
        return RoundJudgement(rounds, True, DECIDED, why, confidence, verdict)
    spent = _budget_spent(looks, rounds, minutes_spent)
    undecided = "; ".join(_still_open(c, rounds, looks) for c in open_checks)
    if spent:
        return RoundJudgement(rounds, True, BUDGET, f"{at}: {spent}; still undecided: {undecided}", confidence, verdict)
    return RoundJudgement(rounds, False, CONTINUE, f"{at}: undecided: {undecided}", confidence, verdict)


def rounds_summary(
    judgement: RoundJudgement,
    looks: Looks,
    *,
    minutes: float | None,
    price_per_hour_usd: float | None,
    instance_count: int,
    stopped: tuple[str, str] | None = None,
) -> dict[str, object]:
    """What the report says of the rounds: how many of the budget, the looks' confidence, why they stopped (the
    last look's `stopped` (reason, why) when the state machine kept it, else this judgement's), and what they cost:
    `minutes` of benchmark on two endpoints (twin and candidate) of `instance_count` instances each."""
    reason, why = stopped or (judgement.reason, judgement.why)
    endpoint_minutes = None if minutes is None else 2 * instance_count * minutes
    usd = None if endpoint_minutes is None or price_per_hour_usd is None else endpoint_minutes / 60 * price_per_hour_usd
    return {
        "done": judgement.rounds,
        "min_rounds": looks.min_rounds,
        "max_rounds": looks.max_rounds,
        "max_minutes": looks.max_minutes,
        "looks": looks.count,
        "confidence": looks.confidence,
        "reason": reason,
        "why": why,
        "benchmark_minutes": minutes,
        "endpoint_minutes": endpoint_minutes,
        "usd": usd,
    }


def rounds_to_decide(check: Check, rounds: int) -> int | None:
    """About how many rounds in all would decide `check` if its estimate held and its interval narrowed as
    1/sqrt(rounds): None when it cannot tell (no interval, or the estimate on the threshold)."""
    threshold = check.threshold
    if check.measured is None or check.low is None or check.high is None or not isinstance(threshold, int | float):
        return None
    gap = abs(float(check.measured) - float(threshold))
    half = (check.high - check.low) / 2
    if not gap > 0 or not math.isfinite(half):
        return None
    return max(rounds + 1, math.ceil(rounds * (half / gap) ** 2))


def _budget_spent(looks: Looks, rounds: int, minutes_spent: float | None) -> str | None:
    if rounds >= looks.max_rounds:
        return f"the budget of {looks.max_rounds} rounds is spent"
    if looks.max_minutes is not None and minutes_spent is not None and rounds:
        next_end = minutes_spent * (rounds + 1) / rounds
        if next_end > looks.max_minutes:
            return (
                f"one more round would end at about {next_end:.0f} of the budget's {looks.max_minutes:g} minutes "
                f"({minutes_spent:.0f} spent)"
            )
    return None


def _still_open(check: Check, rounds: int, looks: Looks) -> str:
    where = label(check)
    needed = rounds_to_decide(check, rounds)
    if needed is None:
        return f"{where} (its estimate sits on the threshold: no budget decides it)"
    if needed > HOPELESS * looks.max_rounds:
        return f"{where} (its estimate is this close to the threshold: about {needed} rounds, no practical budget)"
    return f"{where} (about {needed} rounds would decide it, the budget is {looks.max_rounds})"


def _percent(confidence: float) -> str:
    return f"{100 * confidence:.3g} %"
