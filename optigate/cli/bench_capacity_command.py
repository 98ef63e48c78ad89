"""`optigate bench --find-capacity --slo p99_ttft_ms=800,p99_itl_ms=60`: the highest load one instance carries
within the SLO (optigate.bench.capacity), with its throughput and $ per 1M output tokens at that load."""

from __future__ import annotations

import argparse
from typing import Any

from optigate.cli.errors import CANNOT_RESOLVE_EXIT, CliError, UsageError
from optigate.cli.team_argument import instance_type

#: Requests a level sends per stream (at least --requests): from 46 streams on, the 367 requests a
#: distribution-free 97.5 % bound of the p99 needs (optigate.bench.capacity.order_statistic_bound).
REQUESTS_PER_STREAM = 8


def add_capacity_arguments(bench: argparse.ArgumentParser) -> None:
    bench.add_argument(
        "--find-capacity",
        action="store_true",
        help="search the highest concurrency at which --slo holds (bracket, then narrow) instead of --concurrency;"
        f" each level sends max(--requests, {REQUESTS_PER_STREAM} x concurrency) requests (or --duration);"
        " exit 0 found, 3 cannot resolve (the first level fails, or the client bounded the search)",
    )
    bench.add_argument(
        "--slo",
        help="with --find-capacity (required there): e.g. p99_ttft_ms=800,p99_itl_ms=60; with --against: the goodput "
        "share within it is compared too (default: none)",
    )
    bench.add_argument(
        "--start-concurrency", type=int, default=1, help="with --find-capacity: the first level (default: 1)"
    )
    bench.add_argument(
        "--max-concurrency", type=int, default=1024, help="with --find-capacity: the highest level (default: 1024)"
    )
    bench.add_argument(
        "--max-runs", type=int, default=8, help="with --find-capacity: at most this many runs (default: 8)"
    )
    bench.add_argument(
        "--price-per-hour",
        type=float,
        help="with --find-capacity: USD per instance hour, for $ per 1M output tokens (default: none)",
    )
    bench.add_argument(
        "--instance-type",
        type=instance_type,
        help="with --find-capacity: the endpoint's instance type, priced from optigate's catalog (default: none)",
    )


def _slo(args: argparse.Namespace) -> Any:
    from optigate.bench.goodput import Slo

    if not args.slo:
        raise UsageError("--find-capacity needs --slo, e.g. --slo p99_ttft_ms=800,p99_itl_ms=60")
    try:
        return Slo.parse(args.slo)
    except ValueError as error:
        raise UsageError(f"--slo {args.slo}: {error}") from error


def _price(args: argparse.Namespace) -> float | None:
    if args.price_per_hour is not None:
        if not args.price_per_hour >= 0:
            raise UsageError(f"--price-per-hour {args.price_per_hour}: must be >= 0")
        return float(args.price_per_hour)
    if not args.instance_type:
        return None
    from optigate.plan.catalog import get_instance

    try:
        price = get_instance(args.instance_type).price_per_hour_usd
    except KeyError as error:
        raise UsageError(f"--instance-type: {error.args[0]}") from None
    if price is None:
        raise UsageError(f"--instance-type {args.instance_type}: no price in the catalog; give --price-per-hour")
    return price


def _check(args: argparse.Namespace) -> None:
    from optigate.cli.bench_target import check_target_arguments

    if args.mode != "closed" or args.rate is not None:
        raise UsageError("--find-capacity searches closed-loop concurrency: drop --mode open and --rate")
    if args.adapter_mix:
        raise UsageError("--find-capacity measures one target: drop --adapter-mix")
    if getattr(args, "workload", None):
        raise UsageError("--find-capacity with --workload is not supported yet: use --prompts or synthetic prompts")
    for option, value, least in (
        ("--start-concurrency", args.start_concurrency, 1),
        ("--max-concurrency", args.max_concurrency, 1),
        ("--max-runs", args.max_runs, 1),
        ("--requests", args.requests, 1),
    ):
        if value is None or value < least:
            raise UsageError(f"{option} {value}: must be at least {least}")
    if args.start_concurrency > args.max_concurrency:
        raise UsageError(
            f"--start-concurrency {args.start_concurrency} is above --max-concurrency {args.max_concurrency}"
        )
    for option, value in (("--timeout", args.timeout), ("--duration", args.duration)):
        if value is not None and value <= 0:
            raise UsageError(f"{option} {value}: must be positive")
    check_target_arguments(args)


