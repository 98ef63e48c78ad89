"""The `optigate` command line: one module per command (`*_command.py`), and `main`, the one error handler."""

from __future__ import annotations

import argparse
import os
import sys

from optigate.cli import (
    advise_command,
    bench_command,
    check_command,
    emulate_command,
    evaluate_command,
    plan_command,
    rehearse_command,
    resolve_command,
    schema_command,
    summary_command,
    validate_command,
)
from optigate.cli.errors import USAGE_EXIT, CliError, InvalidConfig, UsageError, one_line
from optigate.cli.output import stderr
from optigate.cli.parser import OptigateParser

__all__ = ["CliError", "InvalidConfig", "OptigateParser", "UsageError", "build_parser", "main"]

DEBUG_VARIABLE = "OPTIGATE_DEBUG"


def build_parser() -> argparse.ArgumentParser:
    parser = OptigateParser(prog="optigate", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True, parser_class=OptigateParser)
    # In the order `optigate --help` lists them.
    validate_command.add_validate_parser(commands)
    check_command.add_check_parser(commands)
    summary_command.add_summary_parser(commands)
    plan_command.add_plan_parser(commands)
    advise_command.add_advise_parser(commands)
    bench_command.add_bench_parser(commands)
    evaluate_command.add_evaluate_parser(commands)
    rehearse_command.add_rehearse_parser(commands)
    emulate_command.add_emulate_parser(commands)
    resolve_command.add_resolve_parser(commands)
    schema_command.add_schema_parser(commands)
    return parser


#: 128 + SIGPIPE, what a shell reports for a writer whose reader closed the pipe.
BROKEN_PIPE_EXIT = 141


def _run(argv: list[str]) -> int:
    if argv[:1] == ["evaluate"]:  # every further argument belongs to the evaluation job
        args = argparse.Namespace(job_args=argv[1:], handler=evaluate_command.cmd_evaluate)
    else:
        args = build_parser().parse_args(argv)
    return args.handler(args)


def main(argv: list[str] | None = None) -> int:
    """Run one command; the only place a failure becomes a message on stderr and an exit code.

    Every failure is one line on stderr (a config's problems one line each) and an exit code: 2 for
    usage and input errors, or the code the command chose. Anything unforeseen is a bug of optigate:
    one line as well, exit 2, and `OPTIGATE_DEBUG=1` re-raises it so its traceback shows.
    """
    argv = sys.argv[1:] if argv is None else argv
    debug = os.environ.get(DEBUG_VARIABLE, "") not in ("", "0")
    try:
        return _run(argv)
    except CliError as error:
        failure = error
    except KeyboardInterrupt:
        failure = CliError("interrupted", exit_code=130)
    except BrokenPipeError:
        # The reader went away (`optigate summary | head`): not a failure to report. Point stdout at devnull so
        # the interpreter's final flush does not raise again, and exit as a process killed by SIGPIPE would.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return BROKEN_PIPE_EXIT
    except Exception as error:
        # Imported here: `optigate --help` and argparse's usage errors need no pydantic.
        from optigate.config.loader import ConfigError

        if isinstance(error, ConfigError):
            failure = InvalidConfig([error])
        else:
            if debug:
                raise
            failure = CliError(
                f"unexpected {type(error).__name__}: {one_line(str(error)) or 'no message'}; this is a bug in "
                f"optigate: rerun with {DEBUG_VARIABLE}=1 for the traceback and report it",
                exit_code=USAGE_EXIT,
            )
    if debug and failure.__cause__ is not None:
        import traceback

        traceback.print_exception(failure.__cause__, file=sys.stderr)
    failure.print_to(stderr)
    return failure.exit_code
