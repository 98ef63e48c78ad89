"""Is `optigate bench residency` calibrated? How often it calls a swap cost on A/A, and finds a known one.

Against a loopback server whose inference components are LoRA adapters in LRU GPU slots
(tests/fixtures/lru_server.py: vLLM's policy, a non-resident adapter's request waits `load_ms` more), this
script runs the probe repeatedly, each time with another seed (the server's TTFT jitter and the order of the
trials), and prints:

(a) A/A, no swap cost: the share of runs that call a swap cost (target <= 2.5 %: the one-sided tail of a 95 %
    interval) and the share the probe cannot tell;
(b) a known 200 ms swap cost: the share of runs that call a swap cost, and the share whose interval holds 200 ms.

    python benchmarks/residency_calibration.py [--runs 40] [--cost-runs 10] [--rounds 20] [--cost-ms 200]

Binomial uncertainty: with 40 runs an observed 0 % has a 95 % upper bound of about 9 %.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout: optigate, and tests/fixtures

from optigate.bench.core.client import Target
from optigate.bench.core.event_loop import run_loop
from optigate.bench.residency import CANNOT_TELL, SWAP_COST, ResidencySpec, judge, run_probe
from tests.fixtures.lru_server import LruServer, serving

ADAPTERS = {"triage": "triage-ic", "summarise": "summarise-ic", "reply": "reply-ic"}
MAX_LORAS = 2


def one_run(load_ms: float, seed: int, rounds: int):
    server = LruServer(list(ADAPTERS.values()), max_loras=MAX_LORAS, load_ms=load_ms, jitter_ms=4.0, seed=seed)
    spec = ResidencySpec(ADAPTERS, MAX_LORAS, base_component="base-ic", rounds=rounds, seed=seed)
    with serving(server) as url:
        trials = run_loop(run_probe(Target("support-dev", endpoint_url=url), spec, timeout=30))
    return judge(trials)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=40, help="A/A runs")
    parser.add_argument("--cost-runs", type=int, default=10, help="runs with the known swap cost")
    parser.add_argument("--rounds", type=int, default=20, help="paired rounds per run (the probe's minimum is 20)")
    parser.add_argument("--cost-ms", type=float, default=200.0, help="the known swap cost")
    args = parser.parse_args()

    started = time.monotonic()
    called = unknown = 0
    widths = []
    for seed in range(args.runs):
        result = one_run(0.0, seed, args.rounds)
        called += result.verdict == SWAP_COST
        unknown += result.verdict == CANNOT_TELL
        if result.swap_ms:
            widths.append(result.swap_ms["high"] - result.swap_ms["low"])
    print(
        f"(a) A/A, {args.runs} runs of {args.rounds} rounds: swap cost called in {called} "
        f"({100 * called / args.runs:.1f} %), cannot tell in {unknown}; median interval width "
        f"{sorted(widths)[len(widths) // 2]:.1f} ms"
    )
    found = covered = 0
    points = []
    for seed in range(args.cost_runs):
        result = one_run(args.cost_ms, 1000 + seed, args.rounds)
        found += result.verdict == SWAP_COST
        if result.swap_ms:
            points.append(result.swap_ms["point"])
            covered += result.swap_ms["low"] <= args.cost_ms <= result.swap_ms["high"]
    shown = ", ".join(f"{point:.0f}" for point in points)
    print(
        f"(b) {args.cost_ms:g} ms swap cost, {args.cost_runs} runs: found in {found} "
        f"({100 * found / args.cost_runs:.0f} %), interval holds {args.cost_ms:g} ms in {covered}; estimates {shown} ms"
    )
    print(f"{time.monotonic() - started:.0f} s")


if __name__ == "__main__":
    main()
