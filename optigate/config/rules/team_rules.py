"""A team file's rules in one walk: `check_team` runs each area's rules in the order they are reported."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ValidationError

from optigate.config import models
from optigate.config.models import Serving, TeamConfig, serving_with
from optigate.config.rules.adapter_candidate_rules import adapter_candidate_problems
from optigate.config.rules.adapter_evaluation_rules import adapter_evaluation_problems
from optigate.config.rules.adapter_mix_rules import adapter_mix_problems
from optigate.config.rules.component_rules import component_problems
from optigate.config.rules.gate_rules import (
    GATE_CANDIDATE,
    compile_problems,
    concurrency_problems,
    cross_check_problems,
    gate_problems,
    trained_head_problems,
)
from optigate.config.rules.model_rules import architecture_problems, source_problems
from optigate.config.rules.registry import PathT, Problem, did_you_mean
from optigate.config.rules.rollout_rules import SHADOW_CANDIDATE, rollout_problems
from optigate.config.rules.serving_rules import adapter_problems, check_serving
from optigate.config.rules.workload_rules import workload_problems

#: The config's pydantic models by name (how pydantic names a union member in an error's location).
MODEL_NAMES = frozenset(
    name for name, value in vars(models).items() if isinstance(value, type) and issubclass(value, BaseModel)
)


def candidate_problems(team: TeamConfig, overrides: dict[str, Any], base: PathT) -> list[Problem]:
    """A candidate (serving with `overrides`): its shape and cross-field rules, reported under `base`."""
    try:
        candidate = serving_with(team.serving, overrides)
    except ValidationError as error:
        problems = []
        for item in error.errors(include_url=False):
            # pydantic puts a union member's model name in the location; a key the user wrote stays.
            loc = tuple(p for p in item["loc"] if not (isinstance(p, str) and p in MODEL_NAMES))
            message = item["msg"]
            if item["type"] == "extra_forbidden":
                message = f"unknown key '{loc[-1]}'{did_you_mean(str(loc[-1]), list(Serving.model_fields))}"
            problems.append(Problem((*base, *loc), message))
        return problems
    problems = check_serving(
        candidate, base, has_adapters=bool(team.adapters), artifact_uri=team.model.source.artifact_uri
    )
    problems += compile_problems(team, candidate, base)
    return problems + (trained_head_problems(candidate, base) if base != GATE_CANDIDATE else [])


def check_team(team: TeamConfig) -> list[Problem]:
    problems = source_problems(team)
    if problems:
        return problems
    problems += check_serving(
        team.serving, ("serving",), has_adapters=bool(team.adapters), artifact_uri=team.model.source.artifact_uri
    )
    problems += trained_head_problems(team.serving, ("serving",))
    problems += compile_problems(team, team.serving, ("serving",))
    problems += architecture_problems(team)
    problems += adapter_problems(team)
    problems += rollout_problems(team) + adapter_mix_problems(team)
    problems += component_problems(team)
    if not problems:  # a candidate inherits the serving block: report its own problems only
        shadow = team.rollout.shadow
        if shadow is not None and shadow.candidate:
            problems += candidate_problems(team, shadow.candidate, SHADOW_CANDIDATE)
        problems += gate_problems(team)
        problems += adapter_candidate_problems(team)
        problems += adapter_evaluation_problems(team)
        if team.gate.candidate:
            problems += candidate_problems(team, team.gate.candidate, GATE_CANDIDATE)
        problems += cross_check_problems(team)
    return problems + concurrency_problems(team) + workload_problems(team)
