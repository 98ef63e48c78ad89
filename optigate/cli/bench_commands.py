"""`optigate bench`, `bench compare` and `emulate`: measure streaming endpoints, compare runs, emulate one."""

from __future__ import annotations

import argparse
import contextlib
import json
from pathlib import Path

from rich.table import Table

from optigate.cli.errors import UsageError
from optigate.cli.output import console, stderr

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


def cmd_emulate(args: argparse.Namespace) -> int:
    """A local SageMaker-runtime emulator on loopback (see optigate.bench.emulator)."""
    import yaml

    from optigate.bench.emulator import EmulatorConfig, serve

    data: dict = {}
    if args.config:
        data = yaml.safe_load(Path(args.config).read_text()) or {}
    default = data.setdefault("default", {})
    for key in EMULATOR_OPTIONS:
        value = getattr(args, key)
        if value is not None:
            default[key] = value
    config = EmulatorConfig.parse(data)

    def ready(port: int) -> None:
        if args.port_file:
            Path(args.port_file).write_text(str(port))
        stderr.print(f"optigate emulator on http://127.0.0.1:{port} (endpoint_url for boto3)")

    with contextlib.suppress(KeyboardInterrupt):
        serve(config, port=args.port, ready=ready)
    return 0


def _bench_table(data: dict, title: str) -> Table:
    from optigate.bench.report import SUMMARY_HEADER, summary_rows

    table = Table(title=title)
    for column in SUMMARY_HEADER:
        table.add_column(column, justify="right")
    for row in summary_rows(data):
        table.add_row(*row)
    return table


