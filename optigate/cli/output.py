"""Where commands put results: stdout for results; stderr for errors, progress and notices; JSON files."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.segment import Segment

from optigate.cli.errors import UsageError
from optigate.jsonsafe import json_safe


class _Console(Console):
    def _render_buffer(self, buffer: Iterable[Segment]) -> str:
        """Without a terminal, no line ends in spaces: rich pads padded and justified renderables to the width,
        which a log file or `diff` then shows as trailing blanks (with a terminal, styles may follow them)."""
        text = super()._render_buffer(buffer)
        if self.is_terminal:
            return text
        return "\n".join(line.rstrip(" ") for line in text.split("\n"))

    def on_broken_pipe(self) -> None:
        """rich exits 1 itself when the reader goes away; 1 is a negative verdict here, so leave it to
        `optigate.cli.main`, which exits as a process killed by SIGPIPE would."""
        raise BrokenPipeError


# Wide tables stay readable when piped or logged by CI (rich assumes 80 columns there), and a long line (a path,
# a verdict) is not broken where a script greps for it; what must fit 100 columns (summary) wraps itself.
console = _Console(width=None if sys.stdout.isatty() else 180)
stderr = Console(stderr=True, width=None if sys.stderr.isatty() else 400)


def write_json(path: str, data: Any, indent: int | None = None) -> None:
    """A `--json PATH` result file: JSON that strict parsers read (no NaN or infinity), or a usage error."""
    try:
        Path(path).write_text(json.dumps(json_safe(data), indent=indent, allow_nan=False))
    except OSError as error:
        raise UsageError(f"cannot write {path}: {error.strerror or error}; choose another --json path") from error
