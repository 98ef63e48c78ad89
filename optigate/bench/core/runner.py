"""Run a benchmark over several concurrency levels: the I/O shell the CLI and the Lambda share.

A replayed level is judged for schedule fidelity: each send's lag behind its recorded time (``sent_at -
scheduled_at``, the run's queue time). When its p99 exceeds the spec's bound the client, not the server, shaped the
load: the run carries ``refused`` (why) and a warning, and no verdict may be drawn from it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, fields, replace
from typing import Any

from optigate.bench.core.client import StreamingClient, Target
from optigate.bench.core.load import LoadSpec, run_load
from optigate.bench.core.metrics import RunSamples, to_epoch
from optigate.bench.core.result_format import FORMAT_VERSION
from optigate.bench.core.schedule import judge_schedule


def unreachable(run: dict[str, Any]) -> bool:
    """Whether no request of a run got through to a server: each one failed to connect."""
    errors = run.get("errors") or {}
    return not run.get("successful_requests") and set(errors) == {"ConnectionError"}


# Over 80 lines: one level after another, each way a level can end (done, interrupted, failed) in one loop.
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
    workers: int = 1,
    start_at: Callable[[], Awaitable[float]] | None = None,
) -> dict[str, Any]:
    """One run per level; an interrupted or failed level keeps its completed requests and ends the run.

    `error` says why the run ended before its last level when that was not an interruption: the load
    failed (the levels before it, and what the failed level completed, are kept), or nothing could be
    reached at a level (every request failed to connect), so the levels after it were not run.

    `workers` > 1 runs each level over that many processes (optigate.bench.core.shards), merged exactly.
    `start_at` (a replay in one process) gives the schedule's start in epoch seconds: the gate's workers, each a
    shard of one replay in its own Lambda, share it (optigate.lambdas.benchmark).
    """
    client = StreamingClient(target, timeout=timeout)
    runs = []
    interrupted = False
    error: str | None = None
    for level in levels:
        level_spec = replace(spec, concurrency=level)
        progress = on_level(level, level_spec) if on_level else None
        if workers > 1:
            from optigate.bench.core.shards import run_sharded  # spawns processes: only when asked to

            run, _, level_error = await run_sharded(target, level_spec, workers, timeout=timeout, stop=stop)
        else:
            result = await run_load(client, level_spec, progress=progress, stop=stop, start_at=start_at)
            run = RunSamples.from_records(level, to_epoch(result.records, result.wall_offset))
            run.interrupted, level_error = result.interrupted, result.error
        summary = run.to_result(include_samples=include_samples)
        if spec.mode == "replay":
            judge_schedule(summary, run, spec.max_lag_ms)
        runs.append(summary)
        if on_level_end is not None:
            on_level_end(level, summary)
        if level_error is not None:
            error = f"the load at c={level} failed: {level_error}"
            break
        if run.interrupted:
            interrupted = True
            break
        if unreachable(summary) and level != levels[-1]:
            error = f"no request reached {target.url} at c={level}; the levels after it were not run"
            break
    data: dict[str, Any] = {
        # The layout of optigate.bench.result_file.BenchResultFile, the model its readers check it against.
        "format_version": FORMAT_VERSION,
        "target": {k: v for k, v in asdict(target).items() if v is not None},
        # Never the prompts' text (a workload's requests): prompts do not leave the team's account.
        "load": {
            field.name: getattr(spec, field.name)
            for field in fields(spec)
            if field.name not in ("prompts", "concurrency", "components", "workload")
        },
        "finished_at": time.time(),
        "interrupted": interrupted,
        "runs": runs,
    }
    data["load"]["workers"] = workers
    # What was sent, not the synthetic defaults: a workload's requests carry their own prompts and output lengths
    # (its shape below), a prompts file its own prompts; only the closed loop sends a warm-up request first.
    data["load"]["warmup"] = spec.warms_up
    if spec.workload is not None or spec.prompts:
        data["load"]["prompt_tokens"] = None
    if spec.workload is not None:  # its shape: counts, lengths, rate; never text
        data["load"]["max_new_tokens"] = None
        from optigate.bench.core.workload import digest, shape

        # The digest lets `bench compare` refuse two sides that replayed different requests.
        data["load"]["workload"] = {**shape(spec.workload), "digest": digest(spec.workload)}
    if spec.components:  # the mix sent: each run's "adapters" holds its requests by adapter
        data["inference_components"] = [asdict(component) for component in spec.components]
    if error is not None:
        data["error"] = error
    return data
