"""Rules on environments.yaml alone (rules against the teams are in `cross_file`)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from optigate.config.models import Environment, EnvironmentsFile
from optigate.config.rule_registry import Found, PathT, Problem, rule_check

# OG611 and OG612 (pipeline.source) are checked by PipelineSource's model validator while the file is read: their
# functions are beside it, in optigate.config.models.


def check_environments(environments: EnvironmentsFile) -> list[Problem]:
    """The rules on environments.yaml alone, environment by environment in the order they are reported."""
    problems: list[Problem] = []
    for index, environment in enumerate(environments.environments):
        problems += environment_once(environments, index)
        problems += one_capture_key(environment, index)
    return problems


@rule_check("OG601", "each environment is defined once")
def environment_once(environments: EnvironmentsFile, index: int) -> Iterator[Found]:
    """Each environment in environments.yaml has a name no environment before it has (checked for the one at
    `index`).

    Why: stacks and endpoints are named after the environment (`optigate-<env>-<team>`, `<team>-<env>`), so two
    environments of one name would give their resources the same names. Reported at the later one.
    """
    environment = environments.environments[index]
    if environment.name in {earlier.name for earlier in environments.environments[:index]}:
        yield (("environments", index, "name"), f"environment '{environment.name}' is defined twice")


@rule_check("OG602", "data_capture or data_capture_percentage, not both")
def one_capture_key(environment: Environment, index: int) -> Iterator[Found]:
    """An environment's overrides, and each team's own overrides there, give `data_capture` or
    `data_capture_percentage`, not both.

    Why: both set the endpoint's data capture, and with both EnvironmentOverrides.capture would take
    `data_capture` and ignore the percentage; `data_capture.percentage` says it in the full form.
    """
    blocks: list[tuple[PathT, Any]] = [(("environments", index, "overrides"), environment.overrides)]
    blocks += [(("environments", index, "teams", name), own) for name, own in environment.teams.items()]
    for path, overrides in blocks:
        if overrides.data_capture is not None and overrides.data_capture_percentage is not None:
            yield (
                (*path, "data_capture_percentage"),
                "give data_capture or data_capture_percentage, not both; "
                "move the percentage into data_capture.percentage",
            )


#: This module's rules, in ID order: optigate.deployment.all_rules collects them (every_rule).
RULES = (
    environment_once,
    one_capture_key,
)
