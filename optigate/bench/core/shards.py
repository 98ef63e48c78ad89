"""One load level split over several processes (`optigate bench --workers N`), so the client is not what limits
the load: one asyncio process timestamps a few hundred streams accurately on two cores
(benchmarks/client_capacity.py measures where it stops), several share the streams between them.

A closed or open loop splits its concurrency (and an open loop its rate) between the shards; a workload's requests
are dealt round-robin (shard k sends requests k, k+N, ...). A replay deals its arrivals the same way and every
shard keeps their recorded offsets from one start time, which the parent announces once every shard has its
connections open: the merged arrivals are the recorded schedule. Each shard's records come back whole and the
level's samples are merged exactly (optigate.bench.core.metrics.merge).

Shards run in spawned processes (each its own interpreter and event loop: a fork of a running loop is unsafe); they
ignore Ctrl-C and stop when the parent tells them to, returning what completed.
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import os
import signal
import time
from dataclasses import replace
from multiprocessing.connection import Connection as Pipe
from typing import Any

from optigate.bench.core.client import StreamingClient, Target
from optigate.bench.core.event_loop import run_loop
from optigate.bench.core.load import LoadResult, LoadSpec, run_load
from optigate.bench.core.metrics import RunSamples, merge, to_epoch
from optigate.bench.core.workload import Workload

#: The replay starts this long after every shard reported its connections open (the announcement's travel time).
START_MARGIN_S = 0.2


def _share(total: int, shards: int, shard: int) -> int:
    return total // shards + (1 if shard < total % shards else 0)


def split_spec(spec: LoadSpec, workers: int) -> list[LoadSpec]:
    """The spec of each of `workers` shards of one level; ValueError when the level cannot be split that far."""
    if workers < 1:
        raise ValueError(f"workers must be at least 1, got {workers}")
    if workers == 1:
        return [spec]
    workload = spec.workload
    if spec.mode == "replay" and workload is not None and spec.requests is not None:
        # The first `requests` arrivals of the schedule, dealt: the budget is the whole level's.
        workload = Workload(workload.requests[: spec.requests], workload.kind, workload.source)
    if spec.mode != "replay" and spec.concurrency < workers:
        raise ValueError(
            f"c={spec.concurrency} cannot be split over {workers} workers: give at most {spec.concurrency}"
        )
    if workload is not None and len(workload.requests) < workers:
        raise ValueError(f"a workload of {len(workload.requests)} requests cannot be dealt to {workers} workers")
    shards = []
    for shard in range(workers):
        changes: dict[str, Any] = {
            "concurrency": max(1, _share(spec.concurrency, workers, shard)),
            "seed": spec.seed + shard,
        }
        if workload is not None:
            changes["workload"] = Workload(workload.requests[shard::workers], workload.kind, workload.source)
        if spec.mode == "replay":
            changes["requests"] = None  # already cut above
        elif spec.requests is not None:
            changes["requests"] = _share(spec.requests, workers, shard)
        if spec.mode == "open" and spec.rate:
            changes["rate"] = spec.rate / workers
        shards.append(replace(spec, **changes))
    if spec.mode != "replay" and any(s.requests == 0 for s in shards):
        raise ValueError(f"{spec.requests} requests cannot be split over {workers} workers")
    return shards


def _shard_process(pipe: Pipe, target: Target, spec: LoadSpec, timeout: float) -> None:
    """A shard's process: run the level, send back its LoadResult (records on this host's monotonic clock)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent stops the shards: it keeps what they measured

    async def main() -> LoadResult:
        loop = asyncio.get_running_loop()
        stop = asyncio.Event()
        start: asyncio.Future[float] = loop.create_future()

        def on_message() -> None:
            try:
                kind, value = pipe.recv()
            except EOFError:  # the parent is gone
                kind, value = "stop", None
            if kind == "start" and not start.done():
                start.set_result(value)
            elif kind == "stop":
                stop.set()
                if not start.done():
                    start.set_result(time.time())

        loop.add_reader(pipe.fileno(), on_message)
        os.set_blocking(pipe.fileno(), True)  # the loop made it non-blocking: a large result must not meet EAGAIN

        async def start_at() -> float:
            pipe.send(("ready", None))
            return await start

        client = StreamingClient(target, timeout=timeout)
        try:
            return await run_load(client, spec, stop=stop, start_at=start_at if spec.mode == "replay" else None)
        finally:
            loop.remove_reader(pipe.fileno())

    try:
        pipe.send(("result", run_loop(main())))
    except Exception as failure:  # said to the parent, which reports it as the level's error
        pipe.send(("failed", f"{type(failure).__name__}: {failure}"))
    finally:
        pipe.close()


