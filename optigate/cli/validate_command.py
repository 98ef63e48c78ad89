"""`optigate validate`: the config files checked without synthesizing, with the notes of valid teams."""

from __future__ import annotations

import argparse
from pathlib import Path

from optigate.cli.errors import InvalidConfig
from optigate.cli.output import console


def cmd_validate(args: argparse.Namespace) -> int:
    """Check config files without synthesizing: a folder (environments + teams) or single files."""
    from optigate.config.loader import ConfigError, load_environments
    from optigate.deployment import load_resolved_project, load_resolved_team

    failures: list[ConfigError] = []
    checked = 0
    advised = []
    for raw in args.paths:
        path = Path(raw)
        try:
            if path.is_dir():
                project = load_resolved_project(path)
                checked += 1 + len(project.teams)
                advised += [(project.project.team_files[name], team) for name, team in project.teams.items()]
            elif path.name.startswith("environments."):
                load_environments(path)
                checked += 1
            else:
                advised.append((str(path), load_resolved_team(path)))
                checked += 1
        except ConfigError as error:
            failures.append(error)
    print_advisories(advised)
    if failures:  # every broken file is reported, not only the first; exit 1: validate's verdict is "invalid"
        raise InvalidConfig(failures, exit_code=1, with_rules=True)
    console.print(f"[green]✓[/green] {checked} config file(s) valid")
    return 0


def print_advisories(advised) -> None:
    """One line per advisory of a valid team (a combination the docs are silent on), at its file and line, with its
    rule's ID; those the team acknowledged are counted instead."""
    from rich.markup import escape

    from optigate.config.reader import format_path, read_yaml
    from optigate.deployment.all_rules import unacknowledged

    for file, resolved_team in advised:
        notes, acknowledged = unacknowledged(resolved_team.team, resolved_team.advisories)
        if acknowledged:
            console.print(f"{escape(file)}: {acknowledged} note(s) acknowledged", highlight=False, soft_wrap=True)
        if not notes:
            continue
        document = read_yaml(Path(file))
        for advisory in notes:
            where = f"{file}:{document.line_of(advisory.path) or 1} {format_path(advisory.path)} [{advisory.rule_id}]"
            message = f"[yellow]note[/yellow] {escape(where)}: {escape(advisory.message)}"
            console.print(message, highlight=False, soft_wrap=True)


def add_validate_parser(commands: argparse._SubParsersAction) -> None:
    validate = commands.add_parser("validate", help="check config files without synthesizing")
    validate.add_argument("paths", nargs="*", default=["config"], help="config folder or files (default: config)")
    validate.set_defaults(handler=cmd_validate)
