"""`optigate plan`: capacity and roofline for a team file or ad hoc, and `plan --compare` across instances."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from rich.markup import escape
from rich.table import Table

from optigate.cli.errors import CliError, UsageError, one_line
from optigate.cli.output import console, stderr
from optigate.cli.plan_live import add_live_arguments
from optigate.cli.pool_table import pool_rows, pool_table
from optigate.cli.team_argument import add_team_arguments, chosen_team, instance_types

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
    ("expected_tpot_ms_batch1", "decode TPOT at batch 1 (expected)", "{:.1f} ms"),
    ("expected_ttft_ms", "TTFT of the prompt (expected)", "{:.1f} ms"),
    ("expected_cost_per_million_output_tokens", "cost per million output tokens (expected)", "${:.3f}"),
]

DEFAULT_COMPARE_INSTANCES = [
    "ml.g5.2xlarge",
    "ml.g5.12xlarge",
    "ml.g6.2xlarge",
    "ml.g6.12xlarge",
    "ml.g6e.xlarge",
    "ml.g6e.2xlarge",
    "ml.g6e.12xlarge",
    "ml.p4d.24xlarge",
    "ml.p5.48xlarge",
]


def _plan_table(result, title: str) -> Table:
    table = Table(title=title, show_header=False)
    table.add_column("what")
    table.add_column("value", justify="right")
    head = [
        ("model", result.model),
        ("instance", f"{result.instance_type} (TP {result.tensor_parallel} x {result.replicas} replica(s))"),
        (
            "precision",
            f"weights {result.weight_precision}, KV {result.kv_cache_dtype}, compute {result.compute_precision}",
        ),
        ("max_model_len", f"{result.max_model_len:,}"),
        ("typical request", f"{result.prompt_tokens:,} prompt + {result.output_tokens:,} output tokens"),
    ]
    for label, value in head:
        table.add_row(label, value)
    data = result.to_dict()
    for key, label, fmt in PLAN_ROWS:
        value = data.get(key)
        table.add_row(label, "n/a" if value is None else fmt.format(value))
    if result.expected is not None:
        table.add_row("expected figures", f"{result.expected.basis} ({result.engine})")
    table.add_row("costs priced at (one replica)", result.cost_basis.describe())
    return table


#: A pool's figures in `optigate plan --json` and the pool table (PlanResult names).


def _print_plan(
    result,
    args: argparse.Namespace,
    title: str,
    extra_notes: tuple[str, ...] = (),
    pools: list[dict] | None = None,
    weights: dict | None = None,
    residency: dict | None = None,
) -> None:
    if args.json:
        data = result.to_dict()
        data["derived"] = list(extra_notes)
        if weights:
            data["weights"] = weights
        if pools:
            data["instance_pools"] = pools
        if residency:
            data["adapter_residency"] = residency
        print(json.dumps(data, indent=2, default=str))
        return
    if result.problems:
        # Refused: the problems (each one line, with what to try), and no table of costs for a plan that
        # cannot be served.
        for problem in result.problems:
            stderr.print(f"[red]✗[/red] {escape(one_line(problem.message))}", highlight=False, soft_wrap=True)
        return
    console.print(_plan_table(result, title))
    for note in (*extra_notes, *result.setting_notes, *result.notes):
        console.print(f"  • {note}", highlight=False)
    if residency:
        console.print(f"  • LoRA slots: {residency['message']}", highlight=False)
    if result.is_lower_bound:
        basis = result.expected.basis if result.expected else None
        if result.expected is not None and result.expected.standing:
            basis = f"{basis}, {result.expected.standing}"
        console.print(
            "  The bound rows are roofline lower bounds; the expected rows add the efficiency engines reach and "
            f"per-step overheads ({basis or 'no expected figure without hardware figures'}).",
            highlight=False,
        )


def _adapter_residency(team, resolved) -> dict | None:
    """For a team with adapters: the LoRA slots its mix needs at the gate's highest concurrency, beside max_loras."""
    from optigate.plan.adapter_slots import MixError, SlotPlan, team_slots

    if not team.adapters or resolved.lora is None:
        return None
    benchmark = team.gate.benchmark
    try:
        answer = team_slots(
            [adapter.name for adapter in team.adapters],
            benchmark.adapter_mix,
            concurrency=max(benchmark.concurrency),
            max_loras=resolved.lora.max_loras,
        )
    except MixError as error:
        raise CliError(f"gate.benchmark.adapter_mix: {error}", exit_code=2) from error
    if isinstance(answer, SlotPlan):
        return answer.to_dict()
    return {"message": answer, "slots_needed": None, "max_loras": resolved.lora.max_loras}


