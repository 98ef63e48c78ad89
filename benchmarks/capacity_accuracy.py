"""Does `optigate bench --find-capacity` find the capacity an emulated server truly has?

For each shape below, an `optigate emulate` process on 127.0.0.1 serves a latency model whose capacity at the SLO
is known (optigate.emulator.truth.capacity_truth: the highest closed-loop concurrency whose p99 TTFT and
p99 ITL the model keeps within the budgets). The search runs through the command itself (`optigate bench
--find-capacity`: at most 8 runs, max(--requests, 8 x c) requests a level, here from 4 streams with at least 48
requests a level: on a shared machine a few requests stall in the client's event loop, and a p99 bound from a
short single-stream run is then the stall itself) and this prints what it found beside the truth:

- target on a quiet machine: within ±10 % of the truth in <= 8 runs;
- with `--burners N` (N CPU-bound processes beside client and server): never above the truth by more than 10 %
  (a busy client only inflates latencies, and client-bound levels never raise the capacity).

Shapes: a TTFT growing with every stream in the batch; batch slots (max_num_seqs: beyond them requests queue);
ITL growing with the batch; and speculative decoding (3 drafts, 70 % acceptance: a mean TPOT of 24.5 ms at one
stream against 50 ms without, but each sequence verifies 4 tokens a step, so the batch term grows 4x: it helps at
low load and hurts at high load; the truth without speculation is printed beside it).

    python benchmarks/capacity_accuracy.py [--burners 2] [--shapes linear-ttft,batch-slots] [--max-new-tokens 12]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout

from optigate.bench.goodput import Slo
from optigate.cli import main as optigate
from optigate.emulator.config import Behaviour
from optigate.emulator.process import emulator_process
from optigate.emulator.truth import capacity_truth

PROMPT_TOKENS = 16
# Slow streams (50 ms token gaps, budgets of hundreds of ms) keep what a busy shared machine adds (event-loop stalls
# of tens of ms in client and server) small beside the budgets, and the frames per second low enough for one
# client process; 25 ms gaps with 45-60 ms ITL budgets left the p99 ITL to the machine's stalls here.
BASE = {"ttft_ms": {"mean": 120, "jitter": 10}, "itl_ms": {"mean": 50, "jitter": 4}}
PLAIN = {**BASE, "itl_ms_per_active_stream": 1.0}
SPECULATION = {**PLAIN, "num_speculative_tokens": 3, "acceptance_rate": 0.7, "draft_ms_per_token": 4}
SHAPES: dict[str, tuple[dict, str]] = {
    "linear-ttft": ({**BASE, "ttft_ms_per_active_stream": 10}, "p99_ttft_ms=500,p99_itl_ms=300"),
    "batch-slots": ({**BASE, "ttft_ms_per_active_stream": 2, "max_num_seqs": 24}, "p99_ttft_ms=300,p99_itl_ms=300"),
    "itl-bound": ({**BASE, "itl_ms_per_active_stream": 2.5}, "p99_ttft_ms=5000,p99_itl_ms=150"),
    "speculation": (SPECULATION, "p99_ttft_ms=5000,p99_itl_ms=150"),
}
#: Printed beside the speculation shape, not searched: the same server without speculation.
CONTRAST = ("no speculation", PLAIN, "p99_ttft_ms=5000,p99_itl_ms=150")


def burners(count: int) -> list[subprocess.Popen]:
    """CPU-bound processes: a busy machine beside the client and the server."""
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]


def one_shape(name: str, settings: dict, slo_text: str, args: argparse.Namespace) -> dict:
    slo = Slo.parse(slo_text)
    truth = capacity_truth(
        Behaviour.parse(settings), slo, prompt_tokens=PROMPT_TOKENS, max_new_tokens=args.max_new_tokens
    )
    with tempfile.TemporaryDirectory() as folder, emulator_process({"default": settings}) as url:
        out = Path(folder, "capacity.json")
        started = time.perf_counter()
        code = optigate(
            [
                "bench", "--find-capacity", "--slo", slo_text, "--endpoint", name, "--endpoint-url", url,
                "--prompt-tokens", str(PROMPT_TOKENS), "--max-new-tokens", str(args.max_new_tokens),
                "--requests", str(args.requests), "--start-concurrency", str(args.start), "--json", str(out),
            ]
        )  # fmt: skip
        seconds = time.perf_counter() - started
        found = json.loads(out.read_text())["capacity"]
    capacity = found["capacity"] or 0
    return {
        "shape": name,
        "slo": slo_text,
        "truth": truth,
        "found": capacity,
        "interval": found["interval"],
        "runs": found["runs"],
        "exit": code,
        "error_pct": 100 * (capacity - truth) / truth,
        "within": abs(capacity - truth) <= 0.1 * truth and found["runs"] <= 8,
        "above": capacity > 1.1 * truth,
        "client_bound": [s["concurrency"] for s in found["steps"] if s["verdict"] == "client-bound"],
        "steps": " ".join(f"{s['concurrency']}{s['verdict'][0]}" for s in found["steps"]),
        "seconds": seconds,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--burners", type=int, default=0, help="CPU-bound processes running beside (default: 0)")
    parser.add_argument("--shapes", default=",".join(SHAPES), help="which shapes (default: all)")
    parser.add_argument("--max-new-tokens", type=int, default=12, help="output tokens per request (default: 12)")
    parser.add_argument("--requests", type=int, default=48, help="--requests of the search (default: 48)")
    parser.add_argument("--start", type=int, default=4, help="--start-concurrency of the search (default: 4)")
    args = parser.parse_args()
    names = [name.strip() for name in args.shapes.split(",") if name.strip()]
    load_before = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    spinning = burners(args.burners)
    rows = []
    try:
        for name in names:
            settings, slo_text = SHAPES[name]
            rows.append(one_shape(name, settings, slo_text, args))
    finally:
        for process in spinning:
            process.terminate()
            process.wait(timeout=10)
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(
        f"\n{args.burners} CPU-bound process(es) beside (load average before: {load_before}; after: {load}); "
        f"{args.max_new_tokens} output tokens, start c={args.start}, >= {args.requests} requests a level, <= 8 runs"
    )
    print(f"{'shape':<16}{'SLO':<32}{'truth':>6}{'found':>6}{'error':>8}{'runs':>5}  steps (h/f/u/c)")
    for row in rows:
        flag = "" if row["within"] else "  OUTSIDE ±10 %"
        flag += "  ABOVE +10 %" if row["above"] else ""
        flag += f"  client-bound at {row['client_bound']}" if row["client_bound"] else ""
        print(
            f"{row['shape']:<16}{row['slo']:<32}{row['truth']:>6}{row['found']:>6}{row['error_pct']:>+7.1f}%"
            f"{row['runs']:>5}  {row['steps']}  [{row['seconds']:.0f} s, exit {row['exit']}]{flag}"
        )
    if "speculation" in names:
        name, settings, slo_text = CONTRAST
        truth = capacity_truth(
            Behaviour.parse(settings),
            Slo.parse(slo_text),
            prompt_tokens=PROMPT_TOKENS,
            max_new_tokens=args.max_new_tokens,
        )
        print(f"{name:<16}{slo_text:<32}{truth:>6}  (the truth, not searched: speculation carries less)")
    within = sum(row["within"] for row in rows)
    above = sum(row["above"] for row in rows)
    print(f"within ±10 % in <= 8 runs: {within}/{len(rows)}; above the truth by > 10 %: {above}/{len(rows)}")
    return 1 if above or (not args.burners and within < len(rows)) else 0


if __name__ == "__main__":
    sys.exit(main())
