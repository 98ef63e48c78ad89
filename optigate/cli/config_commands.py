"""`optigate validate`, `summary` and `schema`: the config files, checked, resolved and described."""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.table import Table

from optigate.cli.errors import CliError, InvalidConfig
from optigate.cli.output import console


def cmd_validate(args: argparse.Namespace) -> int:
    """Check config files without synthesizing: a folder (environments + teams) or single files."""
    from optigate.config.loader import ConfigError, load_environments
    from optigate.deployment import load_resolved_project, load_resolved_team

    failures: list[ConfigError] = []
    checked = 0
    for raw in args.paths:
        path = Path(raw)
        try:
            if path.is_dir():
                project = load_resolved_project(path)
                checked += 1 + len(project.teams)
            elif path.name.startswith("environments."):
                load_environments(path)
                checked += 1
            else:
                load_resolved_team(path)
                checked += 1
        except ConfigError as error:
            failures.append(error)
    if failures:  # every broken file is reported, not only the first
        raise InvalidConfig(failures)
    console.print(f"[green]✓[/green] {checked} config file(s) valid")
    return 0


def cmd_summary(args: argparse.Namespace) -> int:
    """What would be deployed, per environment and team, with every value optigate chose."""
    from optigate.deployment import load_resolved_project
    from optigate.promote.lock import default_locks_dir

    deployments = load_resolved_project(args.config).deployments(args.env, default_locks_dir(args.config))
    table = Table(title="optigate: what `cdk deploy` would create", show_lines=True)
    for column in ("stack", "endpoint", "instance", "image", "LMI settings", "rollout", "chosen by optigate"):
        table.add_column(column, overflow="fold")
    for deployment in deployments:
        team, resolved = deployment.team, deployment.resolved
        env = deployment.container_environment
        settings = "\n".join(f"{key.removeprefix('OPTION_')}={value}" for key, value in env.items())
        rollout: str = team.rollout.strategy
        if team.rollout.shadow is not None and deployment.shadow is not None:
            changed = ", ".join(f"{k}={v}" for k, v in team.rollout.shadow.candidate.items()) or "same"
            rollout += f" {team.rollout.shadow.sampling_percentage}% → {changed}"
        if team.adapters:
            rollout += f"\n{len(team.adapters)} adapters: " + ", ".join(a.name for a in team.adapters)
        served = deployment.served
        table.add_row(
            deployment.stack_name,
            deployment.endpoint_name,
            f"{deployment.instance_count} × {team.serving.instance_type}",
            (served.image if served else deployment.image_uri).split("/")[-1]
            + (f"\napproved package {served.model_package_arn.split('/', 1)[-1]}" if served else ""),
            "\n".join(f"{key.removeprefix('OPTION_')}={value}" for key, value in served.environment.items())
            if served
            else settings,
            rollout,
            "\n".join(resolved.notes) or "-",
        )
    console.print(table)
    return 0


def cmd_schema(args: argparse.Namespace) -> int:
    """Write the JSON schema of the config files, or check that the written ones are current."""
    from optigate.config.schema import stale_schemas, write_schemas

    if args.check:
        stale = stale_schemas(args.out)
        if stale:
            raise CliError(f"out of date in {args.out}: {', '.join(stale)}; run `optigate schema`")
        console.print(f"[green]✓[/green] schemas in {args.out} match the models")
        return 0
    for path in write_schemas(args.out):
        console.print(f"wrote {path}")
    return 0


def add_validate_parser(commands: argparse._SubParsersAction) -> None:
    validate = commands.add_parser("validate", help="check config files without synthesizing")
    validate.add_argument("paths", nargs="*", default=["config"], help="config folder or files (default: config)")
    validate.set_defaults(handler=cmd_validate)


def add_summary_parser(commands: argparse._SubParsersAction) -> None:
    summary = commands.add_parser("summary", help="print what would be deployed per environment and team")
    summary.add_argument("--config", default="config", help="config folder (default: config)")
    summary.add_argument("--env", default=None, help="environment(s), comma-separated (default: all)")
    summary.set_defaults(handler=cmd_summary)


def add_schema_parser(commands: argparse._SubParsersAction) -> None:
    schema = commands.add_parser("schema", help="write the JSON schema of the config files")
    schema.add_argument("--out", default="config/schema", help="folder of the schema files (default: config/schema)")
    schema.add_argument("--check", action="store_true", help="fail if the files differ from the models")
    schema.set_defaults(handler=cmd_schema)
