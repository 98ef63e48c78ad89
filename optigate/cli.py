"""The `optigate` command line."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from rich.console import Console
from rich.table import Table

from optigate.config.loader import ConfigError, load_environments, load_project, load_team

# Wide tables stay readable when piped or logged by CI (rich assumes 80 columns there).
console = Console(width=None if sys.stdout.isatty() else 180)
errors = Console(stderr=True, width=None if sys.stderr.isatty() else 400)


def _print_config_error(error: ConfigError) -> None:
    for issue in error.issues:
        errors.print(f"[red]✗[/red] {issue}", highlight=False, soft_wrap=True)
    errors.print(f"[red]{len(error.issues)} problem(s)[/red]")


def cmd_validate(args: argparse.Namespace) -> int:
    """Check config files without synthesizing: a folder (environments + teams) or single files."""
    from optigate.deployment import load_resolved_project, load_resolved_team

    failures: list[ConfigError] = []
    checked = 0
    for raw in args.paths:
        path = Path(raw)
        try:
            if path.is_dir():
                project = load_resolved_project(path)
                checked += 1 + len(project.teams)
            elif path.name.startswith("environments."):
                load_environments(path)
                checked += 1
            else:
                load_resolved_team(path)
                checked += 1
        except ConfigError as error:
            failures.append(error)
    for failure in failures:
        _print_config_error(failure)
    if failures:
        return 1
    console.print(f"[green]✓[/green] {checked} config file(s) valid")
    return 0


def cmd_summary(args: argparse.Namespace) -> int:
    """What would be deployed, per environment and team, with every value optigate chose."""
    from optigate.deployment import load_resolved_project
    from optigate.promote.lock import default_locks_dir

    try:
        deployments = load_resolved_project(args.config).deployments(args.env, default_locks_dir(args.config))
    except ConfigError as error:
        _print_config_error(error)
        return 1
    table = Table(title="optigate: what `cdk deploy` would create", show_lines=True)
    for column in ("stack", "endpoint", "instance", "image", "LMI settings", "rollout", "chosen by optigate"):
        table.add_column(column, overflow="fold")
    for deployment in deployments:
        team, resolved = deployment.team, deployment.resolved
        env = deployment.container_environment
        settings = "\n".join(f"{key.removeprefix('OPTION_')}={value}" for key, value in env.items())
        rollout = team.rollout.strategy
        if team.rollout.shadow is not None and deployment.shadow is not None:
            changed = ", ".join(f"{k}={v}" for k, v in team.rollout.shadow.candidate.items()) or "same"
            rollout += f" {team.rollout.shadow.sampling_percentage}% → {changed}"
        if team.adapters:
            rollout += f"\n{len(team.adapters)} adapters: " + ", ".join(a.name for a in team.adapters)
        table.add_row(
            deployment.stack_name,
            deployment.endpoint_name,
            f"{deployment.instance_count} × {team.serving.instance_type}",
            (deployment.served.image if deployment.served else deployment.image_uri).split("/")[-1]
            + (f"\napproved package {deployment.served.model_package_arn.split('/', 1)[-1]}" if deployment.served else ""),
            "\n".join(f"{key.removeprefix('OPTION_')}={value}" for key, value in deployment.served.environment.items()) if deployment.served else settings,
            rollout,
            "\n".join(resolved.notes) or "-",
        )
    console.print(table)
    return 0


PLAN_ROWS = [
    ("weights_gib_per_accelerator", "weights per accelerator", "{:.2f} GiB"),
    ("kv_bytes_per_token", "KV cache per token (per accelerator)", "{:,.0f} B"),
    ("kv_budget_gib_per_accelerator", "KV cache budget per accelerator", "{:.2f} GiB"),
    ("runtime_reserve_gib_per_accelerator", "runtime reserve per accelerator", "{:.2f} GiB"),
    ("kv_capacity_tokens", "KV capacity", "{:,} tokens"),
    ("max_concurrency_at_max_model_len", "concurrency at max_model_len", "{:.1f}"),
    ("max_concurrent_sequences_at_typical_length", "sequences at the typical length", "{:,}"),
    ("decode_tpot_ms_batch1", "decode TPOT at batch 1 (lower bound)", "{:.1f} ms"),
    ("decode_bound", "decode bound", "{}"),
    ("prefill_ms", "prefill of the prompt (TTFT lower bound)", "{:.1f} ms"),
    ("prefill_bound", "prefill bound", "{}"),
    ("best_batch", "cheapest batch", "{}"),
    ("cost_per_million_output_tokens", "cost per million output tokens", "${:.3f}"),
]


def _plan_table(result, title: str) -> Table:
    table = Table(title=title, show_header=False)
    table.add_column("what")
    table.add_column("value", justify="right")
    head = [
        ("model", result.model),
        ("instance", f"{result.instance_type} (TP {result.tensor_parallel} x {result.replicas} replica(s))"),
        ("precision", f"weights {result.weight_precision}, KV {result.kv_cache_dtype}, compute {result.compute_precision}"),
        ("max_model_len", f"{result.max_model_len:,}"),
        ("typical request", f"{result.prompt_tokens:,} prompt + {result.output_tokens:,} output tokens"),
    ]
    for label, value in head:
        table.add_row(label, value)
    data = result.to_dict()
    for key, label, fmt in PLAN_ROWS:
        value = data.get(key)
        table.add_row(label, "n/a" if value is None else fmt.format(value))
    return table


def _print_plan(result, args: argparse.Namespace, title: str, extra_notes: tuple[str, ...] = ()) -> None:
    if args.json:
        data = result.to_dict()
        data["derived"] = list(extra_notes)
        print(json.dumps(data, indent=2, default=str))
        return
    console.print(_plan_table(result, title))
    for note in (*extra_notes, *result.notes):
        console.print(f"  • {note}", highlight=False)
    for problem in result.problems:
        errors.print(f"[red]✗[/red] {problem.message}", highlight=False)
    if result.is_lower_bound:
        console.print("  Latency and cost are roofline lower bounds: real serving is slower; use them to rank options.")


def cmd_plan(args: argparse.Namespace) -> int:
    """Capacity and roofline for a team file, or ad hoc for a model on an instance."""
    from optigate.plan.architecture import known_models, load_architecture
    from optigate.plan.compare import compare
    from optigate.plan.planner import plan
    from optigate.deployment import load_resolved_team

    if args.list_models:
        for name in known_models():
            console.print(name)
        return 0
    if args.team_file:
        try:
            resolved_team = load_resolved_team(args.team_file)
        except ConfigError as error:
            _print_config_error(error)
            return 1
        resolved = resolved_team.baseline
        if resolved is None or resolved.plan is None:  # refused by the rules, which raised above
            raise RuntimeError(f"{args.team_file}: resolved without a plan")
        _print_plan(resolved.plan, args, f"optigate plan: {resolved_team.team.team}", resolved.notes)
        return 0 if resolved.plan.fits else 1
    if not args.model or not (args.instance or args.compare):
        errors.print("give a team file, or --model with --instance (or --compare)")
        return 2
    try:
        arch = load_architecture(args.model)
    except (KeyError, ValueError) as error:
        errors.print(f"[red]✗[/red] {error}")
        return 2
    options = dict(
        kv_cache_dtype=args.kv_cache_dtype,
        tensor_parallel=args.tensor_parallel,
        gpu_memory_utilization=args.gpu_memory_utilization,
        max_model_len=args.max_model_len,
        prompt_tokens=args.prompt_tokens,
        output_tokens=args.output_tokens,
        max_batch_size=args.max_batch_size,
    )
    if args.compare:
        instances = args.instance.split(",") if args.instance else DEFAULT_COMPARE_INSTANCES
        return _print_compare(*compare(arch, instances, args.precisions.split(","), tpot_ms=args.tpot_ms, **options), args)
    precision = {"none": "bf16", None: "bf16"}.get(args.quantization, args.quantization)
    try:
        result = plan(arch, args.instance, weight_precision=precision, **options)
    except (KeyError, ValueError) as error:
        errors.print(f"[red]✗[/red] {error}")
        return 2
    _print_plan(result, args, f"optigate plan: {arch.name} on {result.instance_type}")
    return 0 if result.fits else 1


DEFAULT_COMPARE_INSTANCES = [
    "ml.g5.2xlarge", "ml.g5.12xlarge", "ml.g6.2xlarge", "ml.g6.12xlarge", "ml.g6e.xlarge",
    "ml.g6e.2xlarge", "ml.g6e.12xlarge", "ml.p4d.24xlarge", "ml.p5.48xlarge",
]


def _print_compare(candidates, cheapest, args: argparse.Namespace) -> int:
    if args.json:
        print(json.dumps({"candidates": [c.to_dict() for c in candidates], "cheapest": cheapest.to_dict() if cheapest else None}, indent=2))
        return 0 if cheapest else 1
    target = f" within TPOT {args.tpot_ms:g} ms" if args.tpot_ms else ""
    table = Table(title=f"optigate plan --compare: cost per million output tokens{target} (roofline lower bounds)")
    for column in ("instance", "weights", "fits", "TP", "weights/acc", "KV tokens", "TPOT b=1", "batch", "$/M tokens", ""):
        table.add_column(column, justify="right" if column not in ("instance", "weights", "") else "left")
    for c in candidates:
        r = c.result
        mark = "[green]◀ cheapest[/green]" if c is cheapest else ""
        if r is None:
            table.add_row(c.instance_type, c.weight_precision, f"[dim]{c.reason}[/dim]", *[""] * 6, mark)
            continue
        table.add_row(
            c.instance_type,
            c.weight_precision,
            "yes" if r.fits else f"[red]{r.problems[0].kind.replace('_', ' ')}[/red]",
            str(r.tensor_parallel),
            f"{r.weights_gib_per_accelerator:.1f} GiB",
            f"{r.kv_capacity_tokens:,}",
            "n/a" if r.decode_tpot_ms_batch1 is None else f"{r.decode_tpot_ms_batch1:.1f} ms",
            "-" if c.batch_within_target is None else str(c.batch_within_target),
            "-" if c.cost_within_target is None else f"${c.cost_within_target:.3f}",
            mark,
        )
    console.print(table)
    if cheapest is None:
        errors.print("[red]✗[/red] no candidate fits and meets the target")
        return 1
    return 0


def cmd_emulate(args: argparse.Namespace) -> int:
    """A local SageMaker-runtime emulator on loopback (see optigate.bench.emulator)."""
    from pathlib import Path as _Path

    import yaml as _yaml

    from optigate.bench.emulator import EmulatorConfig, serve

    data: dict = {}
    if args.config:
        data = _yaml.safe_load(_Path(args.config).read_text()) or {}
    default = data.setdefault("default", {})
    for key in ("ttft_ms", "itl_ms", "output_tokens", "tokens_per_chunk", "payload_format", "throttle_rate", "model_error_rate", "stream_error_rate", "reset_rate", "stall_rate"):
        value = getattr(args, key)
        if value is not None:
            default[key] = value
    config = EmulatorConfig.parse(data)

    def ready(port: int) -> None:
        if args.port_file:
            _Path(args.port_file).write_text(str(port))
        errors.print(f"optigate emulator on http://127.0.0.1:{port} (endpoint_url for boto3)")

    try:
        serve(config, port=args.port, ready=ready)
    except KeyboardInterrupt:
        pass
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
        errors.print("--endpoint is required")
        return 2
    levels = [int(level) for level in args.concurrency.split(",")]
    target = Target(args.endpoint, args.region, args.endpoint_url, args.target_variant, args.inference_component, args.custom_attributes)
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
    progress = Progress(TextColumn("c={task.fields[level]:>4}"), BarColumn(), MofNCompleteColumn(), TextColumn("errors {task.fields[errors]}"), TimeElapsedColumn(), console=errors, transient=False)

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
    console.print(_bench_table(data, f"optigate bench: {args.endpoint}" + (" (interrupted: partial results)" if data["interrupted"] else "")))
    if args.json:
        Path(args.json).write_text(json.dumps(data))
        console.print(f"wrote {args.json}")
    if args.report:
        from optigate.bench.report import write_report

        console.print(f"wrote {write_report([(args.endpoint, data)], args.report)}")
    return 130 if data["interrupted"] else 0


def cmd_bench_compare(args: argparse.Namespace) -> int:
    from optigate.bench.compare import compare_results
    from optigate.bench.report import write_report

    baseline, candidate = (json.loads(Path(path).read_text()) for path in (args.baseline, args.candidate))
    deltas = compare_results(baseline, candidate)
    if not deltas:
        errors.print("[red]✗[/red] the two files share no concurrency level")
        return 1
    table = Table(title=f"candidate {args.candidate} vs baseline {args.baseline} (95 % bootstrap CI)")
    for column in ("metric", "stat", "conc.", "baseline", "candidate", "delta", "95 % CI", "verdict"):
        table.add_column(column, justify="right")
    colours = {"better": "green", "worse": "red"}
    for d in deltas:
        colour = colours.get(d.verdict, "dim")
        table.add_row(d.metric, d.statistic, str(d.concurrency), f"{d.baseline:,.2f}", f"{d.candidate:,.2f}", f"{d.delta:+,.2f} ({d.relative:+.1%})", f"[{d.low:+,.2f}, {d.high:+,.2f}]", f"[{colour}]{d.verdict}[/{colour}]")
    console.print(table)
    if args.json:
        Path(args.json).write_text(json.dumps({"deltas": [d.to_dict() for d in deltas]}, indent=2))
    if args.report:
        console.print(f"wrote {write_report([('baseline', baseline), ('candidate', candidate)], args.report, deltas)}")
    return 0


def cmd_evaluate(args: argparse.Namespace) -> int:
    """Quality evaluation with fmeval, run in the evaluation environment (see requirements/evaluate.txt)."""
    import os
    import subprocess

    try:
        import fmeval  # noqa: F401
    except ImportError:
        python = os.environ.get("OPTIGATE_EVAL_PYTHON") or str(Path(__file__).resolve().parents[1] / ".venv-eval" / "bin" / "python")
        if not Path(python).exists():
            errors.print("[red]✗[/red] fmeval is not installed here; `. scripts/setup.sh` creates .venv-eval with it (fmeval 1.2.3 pins sagemaker<3, so it has its own environment)")
            return 2
        return subprocess.call([python, "-m", "optigate.evaluate.job", *args.job_args])
    from optigate.evaluate.job import main as job_main

    return job_main(args.job_args)


def cmd_rehearse(args: argparse.Namespace) -> int:
    """The team's whole gate offline: emulated endpoints, moto for AWS, the real definition."""
    try:
        from optigate.gate import rehearse as rehearsal
        from optigate.testing import moto_gate  # noqa: F401  (needs moto: the dev extra)
    except ImportError as error:
        errors.print(f"[red]✗[/red] rehearse needs the dev extra (pip install -e .[dev]): {error}")
        return 2
    try:
        template, deployment = rehearsal.synthesize_team(args.team, args.env, args.config)
    except (KeyError, ValueError, ConfigError) as error:
        errors.print(f"[red]✗[/red] {error}")
        return 2
    candidates = ["faster", "slower"] if args.candidate == "both" else [args.candidate]
    exit_code = 0
    for candidate in candidates:
        console.print(f"[bold]rehearsing {deployment.stack_name}: a {candidate} candidate ({json.dumps(deployment.team.gate.candidate, default=str)})[/bold]")
        result = rehearsal.rehearse(template, deployment, candidate)
        console.print("  path: " + " → ".join(result["states"]), highlight=False, soft_wrap=True)
        execution = result["execution"]
        report = result["report"] or {}
        for check in report.get("checks", []):
            mark = "[green]pass[/green]" if check["passed"] else "[red]FAIL[/red]"
            console.print(f"  {mark} {check['name']}" + (f" @c{check['concurrency']}" if check.get("concurrency") else "") + f": {check.get('detail', '')}", highlight=False)
        packages = ", ".join(p["ModelApprovalStatus"] for p in result["packages"]) or "none"
        left = sum(len(v) for v in result["left"].values())
        verdict = "APPROVED" if execution["status"] == "SUCCEEDED" else f"{execution.get('error', 'FAILED')}: {execution.get('cause', '')}"
        console.print(f"  verdict: {verdict}", highlight=False, soft_wrap=True)
        console.print(f"  model package: {packages}; SageMaker resources left: {left}; notifications: {len(result['messages'])}")
        for name, live in result["live"].items():
            where = "its original config" if live["config"] == live["original_config"] else f"{live['config']} (NOT its original {live['original_config']})"
            console.print(f"  live endpoint {name}: {live['status']} on {where}", highlight=False)
        if (candidate == "faster") != (execution["status"] == "SUCCEEDED"):
            exit_code = 1
    return exit_code


