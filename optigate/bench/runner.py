"""Run a benchmark over several concurrency levels: the I/O shell the CLI and the Lambda share.

A replayed level is judged for schedule fidelity: each send's lag behind its recorded time (``sent_at -
scheduled_at``, the run's queue time). When its p99 exceeds the spec's bound the client, not the server, shaped the
load: the run carries ``refused`` (why) and a warning, and no verdict may be drawn from it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import asdict, fields, replace
from typing import Any

from optigate.bench.client import StreamingClient, Target
from optigate.bench.load import LoadSpec, run_load
from optigate.bench.metrics import RunSamples, summarize, to_epoch


def schedule_fidelity(lags_ms: list[float], bound_ms: float) -> dict[str, Any]:
    """A replayed run's lag of sends behind their schedule: p50/p99/max in ms, the bound and whether the client
    shaped the load (p99 over the bound; no send at all: unknown, so client-bound as well: fail closed)."""
    lag = summarize(lags_ms)
    p99 = lag["p99"]
    return {
        "p50_lag_ms": lag["p50"],
        "p99_lag_ms": p99,
        "max_lag_ms": lag["max"],
        "bound_ms": bound_ms,
        "client_bound": p99 is None or p99 > bound_ms,
    }


def refusal(schedule: dict[str, Any]) -> str | None:
    """Why a replayed run cannot be judged, or None when it kept its schedule."""
    if not schedule["client_bound"]:
        return None
    if schedule["p99_lag_ms"] is None:
        return "no request was sent, so the schedule's fidelity is unknown"
    return (
        f"the client fell behind the recorded schedule: p99 lag {schedule['p99_lag_ms']:.1f} ms > bound "
        f"{schedule['bound_ms']:g} ms (max {schedule['max_lag_ms']:.1f} ms), so the client, not the server, shaped "
        "the load; use more --workers, a lower --speedup or a less loaded machine"
    )


def judge_schedule(summary: dict[str, Any], run: RunSamples, bound_ms: float) -> None:
    """Add a replayed run's schedule fidelity to its result, and its refusal when the client shaped the load."""
    summary["schedule"] = schedule_fidelity(run.queue_ms, bound_ms)
    why = refusal(summary["schedule"])
    if why is not None:
        summary["refused"] = why
        summary["warnings"] = [*summary.get("warnings", []), f"c={run.concurrency}: refused: {why}"]


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
    workers: int = 1,
) -> dict[str, Any]:
    """One run per level; an interrupted or failed level keeps its completed requests and ends the run.

    `error` says why the run ended before its last level when that was not an interruption: the load
    failed (the levels before it, and what the failed level completed, are kept), or nothing could be
    reached at a level (every request failed to connect), so the levels after it were not run.

    `workers` > 1 runs each level over that many processes (optigate.bench.shards), merged exactly.
    """
    client = StreamingClient(target, timeout=timeout)
    runs = []
    interrupted = False
    error: str | None = None
    for level in levels:
        level_spec = replace(spec, concurrency=level)
        progress = on_level(level, level_spec) if on_level else None
        if workers > 1:
            from optigate.bench.shards import run_sharded  # spawns processes: only when asked to

            run, _, level_error = await run_sharded(target, level_spec, workers, timeout=timeout, stop=stop)
        else:
            result = await run_load(client, level_spec, progress=progress, stop=stop)
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
    if spec.workload is not None:  # its shape: counts, lengths, rate; never text
        from optigate.bench.workload import digest, shape

        # The digest lets `bench compare` refuse two sides that replayed different requests.
        data["load"]["workload"] = {**shape(spec.workload), "digest": digest(spec.workload)}
    if spec.components:  # the mix sent: each run's "adapters" holds its requests by adapter
        data["inference_components"] = [asdict(component) for component in spec.components]
    if error is not None:
        data["error"] = error
    return data
