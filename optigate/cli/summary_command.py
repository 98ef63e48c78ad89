"""`optigate summary`: what would be deployed per environment and team, with every value optigate chose."""

from __future__ import annotations

import argparse

from rich.table import Table

from optigate.cli.errors import UsageError
from optigate.cli.output import console


def cmd_summary(args: argparse.Namespace) -> int:
    """What would be deployed, per environment and team, with every value optigate chose."""
    from optigate.deployment import load_resolved_project
    from optigate.promote.lock import default_locks_dir

    project = load_resolved_project(args.config)
    known = [environment.name for environment in project.environments]
    wanted = [name.strip() for name in (args.env or "").split(",") if name.strip()]
    unknown = [name for name in wanted if name not in known]
    if unknown:
        raise UsageError(f"--env {','.join(unknown)}: no such environment in {args.config}; known: {', '.join(known)}")
    deployments = project.deployments(",".join(wanted) or None, default_locks_dir(args.config))
    console.print(summary_table(deployments))
    for deployment in deployments:
        print_details(deployment)
        if args.gate:
            print_gate(deployment)
    return 0


def _rollout(deployment) -> str:
    team = deployment.team
    rollout: str = team.rollout.strategy
    if team.rollout.shadow is not None and deployment.shadow is not None:
        changed = ", ".join(f"{k}={v}" for k, v in team.rollout.shadow.candidate.items()) or "same"
        rollout += f" {team.rollout.shadow.sampling_percentage}% → {changed}"
    if team.adapters:
        rollout += f"; {len(team.adapters)} adapters: " + ", ".join(a.name for a in team.adapters)
    return rollout


def summary_table(deployments) -> Table:
    """One row per stack with its names whole (they fit 100 columns); the long parts follow as text."""
    from rich import box

    table = Table(title="optigate: what `cdk deploy` would create", box=box.SIMPLE_HEAD, padding=(0, 1))
    for column in ("stack", "endpoint", "instance", "rollout"):
        table.add_column(column, no_wrap=column != "rollout")
    for deployment in deployments:
        table.add_row(
            deployment.stack_name,
            deployment.endpoint_name,
            f"{deployment.instance_count} × {deployment.team.serving.instance_type}" + _more_pools(deployment),
            _rollout(deployment),
        )
    return table


def _more_pools(deployment) -> str:
    pools = deployment.resolved.pools
    return f" +{len(pools) - 1} pool{'s' if len(pools) > 2 else ''}" if pools else ""


def _print_pools(deployment) -> None:
    """One line per instance pool: what the shared settings give on it, and what it decides."""
    from rich.markup import escape
    from rich.padding import Padding

    from optigate.cli.plan_command import pool_rows

    resolved = deployment.resolved
    if not resolved.pools:
        return
    gate = "; the gate measures priority 1 only" if deployment.candidate is not None else ""
    console.print(f"  instance pools (one environment on each{gate}):", highlight=False)
    for row in pool_rows(resolved):
        figures = [f"TP {row['tensor_parallel']}"]
        if row["weights_gib_per_accelerator"] is not None:
            figures.append(f"{row['weights_gib_per_accelerator']:.1f} GiB weights/acc.")
        if row["kv_capacity_tokens"] is not None:
            figures.append(f"KV {row['kv_capacity_tokens']:,} tokens")
        if row["decode_tpot_ms_batch1"] is not None:
            figures.append(f"TPOT >= {row['decode_tpot_ms_batch1']:.1f} ms")
        if row["cost_per_million_output_tokens"] is not None:
            figures.append(f"${row['cost_per_million_output_tokens']:.3f}/M tokens")
        if row["decides"]:
            figures.append("decides " + ", ".join(row["decides"]))
        line = f"{row['priority']}. {row['instance_type']}: {', '.join(figures)}"
        console.print(Padding(escape(line), (0, 0, 0, 4)), highlight=False)


def _print_lines(lines: list[str], indent: int) -> None:
    """Lines built whole (optigate.cli.adapter_lines): neither wrapped nor padded to the console's width."""
    from rich.markup import escape

    for line in lines:
        console.print(escape(" " * indent + line), highlight=False, soft_wrap=True)


def _print_components(deployment) -> None:
    """An adapter team's live inference components and the rolling update its `rollout` asks of the base."""
    from optigate.cli.adapter_lines import live_component_lines, rollout_lines
    from optigate.deployment.gate_components import component_compute

    team = deployment.team
    if not team.adapters:
        return
    compute = component_compute(deployment.resolved, team.serving.autoscaling)
    region = deployment.environment.region
    # The adapter versions the lock's package was approved with, once the lock records them (issue 26).
    approved = getattr(deployment.served, "adapters", None) if deployment.served else None
    console.print("  inference components (the base model, each adapter on it):", highlight=False)
    _print_lines(live_component_lines(team, deployment.endpoint_name, compute, region, approved), 4)
    _print_lines(rollout_lines(team), 2)


