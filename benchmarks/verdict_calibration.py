"""Are `bench compare`'s and the gate's verdicts calibrated? A/A false alarms and A/B power.

At the gate's default sample sizes (levels 1/16/64, max(32, 4 x concurrency) requests of 256
tokens per block, 3 blocks per side, everything compared as one family by
`optigate.bench.compare.compare_levels`), this script prints:

(a) the share of simulated A/A pairs (both sides drawn from one emulator-shaped server, each block
    with its own drift) with any `better` or `worse` verdict: target <= 5 %;
(b) the same share over real A/A pairs: two identical `optigate emulate` processes on 127.0.0.1,
    benchmarked in interleaved blocks with small request counts (a few minutes);
(c) the share of simulated A/B pairs where a true 10 % ITL (or TTFT) improvement is labelled
    correctly: some delta of the changed metric `better` and no delta anywhere `worse`: target
    >= 95 %. Also printed: the changed metric's p50 `better` at every level, and wrong-direction
    labels.
(d) with `--slo` (e.g. p99_ttft_ms=240, near the simulated server's p99 TTFT of 239 ms, where goodput and the
    SLO's verdicts are most fragile): (a) with goodput compared too (optigate.bench.compare with the SLO), and the
    A/A share of pairs whose capacity at the gate's levels differs (the highest level up to which every level
    holds the SLO by optigate.bench.capacity.judge_level's interval rule) is lower for the candidate, and the share
    where some level holds for the baseline and fails (lower end over the budget) for the candidate: a gate's
    "carries less within the SLO" should be read off the second (target <= 5 %). Also (b) with goodput, when not
    skipped.

(e) with `--sequential`: looking after every round (#39). Each run draws `--max-rounds` rounds (a round: one
    twin block and one candidate block at every level, `--round-per-slot` requests a stream, at least 8), then:
    `bench compare --rounds` (optigate.bench.sequential.compare_rounds: anytime-valid t confidence sequences, Holm
    over every figure) looks after each round from `--min-rounds` and stops at the first better or worse; the gate
    (optigate.gate.decision.looks: each look's intervals at its share of the 5 %) judges the throughput gain at c=16
    against a 0 % minimum after each round from `--min-rounds`; and beside both, one look at the budget's end (today's
    fixed design on the same data: compare_levels over all rounds, the gate's check at 95 %). Printed: A/A false
    decisions (target <= 5 %), A/B ITL -5/-10/-30 % found (target >= 95 % at -10 %), the mean rounds a decision took
    and its share of the budget (target <= 40 % at -30 %).
(f) with `--sequential` and not `--skip-real`: (e)'s A/A on two identical emulator processes, one level, rounds
    interleaved, `bench compare --rounds` looking after each round; run it again beside two `yes > /dev/null` for
    the busy host (the load average is printed).

    python benchmarks/verdict_calibration.py [--pairs 200] [--ab-pairs 100] [--real-pairs 10]
        [--drift 0.02] [--blocks 3] [--per-slot 4] [--skip-real] [--slo p99_ttft_ms=240,p99_itl_ms=25]
        [--sequential [--runs 200] [--min-rounds 4] [--max-rounds 12] [--round-per-slot 1] [--real-runs 20]]

`--drift` above the comparison's assumed run-to-run drift (2 %) shows what happens when the assumption
is wrong: at 4 % the A/A share rose to 16 % (three blocks cannot show drift they happen not to have).

Binomial uncertainty: with 200 pairs an observed 5 % has a 95 % interval of about 2.4-9 %.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout: optigate, and tests/fixtures

import os
from functools import partial
from typing import Any

from optigate.bench.capacity import judge_level
from optigate.bench.compare import GOODPUT, Delta, compare_levels
from optigate.bench.core.metrics import RunSamples
from optigate.bench.goodput import Slo
from optigate.bench.sequential import RoundDelta, compare_rounds
from optigate.bench.throughput import RUN_TO_RUN_DRIFT_PCT
from optigate.config.models import BenchmarkGate
from optigate.gate.decision.checks import throughput_check
from optigate.gate.decision.looks import Looks
from optigate.gate.decision.slo_checks import capacity_check, side_capacity, slo_checks
from optigate.judge import Outcome
from tests.fixtures.simulated_blocks import GATE_BLOCKS, GATE_LEVELS, Shape, simulated_side

Side = Mapping[int, Sequence[RunSamples]]


def wilson(successes: int, total: int, z: float = 1.96) -> tuple[float, float]:
    """Wilson score interval of a binomial share."""
    if not total:
        return (math.nan, math.nan)
    share = successes / total
    centre = (share + z * z / (2 * total)) / (1 + z * z / total)
    half = z * math.sqrt(share * (1 - share) / total + z * z / (4 * total * total)) / (1 + z * z / total)
    return (max(0.0, centre - half), min(1.0, centre + half))


def share_line(label: str, hits: int, total: int, target: str) -> str:
    low, high = wilson(hits, total)
    return f"{label}: {hits}/{total} = {hits / total:.1%} (95 % CI {low:.1%}-{high:.1%}; target {target})"


def labelled(deltas: Sequence[Delta]) -> list[Delta]:
    return [d for d in deltas if d.verdict in ("better", "worse")]


def with_outcomes(side: Side) -> Side:
    """Per-request outcomes (goodput's input) for simulated blocks, from their TTFT and TPOT samples."""
    for blocks in side.values():
        for block in blocks:
            block.outcomes = list(zip(block.ttft_ms, block.tpot_ms, strict=True))
    return side


def capacity_level(side: Side, slo: Slo) -> tuple[int, dict[int, str]]:
    """The highest level up to which every level holds the SLO (0: not even the first), and each level's verdict."""
    verdicts = {level: judge_level(level, side[level], slo).verdict for level in sorted(side)}
    carried = 0
    for level, verdict in verdicts.items():
        if verdict != "holds":
            break
        carried = level
    return carried, verdicts


def gate_capacity(base: Side, cand: Side, slo: Slo) -> str:
    """The gate's own capacity check (optigate.gate.decision.slo_checks) on a pair: pass, inconclusive or fail."""
    thresholds = BenchmarkGate(
        concurrency=sorted(base), p99_ttft_ms_budget=slo.p99_ttft_ms, p99_itl_ms_budget=slo.p99_itl_ms
    )
    base_side, cand_side = (
        side_capacity({level: slo_checks(level, blocks[level], thresholds, 0) for level in sorted(blocks)}, thresholds)
        for blocks in (base, cand)
    )
    return capacity_check(base_side, cand_side, slo).outcome.value


def simulate(
    pairs: int,
    baseline: Shape,
    candidate: Shape,
    args: argparse.Namespace,
    seed: int,
    slo: Slo | None = None,
    capacities: list[tuple[tuple[int, dict[int, str]], tuple[int, dict[int, str]], str]] | None = None,
) -> list[list[Delta]]:
    out = []
    for pair in range(pairs):
        side = {"blocks": args.blocks, "per_slot": args.per_slot, "levels": GATE_LEVELS}
        base = with_outcomes(simulated_side(baseline, seed=seed + 2 * pair, **side))
        cand = with_outcomes(simulated_side(candidate, seed=seed + 2 * pair + 1, **side))
        out.append(compare_levels(base, cand, seed=pair, slo=slo))
        if slo is not None and capacities is not None:
            capacities.append((capacity_level(base, slo), capacity_level(cand, slo), gate_capacity(base, cand, slo)))
    return out


def report_capacity(name: str, capacities: list) -> None:
    """Two rules for "the candidate carries less": its capacity (levels held in a row) is lower, or (established)
    at some level the baseline holds (upper end within the budget) and the candidate fails (lower end over it)."""
    lower = sum(cand < base for (base, _), (cand, _), _ in capacities)
    print(share_line(f"{name}: A/A pairs, candidate capacity lower", lower, len(capacities), "<= 5 %"))
    established = sum(
        any(bv[level] == "holds" and cv[level] == "fails" for level in bv) for (_, bv), (_, cv), _ in capacities
    )
    print(
        share_line(
            f"{name}: A/A pairs, a level the baseline holds and the candidate fails", established, len(capacities),
            "<= 5 %",
        )
    )  # fmt: skip
    differ = sum(cand != base for (base, _), (cand, _), _ in capacities)
    seen: dict[int, int] = {}
    for (base, _), _, _ in capacities:
        seen[base] = seen.get(base, 0) + 1
    print(f"  capacities differ in {differ}/{len(capacities)}; baseline capacity counts {dict(sorted(seen.items()))}")
    gate = [outcome for _, _, outcome in capacities]
    print(share_line(f"{name}: A/A pairs the gate's capacity check fails", gate.count("fail"), len(gate), "<= 5 %"))
    print(share_line(f"{name}: A/A pairs it cannot tell (inconclusive)", gate.count("inconclusive"), len(gate), "-"))


def report_aa(name: str, results: list[list[Delta]]) -> None:
    flagged = [deltas for deltas in results if labelled(deltas)]
    print(share_line(f"{name}: A/A pairs with any better/worse", len(flagged), len(results), "<= 5 %"))
    goodput = [deltas for deltas in results if any(d.metric == GOODPUT for d in deltas)]
    if goodput:
        hits = sum(any(d.metric == GOODPUT for d in labelled(deltas)) for deltas in goodput)
        print(share_line(f"{name}: A/A pairs with goodput better/worse", hits, len(goodput), "<= 5 %"))
    total = sum(len(deltas) for deltas in results)
    words: dict[str, int] = {}
    for deltas in results:
        for d in deltas:
            words[d.verdict] = words.get(d.verdict, 0) + 1
    print(f"  deltas: {total} ({', '.join(f'{w} {n}' for w, n in sorted(words.items()))})")
    for deltas in flagged[:5]:
        print(
            "  e.g. " + "; ".join(f"c={d.concurrency} {d.metric} {d.statistic} {d.verdict}" for d in labelled(deltas))
        )


def report_ab(name: str, metric: str, results: list[list[Delta]]) -> bool:
    def correct(deltas: list[Delta]) -> bool:
        changed = [d for d in deltas if d.metric == metric]
        return any(d.verdict == "better" for d in changed) and not any(d.verdict == "worse" for d in deltas)

    def strict(deltas: list[Delta]) -> bool:
        p50 = [d for d in deltas if d.metric == metric and d.statistic == "p50"]
        return bool(p50) and all(d.verdict == "better" for d in p50)

    hits = sum(correct(d) for d in results)
    print(share_line(f"{name}: labelled correctly", hits, len(results), ">= 95 %"))
    print(
        f"  {metric} p50 better at every level: {sum(strict(d) for d in results)}/{len(results)}; "
        f"pairs with any worse: {sum(any(x.verdict == 'worse' for x in d) for d in results)}/{len(results)}"
    )
    for level in GATE_LEVELS:
        better = sum(
            any(x.verdict == "better" and x.metric == metric and x.concurrency == level for x in d) for d in results
        )
        print(f"  c={level}: {metric} better in {better}/{len(results)} pairs")
    return hits / len(results) >= 0.95


def real_pairs(pairs: int, slo: Slo | None = None) -> list[list[Delta]]:
    """A/A on two identical emulator processes, blocks interleaved A B A B A B."""
    from optigate.bench.core.client import Target
    from optigate.bench.core.event_loop import run_loop
    from optigate.bench.core.load import LoadSpec
    from optigate.bench.core.runner import run_levels
    from optigate.emulator.process import emulator_process

    config = {
        "default": {
            "ttft_ms": {"mean": 150, "jitter": 30, "kind": "lognormal"},
            "itl_ms": {"mean": 15, "jitter": 2, "kind": "lognormal"},
        }
    }
    requests = {1: 6, 16: 32, 64: 64}  # 3 blocks x 6 = 18 requests a side at c=1, above MIN_REQUESTS
    spec = LoadSpec(concurrency=1, requests=10, max_new_tokens=12, prompt_tokens=16)

    async def one_block(url: str) -> dict[int, RunSamples]:
        out = {}
        for level, count in requests.items():
            data = await run_levels(Target("aa", endpoint_url=url), [level], replace(spec, requests=count), timeout=60)
            out[level] = RunSamples.from_result(data["runs"][0])
        return out

    results = []
    with emulator_process(config) as first, emulator_process(config) as second:
        for pair in range(pairs):
            sides: tuple[dict[int, list[RunSamples]], dict[int, list[RunSamples]]] = ({}, {})
            for _ in range(GATE_BLOCKS):
                for side, url in zip(sides, (first, second), strict=True):
                    for level, run in run_loop(one_block(url)).items():
                        side.setdefault(level, []).append(run)
            results.append(compare_levels(sides[0], sides[1], seed=pair, slo=slo))
            print(f"  real pair {pair + 1}/{pairs}: {len(labelled(results[-1]))} better/worse", flush=True)
    return results


# --------------------------------------------------------------------------- (e), (f): looking after every round


def first_decision(base: Side, cand: Side, min_rounds: int, max_rounds: int) -> tuple[str, int, list[RoundDelta]]:
    """`bench compare --rounds` looking after each round from `min_rounds`: ("decided", round, deltas) at the first
    better or worse, else ("undecided", max_rounds, the last deltas)."""
    deltas: list[RoundDelta] = []
    for rounds in range(min_rounds, max_rounds + 1):
        deltas = compare_rounds({c: b[:rounds] for c, b in base.items()}, {c: b[:rounds] for c, b in cand.items()})
        if any(str(d.verdict) in ("better", "worse") for d in deltas):
            return "decided", rounds, deltas
    return "undecided", max_rounds, deltas


def gate_gain(base: Side, cand: Side, min_rounds: int, max_rounds: int, level: int = 16) -> tuple[str, int, str]:
    """The gate's throughput check at `level` against a 0 % minimum: (its outcome at the first look that decides it,
    or inconclusive at the budget; the rounds; the outcome of one look at 95 % after all rounds)."""
    looks = Looks(min_rounds, max_rounds)
    outcome, used = "inconclusive", max_rounds
    for rounds in range(min_rounds, max_rounds + 1):
        check = throughput_check(level, base[level][:rounds], cand[level][:rounds], 0.0, 0, looks.confidence)
        if check.outcome is not Outcome.INCONCLUSIVE:
            outcome, used = check.outcome.value, rounds
            break
    fixed = throughput_check(level, base[level], cand[level], 0.0, 0).outcome.value
    return outcome, used, fixed


def sequential_runs(runs: int, baseline: Shape, candidate: Shape, args: argparse.Namespace, seed: int) -> list[dict]:
    out = []
    for run in range(runs):
        side = {"blocks": args.max_rounds, "per_slot": args.round_per_slot, "levels": GATE_LEVELS}
        base = simulated_side(baseline, seed=seed + 2 * run, **side)
        cand = simulated_side(candidate, seed=seed + 2 * run + 1, **side)
        word, rounds, deltas = first_decision(base, cand, args.min_rounds, args.max_rounds)
        fixed = compare_levels(base, cand, seed=run)
        gain, gain_rounds, gain_fixed = gate_gain(base, cand, args.min_rounds, args.max_rounds)
        out.append(
            {
                "word": word,
                "rounds": rounds,
                "deltas": deltas,
                "fixed": fixed,
                "gain": gain,
                "gain_rounds": gain_rounds,
                "gain_fixed": gain_fixed,
            }
        )
    return out


#: What a change of ITL moves: itself, each request's time per token and end to end, and output tokens/s. A look
#: that stops at its first decision may have decided one of these before ITL itself.
DECODE_METRICS = ("itl_ms", "tpot_ms", "e2e_ms", "output_tokens_per_s")


def found(deltas: Sequence[RoundDelta | Delta], metrics: str | Sequence[str]) -> bool:
    """Some figure of `metrics` better and none anywhere worse."""
    wanted = {metrics} if isinstance(metrics, str) else set(metrics)
    words = [(d.metric, str(d.verdict)) for d in deltas]
    return any(m in wanted and w == "better" for m, w in words) and not any(w == "worse" for _, w in words)


def report_sequential(name: str, results: list[dict], change: float, budget: int) -> None:
    total = len(results)
    decided = [r for r in results if r["word"] == "decided"]
    mean_rounds = sum(r["rounds"] for r in decided) / len(decided) if decided else math.nan
    gain_decided = [r for r in results if r["gain"] != "inconclusive"]
    gain_rounds = sum(r["gain_rounds"] for r in gain_decided) / len(gain_decided) if gain_decided else math.nan
    if change == 0:
        print(
            share_line(f"{name}: bench compare --rounds, any better/worse at some look", len(decided), total, "<= 5 %")
        )
        fixed = sum(bool(labelled(r["fixed"])) for r in results)
        print(share_line(f"{name}: one look at the budget's end (fixed)", fixed, total, "<= 5 %"))
        print(
            share_line(f"{name}: the gate's throughput check decided at some look", len(gain_decided), total, "<= 5 %")
        )
        fixed_gain = sum(r["gain_fixed"] != "inconclusive" for r in results)
        print(share_line(f"{name}: the gate's check, one look at 95 % (fixed)", fixed_gain, total, "<= 5 %"))
        return
    right = sum(found(r["deltas"], DECODE_METRICS) for r in decided)
    print(share_line(f"{name}: bench compare --rounds found it", right, total, ">= 95 % at -10 %"))
    print(
        f"  (a decode figure better, none worse, when it stopped; ITL itself among them in "
        f"{sum(found(r['deltas'], 'itl_ms') for r in decided)}/{total})"
    )
    print(
        f"  mean {mean_rounds:.1f} rounds to decide ({mean_rounds / budget:.0%} of the {budget}-round budget); "
        f"one look at the budget's end found it in {sum(found(r['fixed'], DECODE_METRICS) for r in results)}/{total}"
    )
    passed = sum(r["gain"] == "pass" for r in results)
    print(share_line(f"{name}: the gate's throughput check passed (gain > 0 %)", passed, total, "-"))
    print(
        f"  mean {gain_rounds:.1f} rounds to decide ({gain_rounds / budget:.0%} of the budget); at 95 % after the "
        f"budget: passed {sum(r['gain_fixed'] == 'pass' for r in results)}/{total}"
    )


def real_rounds(runs: int, min_rounds: int, max_rounds: int, level: int = 16) -> list[tuple[str, int]]:
    """(f): A/A on two identical emulator processes, one level, rounds interleaved (twin block, candidate block),
    `bench compare --rounds` looking after each round: (word, rounds) per run."""
    from optigate.bench.core.client import Target
    from optigate.bench.core.event_loop import run_loop
    from optigate.bench.core.load import LoadSpec
    from optigate.bench.core.runner import run_levels
    from optigate.emulator.process import emulator_process

    config = {
        "default": {
            "ttft_ms": {"mean": 150, "jitter": 30, "kind": "lognormal"},
            "itl_ms": {"mean": 15, "jitter": 2, "kind": "lognormal"},
        }
    }
    spec = LoadSpec(concurrency=level, requests=level, max_new_tokens=12, prompt_tokens=16)

    def block(url: str) -> RunSamples:
        data = run_loop(run_levels(Target("aa", endpoint_url=url), [level], spec, timeout=60))
        return RunSamples.from_result(data["runs"][0])

    out = []
    with emulator_process(config) as first, emulator_process(config) as second:
        for run in range(runs):
            sides: tuple[list[RunSamples], list[RunSamples]] = ([], [])
            word, used = "undecided", max_rounds
            for rounds in range(1, max_rounds + 1):
                sides[0].append(block(first))
                sides[1].append(block(second))
                if rounds >= min_rounds:
                    deltas = compare_rounds({level: sides[0]}, {level: sides[1]})
                    if any(str(d.verdict) in ("better", "worse") for d in deltas):
                        word, used = "decided", rounds
                        break
            out.append((word, used))
            load = os.getloadavg()[0]
            print(f"  real run {run + 1}/{runs}: {word} after {used} rounds (load {load:.1f})", flush=True)
    return out


def timed(label: str, work: Callable[[], Any]) -> Any:
    started = time.perf_counter()
    out = work()
    print(f"[{label}: {time.perf_counter() - started:.0f} s]")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=200, help="simulated A/A pairs")
    parser.add_argument("--ab-pairs", type=int, default=100, help="simulated A/B pairs per change")
    parser.add_argument("--real-pairs", type=int, default=10, help="A/A pairs on real emulator processes")
    parser.add_argument("--drift", type=float, default=0.02, help="sigma of a block's log drift factor")
    parser.add_argument("--blocks", type=int, default=GATE_BLOCKS, help="blocks per side")
    parser.add_argument("--per-slot", type=int, default=4, help="requests per stream per block (at least 32)")
    parser.add_argument("--skip-real", action="store_true", help="skip (b)")
    parser.add_argument("--skip-aa", action="store_true", help="skip (a) and (b): power only")
    parser.add_argument("--changes", default="itl,ttft", help="A/B changes to try: itl, ttft or both (or none)")
    parser.add_argument("--slo", help="(d): compare goodput at this SLO too, and capacity per side (default: none)")
    parser.add_argument("--slo-only", action="store_true", help="with --slo: run (d) alone")
    parser.add_argument("--sequential", action="store_true", help="run (e) and (f) alone: a look after every round")
    parser.add_argument("--runs", type=int, default=200, help="(e): simulated A/A runs (A/B: --ab-pairs each)")
    parser.add_argument("--min-rounds", type=int, default=4, help="(e), (f): the first look")
    parser.add_argument("--max-rounds", type=int, default=12, help="(e), (f): the budget")
    parser.add_argument("--round-per-slot", type=int, default=1, help="(e): requests a stream per round (at least 8)")
    parser.add_argument("--real-runs", type=int, default=20, help="(f): A/A runs on emulator processes")
    args = parser.parse_args()
    if args.sequential:
        sequential_main(args)
        return
    slo = Slo.parse(args.slo) if args.slo else None
    shape = Shape(drift=args.drift)
    print(
        f"levels {list(GATE_LEVELS)}, {args.blocks} blocks per side, max(32, {args.per_slot} x c) requests "
        f"of 256 tokens per block; TTFT ~150 ms (log sigma {shape.ttft_sigma}), ITL ~15 ms, block drift "
        f"sigma {args.drift:.0%}; margin ±3 %, SE floor: {RUN_TO_RUN_DRIFT_PCT:g} % assumed drift; "
        "Holm over every delta of a pair"
    )
    if not (args.skip_aa or args.slo_only):
        aa = timed("simulated A/A", lambda: simulate(args.pairs, shape, shape, args, seed=1_000))
        report_aa("(a) simulated", aa)
    if not (args.skip_aa or args.skip_real or args.slo_only):
        real = timed("real emulator A/A", lambda: real_pairs(args.real_pairs, slo))
        report_aa("(b) real emulator", real)
    if slo is not None and not args.skip_aa:
        capacities: list = []
        with_slo = timed(
            "simulated A/A with the SLO",
            lambda: simulate(args.pairs, shape, shape, args, seed=1_000, slo=slo, capacities=capacities),
        )
        report_aa(f"(d) simulated, {slo.text()}", with_slo)
        report_capacity(f"(d) simulated, {slo.text()}", capacities)
    changes = [] if args.slo_only else args.changes.split(",")
    if "itl" in changes:
        itl = timed("A/B ITL", lambda: simulate(args.ab_pairs, shape, replace(shape, itl_ms=13.5), args, seed=50_000))
        report_ab("(c) A/B ITL 15 -> 13.5 ms", "itl_ms", itl)
    if "ttft" in changes:
        faster = replace(shape, ttft_ms=135.0)
        ttft = timed("A/B TTFT", lambda: simulate(args.ab_pairs, shape, faster, args, seed=90_000))
        report_ab("(c) A/B TTFT 150 -> 135 ms", "ttft_ms", ttft)


