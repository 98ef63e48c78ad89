"""`optigate bench`, `bench compare` and `emulate`: measure streaming endpoints, compare runs, emulate one."""

from __future__ import annotations

import argparse
import contextlib
import json
from pathlib import Path
from typing import Any

from rich.table import Table

from optigate.cli.errors import CANNOT_RESOLVE_EXIT, USAGE_EXIT, CliError, UsageError
from optigate.cli.output import console, stderr
from optigate.cli.parser import RawHelpFormatter

EMULATOR_OPTIONS = (
    "ttft_ms",
    "itl_ms",
    "output_tokens",
    "tokens_per_chunk",
    "payload_format",
    "throttle_rate",
    "model_error_rate",
    "stream_error_rate",
    "reset_rate",
    "stall_rate",
)


def _emulator_data(path: str | None) -> dict:
    """The `--config` file's settings: a mapping, or one line saying what is wrong with the file."""
    if not path:
        return {}
    import yaml

    try:
        data = yaml.safe_load(Path(path).read_text())
    except FileNotFoundError:
        raise UsageError(
            f"emulate --config {path}: no such file; give a YAML or JSON file of emulator settings"
        ) from None
    except OSError as error:
        raise UsageError(f"emulate --config {path}: cannot read it ({error.strerror or error})") from error
    except yaml.YAMLError as error:
        where = getattr(error, "problem_mark", None)
        line = f":{where.line + 1}" if where is not None else ""
        raise UsageError(
            f"emulate --config {path}{line}: not valid YAML or JSON ({getattr(error, 'problem', error)})"
        ) from error
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise UsageError(f"emulate --config {path}: expected a mapping of settings, e.g. {{default: {{ttft_ms: 150}}}}")
    return data


def cmd_emulate(args: argparse.Namespace) -> int:
    """A local SageMaker-runtime emulator on loopback (see optigate.bench.emulator)."""
    import errno

    from optigate.bench.emulator import EmulatorConfig, serve

    data = _emulator_data(args.config)
    default = data.setdefault("default", {})
    if not isinstance(default, dict):
        raise UsageError(f"emulate --config {args.config}: `default` must be a mapping of settings")
    for key in EMULATOR_OPTIONS:
        value = getattr(args, key)
        if value is not None:
            default[key] = value
    try:
        config = EmulatorConfig.parse(data)
    except (TypeError, ValueError, AttributeError) as error:
        where = f"emulate --config {args.config}" if args.config else "emulate"
        raise UsageError(f"{where}: {error}; see `optigate emulate --help` for the settings") from error

    def ready(port: int) -> None:
        if args.port_file:
            Path(args.port_file).write_text(str(port))
        stderr.print(f"optigate emulator on http://127.0.0.1:{port} (endpoint_url for boto3)")

    try:
        with contextlib.suppress(KeyboardInterrupt):
            serve(config, port=args.port, ready=ready)
    except OSError as error:
        if error.errno == errno.EADDRINUSE:
            raise UsageError(
                f"port {args.port} on 127.0.0.1 is in use: stop what listens there, or choose another --port "
                "(0 picks a free one, --port-file says which)"
            ) from error
        raise UsageError(f"cannot listen on 127.0.0.1:{args.port}: {error.strerror or error}") from error
    return 0


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
    """The runs of one result (optigate.bench.report's summary rows) in 100 columns, figures never broken."""
    from rich import box

    from optigate.bench.report import summary_rows

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


def finite_json(value):
    """`value` with every NaN or infinity as null: the files are JSON that strict parsers read."""
    import math

    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: finite_json(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite_json(item) for item in value]
    return value


