"""Run a benchmark over several concurrency levels: the I/O shell the CLI and the Lambda share."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import asdict, replace
from typing import Any

from optigate.bench.client import StreamingClient, Target
from optigate.bench.load import LoadSpec, run_load
from optigate.bench.metrics import RunSamples, to_epoch


async def run_levels(
    target: Target,
    levels: list[int],
    spec: LoadSpec,
    *,
    timeout: float = 120.0,
    stop: asyncio.Event | None = None,
    on_level: Callable[[int, LoadSpec], Callable[[Any], None] | None] | None = None,
    include_samples: bool = True,
) -> dict[str, Any]:
    """One run per level; an interrupted level keeps its completed requests and ends the run."""
    client = StreamingClient(target, timeout=timeout)
    runs = []
    interrupted = False
    for level in levels:
        level_spec = replace(spec, concurrency=level)
        progress = on_level(level, level_spec) if on_level else None
        result = await run_load(client, level_spec, progress=progress, stop=stop)
        run = RunSamples.from_records(level, to_epoch(result.records, result.wall_offset))
        run.interrupted = result.interrupted
        runs.append(run.to_result(include_samples=include_samples))
        if result.interrupted:
            interrupted = True
            break
    return {
        "target": {k: v for k, v in asdict(target).items() if v is not None},
        "load": {k: v for k, v in asdict(spec).items() if k not in ("prompts", "concurrency")},
        "finished_at": time.time(),
        "interrupted": interrupted,
        "runs": runs,
    }
