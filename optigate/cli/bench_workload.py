"""`optigate bench --workload FILE|DIR|s3://...`: the team's captured traffic as the benchmark's workload
(optigate.bench.core.capture reads SageMaker's data capture, optigate.bench.core.workload builds it), replayed on its
recorded schedule or sampled, and `--workers` to shard each level over processes so the client does not shape the
load."""

from __future__ import annotations

import argparse
from typing import Any

from optigate.bench.core.load import DEFAULT_MAX_LAG_MS
from optigate.cli.errors import UsageError
from optigate.cli.output import console, stderr

WORKLOAD_KINDS = ("replay", "sessions", "distribution")
#: The longest replay `optigate bench` runs (at its --speedup): a day, a soak test's length.
MAX_REPLAY_HOURS = 24
#: Defaults that depend on the load model: a replay's level is the connections opened before its schedule (one
#: level: its load is the recorded schedule and --speedup), and it sends the whole workload unless told otherwise.
DEFAULT_LEVELS = "1,16,64"
DEFAULT_REPLAY_CONNECTIONS = "16"
DEFAULT_REQUESTS = 100
#: `optigate bench`'s exit code when a replay's sends fell behind their schedule: it measured the client, so
#: nothing can be judged from it.
CLIENT_BOUND_EXIT = 3


def add_workload_arguments(bench: argparse.ArgumentParser) -> None:
    bench.add_argument(
        "--workload",
        metavar="FILE|DIR|s3://BUCKET/PREFIX",
        help="SageMaker data-capture files (.jsonl, LMI or OpenAI bodies) as the workload: real prompts and output "
        "lengths; prompts never leave this machine's reports, which show only the workload's shape (default: none)",
    )
    bench.add_argument(
        "--workload-kind",
        choices=WORKLOAD_KINDS,
        default="replay",
        help="replay: open loop on the recorded arrival times; sessions: whole sessions sampled, sent by the closed"
        " or open loop; distribution: synthetic prompts with the captured lengths (default: replay)",
    )
    bench.add_argument(
        "--speedup", type=float, default=1.0, help="replay the recorded schedule this many times faster (default: 1)"
    )
    bench.add_argument(
        "--max-requests", type=int, help="with --workload: at most this many captured requests (default: all)"
    )
    bench.add_argument(
        "--window-days", type=float, help="with --workload: only requests of the last N days (default: all)"
    )
    bench.add_argument(
        "--max-lag-ms",
        type=float,
        default=DEFAULT_MAX_LAG_MS,
        help="a replay whose p99 lag of sends behind the schedule exceeds this is refused: the client, not the"
        f" server, shaped its load (default: {DEFAULT_MAX_LAG_MS:g})",
    )
    bench.add_argument(
        "--workers",
        type=int,
        default=1,
        help="run each level over N processes (closed/open: the concurrency split; replay: arrivals dealt"
        " round-robin on one start time), merged exactly; one process keeps a few hundred streams accurate"
        " (benchmarks/client_capacity.py) (default: 1)",
    )


