"""The optimization gate's decision: approve a candidate only on evidence (pure: numpy, pydantic,
stdlib, `optigate.bench` and `optigate.stats`; no AWS).

Rooms:

- :mod:`.inputs`: :class:`GateInputs` (what the gate decides on, JSON-shaped) and the thresholds,
  read as the config's ``BenchmarkGate`` (a misspelt key is refused, not ignored);
- :mod:`.wording`: the checks by name (:class:`CheckName`, in order) and each one's words: the unit of
  its figures, its threshold text and the reason it failed;
- :mod:`.checks`: one function per check, each returning the judge's :class:`~optigate.judge.Check`
  (what each check measures and when it passes is documented there);
- :mod:`.verdict`: :class:`GateVerdict` and :func:`decide`, which runs the checks per
  concurrency level and adds costs and the planner's prediction next to the measurement; the
  outcome is APPROVED, REJECTED or INCONCLUSIVE (a person decides); :func:`unreadable_verdict` is the
  INCONCLUSIVE one when a file the decision reads failed its schema (nothing decided from it).
"""

from optigate.gate.decision.inputs import GateInputs, speculative_method
from optigate.gate.decision.verdict import (
    APPROVED,
    OUTCOMES,
    REJECTED,
    UNDECIDED,
    GateVerdict,
    cost_per_million,
    decide,
    unreadable_verdict,
)
from optigate.gate.decision.wording import CheckName
from optigate.judge import Check

__all__ = [
    "APPROVED",
    "OUTCOMES",
    "REJECTED",
    "UNDECIDED",
    "Check",
    "CheckName",
    "GateInputs",
    "GateVerdict",
    "cost_per_million",
    "decide",
    "speculative_method",
    "unreadable_verdict",
]
