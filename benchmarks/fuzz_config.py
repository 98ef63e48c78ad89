"""Fuzz the config loader: run N mutants of the example files through what `optigate validate` runs.

    python benchmarks/fuzz_config.py --mutants 5000 --seed 14

The mutants and the checker are the ones of tests/config/test_config_fuzz.py
(`tests.fixtures.config_mutants`). Prints the count per outcome (valid, ConfigError, an issue without
a line, traceback, over 2 s of CPU time), each distinct traceback with the smallest mutant that raised
it, and the slowest mutant. Exits 1 if any mutant raised a traceback, ran over 2 s or gave an issue
without a line.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from hypothesis import HealthCheck, Phase, given, seed, settings

REPO = Path(__file__).resolve().parents[1]
LABELS = {
    "valid": "valid",
    "config_error": "ConfigError (every issue with file and line)",
    "issue_without_line": "ConfigError with an issue without file or line",
    "traceback": "traceback (another exception)",
    "slow": "over 2 s of CPU time",
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mutants", type=int, default=5000, help="how many mutants (default: 5000)")
    parser.add_argument("--seed", type=int, default=14, help="hypothesis seed (default: 14)")
    parser.add_argument("--config", default=str(REPO / "config"), help="the example config folder")
    parser.add_argument("--show", type=int, default=3, help="mutants shown per distinct traceback (default: 3)")
    args = parser.parse_args()

    sys.path.insert(0, str(REPO))  # this checkout's optigate, whatever is installed
    from tests.fixtures.config_mutants import Mutant, Outcome, check_mutant, mutants, prepare_project

    counts: Counter[str] = Counter()
    tracebacks: dict[str, list[tuple[Mutant, Outcome]]] = {}
    odd: list[tuple[Mutant, Outcome]] = []
    slowest: tuple[float, Mutant | None] = (0.0, None)
    started = time.monotonic()

    with tempfile.TemporaryDirectory(prefix="optigate-fuzz-") as workdir:
        project = prepare_project(args.config, workdir)
        originals = {path.relative_to(project).as_posix(): path.read_bytes() for path in project.rglob("*.yaml")}

        @seed(args.seed)
        @settings(
            max_examples=args.mutants,
            deadline=None,
            database=None,
            phases=[Phase.generate],
            suppress_health_check=list(HealthCheck),
        )
        @given(mutants(args.config))
        def run(mutant: Mutant) -> None:
            nonlocal slowest
            outcome = check_mutant(project, mutant, originals)
            counts[outcome.kind] += 1
            if outcome.seconds > slowest[0]:
                slowest = (outcome.seconds, mutant)
            if outcome.kind == "traceback":
                tracebacks.setdefault(outcome.signature, []).append((mutant, outcome))
            elif outcome.kind in ("slow", "issue_without_line"):
                odd.append((mutant, outcome))

        run()

    total = sum(counts.values())
    print(f"{total} mutants in {time.monotonic() - started:.0f} s (seed {args.seed})")
    for kind, label in LABELS.items():
        print(f"  {counts[kind]:6}  {label}")
    for signature, cases in sorted(tracebacks.items(), key=lambda item: -len(item[1])):
        print(f"\n{len(cases)} x {signature}")
        for mutant, outcome in sorted(cases, key=lambda case: len(case[0].content))[: args.show]:
            print(f"    {mutant.file}: {'; '.join(mutant.steps)}\n      {outcome.detail}")
    for mutant, outcome in odd[: args.show * 3]:
        print(f"\n{outcome.kind}: {mutant.file}: {'; '.join(mutant.steps)}\n    {outcome.detail}")
    seconds, mutant = slowest
    if mutant is not None:
        print(f"\nslowest: {seconds:.3f} s CPU, {mutant.file}: {'; '.join(mutant.steps)}")
    return 1 if counts["traceback"] or counts["slow"] or counts["issue_without_line"] else 0


if __name__ == "__main__":
    sys.exit(main())
