"""The consoles every command prints to: results on stdout; errors, progress and notices on stderr."""

from __future__ import annotations

import sys

from rich.console import Console

# Wide tables stay readable when piped or logged by CI (rich assumes 80 columns there).
console = Console(width=None if sys.stdout.isatty() else 180)
stderr = Console(stderr=True, width=None if sys.stderr.isatty() else 400)
