"""What a command raises when it cannot go on; `optigate.cli.main` prints it and exits with its code.

Commands raise these (or let `ConfigError` from the loader through) instead of printing and returning
a code themselves, so that every failure is worded and rendered in one place: one line saying what
happened and what to do. Exit codes follow the user guide (docs/guide.md): 0 pass, 1 a negative verdict, 2 a usage or
input error, 3 cannot resolve (inconclusive, or an answer that needs what is not there, such as AWS
credentials).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from rich.console import Console
from rich.markup import escape

if TYPE_CHECKING:  # the loader pulls in pydantic, which `optigate --help` does not need
    from optigate.config.loader import ConfigError

USAGE_EXIT = 2
CANNOT_RESOLVE_EXIT = 3


def one_line(text: str) -> str:
    """A message folded onto one line (a library's error may span several)."""
    return " ".join(str(text).split())


class CliError(Exception):
    """A failure worth one message: printed after a red ✗ on stderr; the process exits with `exit_code`."""

    def __init__(self, message: str, exit_code: int = 1):
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code

    def print_to(self, console: Console) -> None:
        console.print(f"[red]✗[/red] {escape(one_line(self.message))}", highlight=False, soft_wrap=True)


class UsageError(CliError):
    """Arguments missing or in conflict, or input that cannot be read: exit 2 like argparse's own complaints."""

    def __init__(self, message: str, exit_code: int = USAGE_EXIT):
        super().__init__(message, exit_code)


class InvalidConfig(CliError):
    """Config files with problems: every issue on its own line, then how many, for each failed load.
    `with_rules`: each issue with the ID of the rule that reports it (`optigate validate`)."""

    def __init__(self, failures: Sequence[ConfigError], exit_code: int = USAGE_EXIT, *, with_rules: bool = False):
        super().__init__("\n".join(str(failure) for failure in failures), exit_code)
        self.failures = list(failures)
        self.with_rules = with_rules

    def print_to(self, console: Console) -> None:
        for failure in self.failures:
            for issue in failure.issues:
                line = issue.text(with_rule=self.with_rules)
                console.print(f"[red]✗[/red] {escape(line)}", highlight=False, soft_wrap=True)
            for held in failure.held_back:  # not a problem: which checks wait for a schema problem's fix
                console.print(f"[yellow]held back[/yellow] {escape(held.text())}", highlight=False, soft_wrap=True)
            console.print(f"[red]{len(failure.issues)} problem(s)[/red]")
