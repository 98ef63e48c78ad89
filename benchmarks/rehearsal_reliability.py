"""How reliably a team's rehearsed gate reaches the verdict it should, on a busy host: N rehearsals of each kind of
candidate, beside K CPU-bound processes (what a shared CI machine does to the emulators and the client).

    python benchmarks/rehearsal_reliability.py --team support --runs 10 --busy 2

For a team with adapters the kinds are `faster` (expected APPROVED) and `adapter-quality` (a faster base whose first
adapter loses quality on its evaluation: expected REJECTED); else `faster` and `slower`. Prints each run's outcome
and seconds, and per kind how many came out as expected. Exit 0 when every run did, else 1.
"""

from __future__ import annotations

import argparse
import multiprocessing
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def _spin(stop: multiprocessing.synchronize.Event) -> None:  # type: ignore[name-defined]
    """One busy core: pure Python arithmetic until told to stop."""
    x = 0
    while not stop.is_set():
        for _ in range(100_000):
            x = (x * 31 + 7) % 1_000_003


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--team", default="support")
    parser.add_argument("--env", default=None)
    parser.add_argument("--config", default="config")
    parser.add_argument("--runs", type=int, default=10, help="rehearsals of each kind (default 10)")
    parser.add_argument("--busy", type=int, default=2, help="CPU-bound processes beside them (default 2)")
    args = parser.parse_args()

    from optigate.rehearse.rehearsal import expected_outcome, rehearsal_kinds, rehearse, synthesize_team

    template, deployment = synthesize_team(args.team, args.env, args.config)
    kinds = rehearsal_kinds(deployment.team)
    stop = multiprocessing.Event()
    busy = [multiprocessing.Process(target=_spin, args=(stop,), daemon=True) for _ in range(args.busy)]
    for process in busy:
        process.start()
    tally: dict[str, list[str]] = {kind: [] for kind in kinds}
    try:
        for run in range(args.runs):
            for kind in kinds:
                started = time.monotonic()
                result = rehearse(template, deployment, kind)
                execution = result["execution"]
                outcome = (
                    "APPROVED"
                    if execution["status"] == "SUCCEEDED"
                    else "INCONCLUSIVE"
                    if execution.get("error") == "Inconclusive"
                    else "REJECTED"
                )
                left = sum(len(v) for v in result["left"].values())
                tally[kind].append(outcome)
                print(
                    f"run {run + 1:2d} {kind:16s} {outcome:12s} expected {expected_outcome(kind):9s} "
                    f"{time.monotonic() - started:5.1f} s, resources left {left}",
                    flush=True,
                )
    finally:
        stop.set()
        for process in busy:
            process.join(timeout=5)
    failures = 0
    for kind, outcomes in tally.items():
        right = sum(outcome == expected_outcome(kind) for outcome in outcomes)
        failures += len(outcomes) - right
        print(f"{kind}: {right} of {len(outcomes)} {expected_outcome(kind)} beside {args.busy} busy processes")
    return 0 if failures == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
