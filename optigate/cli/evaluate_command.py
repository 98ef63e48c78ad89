"""`optigate evaluate`: quality with fmeval, in whichever environment has fmeval installed."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from optigate.cli.errors import CliError

NO_FMEVAL = (
    "fmeval is not installed here; `. scripts/setup.sh` creates .venv-eval with it"
    " (fmeval 1.2.3 pins sagemaker<3, so it has its own environment)"
)


def fmeval_python() -> Path:
    """The interpreter of the fmeval environment: $OPTIGATE_EVAL_PYTHON, else .venv-eval in the working directory.

    Looked up from where the command runs, not from the package's location, so an installed wheel behaves
    like a checkout (scripts/setup.sh exports OPTIGATE_EVAL_PYTHON).
    """
    return Path(os.environ.get("OPTIGATE_EVAL_PYTHON") or Path.cwd() / ".venv-eval" / "bin" / "python")


def cmd_evaluate(args: argparse.Namespace) -> int:
    """Quality evaluation with fmeval, run in the evaluation environment
    (see optigate/containers/evaluate/requirements.txt)."""
    import subprocess

    if {"-h", "--help"} & set(args.job_args):
        # Help needs neither fmeval nor its environment (starting that imports the SageMaker SDK, seconds).
        from optigate.cli.parser import RawHelpFormatter
        from optigate.evaluate.job import build_parser

        parser = build_parser()
        parser.formatter_class = RawHelpFormatter  # every option's default shown
        parser.print_help()
        return 0
    try:
        import fmeval  # noqa: F401
    except ImportError:
        python = fmeval_python()
        if not python.exists():
            raise CliError(NO_FMEVAL, exit_code=2) from None
        return subprocess.call([str(python), "-m", "optigate.evaluate.job", *args.job_args])
    from optigate.evaluate.job import main as job_main

    return job_main(args.job_args)


def add_evaluate_parser(commands: argparse._SubParsersAction) -> None:
    # Listed for `optigate --help`; `main` hands every argument after `evaluate` to the job (it has its own -h).
    evaluate = commands.add_parser(
        "evaluate",
        help="baseline vs candidate quality with fmeval; exit 0 pass, 1 fail, 2 input error, 3 cannot resolve"
        " (see `optigate evaluate -h`)",
        add_help=False,
    )
    evaluate.add_argument(
        "job_args", nargs=argparse.REMAINDER, help="the evaluation's arguments; see `optigate evaluate -h`"
    )
    evaluate.set_defaults(handler=cmd_evaluate)