def write_json(path: str, data) -> None:
    try:
        Path(path).write_text(json.dumps(finite_json(data), allow_nan=False))
    except OSError as error:
        raise UsageError(f"cannot write {path}: {error.strerror or error}; choose another --json path") from error


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
    from urllib.parse import urlsplit

    if not args.endpoint:
        raise UsageError("--endpoint is required: the SageMaker endpoint's name (with --endpoint-url for the emulator)")
    levels = _levels(args.concurrency)
    if args.mode == "open" and not (args.rate and args.rate > 0):
        raise UsageError("--mode open needs --rate: the Poisson arrival rate in requests per second, e.g. --rate 4")
    if args.mode == "closed" and args.rate is not None:
        raise UsageError("--rate applies to --mode open only; drop it, or add --mode open")
    for option, value in (("--requests", args.requests), ("--timeout", args.timeout), ("--duration", args.duration)):
        if value is not None and value <= 0:
            raise UsageError(f"{option} {value}: must be positive")
    if args.endpoint_url:
        parts = urlsplit(args.endpoint_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise UsageError(
                f"--endpoint-url {args.endpoint_url!r}: expected http(s)://host[:port], e.g. http://127.0.0.1:8080"
            )
    else:
        import botocore.session

        if botocore.session.get_session().get_credentials() is None:
            raise CliError(
                f"no AWS credentials to sign requests to {args.endpoint} in {args.region}: configure them "
                "(aws configure, AWS_PROFILE), or give --endpoint-url http://127.0.0.1:PORT for `optigate emulate`",
                exit_code=CANNOT_RESOLVE_EXIT,
            )
    return levels


def _prompts(path: str | None) -> tuple[dict, ...]:
    from optigate.bench.load import load_prompts

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
    }
    advice = next((hint[name] for name in counted if name in hint), "check the endpoint's logs and the target options")
    return f"every request failed ({classes}{'; ' + detail if detail else ''}): {advice}"


def cmd_bench(args: argparse.Namespace) -> int:
    """Benchmark a streaming endpoint at each concurrency level."""
    if args.bench_command == "compare":
        return cmd_bench_compare(args)
    import asyncio
    import signal

    from optigate.bench.client import Target
    from optigate.bench.emulator import run_loop
    from optigate.bench.load import LoadSpec
    from optigate.bench.runner import run_levels

    levels = _check_bench_arguments(args)
    target = Target(
        args.endpoint,
        args.region,
        args.endpoint_url,
        args.target_variant,
        args.inference_component,
        args.custom_attributes,
    )
    spec = LoadSpec(
        concurrency=levels[0],
        requests=None if args.duration else args.requests,
        duration_s=args.duration,
        max_new_tokens=args.max_new_tokens,
        prompt_tokens=args.prompt_tokens,
        prompts=_prompts(args.prompts),
        schema=args.schema,
        mode=args.mode,
        rate=args.rate,
    )
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
    for warning in (w for run in data["runs"] for w in run.get("warnings", [])):
        console.print(f"[yellow]warning:[/] {warning}", highlight=False)
    if args.json:
        console.print(f"wrote {args.json}")
    if args.report and data["runs"]:
        from optigate.bench.report import default_label, write_report

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
    return 130 if data["interrupted"] else 0


COMPARE_EXIT_CODES = """exit codes:
  0  no metric is worse (and, with --decide, every decided metric is better or equivalent)
  1  a metric is worse: its interval excludes zero and its estimate lies beyond the margin on the
     regressing side, or the candidate failed every request at a level where the baseline did not
  2  usage or input error: unreadable files, or workloads that differ (see --allow-different-workloads)
  3  no metric is worse, but with --decide a decided metric is inconclusive (the data cannot tell),
     or at some level neither side completed a request (nothing was measured there)

Verdicts: better / worse (the interval excludes zero and the estimate is beyond the margin),
equivalent (the interval lies inside the margin), inconclusive (anything else). Intervals resample
runs (blocks), then requests inside them, and assume at least 2 % run-to-run drift; Holm's method
keeps the chance of any false better/worse across everything compared at 5 %. With one run a side
only changes of about 9 % are labelled, with three about 5 %; equivalence within 3 % takes about
fifteen runs a side."""


#: What compare reads from each run of a result file.
RUN_FIELDS = ("concurrency", "requests", "errors", "samples")