def _calibrate(team_file: Path, reports: list[Path]) -> None:
    """Turn gate reports into calibrations in config/calibration.yaml, and say what changed."""
    from optigate.cli.reports import load_gate_report
    from optigate.config.loader import calibration_path, load_calibrations
    from optigate.plan import calibration
    from optigate.plan.catalog import get_instance
    from optigate.plan.expected import literature_efficiency

    path = calibration_path(team_file)
    if path is None:
        raise UsageError(f"{team_file}: --calibrate needs a team file under config/teams/ (beside calibration.yaml)")
    try:
        new = [calibration.from_report(load_gate_report(report), str(report)) for report in reports]
    except calibration.CalibrationError as error:
        raise CliError(str(error), exit_code=2) from error
    calibration.write(path, calibration.merged(load_calibrations(path), new))
    for entry in new:
        literature = literature_efficiency(get_instance(entry.instance_type), entry.weight_precision, entry.engine)
        console.print(
            f"calibrated {entry.accelerator} {entry.weight_precision} {entry.engine}: bandwidth efficiency "
            f"{entry.bandwidth_efficiency:.3f} (literature {literature.bandwidth:.3f}) from {entry.source}; "
            f"kept in {path}",
            highlight=False,
        )


# Over 80 lines: a team file or an ad hoc model on an instance, both through one output path.
def cmd_plan(args: argparse.Namespace) -> int:
    """Capacity and roofline for a team file, or ad hoc for a model on an instance."""
    from optigate.deployment import load_resolved_project, load_resolved_team
    from optigate.plan.architecture import known_models, load_architecture
    from optigate.plan.instance_comparison import compare
    from optigate.plan.memory import DEFAULT_GPU_MEMORY_UTILIZATION
    from optigate.plan.team_plan import plan_longest_held

    chosen = chosen_team(args, "plan", needs_project=False)
    args.team_file = str(chosen.file) if chosen is not None else None
    if args.list_models:
        for name in known_models():
            console.print(name)
        return 0
    if args.calibrate is not None and not args.team_file:
        raise UsageError("--calibrate needs a team file under config/teams/ (config/calibration.yaml keeps the result)")
    if (args.endpoint is not None) != (args.calibrate == []):  # reports, or a live endpoint: one of the two
        raise UsageError("--calibrate takes gate reports, or --endpoint NAME to check the planner on a live endpoint")
    if args.team_file and args.calibrate:
        _calibrate(Path(args.team_file), [Path(report) for report in args.calibrate])
    if args.team_file:
        if chosen is not None and chosen.config is not None:
            # In its config folder, a team is refused as `optigate validate` refuses it (the environments' rules too).
            resolved_team = load_resolved_project(chosen.config, teams=[chosen.name]).teams[chosen.name]
        else:
            resolved_team = load_resolved_team(args.team_file)
        resolved = resolved_team.baseline
        if resolved is None or resolved.plan is None:  # refused by the rules, which raised above
            raise RuntimeError(f"{args.team_file}: resolved without a plan")
        title = f"optigate plan: {resolved_team.team.team}"
        if resolved.pools:
            title += f" on {resolved.instance.instance_type} (priority 1 of {len(resolved.pools)} pools)"
        weights = {
            "as_stored": resolved.downloaded_weights,
            "downloaded_gb": round(resolved.downloaded_gb, 2),
            "startup_quantization_seconds": resolved.startup_quantization_seconds,
        }
        said = tuple(f"weights {note}" for note in resolved.weights_notes) + resolved.notes
        if args.endpoint:
            from optigate.cli.plan_live import check_endpoint

            return check_endpoint(args, resolved.plan.to_dict(), (resolved.image_family, resolved.image_tag))
        residency = _adapter_residency(resolved_team.team, resolved)
        _print_plan(resolved.plan, args, title, said, pool_rows(resolved), weights, residency)
        if resolved.pools and not args.json:
            console.print(pool_table(resolved, "instance pools: one environment on each (roofline lower bounds)"))
        if resolved_team.team.adapters and not args.json:
            _print_components(resolved_team.team, resolved)
        return 0 if resolved.plan.fits else 1
    if not args.model or not (args.instance or args.compare):
        raise UsageError("give a team (its name or file, e.g. plan chat), or --model with --instance (or --compare)")
    try:
        arch = load_architecture(args.model)
    except (KeyError, ValueError, NotImplementedError) as error:  # the last: a layout the planner refuses (MLA)
        raise CliError(f"--model {args.model}: {error}", exit_code=2) from error
    options = {
        "kv_cache_dtype": args.kv_cache_dtype,
        "tensor_parallel": args.tensor_parallel,
        "gpu_memory_utilization": args.gpu_memory_utilization or DEFAULT_GPU_MEMORY_UTILIZATION,
        "max_model_len": args.max_model_len,
        "prompt_tokens": args.prompt_tokens,
        "output_tokens": args.output_tokens,
        "max_batch_size": args.max_batch_size,
    }
    if args.compare:
        instances = args.instance.split(",") if args.instance else DEFAULT_COMPARE_INSTANCES
        candidates, cheapest = compare(arch, instances, args.precisions.split(","), tpot_ms=args.tpot_ms, **options)
        return _print_compare(candidates, cheapest, args)
    precision = {"none": "bf16", None: "bf16"}.get(args.quantization, args.quantization)
    notes: tuple[str, ...] = ()
    try:
        result, model_length = plan_longest_held(arch, args.instance, weight_precision=precision, **options)
        if model_length is not None:
            notes = (
                f"max_model_len={result.max_model_len:,}: the longest the KV cache holds (the model allows "
                f"{model_length:,}); give --max-model-len to plan another length",
            )
    except (KeyError, ValueError, NotImplementedError) as error:  # the last: a layout the planner refuses (MLA)
        raise CliError(f"--model {args.model}: {error}", exit_code=2) from error
    _print_plan(result, args, f"optigate plan: {arch.name} on {result.instance_type}", notes)
    return 0 if result.fits else 1


