"""Does a rehearsal's verdict depend on the host's load? Rehearse a team's two kinds of candidate (what
`optigate rehearse --candidate both` runs) N times each while CPU-bound processes run beside them, and print
how often each verdict came out right.

    python benchmarks/rehearsal_stability.py --team research --runs 10 --burners 2
    python benchmarks/rehearsal_stability.py --team support --runs 10 --burners 2

The faster candidate must be APPROVED every time, the slower one (a team with adapters: the faster base whose
first adapter loses quality on its own records) REJECTED; the host allowance (what the
baseline twin measured above its emulated p99, added to the budgets for rehearsals only) is printed
per run. The burners are plain busy loops in child processes, stopped when the script ends.
"""

from __future__ import annotations

import argparse
import multiprocessing
import time
from collections import Counter
from pathlib import Path

#: The example teams as the test suite keeps them (config/ is the user's project, which may differ).
EXAMPLE_CONFIG = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "project" / "config"


def _burn(stop: multiprocessing.synchronize.Event) -> None:
    while not stop.is_set():
        sum(i * i for i in range(10_000))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--team", default="research")
    parser.add_argument("--env", default=None)
    parser.add_argument("--config", default=str(EXAMPLE_CONFIG), help="default: tests/fixtures/project/config")
    parser.add_argument("--runs", type=int, default=10, help="rehearsals per candidate (default: 10)")
    parser.add_argument("--burners", type=int, default=2, help="CPU-bound processes beside them (default: 2)")
    args = parser.parse_args()

    from optigate.rehearse.rehearsal import expected_outcome, rehearsal_kinds, rehearse, synthesize_team

    template, deployment = synthesize_team(args.team, args.env, args.config)
    stop = multiprocessing.Event()
    burners = [multiprocessing.Process(target=_burn, args=(stop,), daemon=True) for _ in range(args.burners)]
    for burner in burners:
        burner.start()
    expected = {kind: expected_outcome(kind) for kind in rehearsal_kinds(deployment.team)}
    outcomes: dict[str, Counter] = {candidate: Counter() for candidate in expected}
    try:
        for run in range(1, args.runs + 1):
            for candidate in expected:
                started = time.perf_counter()
                result = rehearse(template, deployment, candidate)
                execution = result["execution"]
                if execution["status"] == "SUCCEEDED":
                    outcome = "APPROVED"
                else:
                    outcome = "INCONCLUSIVE" if execution.get("error") == "Inconclusive" else "REJECTED"
                outcomes[candidate][outcome] += 1
                allowance = ", ".join(f"{k} +{v:.1f} ms" for k, v in result.get("host_allowance_ms", {}).items())
                print(
                    f"run {run:2d} {candidate:15s} {outcome:12s} {time.perf_counter() - started:5.1f} s  "
                    f"host allowance: {allowance or 'none'}",
                    flush=True,
                )
                if outcome != expected[candidate]:
                    for check in (result.get("report") or {}).get("checks", []):
                        if check["outcome"] != "pass":
                            where = f"{check['name']} c={check['concurrency']}"
                            print(f"    {check['outcome']}: {where}: {check['detail']}")
    finally:
        stop.set()
        for burner in burners:
            burner.join(timeout=5)
    right = 0
    for candidate, want in expected.items():
        counts = outcomes[candidate]
        right += counts[want]
        print(f"{candidate}: {counts[want]} of {args.runs} {want} ({dict(counts)}) with {args.burners} burners")
    return 0 if right == len(expected) * args.runs else 1


if __name__ == "__main__":
    raise SystemExit(main())