def cmd_resolve(args: argparse.Namespace) -> int:
    """Write the lock of each environment: the newest Approved package of every gated team."""
    import boto3

    from optigate.promote.lock import write_lock
    from optigate.promote.resolve import resolve

    try:
        project = load_project(args.config)
    except ConfigError as error:
        _print_config_error(error)
        return 2
    known = {environment.name: environment for environment in project.environments.environments}
    unknown = [name for name in args.env if name not in known]
    if unknown:
        errors.print(f"[red]✗[/red] unknown environment(s) {', '.join(unknown)}; known: {', '.join(known)}")
        return 2
    for name in args.env:
        environment = known[name]
        client = boto3.client("sagemaker", region_name=environment.region)
        lock = resolve(project, environment, client, partition=args.partition)
        path = write_lock(lock, args.out)
        for team, package in lock.teams.items():
            served = package.model_package_arn if package else "baseline (no Approved package)"
            console.print(f"{name}/{team}: {served}", highlight=False)
        console.print(f"wrote {path}")
    return 0


def cmd_schema(args: argparse.Namespace) -> int:
    from optigate.config.schema import stale_schemas, write_schemas

    if args.check:
        stale = stale_schemas(args.out)
        if stale:
            errors.print(f"[red]✗[/red] out of date in {args.out}: {', '.join(stale)}; run `optigate schema`")
            return 1
        console.print(f"[green]✓[/green] schemas in {args.out} match the models")
        return 0
    for path in write_schemas(args.out):
        console.print(f"wrote {path}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="optigate", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)

    validate = commands.add_parser("validate", help="check config files without synthesizing")
    validate.add_argument("paths", nargs="*", default=["config"], help="config folder or files (default: config)")
    validate.set_defaults(handler=cmd_validate)

    summary = commands.add_parser("summary", help="print what would be deployed per environment and team")
    summary.add_argument("--config", default="config")
    summary.add_argument("--env", default=None, help="environment(s), comma-separated (default: all)")
    summary.set_defaults(handler=cmd_summary)

    planner = commands.add_parser("plan", help="capacity and roofline: what fits and how fast it can be")
    planner.add_argument("team_file", nargs="?", help="a team file (config/teams/x.yaml)")
    planner.add_argument("--model", help="ad hoc: a known model name, a Hugging Face repo id or a config.json path")
    planner.add_argument("--instance", help="ad hoc: e.g. ml.g6.2xlarge (with --compare: a comma-separated list)")
    planner.add_argument("--quantization", choices=["none", "fp8", "awq", "gptq", "int8", "nvfp4", "mxfp4"], default=None)
    planner.add_argument("--kv-cache-dtype", default="auto", choices=["auto", "fp8"])
    planner.add_argument("--tensor-parallel", type=int, default=None)
    planner.add_argument("--gpu-memory-utilization", type=float, default=0.9)
    planner.add_argument("--max-model-len", type=int, default=None)
    planner.add_argument("--max-batch-size", type=int, default=None)
    planner.add_argument("--prompt-tokens", type=int, default=1024)
    planner.add_argument("--output-tokens", type=int, default=256)
    planner.add_argument("--compare", action="store_true", help="precisions x instances side by side")
    planner.add_argument("--precisions", default="bf16,fp8,awq", help="with --compare")
    planner.add_argument("--tpot-ms", type=float, default=None, help="with --compare: the time-per-output-token target")
    planner.add_argument("--list-models", action="store_true", help="list the built-in architectures")
    planner.add_argument("--json", action="store_true", help="print JSON instead of a table")
    planner.set_defaults(handler=cmd_plan)

    bench = commands.add_parser("bench", help="benchmark a streaming endpoint (TTFT, ITL, throughput) at real concurrency")
    bench.add_argument("--endpoint", help="the SageMaker endpoint name")
    bench.add_argument("--endpoint-url", help="e.g. http://127.0.0.1:8080 for `optigate emulate`")
    bench.add_argument("--region", default="us-east-1")
    bench.add_argument("--target-variant")
    bench.add_argument("--inference-component")
    bench.add_argument("--custom-attributes")
    bench.add_argument("--concurrency", default="1,16,64", help="comma-separated levels")
    bench.add_argument("--requests", type=int, default=100, help="measured requests per level")
    bench.add_argument("--duration", type=float, help="seconds per level instead of a request count")
    bench.add_argument("--prompt-tokens", type=int, default=1024)
    bench.add_argument("--max-new-tokens", type=int, default=256)
    bench.add_argument("--prompts", help="JSONL of {prompt|inputs|messages} records instead of synthetic prompts")
    bench.add_argument("--schema", choices=["inputs", "messages"], default="inputs")
    bench.add_argument("--mode", choices=["closed", "open"], default="closed")
    bench.add_argument("--rate", type=float, help="open loop: Poisson arrivals per second")
    bench.add_argument("--timeout", type=float, default=120.0, help="per request, seconds")
    bench.add_argument("--json", help="write the results (with raw samples) here")
    bench.add_argument("--report", help="write PNG plots and index.html into this folder")
    bench.set_defaults(handler=cmd_bench, bench_command=None)
    bench_commands = bench.add_subparsers(dest="bench_command")
    compare_parser = bench_commands.add_parser("compare", help="baseline vs candidate with bootstrap confidence intervals")
    compare_parser.add_argument("baseline")
    compare_parser.add_argument("candidate")
    compare_parser.add_argument("--report", help="write both curves and the deltas into this folder")
    compare_parser.add_argument("--json", help="write the deltas here")

    evaluate = commands.add_parser("evaluate", help="baseline vs candidate quality with fmeval (see `optigate evaluate -h`)", add_help=False)
    evaluate.add_argument("job_args", nargs=argparse.REMAINDER)
    evaluate.set_defaults(handler=cmd_evaluate)

    rehearse = commands.add_parser("rehearse", help="run a team's gate offline against emulated endpoints (needs the dev extra)")
    rehearse.add_argument("--team", required=True)
    rehearse.add_argument("--env", default=None, help="environment (default: the first)")
    rehearse.add_argument("--config", default="config")
    rehearse.add_argument("--candidate", choices=["faster", "slower", "both"], default="both")
    rehearse.set_defaults(handler=cmd_rehearse)

    emulate = commands.add_parser("emulate", help="run a local SageMaker-runtime emulator (loopback only)")
    emulate.add_argument("--port", type=int, default=8080)
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

    resolver = commands.add_parser("resolve", help="lock what each environment serves: the newest gate-Approved model package per team (needs AWS credentials)")
    resolver.add_argument("--env", action="append", required=True, help="environment; repeat for several")
    resolver.add_argument("--config", default="config")
    resolver.add_argument("--out", default="config/locks", help="where <env>.json is written; synth reads it from here")
    resolver.add_argument("--partition", default="aws")
    resolver.set_defaults(handler=cmd_resolve)

    schema = commands.add_parser("schema", help="write the JSON schema of the config files")
    schema.add_argument("--out", default="config/schema")
    schema.add_argument("--check", action="store_true", help="fail if the files differ from the models")
    schema.set_defaults(handler=cmd_schema)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["evaluate"]:  # every further argument belongs to the evaluation job
        return cmd_evaluate(argparse.Namespace(job_args=argv[1:]))
    args = build_parser().parse_args(argv)
    return args.handler(args)


if __name__ == "__main__":
    sys.exit(main())