def _read_results(paths: str, side: str) -> list[tuple[str, dict]]:
    """Each result file of a side, checked enough that comparing it cannot fail half-way."""
    out = []
    written_by = "give a file that `optigate bench --json` wrote"
    for path in (p.strip() for p in paths.split(",") if p.strip()):
        try:
            data = json.loads(Path(path).read_text())
        except FileNotFoundError:
            raise UsageError(f"{side} {path}: no such file; {written_by}") from None
        except OSError as error:
            raise UsageError(f"{side} {path}: cannot read it ({error.strerror or error}); {written_by}") from error
        except ValueError as error:
            raise UsageError(f"{side} {path}: not JSON ({error}); {written_by}") from error
        if not isinstance(data, dict) or not isinstance(data.get("runs"), list):
            raise UsageError(f"{side} {path}: no `runs` list, so not a benchmark result; {written_by}")
        if not data["runs"]:
            raise UsageError(f"{side} {path}: no runs (the benchmark measured no level); benchmark again")
        for number, run in enumerate(data["runs"], 1):
            missing = [key for key in RUN_FIELDS if not isinstance(run, dict) or key not in run]
            if missing:
                raise UsageError(
                    f"{side} {path}: run {number} has no {', '.join(missing)} (raw samples are needed); "
                    "benchmark again with `optigate bench --json`"
                )
        out.append((path, data))
    if not out:
        raise UsageError(f"no {side} result file given; {written_by}")
    return out


def _margins(args: argparse.Namespace) -> float | dict[str, float]:
    if not args.margin:
        return float(args.margin_pct)
    margins: dict[str, float] = {"default": float(args.margin_pct)}
    for item in args.margin:
        metric, _, value = item.partition("=")
        try:
            margins[metric.strip()] = float(value)
        except ValueError as error:
            raise UsageError(f"--margin {item!r}: expected METRIC=PERCENT, e.g. itl_ms=5") from error
    return margins


def _decided(deltas: list, spec: str | None) -> list:
    """The deltas --decide names: all, or METRIC / METRIC:STAT entries separated by commas."""
    if spec is None:
        return []
    if spec == "all":
        return list(deltas)
    wanted = [item.strip() for item in spec.split(",") if item.strip()]
    chosen = [d for d in deltas if d.metric in wanted or f"{d.metric}:{d.statistic}" in wanted]
    if not chosen:
        raise UsageError(f"--decide {spec!r} names no compared metric (e.g. itl_ms, ttft_ms:p99, output_tokens_per_s)")
    return chosen


def _figure(value: float, failed: bool) -> str:
    import math

    if failed:
        return "failed"
    return f"{value:,.2f}" if math.isfinite(value) else "–"


