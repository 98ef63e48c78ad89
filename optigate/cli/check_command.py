"""`optigate check`: a config repository checked as its pipelines need it, team by team.

For each team: its file validated with environments.yaml (`optigate validate`'s rules and notes), its stacks in every
environment synthesized as `cdk synth -c team=<team>` builds them (cdk-nag AwsSolutions inside the synth), and cfn-lint
over each template. A team passes or fails on its own file (and environments.yaml): another team's broken file fails
that team's check, not this one's. Without `--team`, every team file is checked, and the project as a whole too (what
spans files: two teams on one endpoint name, an environment's settings for a team no file defines).

This is what a platform's pipelines run on the config repository (the platform's every team, a team's pipeline its
own); optigate's test suite is optigate's own CI and reads none of it. Every failure is one line on stderr naming the
file; exit 0 every team passed, 1 a check failed, 2 a usage or input error.
"""

from __future__ import annotations

import argparse
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from rich.markup import escape

from optigate.cli.errors import CliError, UsageError
from optigate.cli.output import console, stderr
from optigate.cli.team_argument import ENVIRONMENTS_FILE

if TYPE_CHECKING:
    from optigate.config.reader import ConfigIssue


@dataclass(frozen=True)
class TeamToCheck:
    name: str
    file: Path


@dataclass(frozen=True)
class Problem:
    """One failure, one line; `where` tells two wordings of one problem apart from two problems (environments.yaml's
    problem is every team's, reported once: with the whole project's did-you-mean, or without)."""

    where: tuple[object, ...]
    line: str


def cmd_check(args: argparse.Namespace) -> int:
    from optigate.stacks.team_check import cfn_lint_missing

    config = Path(args.config)
    if not (config / ENVIRONMENTS_FILE).is_file():
        raise UsageError(f"{config}: no {ENVIRONMENTS_FILE} in it; give the config folder with --config")
    if cfn_lint_missing():
        raise UsageError("optigate check needs cfn-lint (the check extra): pip install 'optigate[check]'")
    teams = _teams(config, args.teams)
    printed: set[tuple[object, ...]] = set()

    def fail(problem: Problem) -> None:
        if problem.where not in printed:
            printed.add(problem.where)
            stderr.print(f"[red]✗[/red] {escape(problem.line)}", highlight=False, soft_wrap=True)

    failed: list[str] = []
    by_file = {} if args.teams else _project_problems(config)  # what spans files: only the whole project shows it
    own = {team.file.resolve() for team in teams}
    for path in [path for path in by_file if path not in own]:  # environments.yaml, or a file no team was read from
        for problem in by_file[path]:
            fail(problem)
        failed.append(_display(path))
    with tempfile.TemporaryDirectory(prefix="optigate-check-") as scratch:
        out = Path(args.out) if args.out else Path(scratch)
        for team in teams:
            where = _display(team.file)
            problems = _check_team(config, team, out / team.name, by_file.get(team.file.resolve(), []))
            for problem in problems:
                fail(problem)
            if problems:
                failed.append(f"{team.name} ({where})")
                console.print(
                    f"[red]✗[/red] {escape(team.name)} ({escape(where)}): {len(problems)} problem(s)",
                    highlight=False,
                    soft_wrap=True,
                )
    if failed:
        raise CliError(f"optigate check failed: {'; '.join(failed)}", exit_code=1)
    console.print(
        f"[green]✓[/green] {len(teams)} team(s) checked: valid, synthesized with cdk-nag, cfn-lint without errors"
    )
    return 0


def _issue(issue: ConfigIssue) -> Problem:
    return Problem((issue.file, issue.line, issue.path, issue.rule), issue.text(with_rule=True))


def _project_problems(config: Path) -> dict[Path, list[Problem]]:
    """The whole project's problems by file (resolved path): among them those that span files, which no one team's
    check shows (two teams on one endpoint name)."""
    from optigate.config.loader import ConfigError
    from optigate.deployment import load_resolved_project

    try:
        load_resolved_project(config)
    except ConfigError as error:
        by_file: dict[Path, list[Problem]] = {}
        for issue in error.issues:
            by_file.setdefault(Path(issue.file).resolve(), []).append(_issue(issue))
        return by_file
    return {}


def _check_team(config: Path, team: TeamToCheck, outdir: Path, found: list[Problem]) -> list[Problem]:
    """Validate, synthesize and lint one team: its problems (`found`: the whole project's about its file; a team
    with problems in its files is not synthesized), none when it passed."""
    from optigate.cli.validate_command import print_advisories
    from optigate.config.loader import ConfigError
    from optigate.deployment import load_resolved_project
    from optigate.stacks.team_check import lint, synthesize_team

    where = _display(team.file)
    try:
        project = load_resolved_project(config, files=[team.file])
        if found:
            return found
        print_advisories([(project.project.team_files[name], resolved) for name, resolved in project.teams.items()])
        outdir.mkdir(parents=True, exist_ok=True)
        synth = synthesize_team(config, team.name, outdir)
    except ConfigError as error:
        mine = [_issue(issue) for issue in error.issues]
        return [*found, *(problem for problem in mine if problem.where not in {f.where for f in found})]
    findings = list(synth.findings)
    for template in synth.templates:
        findings += lint(template)
    if not findings:
        console.print(
            f"[green]✓[/green] {escape(team.name)} ({escape(where)}): valid, {len(synth.templates)} stack(s) "
            "synthesized with cdk-nag, cfn-lint without errors",
            highlight=False,
            soft_wrap=True,
        )
    lines = dict.fromkeys(f"{where}: {finding}" for finding in findings)
    return [Problem((line,), line) for line in lines]


def _teams(config: Path, names: list[str] | None) -> list[TeamToCheck]:
    """The teams `--team` names (each looked up as `cdk synth -c team=` does), or every team file's."""
    from optigate.config.loader import ConfigError, declared_team, team_file, team_files

    if names:
        chosen = []
        for name in dict.fromkeys(n.strip() for value in names for n in value.split(",") if n.strip()):
            try:
                chosen.append(TeamToCheck(name, team_file(config, name)))
            except ConfigError as error:
                raise UsageError(f"--team {name}: {error.issues[0].message}") from error
        return chosen
    files = team_files(config)
    if not files:
        raise UsageError(f"{_display(config / 'teams')}: no team files (*.yaml) in it")
    return [TeamToCheck(declared_team(path) or path.stem, path) for path in files]


def _display(path: Path) -> str:
    from optigate.config.reader import display_name

    return display_name(path)


def add_check_parser(commands: argparse._SubParsersAction) -> None:
    check = commands.add_parser(
        "check",
        help="a config repository as its pipelines check it: validate, cdk synth with cdk-nag and cfn-lint, per team",
    )
    check.add_argument("--config", default="config", help="config folder (default: config)")
    check.add_argument(
        "--team",
        dest="teams",
        action="append",
        metavar="TEAM",
        help="check only this team (repeat, or a,b; a team's pipeline checks its own); default: every team file, and "
        "what spans the files",
    )
    check.add_argument(
        "--out", default=None, metavar="DIR", help="keep the synthesized templates in DIR/<team> (default: a temp dir)"
    )
    check.set_defaults(handler=cmd_check)
