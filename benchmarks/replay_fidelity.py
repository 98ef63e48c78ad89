"""Does a replay keep its schedule at 100 requests/s on this machine?

Replays a recorded schedule (Poisson arrivals at --rate, seeded, or a capture given with --workload) against
`optigate emulate` on 127.0.0.1 (its own process) and prints the schedule fidelity the run is judged by (lag of
each send behind its recorded time: p50, p99, max; refused when p99 exceeds --max-lag-ms), and how well the
emulator's own receive times reproduce the recorded inter-arrival gaps (|replayed gap - recorded gap|).

    python benchmarks/replay_fidelity.py [--rate 100] [--seconds 20] [--workers 1] [--max-lag-ms 5]

Target (issue 27): p99 lag <= 5 ms at 100 requests/s on 2 cores, or the run refuses itself and says so.
"""

from __future__ import annotations

import argparse
import itertools
import os
import random
import time

from optigate.bench.core.client import StreamingClient, Target
from optigate.bench.core.event_loop import run_loop
from optigate.bench.core.load import LoadSpec, run_load
from optigate.bench.core.metrics import RunSamples, percentile, to_epoch
from optigate.bench.core.runner import judge_schedule
from optigate.bench.core.workload import Workload, WorkloadRequest
from optigate.emulator.process import emulator_process, fetch_trace


def poisson_workload(rate: float, seconds: float, seed: int, max_new_tokens: int) -> Workload:
    rng = random.Random(seed)
    requests, at = [], 0.0
    while at < seconds:
        requests.append(WorkloadRequest({"inputs": "hello " * 64}, max_new_tokens, 64, offset_s=at))
        at += rng.expovariate(rate)
    return Workload(tuple(requests), "replay", f"poisson {rate}/s")


def capture_workload(source: str, speedup: float) -> Workload:
    from optigate.bench.core.capture import read_capture
    from optigate.bench.core.workload import from_capture

    return from_capture(read_capture(source), kind="replay", speedup=speedup, source=source)


async def replay(url: str, spec: LoadSpec, workers: int):
    """(run summary judged as the runner judges it, records on the host's monotonic clock)."""
    target = Target("fidelity", endpoint_url=url)
    if workers > 1:
        from optigate.bench.core.shards import run_sharded

        run, results, error = await run_sharded(target, spec, workers, timeout=60)
        records = [record for result in results for record in result.records]
    else:
        result = await run_load(StreamingClient(target, timeout=60), spec)
        run, records, error = (
            RunSamples.from_records(1, to_epoch(result.records, result.wall_offset)),
            result.records,
            None,
        )
    summary = run.to_result(include_samples=False)
    judge_schedule(summary, run, spec.max_lag_ms)
    return summary, records, error


def gap_errors_ms(records, trace) -> list[float]:
    ordered = sorted((r for r in records if r.request_id in trace), key=lambda r: r.scheduled_at)
    recorded = [b.scheduled_at - a.scheduled_at for a, b in itertools.pairwise(ordered)]
    received = [trace[r.request_id]["received_at"] for r in ordered]
    replayed = [b - a for a, b in itertools.pairwise(received)]
    return sorted(abs(x - y) * 1000 for x, y in zip(recorded, replayed, strict=True))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rate", type=float, default=100.0, help="Poisson arrivals per second (default 100)")
    parser.add_argument("--seconds", type=float, default=20.0, help="length of the schedule (default 20)")
    parser.add_argument("--workload", help="replay this capture instead of Poisson arrivals")
    parser.add_argument("--speedup", type=float, default=1.0)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--max-lag-ms", type=float, default=5.0)
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--ttft-ms", type=float, default=150.0)
    parser.add_argument("--itl-ms", type=float, default=15.0)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    workload = (
        capture_workload(args.workload, args.speedup)
        if args.workload
        else poisson_workload(args.rate, args.seconds, 1, args.max_new_tokens)
    )
    spec = LoadSpec(concurrency=32, requests=None, mode="replay", workload=workload, max_lag_ms=args.max_lag_ms, seed=1)
    config = {"default": {"ttft_ms": args.ttft_ms, "itl_ms": args.itl_ms}}
    load = os.getloadavg()
    print(
        f"{len(workload.requests)} requests over {workload.requests[-1].offset_s:.1f} s ({workload.source}), "
        f"{args.workers} worker(s), {os.cpu_count()} cores, load average {load[0]:.1f} at start"
    )
    header = (
        f"{'run':>3} | {'lag p50':>7} {'p99':>6} {'max':>7} | {'gap err p50':>11} {'p95':>6} {'p99':>6} | "
        f"{'sent':>5} {'ok':>5} | verdict"
    )
    print(header)
    print("-" * len(header))
    with emulator_process(config) as url:
        for repeat in range(1, args.repeats + 1):
            fetch_trace(url, clear=True)
            started, cpu = time.monotonic(), time.process_time()
            summary, records, error = run_loop(replay(url, spec, args.workers))
            cpu_share = (time.process_time() - cpu) / (time.monotonic() - started)
            trace = fetch_trace(url, clear=True)
            schedule = summary["schedule"]
            if error or schedule["p99_lag_ms"] is None:
                print(f"{repeat:>3} | failed: {error or 'no request sent'}")
                continue
            gaps = gap_errors_ms(records, trace)
            verdict = f"refused: {summary['refused']}" if summary.get("refused") else "kept the schedule"
            print(
                f"{repeat:>3} | {schedule['p50_lag_ms']:>7.2f} {schedule['p99_lag_ms']:>6.2f} "
                f"{schedule['max_lag_ms']:>7.2f} | {percentile(gaps, 50):>11.2f} {percentile(gaps, 95):>6.2f} "
                f"{percentile(gaps, 99):>6.2f} | {summary['requests']:>5} {summary['successful_requests']:>5} | "
                f"{verdict} ({time.monotonic() - started:.0f} s, client CPU {cpu_share:.0%} of a core"
                f"{' (parent only)' if args.workers > 1 else ''}, load average {os.getloadavg()[0]:.1f})",
                flush=True,
            )
            if error:
                print(f"    error: {error}")
    print("\nlag = sent_at - scheduled_at (ms); gap err = |emulator-received gap - recorded gap| (ms).")


if __name__ == "__main__":
    main()