def _print_compare(candidates, cheapest, args: argparse.Namespace) -> int:
    if args.json:
        data = {"candidates": [c.to_dict() for c in candidates], "cheapest": cheapest.to_dict() if cheapest else None}
        print(json.dumps(data, indent=2))
        return 0 if cheapest else 1
    target = f" within TPOT {args.tpot_ms:g} ms" if args.tpot_ms else ""
    from rich import box

    table = Table(
        title=f"optigate plan --compare: cost per million output tokens{target} (expected; bound beside)",
        box=box.SIMPLE_HEAD,
        padding=(0, 1),
    )
    columns = ("instance", "weights", "fits", "TP", "GiB/acc.", "KV tokens", "TPOT b=1", "bound", "batch", "$/M", "")
    for column in columns:
        # Instance and precision names whole; a reason for not fitting wraps at its spaces.
        left = column in ("instance", "weights", "fits", "")
        table.add_column(column, justify="left" if left else "right", no_wrap=column != "fits")
    for c in candidates:
        r = c.result
        mark = "[green]◀[/green]" if c is cheapest else ""
        if r is None:
            table.add_row(c.instance_type, c.weight_precision, f"[dim]{c.reason}[/dim]", *[""] * 7, mark)
            continue
        table.add_row(
            c.instance_type,
            c.weight_precision,
            "yes" if r.fits else f"[red]{r.problems[0].kind.replace('_', ' ')}[/red]",
            str(r.tensor_parallel),
            f"{r.weights_gib_per_accelerator:.1f}",
            f"{r.kv_capacity_tokens:,}",
            "n/a" if r.expected_tpot_ms_batch1 is None else f"{r.expected_tpot_ms_batch1:.1f} ms",
            "n/a" if r.decode_tpot_ms_batch1 is None else f"{r.decode_tpot_ms_batch1:.1f}",
            "-" if c.batch_within_target is None else str(c.batch_within_target),
            "-" if c.cost_within_target is None else f"${c.cost_within_target:.3f}",
            mark,
        )
    console.print(table)
    if cheapest is not None:
        console.print(
            f"◀ cheapest: {cheapest.instance_type} {cheapest.weight_precision}, ${cheapest.cost_within_target:.3f} per "
            "million output tokens",
            highlight=False,
        )
    if cheapest is None:
        raise CliError("no candidate fits and meets the target")
    return 0


