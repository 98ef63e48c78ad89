"""Rules on environments.yaml alone (rules against the teams are in `cross_file`)."""

from __future__ import annotations

from typing import Any

from optigate.config.models import PIPELINE_NEEDS_ONE_SOURCE, PIPELINE_NEEDS_REPOSITORY, EnvironmentsFile
from optigate.config.rules.registry import PathT, Problem, rule

ENVIRONMENT_ONCE = rule("OG601", "each environment is defined once")
ONE_CAPTURE_KEY = rule("OG602", "data_capture or data_capture_percentage, not both")
PIPELINE_REPOSITORY = rule(
    "OG611", "pipeline.source names a repository (model validator)", model_message=PIPELINE_NEEDS_REPOSITORY
)
PIPELINE_ONE_SOURCE = rule(
    "OG612", "pipeline.source is a connection or CodeCommit (model validator)", model_message=PIPELINE_NEEDS_ONE_SOURCE
)


def check_environments(environments: EnvironmentsFile) -> list[Problem]:
    problems: list[Problem] = []
    seen: set[str] = set()
    for index, environment in enumerate(environments.environments):
        if environment.name in seen:
            problems.append(
                Problem(
                    ("environments", index, "name"),
                    f"environment '{environment.name}' is defined twice",
                    ENVIRONMENT_ONCE,
                )
            )
        seen.add(environment.name)
        blocks: list[tuple[PathT, Any]] = [(("environments", index, "overrides"), environment.overrides)]
        blocks += [(("environments", index, "teams", name), own) for name, own in environment.teams.items()]
        for path, overrides in blocks:
            if overrides.data_capture is not None and overrides.data_capture_percentage is not None:
                problems.append(
                    Problem(
                        (*path, "data_capture_percentage"),
                        "give data_capture or data_capture_percentage, not both; "
                        "move the percentage into data_capture.percentage",
                        ONE_CAPTURE_KEY,
                    )
                )
    return problems


#: This module's rules, in ID order: optigate.deployment.all_rules collects them (every_rule).
RULES = (
    ENVIRONMENT_ONCE,
    ONE_CAPTURE_KEY,
    PIPELINE_REPOSITORY,
    PIPELINE_ONE_SOURCE,
)
