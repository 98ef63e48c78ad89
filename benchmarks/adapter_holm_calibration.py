"""Per-adapter verdicts with Holm across adapters: A/A false alarms and A/B power, on simulated blocks.

An adapter team's benchmark spreads each block's requests over three adapters (equal shares); each adapter's
requests are emulator-shaped blocks (tests/fixtures/simulated_blocks.py) with their own drift. At the gate's
default sample sizes (levels 1/16/64, max(32, 4 x c) requests per block, 3 blocks per side) it prints:

(a) A/A, `bench compare`'s per-adapter deltas (optigate.bench.compare.compare_adapters: one Holm family of
    every per-adapter delta of a pair): the share of pairs with any better/worse among them;
(b) A/B, one adapter's ITL 20 % slower (the others unchanged): the share of pairs where that adapter's ITL
    is labelled worse at some level and no other adapter is labelled worse;
(c) the gate's per-adapter p99 ITL check (optigate.gate.decision.adapters) at c=16: with every adapter's true
    p99 exactly at the budget (the worst case for a false FAIL), the share of pairs where any adapter fails,
    with Holm and without (each adapter at 95 %); and with one adapter 30 % slower and the budget between
    them, the share where that adapter fails and no other does.

    python benchmarks/adapter_holm_calibration.py [--pairs 100] [--ab-pairs 60] [--gate-pairs 100]
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout: optigate, and tests/fixtures

from benchmarks.verdict_calibration import share_line
from optigate import stats
from optigate.bench.compare import Delta, compare_adapters
from optigate.bench.core.metrics import RunSamples, merge
from optigate.config.models import BenchmarkGate
from optigate.gate.decision import adapters as gate_adapters
from optigate.gate.decision.adapters import adapter_latency_checks
from optigate.judge import Outcome
from tests.fixtures.simulated_blocks import GATE_BLOCKS, GATE_LEVELS, Shape, gate_requests, simulated_block

ADAPTERS = ("base", "reply", "summarize")


def labelled_block(level: int, shapes: dict[str, Shape], seed: list[int]) -> RunSamples:
    """One block at a level whose requests are split over the adapters (equal shares), labelled."""
    share = max(1, gate_requests(level) // len(shapes))
    parts = {
        name: simulated_block(level, share, shape, seed=[*seed, index])
        for index, (name, shape) in enumerate(shapes.items())
    }
    whole = merge(list(parts.values()))
    whole.concurrency = level
    for run in parts.values():
        run.concurrency = level
    whole.by_adapter = parts
    return whole


def labelled_side(shapes: dict[str, Shape], seed: int, levels=GATE_LEVELS) -> dict[int, list[RunSamples]]:
    return {
        level: [labelled_block(level, shapes, [seed, level, block]) for block in range(GATE_BLOCKS)] for level in levels
    }


def labelled(deltas: list[Delta]) -> list[Delta]:
    return [d for d in deltas if d.verdict in (Outcome.BETTER, Outcome.WORSE)]


def aa(pairs: int, shape: Shape) -> None:
    shapes = dict.fromkeys(ADAPTERS, shape)
    flagged = deltas_total = 0
    for pair in range(pairs):
        deltas = compare_adapters(labelled_side(shapes, 2 * pair), labelled_side(shapes, 2 * pair + 1), seed=pair)
        deltas_total += len(deltas)
        flagged += bool(labelled(deltas))
        for d in labelled(deltas)[:2]:
            print(f"  pair {pair}: c={d.concurrency} {d.adapter} {d.metric} {d.statistic} {d.verdict}")
    print(share_line("(a) A/A pairs with any per-adapter better/worse", flagged, pairs, "<= 5 %"))
    print(f"    per-adapter deltas per pair: {deltas_total / pairs:.0f}")


def ab(pairs: int, shape: Shape) -> None:
    base = dict.fromkeys(ADAPTERS, shape)
    slower = {**base, "reply": replace(shape, itl_ms=shape.itl_ms * 1.2)}
    found = levels_found = 0
    for pair in range(pairs):
        deltas = compare_adapters(
            labelled_side(base, 10_000 + 2 * pair), labelled_side(slower, 10_000 + 2 * pair + 1), seed=pair
        )
        worse = [d for d in deltas if d.verdict == Outcome.WORSE]
        right = [d for d in worse if d.adapter == "reply" and d.metric == "itl_ms"]
        found += bool(right) and all(d.adapter == "reply" for d in worse)
        levels_found += len({d.concurrency for d in right})
    print(share_line("(b) A/B reply ITL +20 %: reply's ITL worse, no other adapter worse", found, pairs, ">= 95 %"))
    print(f"    levels (of {len(GATE_LEVELS)}) where reply's ITL was worse: {levels_found / pairs:.2f} on average")


def true_p99_itl(shape: Shape, level: int = 16) -> float:
    """The p99 ITL of a shape, from many blocks (what "at the budget" means)."""
    values = [simulated_block(level, 400, shape, seed=[99, block]).itl_ms for block in range(30)]
    return float(np.percentile(np.concatenate(values), 99))


def gate(pairs: int, shape: Shape) -> None:
    level = 16
    at_budget = true_p99_itl(shape, level)
    thresholds = BenchmarkGate(concurrency=[level], p99_itl_ms_budget=at_budget)
    shapes = dict.fromkeys(ADAPTERS, shape)
    holm_fails = plain_fails = 0
    for pair in range(pairs):
        cand = labelled_side(shapes, 50_000 + pair, levels=(level,))[level]
        checks = adapter_latency_checks(level, cand, cand, thresholds, seed=pair)
        holm_fails += any(c.outcome is Outcome.FAIL for c in checks)
        plain_fails += any(_plain_fail(cand, name, at_budget, pair) for name in ADAPTERS)
    print(f"(c) gate p99 ITL per adapter at c={level}, every adapter's true p99 = budget {at_budget:.2f} ms:")
    print(share_line("    any adapter FAILS, Holm across adapters", holm_fails, pairs, "<= 2.5 %"))
    print(share_line("    any adapter FAILS, each at 95 % (no Holm)", plain_fails, pairs, "for comparison"))
    slow = replace(shape, itl_ms=shape.itl_ms * 1.3)
    budget = (at_budget + true_p99_itl(slow, level)) / 2
    thresholds = BenchmarkGate(concurrency=[level], p99_itl_ms_budget=budget)
    found = 0
    for pair in range(pairs):
        cand = labelled_side({**shapes, "reply": slow}, 70_000 + pair, levels=(level,))[level]
        failed = {c.adapter for c in adapter_latency_checks(level, cand, cand, thresholds, pair) if c.outcome == "fail"}
        found += failed == {"reply"}
    print(share_line(f"    reply ITL +30 %, budget {budget:.2f} ms: reply alone fails", found, pairs, ">= 95 %"))


def _plain_fail(blocks: list[RunSamples], adapter: str, budget: float, seed: int) -> bool:
    """The same check on one adapter at the unadjusted 95 % (what Holm guards against)."""
    runs = gate_adapters.adapter_blocks(blocks, adapter)
    p99, replicates = gate_adapters.pooled_p99([r.itl_ms for r in runs], [r.itl_counts for r in runs], seed)
    low, _ = stats.percentile_interval(replicates, stats.CONFIDENCE)
    return min(low, p99) > budget


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=100, help="A/A pairs for (a)")
    parser.add_argument("--ab-pairs", type=int, default=60, help="A/B pairs for (b)")
    parser.add_argument("--gate-pairs", type=int, default=100, help="pairs for each part of (c)")
    args = parser.parse_args()
    shape = Shape()
    print(
        f"{len(ADAPTERS)} adapters, equal shares; levels {list(GATE_LEVELS)}, {GATE_BLOCKS} blocks a side, "
        "max(32, 4 x c) requests per block split over the adapters; TTFT ~150 ms, ITL ~15 ms, drift 2 %"
    )
    for label, work, pairs in (("A/A", aa, args.pairs), ("A/B", ab, args.ab_pairs), ("gate", gate, args.gate_pairs)):
        started = time.perf_counter()
        work(pairs, shape)
        print(f"[{label}: {time.perf_counter() - started:.0f} s]", flush=True)


if __name__ == "__main__":
    main()