def cmd_bench_compare(args: argparse.Namespace) -> int:
    """Baseline vs candidate per metric and concurrency level: better, worse, equivalent or inconclusive."""
    import math

    from rich import box

    from optigate.bench.compare import compare_levels, error_rate, levels_of, workload_difference
    from optigate.bench.report import side_labels, write_report

    baselines = _read_results(args.baseline, "baseline")
    candidates = _read_results(args.candidate, "candidate")
    labelled = [(f"baseline {path}", data) for path, data in baselines] + [
        (f"candidate {path}", data) for path, data in candidates
    ]
    difference = workload_difference(labelled)
    if difference and not args.allow_different_workloads:
        raise UsageError(
            f"refusing to compare different workloads: {difference} (--allow-different-workloads to compare anyway)"
        )
    base_levels = levels_of([data for _, data in baselines])
    cand_levels = levels_of([data for _, data in candidates])
    deltas = compare_levels(base_levels, cand_levels, margin_pct=_margins(args))
    if not deltas:
        raise UsageError(
            f"the two sides share no concurrency level (baseline {sorted(base_levels)}, candidate "
            f"{sorted(cand_levels)}); benchmark both at the same --concurrency"
        )
    blocks = f"{len(baselines)} vs {len(candidates)} run(s) per side"
    table = Table(
        title=f"candidate vs baseline ({blocks}; margin ±{args.margin_pct:g} %, Holm over all deltas)",
        box=box.SIMPLE_HEAD,
        padding=(0, 1),
    )
    for column in ("metric", "stat", "c", "baseline", "candidate", "delta", "interval", "verdict"):
        # Names whole (never folded mid-word); figures wrap at their spaces when the terminal is narrow.
        whole = column in ("metric", "stat", "verdict")
        table.add_column(column, justify="left" if whole else "right", no_wrap=whole)
    colours = {"better": "green", "worse": "red", "equivalent": "cyan"}
    for d in deltas:
        colour = colours.get(d.verdict, "dim")
        relative = f" ({d.relative:+.1%})" if math.isfinite(d.relative) else ""
        interval = f"[{d.low:+,.2f}, {d.high:+,.2f}] {d.confidence:.2%}" if math.isfinite(d.low) else (d.note or "–")
        table.add_row(
            d.metric,
            d.statistic,
            str(d.concurrency),
            _figure(d.baseline, "baseline failed" in d.note or "both" in d.note),
            _figure(d.candidate, "candidate failed" in d.note or "both" in d.note),
            f"{d.delta:+,.2f}{relative}" if math.isfinite(d.delta) else "–",
            interval,
            f"[{colour}]{d.verdict}[/{colour}]",
        )
    console.print(table)
    rates = {}
    for level in sorted(set(base_levels) & set(cand_levels)):
        rate = {"baseline": error_rate(base_levels[level]), "candidate": error_rate(cand_levels[level])}
        rates[level] = rate
        shown = ", ".join(f"{side} {'–' if r is None else f'{r:.1%}'}" for side, r in rate.items())
        console.print(f"c={level}: error rate {shown}")
    worse = [d for d in deltas if d.verdict == "worse"]
    decided = _decided(deltas, args.decide)
    undecided = [d for d in decided if d.verdict == "inconclusive"]
    # Fail closed: a level where neither side completed a request measured nothing, so it passes nothing.
    unmeasured = [level for level, rate in rates.items() if all(r is None or r >= 1.0 for r in rate.values())]
    code = 1 if worse else 3 if undecided or unmeasured else 0
    if unmeasured and not worse:
        levels = ", ".join(f"c={level}" for level in unmeasured)
        console.print(
            f"[yellow]inconclusive[/yellow]: neither side completed a request at {levels}; "
            "nothing was measured there (exit 3): fix the endpoints and benchmark again"
        )
    if worse:
        console.print(f"[red]worse[/red]: {len(worse)} metric(s) regressed by more than the margin (exit 1)")
    elif undecided:
        console.print(f"[yellow]inconclusive[/yellow]: {len(undecided)} decided metric(s) cannot be told (exit 3)")
    if args.json:
        payload = {
            "deltas": [d.to_dict() for d in deltas],
            "error_rates": {str(level): rate for level, rate in rates.items()},
            "baseline_runs": [path for path, _ in baselines],
            "candidate_runs": [path for path, _ in candidates],
            "workload_difference": difference,
            "exit_code": code,
        }
        try:
            Path(args.json).write_text(json.dumps(finite_json(payload), indent=2, allow_nan=False))
        except OSError as error:
            raise UsageError(
                f"cannot write {args.json}: {error.strerror or error}; choose another --json path"
            ) from error
    if args.report:
        names = side_labels(baselines, candidates, args.label)
        results = [(names[0], [data for _, data in baselines]), (names[1], [data for _, data in candidates])]
        console.print(f"wrote {write_report(results, args.report, deltas)}")
    return code