def _print_components(team, resolved) -> None:
    """An adapter team's components and the mix its gate benchmarks (optigate.cli.adapter_lines)."""
    from optigate.cli.adapter_lines import plan_lines
    from optigate.deployment.gate_components import component_compute

    for line in plan_lines(team, component_compute(resolved, team.serving.autoscaling)):
        console.print(escape(f"  {line}"), highlight=False, soft_wrap=True)


def add_plan_parser(commands: argparse._SubParsersAction) -> None:
    planner = commands.add_parser("plan", help="capacity and roofline: what fits and how fast it can be")
    add_team_arguments(planner, required=False)
    planner.add_argument(
        "--model",
        help="ad hoc: a known model name, a Hugging Face repo id or a config.json path (default: none)",
    )
    planner.add_argument(
        "--instance",
        type=instance_types,
        help="ad hoc: e.g. ml.g6.2xlarge (with --compare: a comma-separated list; default there: nine common ones)",
    )
    planner.add_argument(
        "--quantization",
        choices=["none", "fp8", "awq", "gptq", "int8", "nvfp4", "mxfp4"],
        default=None,
        help="ad hoc: weight precision (default: none, i.e. bf16)",
    )
    planner.add_argument("--kv-cache-dtype", default="auto", choices=["auto", "fp8"], help="ad hoc: KV cache precision")
    planner.add_argument(
        "--tensor-parallel", type=int, default=None, help="ad hoc: accelerators per replica (default: fewest that fit)"
    )
    planner.add_argument(
        "--gpu-memory-utilization", type=float, default=None, help="ad hoc: share of accelerator memory (default: 0.9)"
    )
    planner.add_argument(
        "--max-model-len",
        type=int,
        default=None,
        help="ad hoc: longest sequence in tokens (default: the model's, or the longest the KV cache holds if shorter)",
    )
    planner.add_argument(
        "--max-batch-size",
        type=int,
        default=None,
        help="ad hoc: cap on the decode batch (default: none beyond what the KV cache holds)",
    )
    planner.add_argument("--prompt-tokens", type=int, default=1024, help="ad hoc: typical prompt (default: 1024)")
    planner.add_argument("--output-tokens", type=int, default=256, help="ad hoc: typical output (default: 256)")
    planner.add_argument("--compare", action="store_true", help="precisions x instances side by side")
    planner.add_argument(
        "--precisions", default="bf16,fp8,awq", help="with --compare: weight precisions side by side, comma-separated"
    )
    planner.add_argument(
        "--tpot-ms",
        type=float,
        default=None,
        help="with --compare: the time-per-output-token target (default: none, the cheapest at any TPOT)",
    )
    planner.add_argument(
        "--calibrate",
        nargs="*",
        metavar="GATE_REPORT",
        default=None,
        help="with a team file: calibrate the expected figures from gate report JSON files (what the gate measured "
        "at concurrency 1), kept in config/calibration.yaml (default: none, literature estimates); with --endpoint, "
        "check the planner's KV capacity on a live endpoint instead",
    )
    add_live_arguments(planner)
    planner.add_argument("--list-models", action="store_true", help="list the built-in architectures")
    planner.add_argument("--json", action="store_true", help="print JSON instead of a table")
    planner.set_defaults(handler=cmd_plan)