def resolve_load_arguments(args: argparse.Namespace) -> None:
    """Fill the defaults that depend on the load model (mode, levels, requests) and reject what contradicts it."""
    replaying = bool(args.workload) and args.workload_kind == "replay"
    if args.mode is None:
        args.mode = "replay" if replaying else "closed"
    if args.mode == "replay" and not replaying:
        raise UsageError("--mode replay needs --workload (a capture) with --workload-kind replay")
    if replaying and args.mode != "replay":
        raise UsageError(
            f"--workload-kind replay sends on the recorded schedule, not a --mode {args.mode} loop: drop --mode, "
            "or use --workload-kind sessions or distribution"
        )
    if args.concurrency is None:
        args.concurrency = DEFAULT_REPLAY_CONNECTIONS if replaying else DEFAULT_LEVELS
    elif replaying and "," in args.concurrency.strip(", "):
        raise UsageError(
            "a replay's load is the recorded schedule (and --speedup): give one --concurrency, the connections "
            "opened before it starts"
        )
    if args.requests is None and not (replaying or args.duration):
        args.requests = DEFAULT_REQUESTS
    for option, value in (("--speedup", args.speedup), ("--max-lag-ms", args.max_lag_ms)):
        if not value > 0:
            raise UsageError(f"{option} {value}: must be positive")
    for option, value in (("--max-requests", args.max_requests), ("--window-days", args.window_days)):
        if value is not None and not value > 0:
            raise UsageError(f"{option} {value}: must be positive")
    if args.workers < 1:
        raise UsageError(f"--workers {args.workers}: must be at least 1")
    if not args.workload:
        given = [
            option
            for option, value in (
                ("--max-requests", args.max_requests),
                ("--window-days", args.window_days),
                ("--speedup", None if args.speedup == 1.0 else args.speedup),
            )
            if value is not None
        ]
        if given:
            raise UsageError(f"{', '.join(given)} appl{'ies' if len(given) == 1 else 'y'} to --workload only")
    elif args.prompts:
        raise UsageError("--workload and --prompts both give the prompts: keep one")


def read_workload(args: argparse.Namespace) -> Any:
    """The workload --workload names (None without it), read once however many specs are made of it. Records that
    are not requests are skipped and counted in one line on stderr; a capture with none readable, or mostly
    unreadable (optigate.bench.core.capture.MIN_READABLE_SHARE), is a usage error naming it and why."""
    if not hasattr(args, "read_workload"):
        args.read_workload = _read(args)
    return args.read_workload


def _read(args: argparse.Namespace) -> Any:
    if not args.workload:
        return None
    from optigate.bench.core.capture import read_capture
    from optigate.bench.core.workload import from_capture

    s3_client = None
    if args.workload.startswith("s3://"):
        import boto3

        s3_client = boto3.client("s3", region_name=args.region)
    try:
        read = read_capture(
            args.workload, s3_client=s3_client, window_days=args.window_days, max_requests=args.max_requests
        )
        skipped = sum(read.skipped.values())
        if skipped:  # a file cut short, a body of another kind: said once, the rest is the workload
            stderr.print(
                f"--workload {args.workload}: {len(read.requests)} request(s) read from {read.files} file(s), "
                f"{skipped} record(s) skipped: {read.skipped_note()}",
                highlight=False,
                soft_wrap=True,
                markup=False,
            )
        workload = from_capture(
            read,
            kind=args.workload_kind,
            speedup=args.speedup,
            max_requests=args.max_requests,
            default_max_new_tokens=args.max_new_tokens,
            source=args.workload,
        )
    except (OSError, ValueError) as error:
        reason = str(error).removeprefix(f"{args.workload}: ")  # named once
        raise UsageError(f"--workload {args.workload}: {reason}") from error
    span = max((request.offset_s or 0.0) for request in workload.requests) if workload.scheduled else 0.0
    if span > MAX_REPLAY_HOURS * 3600:
        # A stray timestamp (a hand-edited or corrupted record) would otherwise make a replay wait for years.
        raise UsageError(
            f"--workload {args.workload}: the {len(workload.requests)} requests span {span / 3600:,.0f} h at speedup "
            f"{args.speedup:g}, over the {MAX_REPLAY_HOURS} h a replay may run: raise --speedup to at least "
            f"{args.speedup * span / (MAX_REPLAY_HOURS * 3600):.3g}, lower --window-days or --max-requests"
        )
    return workload


def print_schedules(data: dict) -> None:
    """A replay's schedule fidelity, one line per run: how late the sends left against the recorded times."""
    for run in data["runs"]:
        schedule = run.get("schedule")
        if schedule and schedule["p99_lag_ms"] is not None:
            lags = ", ".join(f"{key[:3]} {schedule[key]:.2f} ms" for key in ("p50_lag_ms", "p99_lag_ms", "max_lag_ms"))
            console.print(
                f"c={run['concurrency']}: schedule lag {lags} (bound {schedule['bound_ms']:g} ms)", highlight=False
            )