def add_bench_parser(commands: argparse._SubParsersAction) -> None:
    bench = commands.add_parser(
        "bench",
        help="benchmark a streaming endpoint (TTFT, ITL, throughput) at real concurrency",
        description="Benchmark InvokeEndpointWithResponseStream at each concurrency level. Exit codes: 0 measured,"
        " 2 usage or input error, or every request failed (the JSON is written all the same), 3 no AWS"
        " credentials for a real endpoint, 130 interrupted (partial results kept).",
    )
    bench.add_argument("--endpoint", help="the SageMaker endpoint name (required)")
    bench.add_argument(
        "--endpoint-url",
        help="e.g. http://127.0.0.1:8080 for `optigate emulate` (default: SageMaker's runtime in --region)",
    )
    bench.add_argument("--region", default="us-east-1", help="AWS region")
    bench.add_argument("--target-variant", help="invoke this production variant (TargetVariant; default: routed)")
    bench.add_argument("--inference-component", help="invoke this inference component (default: none)")
    bench.add_argument("--custom-attributes", help="sent as CustomAttributes with every request (default: none)")
    bench.add_argument("--concurrency", default="1,16,64", help="comma-separated levels, one run each")
    bench.add_argument("--requests", type=int, default=100, help="measured requests per level")
    bench.add_argument(
        "--duration", type=float, help="seconds of measurement per level, instead of --requests (default: unset)"
    )
    bench.add_argument("--prompt-tokens", type=int, default=1024, help="synthetic prompt length in tokens")
    bench.add_argument("--max-new-tokens", type=int, default=256, help="output tokens per request")
    bench.add_argument(
        "--prompts", help="JSONL of {prompt|inputs|messages} records instead of synthetic prompts (default: synthetic)"
    )
    bench.add_argument(
        "--schema", choices=["inputs", "messages"], default="inputs", help="request body: LMI inputs or OpenAI messages"
    )
    bench.add_argument(
        "--mode",
        choices=["closed", "open"],
        default="closed",
        help="closed: fixed concurrency, each worker sends when its last request ended; open: Poisson arrivals"
        " at --rate",
    )
    bench.add_argument("--rate", type=float, help="with --mode open: arrivals per second (required there)")
    bench.add_argument("--timeout", type=float, default=120.0, help="per request, seconds; beyond it a Timeout error")
    bench.add_argument("--json", help="write the results (with raw samples) here (default: not written)")
    bench.add_argument("--report", help="write plots and index.html into this folder (default: none)")
    bench.add_argument(
        "--label", help="this run's name in reports and --json (default: the endpoint, with its variant or component)"
    )
    bench.set_defaults(handler=cmd_bench, bench_command=None)
    bench_commands = bench.add_subparsers(dest="bench_command", title="subcommands")
    compare_parser = bench_commands.add_parser(
        "compare",
        help="baseline vs candidate: better, worse, equivalent or inconclusive per metric",
        description="Compare benchmark results. Each side is one result file of `optigate bench --json`,\n"
        "or several separated by commas: runs of the same workload, ideally interleaved A B A B A B.\n"
        "Each run is a block, and run-to-run drift widens the intervals instead of deciding.",
        epilog=COMPARE_EXIT_CODES,
        formatter_class=RawHelpFormatter,
    )
    compare_parser.add_argument(
        "baseline", help="baseline result file(s) of `optigate bench --json`, comma-separated: one run per file"
    )
    compare_parser.add_argument(
        "candidate", help="candidate result file(s) of `optigate bench --json`, comma-separated: one run per file"
    )
    compare_parser.add_argument(
        "--margin-pct", type=float, default=3.0, help="practical margin, percent of the baseline"
    )
    compare_parser.add_argument(
        "--margin",
        action="append",
        metavar="METRIC=PCT",
        help="a metric's own margin, e.g. itl_ms=5 (repeatable; default: --margin-pct for every metric)",
    )
    compare_parser.add_argument(
        "--decide",
        nargs="?",
        const="all",
        metavar="METRICS",
        help="ask for a decision on these metrics (all, or e.g. itl_ms,ttft_ms:p99): exit 3 when one is inconclusive"
        " (default: no decision; bare --decide: all)",
    )
    compare_parser.add_argument(
        "--allow-different-workloads",
        action="store_true",
        help="compare even when prompt tokens, output tokens, levels, payload schema or mode differ",
    )
    compare_parser.add_argument("--report", help="write both curves and the deltas into this folder (default: none)")
    compare_parser.add_argument(
        "--label",
        nargs=2,
        metavar=("BASELINE", "CANDIDATE"),
        help="the sides' names in the report (default: each side's --label, else its endpoint; files' names if alike)",
    )
    compare_parser.add_argument("--json", help="write the deltas here (default: not written)")


