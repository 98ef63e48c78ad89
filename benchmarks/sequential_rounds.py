"""How many interleaved rounds does the anytime-valid interval (optigate.stats.t_confidence_sequence) need, and does
it hold its error rate when it looks after every round? A design study for the gate's sequential benchmark (#39).

Each round sends one twin block and one candidate block at one level (a closed loop of `concurrency` streams,
`requests` requests of `tokens` tokens), shaped as tests/fixtures/simulated_blocks draws them: a per-block drift
factor (a busy host), a per-request speed factor and per-gap noise. A round's figure is the log of the candidate's
p99 ITL over the twin's. After each round the interval is computed; the run stops when it excludes "no change"
(a decision: better or worse) or at `--max-rounds`.

Printed per round size (requests per block): A/A false decisions (target <= 5 %), and for each true ITL change the
share decided in the right direction, the wrong one, and the mean rounds and requests a decision took.

    python benchmarks/sequential_rounds.py [--runs 400] [--max-rounds 20] [--concurrency 16] [--drift 0.02]
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's optigate

from optigate.stats import t_confidence_sequence


def block_p99_itl(rng: np.random.Generator, requests: int, tokens: int, itl_ms: float, drift: float) -> float:
    """One block's p99 inter-token latency (ms), pooled over its requests' gaps."""
    factor = math.exp(rng.normal(0, drift))
    speed = itl_ms * factor * rng.lognormal(0, 0.05, requests)
    gaps = speed[:, None] * rng.lognormal(0, 0.15, (requests, tokens - 1))
    return float(np.percentile(gaps, 99))


def one_run(
    rng: np.random.Generator, change: float, requests: int, tokens: int, drift: float, max_rounds: int
) -> tuple[str, int]:
    """('better' | 'worse' | 'undecided', rounds used) for a candidate whose ITL is (1 + change) x the twin's."""
    figures: list[float] = []
    for round_number in range(1, max_rounds + 1):
        twin = block_p99_itl(rng, requests, tokens, 15.0, drift)
        candidate = block_p99_itl(rng, requests, tokens, 15.0 * (1 + change), drift)
        figures.append(math.log(candidate / twin))
        _, low, high = t_confidence_sequence(figures)
        if low > 0:
            return "worse", round_number
        if high < 0:
            return "better", round_number
    return "undecided", max_rounds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=400)
    parser.add_argument("--max-rounds", type=int, default=20)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--tokens", type=int, default=256)
    parser.add_argument("--drift", type=float, default=0.02, help="sigma of a block's log drift factor")
    parser.add_argument("--requests", default="16,32,64", help="requests per block, comma-separated")
    args = parser.parse_args(argv)
    changes = (0.0, -0.05, -0.10, -0.30)
    print(
        f"c={args.concurrency}, {args.tokens} tokens, drift {args.drift:.0%}, up to {args.max_rounds} rounds, "
        f"{args.runs} runs each"
    )
    for requests in (int(r) for r in args.requests.split(",")):
        print(f"\n{requests} requests per block (a round sends {2 * requests}):")
        for change in changes:
            rng = np.random.default_rng([requests, round(change * 1000) + 1000])
            outcomes = [
                one_run(rng, change, requests, args.tokens, args.drift, args.max_rounds) for _ in range(args.runs)
            ]
            decided = [rounds for verdict, rounds in outcomes if verdict != "undecided"]
            right = sum(verdict == "better" for verdict, _ in outcomes)
            wrong = sum(verdict == "worse" for verdict, _ in outcomes)
            mean_rounds = float(np.mean(decided)) if decided else math.nan
            if change == 0:
                print(f"  A/A: any decision in {len(decided) / args.runs:.1%} of runs (target <= 5 %)")
            else:
                print(
                    f"  ITL {change:+.0%}: found {right / args.runs:.1%}, wrong way {wrong / args.runs:.1%}, "
                    f"mean {mean_rounds:.1f} rounds ({mean_rounds * 2 * requests:.0f} requests) to decide"
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
