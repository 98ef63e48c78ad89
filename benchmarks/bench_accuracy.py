"""How accurate is the benchmark client at high concurrency on this machine?

The emulator (its own process, 150 ms TTFT, 15 ms ITL, 64 tokens) records when it really sent
every chunk on the same monotonic clock the client uses. For each concurrency level this script
prints the client's measured p50/p99 TTFT and ITL beside the emulator's truth for the same
requests, the achieved concurrency, throughput measured vs sent, tokens per frame (the emulator
sends one token per frame: anything but 1.00 is a counting error), the share of frames that
arrived coalesced (several completed by one socket read), and client CPU per token.

    python benchmarks/bench_accuracy.py [--levels 1,32,128,256] [--requests-per-slot 3]

Targets: p99 TTFT error <= 10 ms and p99 ITL error <= 5 ms at concurrency 256; achieved
concurrency >= 98 %; throughput within 2 %.
"""

from __future__ import annotations

import argparse
import itertools
import time

from optigate.bench.core.client import StreamingClient, Target
from optigate.bench.core.event_loop import run_loop
from optigate.bench.core.load import LoadSpec, run_load
from optigate.bench.core.metrics import RunSamples, percentile
from optigate.emulator.process import emulator_process, fetch_trace

TTFT_MS, ITL_MS, TOKENS = 150.0, 15.0, 64


def truth_samples(records, trace):
    """TTFT and per-token ITL as the emulator sent them, for the measured requests."""
    ttft, itl, starts_ends = [], [], []
    for record in records:
        if record.warmup or record.error or record.request_id not in trace:
            continue
        sends = trace[record.request_id]["sends"]
        ttft.append((sends[0][0] - record.sent_at) * 1000)
        for (previous, _), (current, tokens) in itertools.pairwise(sends):
            itl.extend([(current - previous) / tokens * 1000] * tokens)
        starts_ends.append(sends)
    return ttft, itl


def sent_tokens_in(trace, start, end):
    return sum(tokens for entry in trace.values() for t, tokens in entry["sends"] if start <= t <= end)


async def measure(url: str, concurrency: int, requests: int):
    client = StreamingClient(Target("accuracy", endpoint_url=url), timeout=60)
    spec = LoadSpec(concurrency=concurrency, requests=requests, max_new_tokens=TOKENS, prompt_tokens=128)
    cpu_before = time.process_time()
    result = await run_load(client, spec)
    cpu = time.process_time() - cpu_before
    return result, cpu


def boto3_thread_pool(url: str, concurrency: int, requests: int):
    """The usual client, for contrast: boto3 in a thread pool, timing chunks as threads see them."""
    import json as _json
    from concurrent.futures import ThreadPoolExecutor

    import boto3
    from botocore.config import Config

    runtime = boto3.client(
        "sagemaker-runtime",
        region_name="us-east-1",
        endpoint_url=url,
        aws_access_key_id="x",
        aws_secret_access_key="x",
        config=Config(max_pool_connections=concurrency, retries={"max_attempts": 0}),
    )
    body = _json.dumps({"inputs": "hello " * 128, "parameters": {"max_new_tokens": TOKENS}})

    def one(_):
        sent = time.perf_counter()
        response = runtime.invoke_endpoint_with_response_stream(
            EndpointName="accuracy", Body=body, ContentType="application/json"
        )
        arrivals = [time.perf_counter() for event in response["Body"] if "PayloadPart" in event]
        return response["ResponseMetadata"]["RequestId"], sent, arrivals

    with ThreadPoolExecutor(concurrency) as pool:
        return list(pool.map(one, range(requests)))


