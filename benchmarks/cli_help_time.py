"""How long does `optigate <command> --help` take, and does it print anything but help?

Each command's help runs in a fresh interpreter (as a user types it), several times; the script
prints the best and the median wall time per command, and flags output that is not help (the
SageMaker SDK's `sagemaker.config INFO` lines, warnings). The target is under 1 s for every
command; heavy libraries (pydantic, boto3, the CDK, fmeval, the SageMaker SDK) are imported only
by the commands that run.

    python benchmarks/cli_help_time.py [--runs 5]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

COMMANDS = (
    [],
    ["validate"],
    ["check"],
    ["summary"],
    ["plan"],
    ["bench"],
    ["bench", "compare"],
    ["evaluate"],
    ["rehearse"],
    ["emulate"],
    ["resolve"],
    ["schema"],
)
TARGET_S = 1.0


def timed(command: list[str]) -> tuple[float, str]:
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "optigate.cli", *command, "--help"], capture_output=True, text=True, timeout=60
    )
    elapsed = time.perf_counter() - started
    stray = [line for line in done.stderr.splitlines() if line.strip()]
    stray += [line for line in done.stdout.splitlines() if "sagemaker.config" in line]
    if done.returncode != 0:
        stray.append(f"exit {done.returncode}")
    return elapsed, "; ".join(stray)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5, help="runs per command (default: 5)")
    args = parser.parse_args()
    print(f"{'command':<31} {'best s':>7} {'median s':>9}  stray output")
    worst = 0.0
    for command in COMMANDS:
        times, stray = [], ""
        for _ in range(args.runs):
            elapsed, stray = timed(command)
            times.append(elapsed)
        name = " ".join(["optigate", *command, "--help"])
        median = statistics.median(times)
        worst = max(worst, median)
        print(f"{name:<31} {min(times):7.3f} {median:9.3f}  {stray or '-'}")
    print(f"slowest median {worst:.3f} s; target < {TARGET_S:.1f} s: {'met' if worst < TARGET_S else 'NOT met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
