"""Fuzz the readers of every file optigate reads: N mutants of real files through the command that reads them.

    python benchmarks/fuzz_inputs.py                       # every format, the default --mutants each
    python benchmarks/fuzz_inputs.py --format config --mutants 10000 --seed 14

Formats and what reads them (mutants and checkers: `tests/fixtures/<format>_mutants.py`, the same as the suite's
property tests, which run `max_examples` of each; JSON formats share the engine of tests/fixtures/json_mutants.py):

- config: the example project's YAML files, through what `optigate validate` runs; each mutant under 2 s of CPU;
- bench_result: a pair of `optigate bench --json` results, compared with `optigate bench compare`;
- merged_result: the benchmark fleet's merged results, through what the gate's decision runs on them (it fails
  closed: a refusal is the INCONCLUSIVE verdict naming the file and JSON path);
- gate_report: real gate reports (`optigate rehearse --report`), through `optigate advise --from-report` and
  `optigate plan --calibrate`;
- capture: real SageMaker data-capture files (JSON Lines), through what `optigate bench --workload` reads;
- calibration: real calibration.yaml files, through `optigate plan` of a team that has one.

Prints, per format, the count per outcome, each distinct failure with its smallest mutants, a few refusals as
examples, and the slowest mutant. Exits 1 on any failure (an unexpected error, a summary-only mutant read with
another verdict, a hang; for config also an issue without a line or a mutant over 2 s).
"""

from __future__ import annotations

import argparse
import importlib
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, Phase, given, seed, settings

REPO = Path(__file__).resolve().parents[1]
FORMATS = ("config", "bench_result", "merged_result", "gate_report", "capture", "calibration")


def fuzz(name: str, target: Any, mutants: int, chosen_seed: int | None, show: int) -> bool:
    """Run one format's mutants and print what they did; True when none failed."""
    counts: Counter[str] = Counter()
    failures: dict[str, list[tuple[Any, Any]]] = {}
    refusals: list[tuple[Any, Any]] = []
    slowest: tuple[float, Any] = (0.0, None)
    used_seed = target.default_seed if chosen_seed is None else chosen_seed
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix=f"optigate-fuzz-{name}-") as workdir:

        @seed(used_seed)
        @settings(
            max_examples=mutants,
            deadline=None,
            database=None,
            phases=[Phase.generate],
            suppress_health_check=list(HealthCheck),
        )
        @given(target.mutants())
        def run(mutant: Any) -> None:
            nonlocal slowest
            outcome = target.check(Path(workdir), mutant)
            counts[outcome.kind] += 1
            if outcome.seconds > slowest[0]:
                slowest = (outcome.seconds, mutant)
            if outcome.kind in target.failing:
                failures.setdefault(outcome.signature or outcome.kind, []).append((mutant, outcome))
            elif outcome.kind == "refused" and len(refusals) < show * 3:
                # One example per kind of refusal (what was expected), not the same cut file again.
                kind = outcome.detail.split("expected", 1)[-1].split(",")[0]
                if all(kind not in seen.detail for _, seen in refusals):
                    refusals.append((mutant, outcome))
            if getattr(mutant, "summary_only", False):
                counts[f"summary_only_{outcome.kind}"] += 1

        run()

    total = sum(counts[kind] for kind in target.labels)
    print(f"{name}: {total} mutants in {time.monotonic() - started:.0f} s (seed {used_seed})")
    for kind, label in target.labels.items():
        print(f"  {counts[kind]:6}  {label}")
    touched = sum(counts[f"summary_only_{kind}"] for kind in target.labels)
    if touched:
        print(
            f"  of which {touched} touched only summary fields: "
            f"{counts['summary_only_read']} read with the unmutated verdicts, {counts['summary_only_refused']} refused"
        )
    for signature, cases in sorted(failures.items(), key=lambda item: -len(item[1])):
        print(f"\n{len(cases)} x {signature}")
        for mutant, outcome in sorted(cases, key=lambda case: target.size(case[0]))[:show]:
            print(f"    {target.describe(mutant)}\n      {outcome.detail}")
    if refusals:
        print("\nrefusals, for example:")
        for mutant, outcome in refusals:
            print(f"    {target.describe(mutant)}\n      {outcome.detail}")
    seconds, mutant = slowest
    if mutant is not None:
        print(f"\nslowest: {seconds:.3f} s CPU, {target.describe(mutant)}")
    return not any(counts[kind] for kind in target.failing)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--format", choices=(*FORMATS, "all"), default="all", help="file format (default: all)")
    parser.add_argument("--mutants", type=int, default=5000, help="how many mutants per format (default: %(default)s)")
    parser.add_argument("--seed", type=int, help="hypothesis seed (default: each format's own)")
    parser.add_argument("--show", type=int, default=3, help="mutants shown per distinct failure (default: 3)")
    args = parser.parse_args()

    sys.path.insert(0, str(REPO))  # this checkout's optigate, whatever is installed
    passed = True
    for name in FORMATS if args.format == "all" else (args.format,):
        target = importlib.import_module(f"tests.fixtures.{name}_mutants").fuzz_target()
        passed &= fuzz(name, target, args.mutants, args.seed, args.show)
        print()
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
