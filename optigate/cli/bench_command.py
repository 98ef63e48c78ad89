# Over 400 lines: one command's options, progress and outputs read top to bottom (compare has a module of its own).
"""`optigate bench`: measure a streaming endpoint at each concurrency level (`bench compare` is its subcommand)."""

from __future__ import annotations

import argparse
from typing import Any

from rich.table import Table

from optigate.cli.bench_capacity_command import add_capacity_arguments
from optigate.cli.bench_compare_command import add_compare_parser, cmd_bench_compare
from optigate.cli.bench_residency_command import add_residency_parser, cmd_bench_residency
from optigate.cli.bench_rounds_command import add_rounds_arguments, check_rounds_arguments, cmd_bench_rounds
from optigate.cli.bench_target import check_target_arguments
from optigate.cli.bench_workload import (
    CLIENT_BOUND_EXIT,
    add_workload_arguments,
    print_schedules,
    read_workload,
    resolve_load_arguments,
)
from optigate.cli.errors import USAGE_EXIT, CliError, UsageError
from optigate.cli.output import console, stderr, write_json

#: Short column names so that the table fits 100 columns; errors follow the table, one line per level.
BENCH_COLUMNS = (
    "c",
    "req",
    "TTFT\np50",
    "TTFT\np99",
    "ITL\np50",
    "ITL\np99",
    "TPOT\np50",
    "tok/s",
    "req/s",
    "conc.",
    "tok/\nframe",
    "coal.\n%",
)


def _bench_table(data: dict, title: str) -> Table:
    """The runs of one result (optigate.bench.html_report's summary rows) in 100 columns, figures never broken."""
    from rich import box

    from optigate.bench.html_report import summary_rows

    table = Table(title=title, box=box.SIMPLE_HEAD, padding=(0, 1), collapse_padding=True, caption="latencies in ms")
    for header in BENCH_COLUMNS:
        table.add_column(header, justify="right", no_wrap=True)
    for row in summary_rows(data):
        table.add_row(*row[: len(BENCH_COLUMNS)])
    return table


def _print_errors(data: dict) -> None:
    for run in data["runs"]:
        if run["errors"]:
            shown = ", ".join(f"{name} {count}" for name, count in run["errors"].items())
            console.print(f"c={run['concurrency']}: errors {shown} of {run['requests']} requests", highlight=False)


HEARTBEAT_SECONDS = 10.0


def _levels(text: str) -> list[int]:
    try:
        levels = [int(level) for level in text.split(",") if level.strip()]
    except ValueError:
        levels = []
    if not levels or any(level < 1 for level in levels):
        raise UsageError(f"--concurrency {text!r}: expected positive whole numbers separated by commas, e.g. 1,16,64")
    return levels


def _check_bench_arguments(args: argparse.Namespace) -> list[int]:
    if not args.endpoint:
        check_target_arguments(args)  # says what --endpoint is, before any other complaint
    levels = _levels(args.concurrency)
    if args.mode == "open" and not (args.rate and args.rate > 0):
        raise UsageError("--mode open needs --rate: the Poisson arrival rate in requests per second, e.g. --rate 4")
    if args.mode != "open" and args.rate is not None:
        raise UsageError("--rate applies to --mode open only; drop it, or add --mode open")
    for option, value in (("--requests", args.requests), ("--timeout", args.timeout), ("--duration", args.duration)):
        if value is not None and value <= 0:
            raise UsageError(f"{option} {value}: must be positive")
    check_target_arguments(args)
    return levels


def _prompts(path: str | None) -> tuple[dict, ...]:
    from optigate.bench.core.load import load_prompts

    if not path:
        return ()
    try:
        return tuple(load_prompts(path))
    except FileNotFoundError:
        raise UsageError(
            f"--prompts {path}: no such file; give a JSONL file of {{prompt|inputs|messages}} records"
        ) from None
    except (OSError, ValueError) as error:
        raise UsageError(f"--prompts {path}: {error}") from error


def _adapter_mix(args: argparse.Namespace) -> tuple:
    from optigate.bench.core.load import parse_adapter_mix

    if not args.adapter_mix:
        return ()
    if args.inference_component or args.target_variant:
        which = "--inference-component" if args.inference_component else "--target-variant"
        raise UsageError(f"--adapter-mix addresses each request to a component itself: drop {which}")
    try:
        return parse_adapter_mix(args.adapter_mix)
    except ValueError as error:
        raise UsageError(f"--adapter-mix: {error}") from error