def _behaviour_settings() -> str:
    """The emulator's settings with their defaults, read from the Behaviour dataclass itself."""
    from dataclasses import fields

    from optigate.bench.emulator_config import Behaviour, Distribution

    default = Behaviour()
    shown = []
    for field in fields(Behaviour):
        value = getattr(default, field.name)
        if isinstance(value, Distribution):
            value = f"{value.mean:g} (or {{mean, jitter, kind: normal|lognormal|fixed}})"
        elif isinstance(value, tuple):
            value = list(value)
        shown.append(f"{field.name}={value}")
    import textwrap

    return textwrap.fill(", ".join(shown), width=100, initial_indent="  ", subsequent_indent="  ")


EMULATE_EPILOG = """--config: YAML or JSON {{default: {{SETTING: VALUE, ...}}, seed: 0, endpoints: {{NAME:
{{SETTING: VALUE, ..., variants: {{VARIANT: {{...}}}}, inference_components: {{COMPONENT: {{...}}}}}}}}}};
an endpoint not listed gets default. `seed` makes the latency and fault draws repeatable.
Answer mode: answers_file (JSONL of id, model_input, target_output, category) with wrong_fraction /
refuse_fraction (in wrong_categories / refuse_categories).
Faults: *_rate are shares of requests; a stall holds a response stall_seconds.

Settings and defaults:
{settings}"""


def add_emulate_parser(commands: argparse._SubParsersAction) -> None:
    emulate = commands.add_parser(
        "emulate",
        help="run a local SageMaker-runtime emulator (loopback only)",
        formatter_class=RawHelpFormatter,
        description="A SageMaker runtime for LLM endpoints on 127.0.0.1: streaming and plain invocations with\n"
        "configurable latency, payload format and faults. The options below override --config's `default`.",
    )
    # The defaults live in the Behaviour dataclass (a stdlib-only module); the epilog lists them from it.
    emulate.epilog = EMULATE_EPILOG.format(settings=_behaviour_settings())
    emulate.add_argument("--port", type=int, default=8080, help="loopback port; 0 picks a free one")
    emulate.add_argument(
        "--config",
        help="YAML/JSON settings per endpoint, variant and component (see below; default: none, the options)",
    )
    emulate.add_argument("--port-file", help="write the bound port here once listening (default: not written)")
    emulate.add_argument("--ttft-ms", type=float, help="time to first token, ms (default: 150)")
    emulate.add_argument("--itl-ms", type=float, help="time between tokens, ms (default: 15)")
    emulate.add_argument(
        "--output-tokens", type=int, help="tokens per response (default: the request's max_new_tokens)"
    )
    emulate.add_argument(
        "--tokens-per-chunk",
        type=int,
        help="tokens per event-stream frame; >1 emulates speculative decoding (default: 1)",
    )
    emulate.add_argument(
        "--payload-format",
        choices=["lmi", "tgi", "openai"],
        help="streamed payload: LMI jsonlines, TGI SSE or OpenAI (default: lmi)",
    )
    emulate.add_argument(
        "--throttle-rate", type=float, help="share of requests answered 429 ThrottlingException (default: 0)"
    )
    emulate.add_argument("--model-error-rate", type=float, help="share answered 424 ModelError (default: 0)")
    emulate.add_argument(
        "--stream-error-rate", type=float, help="share failing mid-stream with ModelStreamError (default: 0)"
    )
    emulate.add_argument("--reset-rate", type=float, help="share whose connection is reset mid-stream (default: 0)")
    emulate.add_argument("--stall-rate", type=float, help="share that stall mid-stream for stall_seconds (default: 0)")
    emulate.set_defaults(handler=cmd_emulate)
