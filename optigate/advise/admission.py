"""Whether a block of serving overrides may be pasted: the rules `optigate validate` applies, nothing else.

A block is tried as the team's `gate.candidate` (teams serving adapters included: their gate stages the candidate
on inference-component endpoints, optigate.deployment.gate_components) through the config rules
(`optigate.config.rules.check_team`) and the team's resolution (`optigate.deployment.resolve_team`: catalog, image
tables, capacity plan, optimization job). The resolution of an admitted block is its re-plan: the advice's predicted
effect is read from it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from optigate.config.models import TeamConfig
from optigate.config.reader import format_path
from optigate.config.rules import GATE_CANDIDATE, Problem, check_team
from optigate.deployment import ResolvedServing, resolve_team

GATE = "gate.candidate"
#: Problems of the team rather than of a block, by rule: whatever candidate it proves, the gate needs an evaluation
#: dataset (OG402) and one for each adapter (OG440, optigate.config.rules.adapter_evaluation_rules).
PREREQUISITE_RULES = frozenset({"OG402", "OG440"})


@dataclass(frozen=True)
class Admission:
    """A block's fate under the rules: where it goes, its resolution (None if refused), and why not."""

    block: dict[str, Any]
    target: str  # GATE: where the block is pasted
    resolved: ResolvedServing | None
    refusals: tuple[str, ...] = ()
    # What the team must add before the gate takes any candidate (an evaluation dataset).
    prerequisites: tuple[str, ...] = field(default_factory=tuple)

    @property
    def admitted(self) -> bool:
        return self.resolved is not None and not self.refusals


def _lines(problems: list[Problem]) -> tuple[str, ...]:
    return tuple(f"{format_path(p.path)}: {p.message}" for p in problems)


def with_candidate(team: TeamConfig, block: Mapping[str, Any]) -> TeamConfig:
    """`team` with `block` as its gate.candidate (the calibrations kept)."""
    gate = team.gate.model_copy(update={"candidate": dict(block)})
    return team.model_copy(update={"gate": gate})


def admit(team: TeamConfig, block: Mapping[str, Any]) -> Admission:
    """Try `block` as the team's gate.candidate."""
    block = dict(block)
    trial = with_candidate(team, block)
    problems = check_team(trial)
    prerequisites = [p for p in problems if p.rule_id in PREREQUISITE_RULES]
    refused = [p for p in problems if p.rule_id not in PREREQUISITE_RULES]
    if refused:
        return Admission(block, GATE, None, _lines(refused), _lines(prerequisites))
    resolved = resolve_team(trial)
    if resolved.problems or resolved.candidate is None:
        why = list(resolved.problems) or [Problem(GATE_CANDIDATE, "the candidate does not resolve")]
        return Admission(block, GATE, None, _lines(why), _lines(prerequisites))
    return Admission(block, GATE, resolved.candidate, (), _lines(prerequisites))