def report_boto3(url: str, concurrency: int, requests: int) -> None:
    fetch_trace(url, clear=True)
    results = boto3_thread_pool(url, concurrency, requests)
    trace = fetch_trace(url, clear=True)
    measured_ttft, true_ttft, measured_itl, true_itl = [], [], [], []
    for request_id, sent, arrivals in results[concurrency:]:  # skip the first wave
        sends = [t for t, _ in trace[request_id]["sends"]]
        measured_ttft.append((arrivals[0] - sent) * 1000)
        true_ttft.append((sends[0] - sent) * 1000)
        measured_itl += [(b - a) * 1000 for a, b in itertools.pairwise(arrivals)]
        true_itl += [(b - a) * 1000 for a, b in itertools.pairwise(sends)]
    p99 = lambda values: percentile(sorted(values), 99)  # noqa: E731
    print(
        f"boto3 + ThreadPoolExecutor({concurrency}), {len(results) - concurrency} requests: "
        f"p99 TTFT {p99(measured_ttft):.1f} ms vs truth {p99(true_ttft):.1f} "
        f"ms ({p99(measured_ttft) - p99(true_ttft):+.1f}); "
        f"p99 ITL {p99(measured_itl):.2f} ms vs truth {p99(true_itl):.2f} ms ({p99(measured_itl) - p99(true_itl):+.2f})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--levels", default="1,32,128,256")
    parser.add_argument("--requests-per-slot", type=int, default=3, help="measured requests per concurrent slot")
    parser.add_argument(
        "--boto3-baseline", type=int, default=0, help="also time boto3 in a thread pool at this concurrency (0: skip)"
    )
    args = parser.parse_args()
    config = {"default": {"ttft_ms": TTFT_MS, "itl_ms": ITL_MS, "output_tokens": TOKENS}}
    header = (
        f"{'conc':>5} {'reqs':>5} | "
        f"{'TTFT p50':>9} {'truth':>7} {'p99':>8} {'truth':>7} {'err':>6} | "
        f"{'ITL p50':>8} {'truth':>6} {'p99':>7} {'truth':>6} {'err':>5} | "
        f"{'achieved':>8} | {'tok/s':>8} {'sent':>8} {'err%':>5} | {'tok/fr':>6} {'coal%':>5} | {'CPU/tok':>8}"
    )
    print(header)
    print("-" * len(header))
    with emulator_process(config) as url:
        for level in [int(x) for x in args.levels.split(",")]:
            fetch_trace(url, clear=True)
            requests = max(20, level * args.requests_per_slot)
            result, cpu = run_loop(measure(url, level, requests))
            trace = fetch_trace(url, clear=True)
            run = RunSamples.from_records(level, result.records)
            summary = run.to_result(include_samples=False)
            true_ttft, true_itl = truth_samples(result.records, trace)
            start, end = run.window()
            sent_rate = sent_tokens_in(trace, start, end) / (end - start)
            tokens = sum(r.output_tokens for r in result.records)
            m_ttft, m_itl = summary["ttft_ms"], summary["itl_ms"]
            t_ttft, t_itl = sorted(true_ttft), sorted(true_itl)
            ttft_err = m_ttft["p99"] - percentile(t_ttft, 99)
            itl_err = m_itl["p99"] - percentile(t_itl, 99)
            tput_err = (summary["output_tokens_per_s"] - sent_rate) / sent_rate * 100
            coalesced = summary["coalesced_frame_share"]
            print(
                f"{level:>5} {summary['requests']:>5} | {m_ttft['p50']:>9.1f} {percentile(t_ttft, 50):>7.1f} "
                f"{m_ttft['p99']:>8.1f} {percentile(t_ttft, 99):>7.1f} {ttft_err:>+6.1f} | "
                f"{m_itl['p50']:>8.2f} {percentile(t_itl, 50):>6.2f} "
                f"{m_itl['p99']:>7.2f} {percentile(t_itl, 99):>6.2f} {itl_err:>+5.2f} | "
                f"{summary['achieved_concurrency'] / level * 100:>7.1f}% | "
                f"{summary['output_tokens_per_s']:>8.0f} {sent_rate:>8.0f} {tput_err:>+5.1f} | "
                f"{summary['tokens_per_chunk']['mean']:>6.2f} {(coalesced or 0) * 100:>5.1f} | "
                f"{cpu / max(tokens, 1) * 1e6:>6.1f}µs",
                flush=True,
            )
            errors = summary["errors"]
            if errors:
                print(f"      errors: {errors}")
            for warning in summary["warnings"]:
                print(f"      warning: {warning}")
        if args.boto3_baseline:
            print()
            report_boto3(url, args.boto3_baseline, args.boto3_baseline * (args.requests_per_slot + 1))
    print("\nerr = measured - emulator truth (ms); truth = the emulator's own send times for the same requests.")


if __name__ == "__main__":
    main()