def print_details(deployment) -> None:
    """A stack's image, LMI settings and every value optigate chose, wrapped at spaces and indented."""
    from rich.markup import escape
    from rich.padding import Padding

    from optigate.deployment.compilation import recompile_note

    served = deployment.served
    environment = served.environment if served else deployment.container_environment
    image = (served.image if served else deployment.image_uri).split("/")[-1]
    if served:
        image += f" (approved package {served.model_package_arn.split('/', 1)[-1]})"
    settings = ", ".join(f"{key.removeprefix('OPTION_')}={value}" for key, value in environment.items())
    console.print(f"[bold]{deployment.stack_name}[/bold]", highlight=False)
    console.print(Padding(escape(f"image: {image}"), (0, 0, 0, 2)), highlight=False)
    console.print(Padding(escape(f"LMI settings: {settings or '-'}"), (0, 0, 0, 2)), highlight=False)
    _print_pools(deployment)
    _print_components(deployment)
    plan = deployment.resolved.plan
    if plan is not None and plan.expected is not None:
        expected = plan.expected
        line = (
            f"decode TPOT at batch 1: expected {expected.tpot_ms_batch1:.1f} ms ({expected.basis}: "
            f"{expected.bandwidth_efficiency:.0%} of peak bandwidth), bound {plan.decode_tpot_ms_batch1:.1f} ms"
        )
        console.print(Padding(escape(line), (0, 0, 0, 2)), highlight=False)
        if expected.basis != "literature estimate":
            console.print(Padding(escape(f"calibration: {expected.source}"), (0, 0, 0, 4)), highlight=False)
    if plan is not None and plan.setting_notes:
        console.print("  vLLM engine switches (what each changed in the plan):", highlight=False)
        for note in plan.setting_notes:
            console.print(Padding(escape(f"• {note}"), (0, 0, 0, 4)), highlight=False)
    recompile = recompile_note(served.compiled_for if served else None, deployment.resolved)
    if recompile:
        console.print(Padding(escape(f"note: {recompile}"), (0, 0, 0, 2)), highlight=False)
    if not served:  # an approved package's weights are the optimization job's, not the team's checkpoint
        console.print("  weights:", highlight=False)
        for note in deployment.resolved.weights_notes:
            console.print(Padding(escape(f"• {note}"), (0, 0, 0, 4)), highlight=False)
    notes = deployment.resolved.notes
    console.print("  chosen by optigate:" + ("" if notes else " nothing"), highlight=False)
    for note in notes:
        console.print(Padding(escape(f"• {note}"), (0, 0, 0, 4)), highlight=False)


def gate_lines(plan) -> list[str]:
    """What a team's gate measures (its GatePlan), one line each."""
    workers = f"{plan.shards} worker{'s' if plan.shards > 1 else ''}"
    levels = ", ".join(str(c) for c in plan.measured_concurrency)
    per_worker = ", ".join(str(c) for c in plan.levels)
    requests = ", ".join(str(plan.shards * r) for r in plan.requests_per_level)
    per_worker_requests = ", ".join(str(r) for r in plan.requests_per_level)
    thresholds = ", ".join(f"{key}={value}" for key, value in plan.thresholds.items() if key != "concurrency")
    lines = [
        f"levels (measured concurrency): {levels} ({workers} × {per_worker} streams)",
        f"requests per level and block: {requests} ({workers} × {per_worker_requests})",
        f"blocks per level: {plan.blocks} (baseline twin, then candidate, interleaved)",
        f"prompt/output tokens: {plan.prompt_tokens}/{plan.max_new_tokens}",
        f"on: {plan.instance_count} × {plan.instance_type}",
        f"thresholds: {thresholds or '-'}",
    ]
    if plan.optimization_configs:
        lines.append("optimization job: " + ", ".join(kind for config in plan.optimization_configs for kind in config))
    if plan.shadow:
        lines.append(f"shadow: {plan.shadow.sampling_percentage}% of live traffic for {plan.shadow.window_minutes} min")
    if plan.cross_check:
        lines.append(f"cross-check: SageMaker's managed benchmark, tokenizer {plan.cross_check.tokenizer}")
    lines.append(f"fingerprint: {plan.fingerprint}")
    return lines


def print_gate(deployment) -> None:
    """`summary --gate`: what the team's gate will measure here, when it has one."""
    from rich.markup import escape
    from rich.padding import Padding

    plan = deployment.gate
    if plan is None:
        return
    console.print("  gate (what it measures):", highlight=False)
    for line in gate_lines(plan):
        console.print(Padding(escape(line), (0, 0, 0, 4)), highlight=False)
    if plan.components is not None:
        from optigate.cli.adapter_lines import gate_component_lines

        _print_lines(gate_component_lines(plan.components), 4)


def add_summary_parser(commands: argparse._SubParsersAction) -> None:
    summary = commands.add_parser("summary", help="print what would be deployed per environment and team")
    summary.add_argument("--config", default="config", help="config folder (default: config)")
    summary.add_argument("--env", default=None, help="environment(s), comma-separated (default: all)")
    summary.add_argument("--gate", action="store_true", help="also print what each team's gate will measure")
    summary.set_defaults(handler=cmd_summary)