def cmd_bench(args: argparse.Namespace) -> int:
    """Benchmark a streaming endpoint at each concurrency level."""
    if args.bench_command == "compare":
        return cmd_bench_compare(args)
    import asyncio
    import signal

    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from optigate.bench.client import Target
    from optigate.bench.emulator import run_loop
    from optigate.bench.load import LoadSpec, load_prompts
    from optigate.bench.runner import run_levels

    if not args.endpoint:
        raise UsageError("--endpoint is required")
    levels = [int(level) for level in args.concurrency.split(",")]
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
        prompts=tuple(load_prompts(args.prompts)) if args.prompts else (),
        schema=args.schema,
        mode=args.mode,
        rate=args.rate,
    )
    progress = Progress(
        TextColumn("c={task.fields[level]:>4}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("errors {task.fields[errors]}"),
        TimeElapsedColumn(),
        console=stderr,
        transient=False,
    )

    def on_level(level: int, level_spec: LoadSpec):
        total = level_spec.requests if level_spec.requests else None
        task = progress.add_task("bench", total=total, level=level, errors=0)
        counts = {"errors": 0}

        def tick(exchange) -> None:
            if exchange.error or (exchange.status or 500) >= 300:
                counts["errors"] += 1
            progress.update(task, advance=1, errors=counts["errors"])

        return tick

    async def main() -> dict:
        stop = asyncio.Event()
        asyncio.get_running_loop().add_signal_handler(signal.SIGINT, stop.set)
        return await run_levels(target, levels, spec, timeout=args.timeout, stop=stop, on_level=on_level)

    with progress:
        data = run_loop(main())
    title = f"optigate bench: {args.endpoint}" + (" (interrupted: partial results)" if data["interrupted"] else "")
    console.print(_bench_table(data, title))
    for warning in (w for run in data["runs"] for w in run.get("warnings", [])):
        console.print(f"[yellow]warning:[/] {warning}", highlight=False)
    if args.json:
        Path(args.json).write_text(json.dumps(data))
        console.print(f"wrote {args.json}")
    if args.report:
        from optigate.bench.report import write_report

        console.print(f"wrote {write_report([(args.endpoint, data)], args.report)}")
    return 130 if data["interrupted"] else 0


COMPARE_EXIT_CODES = """exit codes:
  0  no metric is worse (and, with --decide, every decided metric is better or equivalent)
  1  a metric is worse: its interval excludes zero and its estimate lies beyond the margin on the
     regressing side, or the candidate failed every request at a level where the baseline did not
  2  usage or input error: unreadable files, or workloads that differ (see --allow-different-workloads)
  3  with --decide: no metric is worse, but a decided metric is inconclusive (the data cannot tell)

Verdicts: better / worse (the interval excludes zero and the estimate is beyond the margin),
equivalent (the interval lies inside the margin), inconclusive (anything else). Intervals resample
runs (blocks), then requests inside them, and assume at least 2 % run-to-run drift; Holm's method
keeps the chance of any false better/worse across everything compared at 5 %. With one run a side
only changes of about 9 % are labelled, with three about 5 %; equivalence within 3 % takes about
fifteen runs a side."""


def _read_results(paths: str, side: str) -> list[tuple[str, dict]]:
    out = []
    for path in (p for p in paths.split(",") if p):
        try:
            data = json.loads(Path(path).read_text())
        except (OSError, ValueError) as error:
            raise UsageError(f"{side} {path}: cannot read a result file ({error})") from error
        if not isinstance(data, dict) or not isinstance(data.get("runs"), list):
            raise UsageError(f"{side} {path}: not written by `optigate bench --json` (no runs)")
        out.append((path, data))
    if not out:
        raise UsageError(f"no {side} result file given")
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

    from optigate.bench.compare import compare_levels, error_rate, levels_of, workload_difference
    from optigate.bench.report import write_report

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
        raise UsageError("the two sides share no concurrency level")
    blocks = f"{len(baselines)} vs {len(candidates)} run(s) per side"
    table = Table(title=f"candidate vs baseline ({blocks}; margin ±{args.margin_pct:g} %, Holm over all deltas)")
    for column in ("metric", "stat", "conc.", "baseline", "candidate", "delta", "interval", "verdict"):
        table.add_column(column, justify="right")
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
    code = 1 if worse else 3 if undecided else 0
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
        Path(args.json).write_text(json.dumps(payload, indent=2, allow_nan=False))
    if args.report:
        results = [(label, data) for label, data in labelled]
        console.print(f"wrote {write_report(results, args.report, deltas)}")
    return code


def add_bench_parser(commands: argparse._SubParsersAction) -> None:
    bench = commands.add_parser(
        "bench", help="benchmark a streaming endpoint (TTFT, ITL, throughput) at real concurrency"
    )
    bench.add_argument("--endpoint", help="the SageMaker endpoint name")
    bench.add_argument("--endpoint-url", help="e.g. http://127.0.0.1:8080 for `optigate emulate`")
    bench.add_argument("--region", default="us-east-1", help="AWS region (default: us-east-1)")
    bench.add_argument("--target-variant", help="invoke this production variant (TargetVariant)")
    bench.add_argument("--inference-component", help="invoke this inference component")
    bench.add_argument("--custom-attributes", help="sent as CustomAttributes with every request")
    bench.add_argument("--concurrency", default="1,16,64", help="comma-separated levels")
    bench.add_argument("--requests", type=int, default=100, help="measured requests per level")
    bench.add_argument("--duration", type=float, help="seconds per level instead of a request count")
    bench.add_argument("--prompt-tokens", type=int, default=1024, help="synthetic prompt length (default: 1024)")
    bench.add_argument("--max-new-tokens", type=int, default=256, help="output tokens per request (default: 256)")
    bench.add_argument("--prompts", help="JSONL of {prompt|inputs|messages} records instead of synthetic prompts")
    bench.add_argument(
        "--schema", choices=["inputs", "messages"], default="inputs", help="request body: LMI inputs or OpenAI messages"
    )
    bench.add_argument(
        "--mode", choices=["closed", "open"], default="closed", help="closed: fixed concurrency; open: at --rate"
    )
    bench.add_argument("--rate", type=float, help="open loop: Poisson arrivals per second")
    bench.add_argument("--timeout", type=float, default=120.0, help="per request, seconds")
    bench.add_argument("--json", help="write the results (with raw samples) here")
    bench.add_argument("--report", help="write PNG plots and index.html into this folder")
    bench.set_defaults(handler=cmd_bench, bench_command=None)
    bench_commands = bench.add_subparsers(dest="bench_command")
    compare_parser = bench_commands.add_parser(
        "compare",
        help="baseline vs candidate: better, worse, equivalent or inconclusive per metric",
        description="Compare benchmark results. Each side is one result file of `optigate bench --json`,\n"
        "or several separated by commas: runs of the same workload, ideally interleaved A B A B A B.\n"
        "Each run is a block, and run-to-run drift widens the intervals instead of deciding.",
        epilog=COMPARE_EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    compare_parser.add_argument("baseline", help="baseline result file(s), comma-separated")
    compare_parser.add_argument("candidate", help="candidate result file(s), comma-separated")
    compare_parser.add_argument(
        "--margin-pct", type=float, default=3.0, help="practical margin, percent of the baseline (default: 3)"
    )
    compare_parser.add_argument(
        "--margin", action="append", metavar="METRIC=PCT", help="a metric's own margin, e.g. itl_ms=5 (repeatable)"
    )
    compare_parser.add_argument(
        "--decide",
        nargs="?",
        const="all",
        metavar="METRICS",
        help="ask for a decision on these metrics (all, or e.g. itl_ms,ttft_ms:p99): exit 3 when one is inconclusive",
    )
    compare_parser.add_argument(
        "--allow-different-workloads",
        action="store_true",
        help="compare even when prompt tokens, output tokens, levels, payload schema or mode differ",
    )
    compare_parser.add_argument("--report", help="write both curves and the deltas into this folder")
    compare_parser.add_argument("--json", help="write the deltas here")


def add_emulate_parser(commands: argparse._SubParsersAction) -> None:
    emulate = commands.add_parser("emulate", help="run a local SageMaker-runtime emulator (loopback only)")
    emulate.add_argument("--port", type=int, default=8080, help="0 picks a free port (default: 8080)")
    emulate.add_argument("--config", help="YAML/JSON: {default: {...}, endpoints: {name: {..., variants: {...}}}}")
    emulate.add_argument("--port-file", help="write the bound port here once listening")
    emulate.add_argument("--ttft-ms", type=float)
    emulate.add_argument("--itl-ms", type=float)
    emulate.add_argument("--output-tokens", type=int)
    emulate.add_argument("--tokens-per-chunk", type=int)
    emulate.add_argument("--payload-format", choices=["lmi", "tgi", "openai"])
    emulate.add_argument("--throttle-rate", type=float)
    emulate.add_argument("--model-error-rate", type=float)
    emulate.add_argument("--stream-error-rate", type=float)
    emulate.add_argument("--reset-rate", type=float)
    emulate.add_argument("--stall-rate", type=float)
    emulate.set_defaults(handler=cmd_emulate)
