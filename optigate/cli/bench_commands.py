"""`optigate bench`, `bench compare` and `emulate`: measure streaming endpoints, compare runs, emulate one."""

from __future__ import annotations

import argparse
import contextlib
import json
from pathlib import Path

from rich.table import Table

from optigate.cli.errors import CliError, UsageError
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
    if args.json:
        Path(args.json).write_text(json.dumps(data))
        console.print(f"wrote {args.json}")
    if args.report:
        from optigate.bench.report import write_report

        console.print(f"wrote {write_report([(args.endpoint, data)], args.report)}")
    return 130 if data["interrupted"] else 0


def cmd_bench_compare(args: argparse.Namespace) -> int:
    """Baseline vs candidate per metric and concurrency level, with bootstrap confidence intervals."""
    from optigate.bench.compare import compare_results
    from optigate.bench.report import write_report

    baseline, candidate = (json.loads(Path(path).read_text()) for path in (args.baseline, args.candidate))
    deltas = compare_results(baseline, candidate)
    if not deltas:
        raise CliError("the two files share no concurrency level")
    table = Table(title=f"candidate {args.candidate} vs baseline {args.baseline} (95 % bootstrap CI)")
    for column in ("metric", "stat", "conc.", "baseline", "candidate", "delta", "95 % CI", "verdict"):
        table.add_column(column, justify="right")
    colours = {"better": "green", "worse": "red"}
    for d in deltas:
        colour = colours.get(d.verdict, "dim")
        table.add_row(
            d.metric,
            d.statistic,
            str(d.concurrency),
            f"{d.baseline:,.2f}",
            f"{d.candidate:,.2f}",
            f"{d.delta:+,.2f} ({d.relative:+.1%})",
            f"[{d.low:+,.2f}, {d.high:+,.2f}]",
            f"[{colour}]{d.verdict}[/{colour}]",
        )
    console.print(table)
    if args.json:
        Path(args.json).write_text(json.dumps({"deltas": [d.to_dict() for d in deltas]}, indent=2))
    if args.report:
        console.print(f"wrote {write_report([('baseline', baseline), ('candidate', candidate)], args.report, deltas)}")
    return 0


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
        "compare", help="baseline vs candidate with bootstrap confidence intervals"
    )
    compare_parser.add_argument("baseline", help="results written by `optigate bench --json`")
    compare_parser.add_argument("candidate", help="results written by `optigate bench --json`")
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
