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


def unreachable(run: dict[str, Any]) -> bool:
    """Whether no request of a run got through to a server: each one failed to connect."""
    errors = run.get("errors") or {}
    return not run.get("successful_requests") and set(errors) == {"ConnectionError"}


async def run_levels(
    target: Target,
    levels: list[int],
    spec: LoadSpec,
    *,
    timeout: float = 120.0,
    stop: asyncio.Event | None = None,
    on_level: Callable[[int, LoadSpec], Callable[[Any], None] | None] | None = None,
    on_level_end: Callable[[int, dict[str, Any]], None] | None = None,
    include_samples: bool = True,
) -> dict[str, Any]:
    """One run per level; an interrupted or failed level keeps its completed requests and ends the run.

    `error` says why the run ended before its last level when that was not an interruption: the load
    failed (the levels before it, and what the failed level completed, are kept), or nothing could be
    reached at a level (every request failed to connect), so the levels after it were not run.
    """
    client = StreamingClient(target, timeout=timeout)
    runs = []
    interrupted = False
    error: str | None = None
    for level in levels:
        level_spec = replace(spec, concurrency=level)
        progress = on_level(level, level_spec) if on_level else None
        result = await run_load(client, level_spec, progress=progress, stop=stop)
        run = RunSamples.from_records(level, to_epoch(result.records, result.wall_offset))
        run.interrupted = result.interrupted
        summary = run.to_result(include_samples=include_samples)
        runs.append(summary)
        if on_level_end is not None:
            on_level_end(level, summary)
        if result.error is not None:
            error = f"the load at c={level} failed: {result.error}"
            break
        if result.interrupted:
            interrupted = True
            break
        if unreachable(summary) and level != levels[-1]:
            error = f"no request reached {target.url} at c={level}; the levels after it were not run"
            break
    data: dict[str, Any] = {
        "target": {k: v for k, v in asdict(target).items() if v is not None},
        # Never the prompts' text (a workload's requests): prompts do not leave the team's account.
        "load": {
            k: v for k, v in asdict(spec).items() if k not in ("prompts", "concurrency", "components", "workload")
        },
        "finished_at": time.time(),
        "interrupted": interrupted,
        "runs": runs,
    }
    if spec.components:  # the mix sent: each run's "adapters" holds its requests by adapter
        data["inference_components"] = [asdict(component) for component in spec.components]
    if error is not None:
        data["error"] = error
    return data
