"""One way to name a team on every command that reads one (`plan`, `advise`, `rehearse`): its name or its file,
as the first argument or with `--team`; and one way to write an instance type, the config's (`ml.g6.2xlarge`)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

from optigate.cli.errors import UsageError

ENVIRONMENTS_FILE = "environments.yaml"
TEAM_FILE_SUFFIXES = (".yaml", ".yml")


def project_of(team_file: Path) -> Path | None:
    """The config folder a team file belongs to (`<config>/teams/x.yaml` with `<config>/environments.yaml`)."""
    config = team_file.parent.parent
    if team_file.parent.name == "teams" and (config / ENVIRONMENTS_FILE).is_file():
        return config
    return None


def is_file_argument(value: str) -> bool:
    """Whether a team argument names a file: a team's name (lowercase letters, digits, hyphens) has no `/` nor `.`."""
    return Path(value).suffix in TEAM_FILE_SUFFIXES or "/" in value or "\\" in value or Path(value).is_file()


def add_team_arguments(parser: argparse.ArgumentParser, *, required: bool) -> None:
    """TEAM (a name or a file), `--team` (the same) and `--config`."""
    need = "required: TEAM or --team" if required else "default: none"
    parser.add_argument(
        "team_argument",
        nargs="?",
        default=None,
        metavar="TEAM",
        help=f"a team's name (`team:` of a file in CONFIG/teams) or its file, e.g. chat or config/teams/chat.yaml "
        f"({need})",
    )
    parser.add_argument(
        "--team",
        default=None,
        metavar="TEAM",
        dest="team_option",
        help=f"the same as TEAM: a team's name or its file ({need})",
    )
    parser.add_argument(
        "--config", default="config", help="config folder a team's name is looked up in (default: config)"
    )


@dataclass(frozen=True)
class ChosenTeam:
    name: str  # the team's name (`team:` of its file, or the file's name when it declares none readable)
    file: Path
    config: Path | None  # the config folder the file lives in; None for a file outside one


def chosen_team(args: argparse.Namespace, command: str, *, needs_project: bool) -> ChosenTeam | None:
    """The team TEAM or --team names (None when neither is given); raise UsageError for a clash or a file a command
    that needs the team's environments cannot use; a name no file defines is the loader's ConfigError (with a
    did-you-mean)."""
    from optigate.config.loader import ConfigError, declared_team, team_file

    given = [value for value in (args.team_argument, args.team_option) if value is not None]
    if not given:
        return None
    if len(given) == 2 and given[0] != given[1]:
        raise UsageError(f"{command}: TEAM {given[0]} and --team {given[1]} name two teams; give one of them")
    value = given[0]
    option = "--team" if args.team_option is not None else "TEAM"
    if not is_file_argument(value):
        try:
            file = team_file(args.config, value)
        except ConfigError as error:  # no file defines it, or two do: one line, with the did-you-mean
            raise UsageError(f"{option} {value}: {'; '.join(issue.message for issue in error.issues)}") from None
        return ChosenTeam(declared_team(file) or value, file, Path(args.config))
    file = Path(value)
    if not file.is_file():
        raise UsageError(f"{option} {value}: no such file; give a team file or a team's name (e.g. --team chat)")
    config = project_of(file)
    if config is None and needs_project:
        raise UsageError(
            f"{command}: {value} is not in a config folder's teams/ beside {ENVIRONMENTS_FILE}, and {command} needs "
            f"the team's environments: move it to <config>/teams/, or give --team NAME --config FOLDER"
        )
    return ChosenTeam(declared_team(file) or file.stem, file, config)


def instance_type(value: str) -> str:
    """argparse `type=` for an instance type: refused without `ml.`, as config files refuse it."""
    from optigate.config.instance_names import instance_type_problem

    problem = instance_type_problem(value)
    if problem is not None:
        raise argparse.ArgumentTypeError(problem)
    return value


def instance_types(value: str) -> str:
    """argparse `type=` for a comma-separated list of instance types (`plan --compare --instance`)."""
    for name in value.split(","):
        instance_type(name.strip())
    return value
