"""`optigate validate`: the config files checked without synthesizing, with the notes of valid teams.

A team file is checked with the project it lives in (`<config>/teams/<team>.yaml` beside
`<config>/environments.yaml`): the environments' rules that read it (data capture, overrides) apply, so a team's
own CI check gives the verdict `optigate validate` of the whole folder gives. A file outside such a layout is
checked alone, and the run says so.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from pathlib import Path

from rich.markup import escape

from optigate.cli.errors import InvalidConfig, UsageError
from optigate.cli.output import console
from optigate.cli.team_argument import ENVIRONMENTS_FILE, TEAM_FILE_SUFFIXES, project_of


@dataclass
class Selection:
    """What the paths name: whole projects, team files grouped by their project, files to check alone."""

    projects: list[Path] = field(default_factory=list)
    teams_by_project: dict[Path, list[Path]] = field(default_factory=dict)
    alone: list[Path] = field(default_factory=list)
    environments_files: list[Path] = field(default_factory=list)

    def add_file(self, path: Path) -> None:
        if path.name.startswith("environments."):
            self.environments_files.append(path)
            return
        config = project_of(path)
        if config is None:
            self.alone.append(path)
        elif path not in self.teams_by_project.setdefault(config, []):
            self.teams_by_project[config].append(path)


def select(paths: list[str]) -> Selection:
    """Sort the command's paths: a folder with environments.yaml is a project; another folder is its team files."""
    selection = Selection()
    for raw in paths:
        path = Path(raw)
        if path.is_dir() and (path / ENVIRONMENTS_FILE).is_file():
            selection.projects.append(path)
        elif path.is_dir() and path.name == "teams" and (path.parent / ENVIRONMENTS_FILE).is_file():
            selection.projects.append(path.parent)  # a project's every team file: the project, checked whole
        elif path.is_dir():
            files = sorted(p for p in path.iterdir() if p.is_file() and p.suffix in TEAM_FILE_SUFFIXES)
            if not files:
                raise UsageError(
                    f"{raw}: no {ENVIRONMENTS_FILE} and no team files (*.yaml) in it; "
                    "give a config folder or team files"
                )
            for file in files:
                selection.add_file(file)
        else:
            selection.add_file(path)  # a file that does not exist is reported by the loader at its name
    # A project named whole already checks its team files.
    whole = {path.resolve() for path in selection.projects}
    selection.teams_by_project = {
        config: files for config, files in selection.teams_by_project.items() if config.resolve() not in whole
    }
    return selection


def cmd_validate(args: argparse.Namespace) -> int:
    """Check config files without synthesizing: config folders, folders of team files, or single files."""
    from optigate.config.loader import ConfigError, load_environments
    from optigate.deployment import load_resolved_project, load_resolved_team

    selection = select(args.paths)
    failures: list[ConfigError] = []
    checked = 0
    advised = []
    for config in selection.projects:
        try:
            project = load_resolved_project(config)
            checked += 1 + len(project.teams)
            advised += [(project.project.team_files[name], team) for name, team in project.teams.items()]
        except ConfigError as error:
            failures.append(error)
    for config, files in selection.teams_by_project.items():
        try:
            # Exactly these files are read (with environments.yaml), whatever team each declares.
            project = load_resolved_project(config, files=files)
            checked += len(project.teams)
            advised += [(project.project.team_files[name], team) for name, team in project.teams.items()]
        except ConfigError as error:
            failures.append(error)
    for path in selection.environments_files:
        try:
            load_environments(path)
            checked += 1
        except ConfigError as error:
            failures.append(error)
    for path in selection.alone:
        try:
            advised.append((str(path), load_resolved_team(path)))
            checked += 1
        except ConfigError as error:
            failures.append(error)
        if path.exists():
            console.print(
                f"[yellow]note[/yellow] {escape(str(path))}: no {ENVIRONMENTS_FILE} found (the file is not in "
                f"<config>/teams/): checked alone, without the environments' rules (data capture, overrides); "
                f"validate it inside its config folder for the full verdict",
                highlight=False,
                soft_wrap=True,
            )
    print_advisories(advised)
    if failures:  # every broken file is reported, not only the first; exit 1: validate's verdict is "invalid"
        raise InvalidConfig(failures, exit_code=1, with_rules=True)
    console.print(f"[green]✓[/green] {checked} config file(s) valid")
    return 0


def print_advisories(advised) -> None:
    """One line per advisory of a valid team (a combination the docs are silent on), at its file and line, with its
    rule's ID; those the team acknowledged are counted instead."""
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
    validate.add_argument(
        "paths",
        nargs="*",
        default=["config"],
        help="config folders, folders of team files, or files; a team file under <config>/teams/ is checked with "
        "<config>/environments.yaml (default: config)",
    )
    validate.set_defaults(handler=cmd_validate)