def _spec(args: argparse.Namespace) -> Any:
    from optigate.bench.core.load import LoadSpec, load_prompts

    prompts: tuple[dict, ...] = ()
    if args.prompts:
        try:
            prompts = tuple(load_prompts(args.prompts))
        except (OSError, ValueError) as error:
            raise UsageError(f"--prompts {args.prompts}: {error}") from error
    try:
        return LoadSpec(
            concurrency=args.start_concurrency,
            requests=None if args.duration else args.requests,
            duration_s=args.duration,
            max_new_tokens=args.max_new_tokens,
            prompt_tokens=args.prompt_tokens,
            prompts=prompts,
            engine_mode=args.engine_mode,
            schema=args.schema,
        )
    except ValueError as error:
        raise UsageError(f"--engine-mode {args.engine_mode} --schema {args.schema or 'default'}: {error}") from error


def cmd_find_capacity(args: argparse.Namespace) -> int:
    from dataclasses import asdict, replace

    from optigate.bench.capacity import LevelRuns, find_capacity
    from optigate.bench.core.client import Target
    from optigate.bench.core.event_loop import run_loop
    from optigate.bench.core.metrics import RunSamples
    from optigate.bench.core.runner import run_levels
    from optigate.cli.output import console, write_json

    slo = _slo(args)
    _check(args)
    price = _price(args)
    spec = _spec(args)
    target = Target(
        args.endpoint, args.region, args.endpoint_url, args.target_variant, args.inference_component,
        args.custom_attributes,
    )  # fmt: skip
    measured: list[dict[str, Any]] = []
    console.print(
        f"finding the capacity at {slo.text()} on {args.endpoint}: at most {args.max_runs} runs, "
        f"c={args.start_concurrency}..{args.max_concurrency}",
        highlight=False,
    )

    def run_level(concurrency: int) -> LevelRuns:
        requests = None if args.duration else max(args.requests, REQUESTS_PER_STREAM * concurrency)
        level_spec = replace(spec, concurrency=concurrency, requests=requests)
        data = run_loop(run_levels(target, [concurrency], level_spec, timeout=args.timeout))
        if not data["runs"]:
            raise CliError(f"c={concurrency}: {data.get('error') or 'no run'}")
        run = data["runs"][0]
        measured.append(run)
        refused = run.get("refused") or (data.get("error") if run.get("successful_requests") else None)
        return LevelRuns((RunSamples.from_result(run),), refused)

    result = find_capacity(
        run_level,
        slo,
        start=args.start_concurrency,
        max_concurrency=args.max_concurrency,
        max_runs=args.max_runs,
        on_step=lambda step: console.print(step.text(), highlight=False),
    )
    if args.json:
        # Never the prompts' text: prompts do not leave the team's account.
        load = {key: value for key, value in asdict(spec).items() if key not in ("prompts", "components", "workload")}
        write_json(
            args.json,
            {
                "target": {key: value for key, value in asdict(target).items() if value is not None},
                "load": {**load, "mode": "closed", "requests_per_stream": REQUESTS_PER_STREAM},
                "capacity": result.to_dict(price),
                "runs": measured,
                **({"label": args.label} if args.label else {}),
            },
        )
        console.print(f"wrote {args.json}")
    return _report(result, price)


def _report(result: Any, price: float | None) -> int:
    from optigate.cli.output import console

    if result.capacity is None:
        first = result.steps[0] if result.steps else None
        why = f" ({first.note})" if first is not None and first.note else ""
        raise CliError(
            f"cannot resolve a capacity at {result.slo.text()}: {result.stopped}{why}", exit_code=CANNOT_RESOLVE_EXIT
        )
    step = result.at_capacity
    above = f"the server did not carry c={result.upper}" if result.upper is not None else "no level above it failed"
    lines = [
        f"capacity at {result.slo.text()}: c={result.capacity} ({above}; {result.runs} runs; {result.stopped})",
        f"at c={result.capacity}: {step.output_tokens_per_s:.0f} output tok/s, {step.requests_per_s:.2f} req/s per "
        "instance" + ("" if step.goodput_share is None else f", goodput {step.goodput_share:.0%}"),
    ]
    cost = result.cost_per_million_output_tokens(price)
    if cost is not None:
        lines.append(f"${cost:.2f} per 1M output tokens at ${price:g}/h, one instance at that load")
    client = [s for s in result.steps if s.verdict == "client-bound" and s.concurrency > result.capacity]
    if client:
        lines.append(
            f"[yellow]warning:[/] client-bound at {', '.join(f'c={s.concurrency} ({s.note})' for s in client)}"
        )
    for line in lines:
        console.print(line, highlight=False)
    if not result.resolved:
        raise CliError(
            f"the client, not the server, may have bounded the search above c={result.capacity}: it is a lower "
            "bound; use a less loaded machine or shard the client",
            exit_code=CANNOT_RESOLVE_EXIT,
        )
    return 0