def _load_spec(args: argparse.Namespace, concurrency: int) -> Any:
    from optigate.bench.core.load import LoadSpec

    components = _adapter_mix(args)
    return LoadSpec(
        components=components,
        concurrency=concurrency,
        requests=None if args.duration else args.requests,
        duration_s=args.duration,
        max_new_tokens=args.max_new_tokens,
        prompt_tokens=args.prompt_tokens,
        prompts=_prompts(args.prompts),
        engine_mode=args.engine_mode,
        schema=args.schema,
        mode=args.mode,
        rate=args.rate,
        workload=read_workload(args),
        max_lag_ms=args.max_lag_ms,
    )


class _LevelProgress:
    """Progress a person can follow: a bar on a terminal; otherwise a line per level and every 10 s on stdout.

    The elapsed time of a level stops when the level ends (its task is stopped), whether it ran for a
    request count or a duration.
    """

    def __init__(self, interactive: bool) -> None:
        self.interactive = interactive
        self.level: int | None = None
        self.total: int | None = None
        self.done = 0
        self.errors: dict[str, int] = {}
        self.details: dict[str, str] = {}  # the first detail of each error class, for the closing message
        self.started = 0.0
        self.task: Any = None  # rich's TaskID of the running level
        self.bar: Any = None
        if interactive:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            self.bar = Progress(
                TextColumn("c={task.fields[level]:>4}"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("errors {task.fields[errors]}"),
                TimeElapsedColumn(),
                console=stderr,
                transient=False,
            )

    def __enter__(self) -> _LevelProgress:
        if self.bar is not None:
            self.bar.start()
        return self

    def __exit__(self, *exc_info) -> None:
        if self.bar is not None:
            self.bar.stop()

    def _elapsed(self) -> str:
        import time

        seconds = int(time.monotonic() - self.started)
        return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"

    def _status(self) -> str:
        of = f"/{self.total}" if self.total else ""
        errors = sum(self.errors.values())
        return f"c={self.level}: {self.done}{of} requests, {errors} error(s), {self._elapsed()}"

    def start_level(self, level: int, spec):
        import time

        self.level, self.total, self.done, self.started = level, spec.requests, 0, time.monotonic()
        level_errors = {"count": 0}
        if self.bar is not None:
            self.task = self.bar.add_task("bench", total=self.total, level=level, errors=0)

        def tick(exchange) -> None:
            self.done += 1
            failed = exchange.error or ("HTTP" if (exchange.status or 500) >= 300 else None)
            if failed:
                level_errors["count"] += 1
                self.errors[failed] = self.errors.get(failed, 0) + 1
                if exchange.error_detail:
                    self.details.setdefault(failed, exchange.error_detail)
            if self.bar is not None and self.task is not None:
                self.bar.update(self.task, advance=1, errors=level_errors["count"])

        return tick

    def end_level(self, level: int, run: dict) -> None:
        if self.bar is not None and self.task is not None:
            self.bar.stop_task(self.task)
            return
        errors = ", ".join(f"{name} {count}" for name, count in run["errors"].items()) or "no errors"
        console.print(
            f"c={level}: done, {run['requests']} requests, {run.get('successful_requests', 0)} succeeded "
            f"({errors}), {self._elapsed()}",
            highlight=False,
        )

    async def heartbeat(self) -> None:
        """A line every HEARTBEAT_SECONDS while a level runs (only when there is no bar)."""
        import asyncio

        while True:
            await asyncio.sleep(HEARTBEAT_SECONDS)
            if self.level is not None:
                console.print(self._status(), highlight=False)


def _every_request_failed(data: dict, progress: _LevelProgress, url: str) -> str | None:
    """One line when nothing succeeded at any level: the classes and counts, a cause and what to do."""
    runs = data["runs"]
    if not runs or any(run.get("successful_requests") for run in runs):
        return None
    total = sum(run["requests"] for run in runs)
    counted: dict[str, int] = {}
    for run in runs:
        for name, count in run["errors"].items():
            counted[name] = counted.get(name, 0) + count
    classes = ", ".join(f"{name} {count} of {total}" for name, count in counted.items()) or "no request completed"
    detail = next(iter(progress.details.values()), None)
    hint = {
        "ConnectionError": f"is the endpoint (or `optigate emulate`) listening at {url}? check --endpoint-url/--region",
        "ThrottlingException": "the endpoint throttled every request: lower --concurrency or raise its capacity",
        "Timeout": "no response within --timeout: raise it, or check the endpoint's health",
        "StreamFormatMismatch": "the endpoint streams another LMI engine mode's format: check --engine-mode "
        "(`optigate summary` names the mode of each team's container)",
        "EmptyStream": "the responses carried no token line: check --engine-mode and --schema",
    }
    advice = next((hint[name] for name in counted if name in hint), "check the endpoint's logs and the target options")
    return f"every request failed ({classes}{'; ' + detail if detail else ''}): {advice}"


# Over 80 lines: a command read top to bottom: arguments, target, levels, outputs, exit code.
def cmd_bench(args: argparse.Namespace) -> int:
    """Benchmark a streaming endpoint at each concurrency level."""
    if args.bench_command == "compare":
        return cmd_bench_compare(args)
    if args.bench_command == "residency":
        return cmd_bench_residency(args)
    resolve_load_arguments(args)
    check_rounds_arguments(args)
    if args.find_capacity:
        from optigate.cli.bench_capacity_command import cmd_find_capacity

        return cmd_find_capacity(args)
    import asyncio
    import signal

    from optigate.bench.core.client import Target
    from optigate.bench.core.event_loop import run_loop
    from optigate.bench.core.runner import run_levels

    levels = _check_bench_arguments(args)
    target = Target(
        args.endpoint,
        args.region,
        args.endpoint_url,
        args.target_variant,
        args.inference_component,
        args.custom_attributes,
    )
    try:
        spec = _load_spec(args, levels[0])
    except ValueError as error:  # an engine mode and schema the stream cannot be read exactly in
        raise UsageError(f"--engine-mode {args.engine_mode} --schema {args.schema or 'default'}: {error}") from error
    if args.against:
        return cmd_bench_rounds(args, levels, target, spec)
    progress = _LevelProgress(interactive=stderr.is_terminal)

    async def main() -> dict:
        stop = asyncio.Event()
        asyncio.get_running_loop().add_signal_handler(signal.SIGINT, stop.set)
        heartbeat = None if progress.interactive else asyncio.create_task(progress.heartbeat())
        try:
            return await run_levels(
                target,
                levels,
                spec,
                timeout=args.timeout,
                stop=stop,
                on_level=progress.start_level,
                on_level_end=progress.end_level,
                workers=args.workers,
            )
        finally:
            if heartbeat is not None:
                heartbeat.cancel()

    with progress:
        data = run_loop(main())
    if args.label:
        data["label"] = args.label
    # What was measured is written first: whatever fails next, the results are kept.
    if args.json:
        write_json(args.json, data)
    title = f"optigate bench: {args.endpoint}" + (" (interrupted: partial results)" if data["interrupted"] else "")
    console.print(_bench_table(data, title))
    _print_errors(data)
    print_schedules(data)
    for warning in (w for run in data["runs"] for w in run.get("warnings", [])):
        console.print(f"[yellow]warning:[/] {warning}", highlight=False)
    if args.json:
        console.print(f"wrote {args.json}")
    if args.report and data["runs"]:
        from optigate.bench.html_report import default_label, write_report

        console.print(f"wrote {write_report([(default_label(data), data)], args.report)}")
    kept = f"; the measured levels are in {args.json}" if args.json else ""
    failed = _every_request_failed(data, progress, target.url)
    if failed:
        raise CliError(failed + kept, exit_code=USAGE_EXIT)
    if data.get("error"):
        raise CliError(f"{data['error']}{kept}", exit_code=USAGE_EXIT)
    for run in data["runs"]:
        if run["requests"] and not run.get("successful_requests"):
            console.print(f"[yellow]warning:[/] c={run['concurrency']}: every request failed", highlight=False)
    refused = next((run["refused"] for run in data["runs"] if run.get("refused")), None)
    if refused and not data["interrupted"]:
        raise CliError(f"cannot judge: the client shaped the load: {refused}{kept}", exit_code=CLIENT_BOUND_EXIT)
    return 130 if data["interrupted"] else 0


def add_bench_parser(commands: argparse._SubParsersAction) -> None:
    bench = commands.add_parser(
        "bench",
        help="benchmark a streaming endpoint (TTFT, ITL, throughput) at real concurrency",
        description="Benchmark InvokeEndpointWithResponseStream at each concurrency level. Exit codes: 0 measured,"
        " 2 usage or input error, or every request failed (the JSON is written all the same), 3 no AWS"
        " credentials for a real endpoint, or cannot judge: a replay's sends fell behind the recorded schedule"
        " (the client shaped the load; the JSON is written all the same), 130 interrupted (partial results kept).",
    )
    bench.add_argument("--endpoint", help="the SageMaker endpoint name (required)")
    bench.add_argument(
        "--endpoint-url",
        help="e.g. http://127.0.0.1:8080 for `optigate emulate` (default: SageMaker's runtime in --region)",
    )
    bench.add_argument("--region", default="us-east-1", help="AWS region")
    bench.add_argument("--target-variant", help="invoke this production variant (TargetVariant; default: routed)")
    bench.add_argument("--inference-component", help="invoke this inference component (default: none)")
    bench.add_argument(
        "--adapter-mix",
        metavar="ADAPTER=COMPONENT:WEIGHT,...",
        help="an endpoint with inference components: spread the requests over them by relative weight, each "
        "request sent with its component's name, figures per adapter and overall, e.g. "
        "base=support-ic-base:1,reply=support-ic-reply:3 (default: none)",
    )
    bench.add_argument("--custom-attributes", help="sent as CustomAttributes with every request (default: none)")
    bench.add_argument(
        "--concurrency",
        help="comma-separated levels, one run each; a replay: the connections opened before its schedule, one level"
        " (default: 1,16,64; a replay: 16)",
    )
    bench.add_argument(
        "--requests", type=int, help="measured requests per level (default: 100; a replay: the whole workload)"
    )
    bench.add_argument(
        "--duration", type=float, help="seconds of measurement per level, instead of --requests (default: unset)"
    )
    bench.add_argument("--prompt-tokens", type=int, default=1024, help="synthetic prompt length in tokens")
    bench.add_argument("--max-new-tokens", type=int, default=256, help="output tokens per request")
    bench.add_argument(
        "--prompts", help="JSONL of {prompt|inputs|messages} records instead of synthetic prompts (default: synthetic)"
    )
    bench.add_argument(
        "--engine-mode",
        choices=["async", "rolling-batch"],
        default="async",
        help="LMI's engine mode of the endpoint (`optigate summary` names it): async, LMI's default since v17, is "
        "sent chat requests; rolling-batch, LMI inputs (default: async)",
    )
    bench.add_argument(
        "--schema",
        choices=["inputs", "messages"],
        help="request body: LMI inputs (rolling-batch only) or OpenAI messages (default: the engine mode's)",
    )
    bench.add_argument(
        "--mode",
        choices=["closed", "open", "replay"],
        help="closed: fixed concurrency, each worker sends when its last request ended; open: Poisson arrivals"
        " at --rate; replay: the --workload's recorded arrival times (default: replay with a --workload of kind"
        " replay, else closed)",
    )
    bench.add_argument("--rate", type=float, help="with --mode open: arrivals per second (required there)")
    bench.add_argument("--timeout", type=float, default=120.0, help="per request, seconds; beyond it a Timeout error")
    bench.add_argument("--json", help="write the results (with raw samples) here (default: not written)")
    bench.add_argument("--report", help="write plots and index.html into this folder (default: none)")
    bench.add_argument(
        "--label", help="this run's name in reports and --json (default: the endpoint, with its variant or component)"
    )
    add_workload_arguments(bench)
    add_capacity_arguments(bench)
    add_rounds_arguments(bench)
    bench.set_defaults(handler=cmd_bench, bench_command=None)
    subcommands = bench.add_subparsers(dest="bench_command", title="subcommands")
    add_compare_parser(subcommands)
    add_residency_parser(subcommands)
