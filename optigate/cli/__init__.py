"""The `optigate` command line."""

from __future__ import annotations

import argparse
import sys

from optigate.cli import (
    bench_commands,
    config_commands,
    evaluate_command,
    gate_commands,
    plan_command,
    promote_commands,
)
from optigate.cli.errors import CliError, InvalidConfig, UsageError
from optigate.cli.output import stderr

__all__ = ["CliError", "InvalidConfig", "UsageError", "build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="optigate", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    # In the order `optigate --help` lists them.
    config_commands.add_validate_parser(commands)
    config_commands.add_summary_parser(commands)
    plan_command.add_plan_parser(commands)
    bench_commands.add_bench_parser(commands)
    evaluate_command.add_evaluate_parser(commands)
    gate_commands.add_rehearse_parser(commands)
    bench_commands.add_emulate_parser(commands)
    promote_commands.add_resolve_parser(commands)
    config_commands.add_schema_parser(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run one command; the only place a failure becomes a message on stderr and an exit code."""
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["evaluate"]:  # every further argument belongs to the evaluation job
        args = argparse.Namespace(job_args=argv[1:], handler=evaluate_command.cmd_evaluate)
    else:
        args = build_parser().parse_args(argv)
    # Imported after parsing: `optigate --help` and argparse's usage errors need no pydantic.
    from optigate.config.loader import ConfigError

    try:
        return args.handler(args)
    except ConfigError as error:
        failure: CliError = InvalidConfig([error])
    except CliError as error:
        failure = error
    failure.print_to(stderr)
    return failure.exit_code
