"""A team file's rules in one walk: `check_team` runs each area's rules in the order they are reported."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from pydantic import BaseModel, ValidationError

from optigate.config import models
from optigate.config.models import Serving, TeamConfig, serving_with
from optigate.config.rule_registry import PathT, Problem, did_you_mean
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


#: How `check_team` runs one area's rules: `run(area, check)` gives the problems to report and whether the area was
#: judged whole (False: it read a key a schema problem left out, optigate.config.valid_part).
AreaRunner = Callable[[str, Callable[[], list[Problem]]], tuple[list[Problem], bool]]


def run_whole(area: str, check: Callable[[], list[Problem]]) -> tuple[list[Problem], bool]:
    return check(), True


def candidates_own(
    problems: list[Problem], base: list[Problem], overrides: Mapping[str, object], at: PathT
) -> list[Problem]:
    """A candidate's problems (under `at`) but those repeating the serving block's (`base`) at a key it inherits: the
    candidate inherits the serving block, and a problem is reported once, where it is written."""
    served = {(problem.rule_id, problem.path[1:]) for problem in base if problem.path[:1] == ("serving",)}
    return [
        problem
        for problem in problems
        if not (
            problem.path[: len(at)] == at
            and len(problem.path) > len(at)
            and problem.path[len(at)] not in overrides
            and (problem.rule_id, problem.path[len(at) :]) in served
        )
    ]


def check_team(team: TeamConfig, run: AreaRunner = run_whole) -> list[Problem]:
    """Every area's rules in the order they are reported. Each area runs whatever another found (one run shows every
    problem), but the model source's: without one valid source nothing else is judged."""
    problems, whole = run("model source rules", lambda: source_problems(team))
    if problems or not whole:
        return problems
    areas: list[tuple[str, Callable[[], list[Problem]]]] = [
        (
            "serving rules",
            lambda: check_serving(
                team.serving,
                ("serving",),
                has_adapters=bool(team.adapters),
                artifact_uri=team.model.source.artifact_uri,
            ),
        ),
        ("trained head rules", lambda: trained_head_problems(team.serving, ("serving",))),
        ("compilation rules", lambda: compile_problems(team, team.serving, ("serving",))),
        ("architecture rules", lambda: architecture_problems(team)),
        ("adapter rules", lambda: adapter_problems(team)),
        ("rollout rules", lambda: rollout_problems(team)),
        ("adapter mix rules", lambda: adapter_mix_problems(team)),
        ("inference component rules", lambda: component_problems(team)),
    ]
    for area, check in areas:
        problems += run(area, check)[0]
    base = list(problems)

    def shadow_candidate() -> list[Problem]:
        shadow = team.rollout.shadow
        if shadow is None or not shadow.candidate:
            return []
        found = candidate_problems(team, shadow.candidate, SHADOW_CANDIDATE)
        return candidates_own(found, base, shadow.candidate, SHADOW_CANDIDATE)

    def gate_candidate() -> list[Problem]:
        if not team.gate.candidate:
            return []
        found = candidate_problems(team, team.gate.candidate, GATE_CANDIDATE)
        return candidates_own(found, base, team.gate.candidate, GATE_CANDIDATE)

    later: list[tuple[str, Callable[[], list[Problem]]]] = [
        ("shadow candidate rules", shadow_candidate),
        ("gate rules", lambda: gate_problems(team)),
        ("adapter candidate rules", lambda: adapter_candidate_problems(team)),
        ("adapter evaluation rules", lambda: adapter_evaluation_problems(team)),
        ("gate candidate rules", gate_candidate),
        ("cross-check rules", lambda: cross_check_problems(team)),
        ("concurrency rules", lambda: concurrency_problems(team)),
        ("workload rules", lambda: workload_problems(team)),
    ]
    for area, check in later:
        problems += run(area, check)[0]
    return problems