def sequential_main(args: argparse.Namespace) -> None:
    shape = Shape(drift=args.drift)
    print(
        f"(e) levels {list(GATE_LEVELS)}, rounds {args.min_rounds}..{args.max_rounds} of max(8, "
        f"{args.round_per_slot} x c) requests, 256 tokens; block drift {args.drift:.0%}; {args.runs} A/A runs, "
        f"{args.ab_pairs} a change"
    )
    changes = (-0.05, -0.10, -0.30) if args.skip_aa else (0.0, -0.05, -0.10, -0.30)
    for change in changes:
        candidate = replace(shape, itl_ms=shape.itl_ms * (1 + change))
        label = "A/A" if change == 0 else f"A/B ITL {change:+.0%}"
        seed = 200_000 + round(change * 1000)
        runs = args.runs if change == 0 else args.ab_pairs
        results = timed(f"simulated {label}", partial(sequential_runs, runs, shape, candidate, args, seed))
        report_sequential(f"(e) {label}", results, change, args.max_rounds)
    if not (args.skip_real or args.skip_aa):
        real = timed("real emulator A/A, rounds", lambda: real_rounds(args.real_runs, args.min_rounds, args.max_rounds))
        decided = sum(word == "decided" for word, _ in real)
        print(share_line("(f) emulator A/A, any better/worse at some look", decided, len(real), "<= 5 %"))


if __name__ == "__main__":
    main()
