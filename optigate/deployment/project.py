"""Every config file of a checkout, validated and resolved: the entry point of `optigate validate`,
`optigate summary`, `cdk synth` and rehearsal.

The config loader checks what the files say; each team is then resolved once here (catalog, image
tables, capacity plan), and any problem is reported at its file and line with the others.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path

from optigate import naming
from optigate.config.loader import ConfigError, ConfigIssue, Project, load_project, load_team, team_file
from optigate.config.models import Environment
from optigate.config.reader import format_path, read_yaml
from optigate.config.rules import PathT
from optigate.config.rules.cross_file import resource_names_distinct
from optigate.deployment.all_rules import acknowledgement_problems
from optigate.deployment.environment import Deployment, deploy
from optigate.deployment.placement import copies_fit_instances
from optigate.deployment.team import ResolvedTeam, resolve_team
from optigate.promote.lock import read_lock


@dataclass(frozen=True)
class ResolvedProject:
    project: Project
    teams: dict[str, ResolvedTeam]

    @property
    def environments(self) -> list[Environment]:
        return list(self.project.environments.environments)

    def select_environments(self, selection: str | None) -> list[Environment]:
        """`-c env=dev` or `-c env=dev,prod`; all environments when unset."""
        environments = self.environments
        if not selection:
            return environments
        wanted = [name.strip() for name in selection.split(",") if name.strip()]
        known = {environment.name: environment for environment in environments}
        unknown = [name for name in wanted if name not in known]
        if unknown:
            raise ConfigError(
                [
                    ConfigIssue(
                        "-c env", None, "", f"unknown environment(s) {', '.join(unknown)}; known: {', '.join(known)}"
                    )
                ]
            )
        return [known[name] for name in wanted]

    def deployments(self, selection: str | None = None, locks_dir: str | Path | None = None) -> list[Deployment]:
        """Every (team, environment) to deploy; with `locks_dir`, each serves what its lock names."""
        pipeline = self.project.environments.pipeline
        where = (pipeline.account, pipeline.region) if pipeline else None
        result = []
        for environment in self.select_environments(selection):
            lock = read_lock(locks_dir, environment.name)
            for name, resolved in self.teams.items():
                served = lock.teams.get(name) if lock else None
                result.append(deploy(resolved, environment, served, where))
        return result


def load_resolved_project(
    config_dir: str | Path = "config",
    *,
    teams: Collection[str] | None = None,
    files: Collection[Path] | None = None,
) -> ResolvedProject:
    """Load and check every file, then resolve each team once; raise ConfigError listing every problem.

    `teams`: only these teams' files are read (with environments.yaml): one team's stacks, pipeline or
    check, which another team's broken file does not stop (`optigate.config.loader.team_file`). `files`:
    only these team files (`optigate validate <file>`, whatever the file's name)."""
    resolved: dict[int, ResolvedTeam] = {}

    def check(team):
        result = resolve_team(team)
        resolved[id(team)] = result
        return list(result.problems) + acknowledgement_problems(team)

    only = None if teams is None else _team_files(config_dir, teams)
    if files is not None:
        only = [*(only or []), *(Path(file) for file in files)]
    project = load_project(config_dir, team_checks=check, only=only)
    clashes = _name_clashes(project)
    teams_resolved = {name: resolved[id(team)] for name, team in project.teams.items()}
    clashes += _override_placement_issues(config_dir, project, teams_resolved)
    if clashes:
        raise ConfigError(clashes)
    return ResolvedProject(project, teams_resolved)


def _name_clashes(project: Project) -> list[ConfigIssue]:
    """`<team>-<env>` names are ambiguous with hyphens (team `a-b` in `c`, team `a` in `b-c`): two
    teams would deploy onto one endpoint, so such a pair is refused (OG610), at the second team's file."""
    pairs = [(team, environment.name) for environment in project.environments.environments for team in project.teams]
    clashes = naming.clashes(pairs)
    return [
        ConfigIssue(project.team_files[second[0]], 1, format_path(problem.path), problem.message, problem.rule_id)
        for first, second in dict.fromkeys((first, second) for first, second, _ in clashes)
        for problem in resource_names_distinct(first, second, clashes)
    ]


#: The override that replaces each key a placement finding names (`min_capacity` has none).
_OVERRIDE_OF = {"max_capacity": "autoscaling_max_capacity", "instance_count": "instance_count"}


def _key(key: str) -> PathT:
    """Where a placement finding is reported here: at the key it names (its override's path is found from it)."""
    return (key,)


def _override_placement_issues(
    config_dir: str | Path, project: Project, teams: dict[str, ResolvedTeam]
) -> list[ConfigIssue]:
    """OG533 where an environment's override (instance_count, autoscaling_max_capacity) leaves an adapter team's base
    copies without instances, reported at the override in environments.yaml (the team file's own values are checked
    when the team is resolved)."""
    path = Path(config_dir, "environments.yaml")
    document = None
    issues: list[ConfigIssue] = []
    for index, environment in enumerate(project.environments.environments):
        for name, resolved_team in teams.items():
            if resolved_team.baseline is None or not resolved_team.team.adapters:
                continue
            deployment = deploy(resolved_team, environment)
            for found in copies_fit_instances(deployment.placement.copies, _key):
                override = _OVERRIDE_OF.get(str(found.path[0]))
                if override is None:
                    continue
                own = environment.teams.get(name)
                if own is not None and getattr(own, override) is not None:
                    where: tuple[str | int, ...] = ("environments", index, "teams", name, override)
                elif getattr(environment.overrides, override) is not None:
                    where = ("environments", index, "overrides", override)
                else:
                    continue  # the team file's own values: reported at the team file
                document = document or read_yaml(path)
                text = f"team {name} in {environment.name}: {found.message}"
                issues.append(
                    ConfigIssue(document.file, document.line_of(where), format_path(where), text, found.rule_id)
                )
    return issues


def _team_files(config_dir: str | Path, teams: Collection[str]) -> list[Path]:
    files, issues = [], []
    for name in dict.fromkeys(teams):
        try:
            files.append(team_file(config_dir, name))
        except ConfigError as error:
            issues += error.issues
    if issues:
        raise ConfigError(issues)
    return files


def load_resolved_team(path: str | Path) -> ResolvedTeam:
    """One team file, checked and resolved once; raise ConfigError listing every problem."""
    resolved: list[ResolvedTeam] = []

    def check(team):
        resolved.append(resolve_team(team))
        return list(resolved[-1].problems) + acknowledgement_problems(team)

    load_team(path, team_checks=check)
    return resolved[-1]
