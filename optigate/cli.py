"""The `optigate` command line."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rich.console import Console
from rich.table import Table

from optigate.config.loader import ConfigError, load_environments, load_project, load_team

# Wide tables stay readable when piped or logged by CI (rich assumes 80 columns there).
console = Console(width=None if sys.stdout.isatty() else 180)
errors = Console(stderr=True, width=None if sys.stderr.isatty() else 400)


def _print_config_error(error: ConfigError) -> None:
    for issue in error.issues:
        errors.print(f"[red]✗[/red] {issue}", highlight=False, soft_wrap=True)
    errors.print(f"[red]{len(error.issues)} problem(s)[/red]")


def cmd_validate(args: argparse.Namespace) -> int:
    """Check config files without synthesizing: a folder (environments + teams) or single files."""
    failures: list[ConfigError] = []
    checked = 0
    for raw in args.paths:
        path = Path(raw)
        try:
            if path.is_dir():
                project = load_project(path)
                checked += 1 + len(project.teams)
            elif path.name.startswith("environments."):
                load_environments(path)
                checked += 1
            else:
                load_team(path)
                checked += 1
        except ConfigError as error:
            failures.append(error)
    for failure in failures:
        _print_config_error(failure)
    if failures:
        return 1
    console.print(f"[green]✓[/green] {checked} config file(s) valid")
    return 0


def cmd_summary(args: argparse.Namespace) -> int:
    """What would be deployed, per environment and team, with every value optigate chose."""
    from optigate.stacks.app import plan_deployments

    try:
        deployments = plan_deployments(load_project(args.config), args.env)
    except ConfigError as error:
        _print_config_error(error)
        return 1
    table = Table(title="optigate: what `cdk deploy` would create", show_lines=True)
    for column in ("stack", "endpoint", "instance", "image", "LMI settings", "rollout", "chosen by optigate"):
        table.add_column(column, overflow="fold")
    for deployment in deployments:
        team, resolved = deployment.team, deployment.resolved
        env = deployment.container_environment
        settings = "\n".join(f"{key.removeprefix('OPTION_')}={value}" for key, value in env.items())
        rollout = team.rollout.strategy
        if team.rollout.shadow is not None and deployment.shadow is not None:
            changed = ", ".join(f"{k}={v}" for k, v in team.rollout.shadow.candidate.items()) or "same"
            rollout += f" {team.rollout.shadow.sampling_percentage}% → {changed}"
        if team.adapters:
            rollout += f"\n{len(team.adapters)} adapters: " + ", ".join(a.name for a in team.adapters)
        table.add_row(
            deployment.stack_name,
            deployment.endpoint_name,
            f"{deployment.instance_count} × {team.serving.instance_type}",
            deployment.image_uri.split("/")[-1],
            settings,
            rollout,
            "\n".join(resolved.notes) or "-",
        )
    console.print(table)
    return 0


def cmd_schema(args: argparse.Namespace) -> int:
    from optigate.config.schema import stale_schemas, write_schemas

    if args.check:
        stale = stale_schemas(args.out)
        if stale:
            errors.print(f"[red]✗[/red] out of date in {args.out}: {', '.join(stale)}; run `optigate schema`")
            return 1
        console.print(f"[green]✓[/green] schemas in {args.out} match the models")
        return 0
    for path in write_schemas(args.out):
        console.print(f"wrote {path}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="optigate", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)

    validate = commands.add_parser("validate", help="check config files without synthesizing")
    validate.add_argument("paths", nargs="*", default=["config"], help="config folder or files (default: config)")
    validate.set_defaults(handler=cmd_validate)

    summary = commands.add_parser("summary", help="print what would be deployed per environment and team")
    summary.add_argument("--config", default="config")
    summary.add_argument("--env", default=None, help="environment(s), comma-separated (default: all)")
    summary.set_defaults(handler=cmd_summary)

    schema = commands.add_parser("schema", help="write the JSON schema of the config files")
    schema.add_argument("--out", default="config/schema")
    schema.add_argument("--check", action="store_true", help="fail if the files differ from the models")
    schema.set_defaults(handler=cmd_schema)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.handler(args)


if __name__ == "__main__":
    sys.exit(main())
