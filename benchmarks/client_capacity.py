"""Up to how many streams does one client process stay accurate, and do two workers hold more?

A closed loop at each level against `optigate emulate` (its own process), once in one process and once sharded over
--workers processes (optigate.bench.core.shards). The emulator stamps when it really sent each chunk on the host's
monotonic clock, the one the client stamps with, so for the same requests the client's p99 TTFT and p99 ITL are
compared with the emulator's truth. A level is accurate when p99 TTFT is within --ttft-tolerance-ms of the truth;
the script prints the first level where one process is not. The emulator shares the machine: a level where it fell
behind its own latencies (true p50 TTFT over 1.5x the configured one) sent fewer frames than configured, so it
loaded the client less than its stream count says; such rows are marked "emulator-bound".

    python benchmarks/client_capacity.py [--levels 64,256,512,1024] [--workers 2] [--requests-per-slot 2]

Busy machines shift every figure: the load average is printed beside each row.
"""

from __future__ import annotations

import argparse
import itertools
import os

from optigate.bench.core.client import StreamingClient, Target
from optigate.bench.core.event_loop import run_loop
from optigate.bench.core.load import LoadSpec, run_load
from optigate.bench.core.metrics import RunSamples, merge, percentile, to_epoch
from optigate.emulator.process import emulator_process, fetch_trace


def truth(records, trace) -> tuple[list[float], list[float]]:
    """TTFT and per-token ITL as the emulator sent them, for the measured requests (ms)."""
    ttft, itl = [], []
    for record in records:
        if record.warmup or record.error or record.request_id not in trace:
            continue
        sends = trace[record.request_id]["sends"]
        ttft.append((sends[0][0] - record.sent_at) * 1000)
        for (previous, _), (current, tokens) in itertools.pairwise(sends):
            itl.extend([(current - previous) / tokens * 1000] * tokens)
    return sorted(ttft), sorted(itl)


async def measure(url: str, spec: LoadSpec, workers: int):
    target = Target("capacity", endpoint_url=url)
    if workers == 1:
        result = await run_load(StreamingClient(target, timeout=120), spec)
        run = RunSamples.from_records(spec.concurrency, to_epoch(result.records, result.wall_offset))
        return run, result.records, result.error
    from optigate.bench.core.shards import run_sharded

    run, results, error = await run_sharded(target, spec, workers, timeout=120)
    return run, [record for result in results for record in result.records], error


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--levels", default="64,256,512,1024")
    parser.add_argument("--workers", type=int, default=2, help="the sharded run's processes (default 2)")
    parser.add_argument("--requests-per-slot", type=int, default=2)
    parser.add_argument("--ttft-ms", type=float, default=150.0)
    parser.add_argument("--itl-ms", type=float, default=15.0)
    parser.add_argument("--output-tokens", type=int, default=32)
    parser.add_argument("--ttft-tolerance-ms", type=float, default=10.0, help="accurate: |p99 TTFT error| within")
    args = parser.parse_args()
    config = {"default": {"ttft_ms": args.ttft_ms, "itl_ms": args.itl_ms, "output_tokens": args.output_tokens}}
    header = (
        f"{'streams':>7} {'proc':>4} {'reqs':>5} | {'TTFT p99':>8} {'truth':>7} {'err':>6} | "
        f"{'ITL p99':>7} {'truth':>6} {'err':>5} | {'achieved':>8} {'coal%':>5} | {'load':>4} | accurate"
    )
    print(f"{os.cpu_count()} cores; emulator TTFT {args.ttft_ms} ms, ITL {args.itl_ms} ms, {args.output_tokens} tokens")
    print(header)
    print("-" * len(header))
    first_inaccurate: int | None = None
    with emulator_process(config) as url:
        for level in [int(x) for x in args.levels.split(",")]:
            for workers in (1, args.workers):
                fetch_trace(url, clear=True)
                spec = LoadSpec(
                    concurrency=level,
                    requests=level * args.requests_per_slot,
                    max_new_tokens=args.output_tokens,
                    prompt_tokens=128,
                )
                run, records, error = run_loop(measure(url, spec, workers))
                trace = fetch_trace(url, clear=True)
                summary = merge([run]).to_result(include_samples=False)
                true_ttft, true_itl = truth(records, trace)
                ttft_err = summary["ttft_ms"]["p99"] - percentile(true_ttft, 99)
                itl_err = summary["itl_ms"]["p99"] - percentile(true_itl, 99)
                accurate = abs(ttft_err) <= args.ttft_tolerance_ms and not error
                emulator_bound = percentile(true_ttft, 50) > 1.5 * args.ttft_ms
                if workers == 1 and not accurate and first_inaccurate is None:
                    first_inaccurate = level
                print(
                    f"{level:>7} {workers:>4} {summary['requests']:>5} | {summary['ttft_ms']['p99']:>8.1f} "
                    f"{percentile(true_ttft, 99):>7.1f} {ttft_err:>+6.1f} | {summary['itl_ms']['p99']:>7.2f} "
                    f"{percentile(true_itl, 99):>6.2f} {itl_err:>+5.2f} | "
                    f"{summary['achieved_concurrency'] / level * 100:>7.1f}% "
                    f"{(summary['coalesced_frame_share'] or 0) * 100:>5.1f} | {os.getloadavg()[0]:>4.1f} | "
                    f"{'yes' if accurate else 'NO'}"
                    + (" (emulator-bound)" if emulator_bound else "")
                    + (f" ({error})" if error else ""),
                    flush=True,
                )
    print(
        "\nerr = measured - emulator truth (ms), same requests; coal% = token frames read together with another."
        + (
            f"\nOne process stops being accurate at {first_inaccurate} streams: shard beyond it (--workers)."
            if first_inaccurate
            else "\nOne process stayed accurate at every level measured."
        )
    )


if __name__ == "__main__":
    main()
