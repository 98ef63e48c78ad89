"""Fuzz the readers of the files optigate reads back: N mutants of a real file through the command that reads it.

    python benchmarks/fuzz_inputs.py --format bench_result --mutants 5000 --seed 29

Formats: bench_result (a pair of `optigate bench --json` results, compared with `optigate bench compare`; the
mutants and the checker are those of tests/bench/test_result_file_fuzz.py, `tests.fixtures.bench_result_mutants`).
Prints the count per outcome (read, refused with one line, unexpected error, a summary-only mutant whose verdict
changed, stopped after 30 s of CPU time), each distinct unexpected error with its smallest mutants, a few refusals
as examples, and the slowest mutant. Exits 1 on any unexpected error, changed verdict or hang.
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
FORMATS = ("bench_result",)
LABELS = {
    "read": "read (a verdict)",
    "refused": "refused with one line, exit 2",
    "unexpected": "unexpected error (a bug)",
    "verdict_changed": "summary-only mutant read with another verdict",
    "slow": "stopped after 30 s of CPU time (hang)",
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--format", choices=FORMATS, default="bench_result", help="file format (default: bench_result)")
    parser.add_argument("--mutants", type=int, default=5000, help="how many mutants (default: 5000)")
    parser.add_argument("--seed", type=int, default=29, help="hypothesis seed (default: 29)")
    parser.add_argument("--show", type=int, default=3, help="mutants shown per distinct failure (default: 3)")
    args = parser.parse_args()

    sys.path.insert(0, str(REPO))  # this checkout's optigate, whatever is installed
    from tests.fixtures.bench_result_mutants import Mutant, Outcome, check_mutant, mutants

    counts: Counter[str] = Counter()
    failures: dict[str, list[tuple[Mutant, Outcome]]] = {}
    refusals: list[tuple[Mutant, Outcome]] = []
    slowest: tuple[float, Mutant | None] = (0.0, None)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="optigate-fuzz-inputs-") as workdir:

        @seed(args.seed)
        @settings(
            max_examples=args.mutants,
            deadline=None,
            database=None,
            phases=[Phase.generate],
            suppress_health_check=list(HealthCheck),
        )
        @given(mutants())
        def run(mutant: Mutant) -> None:
            nonlocal slowest
            outcome = check_mutant(Path(workdir), mutant)
            counts[outcome.kind] += 1
            if outcome.seconds > slowest[0]:
                slowest = (outcome.seconds, mutant)
            if outcome.kind in ("unexpected", "verdict_changed", "slow"):
                failures.setdefault(outcome.signature or outcome.kind, []).append((mutant, outcome))
            elif outcome.kind == "refused" and len(refusals) < args.show * 3:
                # One example per kind of refusal (what was expected), not the same cut file again.
                kind = outcome.detail.split("expected", 1)[-1].split(",")[0]
                if all(kind not in seen.detail for _, seen in refusals):
                    refusals.append((mutant, outcome))
            if mutant.summary_only:
                counts[f"summary_only_{outcome.kind}"] += 1

        run()

    total = sum(counts[kind] for kind in LABELS)
    print(f"{args.format}: {total} mutants in {time.monotonic() - started:.0f} s (seed {args.seed})")
    for kind, label in LABELS.items():
        print(f"  {counts[kind]:6}  {label}")
    print(
        f"  of which {sum(counts[f'summary_only_{kind}'] for kind in LABELS)} touched only summary fields: "
        f"{counts['summary_only_read']} read with the unmutated verdicts, {counts['summary_only_refused']} refused"
    )
    for signature, cases in sorted(failures.items(), key=lambda item: -len(item[1])):
        print(f"\n{len(cases)} x {signature}")
        for mutant, outcome in sorted(cases, key=lambda case: len(case[0].content))[: args.show]:
            print(f"    {mutant.side}: {'; '.join(mutant.steps)}\n      {outcome.detail}")
    if refusals:
        print("\nrefusals, for example:")
        for mutant, outcome in refusals:
            print(f"    {'; '.join(mutant.steps)}\n      {outcome.detail}")
    seconds, mutant = slowest
    if mutant is not None:
        print(f"\nslowest: {seconds:.3f} s CPU, {mutant.side}: {'; '.join(mutant.steps)}")
    return 1 if counts["unexpected"] or counts["verdict_changed"] or counts["slow"] else 0


if __name__ == "__main__":
    sys.exit(main())
