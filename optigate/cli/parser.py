"""argparse for every command: one-line complaints, and every option's default in its help."""

from __future__ import annotations

import argparse
from typing import NoReturn

from optigate.cli.errors import UsageError


class HelpFormatter(argparse.HelpFormatter):
    """Every option's default appended to its help, unless the help already says it or there is none."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        if "%(default)" in text or "(default" in text or action.default in (None, False, argparse.SUPPRESS):
            return text
        if action.option_strings or action.nargs in (argparse.OPTIONAL, argparse.ZERO_OR_MORE):
            return f"{text} (default: %(default)s)"
        return text


class RawHelpFormatter(argparse.RawDescriptionHelpFormatter, HelpFormatter):
    """HelpFormatter that keeps the description and epilog as written (tables of exit codes)."""


class OptigateParser(argparse.ArgumentParser):
    """argparse that raises a one-line UsageError (what is wrong, then where the help is) instead of
    printing its usage block and exiting, and that shows every option's default."""

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{self.prog}: {message}; see `{self.prog} --help`")
