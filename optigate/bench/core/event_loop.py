"""The event loop a benchmark runs on: the client's (`optigate bench`, each shard's process), and the emulator's too."""

from __future__ import annotations

import asyncio
from typing import Any


def run_loop(coroutine: Any) -> Any:
    """uvloop when installed (a faster event loop keeps timestamps honest), else asyncio."""
    try:
        import uvloop
    except ImportError:
        return asyncio.run(coroutine)
    return uvloop.run(coroutine)
