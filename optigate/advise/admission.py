"""Whether a block of serving overrides may be pasted: the rules `optigate validate` applies, nothing else.

A block is tried as the team's `gate.candidate` (or, for a team whose gate cannot stage candidates, as a
change of `serving` itself) through the config rules (`optigate.config.rules.check_team`) and the team's
resolution (`optigate.deployment.resolve_team`: catalog, image tables, capacity plan, optimization job).
The resolution of an admitted block is its re-plan: the advice's predicted effect is read from it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from optigate.config.models import TeamConfig, serving_with
from optigate.config.reader import format_path
from optigate.config.rules import GATE_CANDIDATE, Problem, check_team
from optigate.deployment import ResolvedServing, ResolvedTeam, resolve_team

GATE = "gate.candidate"
SERVING = "serving"
#: Problems of the team rather than of a block: the gate needs them whatever candidate it proves.
DATASET: tuple[str, ...] = ("gate", "evaluation", "dataset_s3_uri")


@dataclass(frozen=True)
class Admission:
    """A block's fate under the rules: where it goes, its resolution (None if refused), and why not."""

    block: dict[str, Any]
    target: str  # GATE or SERVING
    resolved: ResolvedServing | None
    refusals: tuple[str, ...] = ()
    # What the team must add before the gate takes any candidate (an evaluation dataset).
    prerequisites: tuple[str, ...] = field(default_factory=tuple)

    @property
    def admitted(self) -> bool:
        return self.resolved is not None and not self.refusals


def _lines(problems: list[Problem]) -> tuple[str, ...]:
    return tuple(f"{format_path(p.path)}: {p.message}" for p in problems)


def gate_can_stage(team: TeamConfig) -> bool:
    """The gate stages candidates on a model-backed endpoint: not for teams serving adapters (config rules)."""
    return not team.adapters


def with_candidate(team: TeamConfig, block: Mapping[str, Any]) -> TeamConfig:
    """`team` with `block` as its gate.candidate (the calibrations kept)."""
    gate = team.gate.model_copy(update={"candidate": dict(block)})
    return team.model_copy(update={"gate": gate})


def admit(team: TeamConfig, block: Mapping[str, Any]) -> Admission:
    """Try `block` where the team can paste it: its gate.candidate, or `serving` when the gate cannot stage."""
    block = dict(block)
    if not gate_can_stage(team):
        return _admit_serving(team, block)
    trial = with_candidate(team, block)
    problems = check_team(trial)
    prerequisites = [p for p in problems if p.path == DATASET]
    refused = [p for p in problems if p.path != DATASET]
    if refused:
        return Admission(block, GATE, None, _lines(refused), _lines(prerequisites))
    resolved = resolve_team(trial)
    if resolved.problems or resolved.candidate is None:
        why = list(resolved.problems) or [Problem(GATE_CANDIDATE, "the candidate does not resolve")]
        return Admission(block, GATE, None, _lines(why), _lines(prerequisites))
    return Admission(block, GATE, resolved.candidate, (), _lines(prerequisites))


def _admit_serving(team: TeamConfig, block: dict[str, Any]) -> Admission:
    try:
        serving = serving_with(team.serving, block)
    except ValidationError as error:
        return Admission(block, SERVING, None, (f"serving: {error.errors(include_url=False)[0]['msg']}",))
    trial = team.model_copy(update={"serving": serving})
    problems = check_team(trial)
    if problems:
        return Admission(block, SERVING, None, _lines(problems))
    resolved: ResolvedTeam = resolve_team(trial)
    if resolved.problems or resolved.baseline is None:
        return Admission(block, SERVING, None, _lines(list(resolved.problems)) or ("serving: does not resolve",))
    return Admission(block, SERVING, resolved.baseline)