class _Shard:
    def __init__(self, context: Any, target: Target, spec: LoadSpec, timeout: float) -> None:
        self.spec = spec
        self.pipe, child = context.Pipe()
        self.process = context.Process(target=_shard_process, args=(child, target, spec, timeout), daemon=True)
        self.process.start()
        child.close()
        self.messages: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
        asyncio.get_running_loop().add_reader(self.pipe.fileno(), self._receive)
        # Readiness comes from the loop; a shard's result is read whole, however many socket reads it takes.
        os.set_blocking(self.pipe.fileno(), True)

    def _receive(self) -> None:
        try:
            message = self.pipe.recv()
        except (EOFError, OSError):
            message = ("failed", f"a shard process exited without a result (exit code {self.process.exitcode})")
            asyncio.get_running_loop().remove_reader(self.pipe.fileno())
        self.messages.put_nowait(message)

    def send(self, kind: str, value: Any = None) -> None:
        with contextlib.suppress(OSError):  # it ended already: its result or failure is in the queue
            self.pipe.send((kind, value))

    def close(self) -> None:
        with contextlib.suppress(ValueError, OSError):
            asyncio.get_running_loop().remove_reader(self.pipe.fileno())
        self.pipe.close()
        self.process.join(5)
        if self.process.is_alive():
            self.process.kill()
            self.process.join(5)


async def run_sharded(
    target: Target, spec: LoadSpec, workers: int, *, timeout: float = 120.0, stop: asyncio.Event | None = None
) -> tuple[RunSamples, list[LoadResult], str | None]:
    """Run one level over `workers` processes: the merged samples (epoch times), each shard's LoadResult (records on
    the host's monotonic clock, as the emulator's trace), and the first shard's failure if one failed."""
    specs = split_spec(spec, workers)
    context = multiprocessing.get_context("spawn")
    shards = [_Shard(context, target, shard_spec, timeout) for shard_spec in specs]
    stop = stop or asyncio.Event()

    async def relay_stop() -> None:
        await stop.wait()
        for shard in shards:
            shard.send("stop")

    relay = asyncio.create_task(relay_stop())
    results: list[LoadResult] = []
    failures: list[str] = []
    try:
        pending = list(shards)
        if spec.mode == "replay":
            ready = []
            for shard in shards:
                kind, value = await shard.messages.get()
                if kind == "ready":
                    ready.append(shard)
                else:
                    shard.messages.put_nowait((kind, value))
            start = time.time() + START_MARGIN_S
            for shard in ready:
                shard.send("start", start)
        for shard in pending:
            kind, value = await shard.messages.get()
            if kind == "result":
                results.append(value)
            else:
                failures.append(str(value))
                results.append(LoadResult([], False, 0.0, str(value)))
    finally:
        relay.cancel()
        for shard in shards:
            shard.close()
    runs = []
    for shard_spec, result in zip(specs, results, strict=True):
        run = RunSamples.from_records(shard_spec.concurrency, to_epoch(result.records, result.wall_offset))
        run.interrupted = result.interrupted
        runs.append(run)
    merged = merge(runs)
    for run in (merged, *merged.by_adapter.values()):
        run.concurrency = spec.concurrency  # the level asked for (a replay's shards open at least one connection)
    errors = failures or [result.error for result in results if result.error]
    return merged, results, errors[0] if errors else None
