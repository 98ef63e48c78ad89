"""`optigate bench --find-capacity --slo p99_ttft_ms=800,p99_itl_ms=60`: the highest load one instance carries
within the SLO (optigate.bench.capacity)."""

from __future__ import annotations

import argparse

from optigate.cli.errors import UsageError


def add_capacity_arguments(bench: argparse.ArgumentParser) -> None:
    bench.add_argument(
        "--find-capacity",
        action="store_true",
        help="search the highest concurrency at which --slo holds (bracket, then bisect) instead of --concurrency",
    )
    bench.add_argument("--slo", help="with --find-capacity: e.g. p99_ttft_ms=800,p99_itl_ms=60 (required there)")


def cmd_find_capacity(args: argparse.Namespace) -> int:
    raise UsageError("--find-capacity is being built (issue 27)")
