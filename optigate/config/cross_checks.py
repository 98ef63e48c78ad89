"""Rules across files: each environment's overrides against each team they apply to, and regions
against the SDK's own tables. A single file can be valid while the pair synthesizes nonsense
(`MinCapacity 2, MaxCapacity 1`) or fails only at synth (`Unsupported region`).

Problems are reported where the user would change something: the override in environments.yaml.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache

from optigate.config.models import Environment, EnvironmentOverrides, EnvironmentsFile, TeamConfig
from optigate.config.rules import Problem, did_you_mean


def effective_overrides(team: TeamConfig, environment: Environment) -> EnvironmentOverrides:
    """Environment-wide overrides, then the team's own overrides in that environment."""
    merged = environment.overrides.model_dump(exclude_none=True)
    team_overrides = environment.teams.get(team.team)
    if team_overrides is not None:
        merged.update(team_overrides.model_dump(exclude_none=True))
    return EnvironmentOverrides(**merged)


@cache
def sagemaker_regions() -> frozenset[str]:
    """Every region botocore's endpoint tables list SageMaker in, across partitions (no AWS call)."""
    import botocore.session

    session = botocore.session.get_session()
    return frozenset(
        region
        for partition in session.get_available_partitions()
        for region in session.get_available_regions("sagemaker", partition)
    )


@dataclass(frozen=True)
class _Where:
    index: int
    environment: Environment
    team: str

    def override(self, key: str) -> tuple[str | int, ...]:
        """The YAML path of the override that set `key` for this team (its own, else the environment's)."""
        own = self.environment.teams.get(self.team)
        if own is not None and getattr(own, key) is not None:
            return ("environments", self.index, "teams", self.team, key)
        return ("environments", self.index, "overrides", key)


def check_regions(environments: EnvironmentsFile) -> list[Problem]:
    regions = sagemaker_regions()
    problems = []
    for index, environment in enumerate(environments.environments):
        if environment.region not in regions:
            problems.append(
                Problem(
                    ("environments", index, "region"),
                    f"SageMaker has no endpoint in region '{environment.region}' (botocore's tables)"
                    + _region_hint(environment.region, sorted(regions)),
                )
            )
    return problems


def _region_hint(region: str, regions: list[str]) -> str:
    """A region with the same letters first (`us-esat-1` is `us-east-1` typed fast, while difflib prefers
    `us-west-1`), else the closest one."""
    anagrams = [r for r in regions if sorted(r) == sorted(region)]
    return f"; did you mean '{anagrams[0]}'?" if anagrams else did_you_mean(region, regions)


def check_overrides(environments: EnvironmentsFile, teams: Mapping[str, TeamConfig]) -> list[Problem]:
    """Each environment's overrides against each team's serving, as the team stack will combine them."""
    problems: list[Problem] = []
    for index, environment in enumerate(environments.environments):
        for name, team in teams.items():
            where = _Where(index, environment, name)
            overrides = effective_overrides(team, environment)
            own = environment.teams.get(name)
            scaling = team.serving.autoscaling
            if scaling is None:
                for key in ("autoscaling_max_capacity", "suspend_autoscaling"):
                    if own is not None and getattr(own, key) is not None:
                        problems.append(
                            Problem(
                                where.override(key),
                                f"has no effect: team '{name}' has no serving.autoscaling",
                            )
                        )
                continue
            # What the stack synthesizes: an endpoint keeps at least one instance; copies may go to zero.
            minimum = scaling.min_capacity if team.adapters else max(1, scaling.min_capacity)
            maximum = overrides.autoscaling_max_capacity or scaling.max_capacity
            if maximum < minimum:
                problems.append(
                    Problem(
                        where.override("autoscaling_max_capacity"),
                        f"{maximum} is below team '{name}'s serving.autoscaling.min_capacity ({minimum}) "
                        f"in {environment.name}: raise it to at least {minimum}, or lower the team's minimum",
                    )
                )
            count = overrides.instance_count
            if count is not None and not team.adapters and count > maximum:
                problems.append(
                    Problem(
                        where.override("instance_count"),
                        f"{count} instances exceed team '{name}'s autoscaling maximum ({maximum}) in "
                        f"{environment.name}: autoscaling would remove them at once",
                    )
                )
    return problems


def check_project(environments: EnvironmentsFile, teams: Mapping[str, TeamConfig]) -> list[Problem]:
    """Every cross-file rule; paths are in environments.yaml."""
    return check_regions(environments) + check_overrides(environments, teams)
