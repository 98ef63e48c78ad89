"""`optigate summary`: what would be deployed per environment and team (every resource a stack creates, what
its instances cost a month, every value optigate chose), and the fleet's totals; `--json` for the same data.

Every line is built whole and wrapped at spaces to 100 columns (or the terminal's width, if narrower), and none is
padded: a redirected summary fits 100 columns and carries no trailing spaces."""

from __future__ import annotations

import argparse
import json
import textwrap
from typing import Any

from optigate.cli.errors import UsageError
from optigate.cli.output import console

#: The widest line the summary prints, redirected or not.
WIDTH = 100


def cmd_summary(args: argparse.Namespace) -> int:
    """What would be deployed, per environment and team, with every value optigate chose, and the fleet's totals."""
    from optigate.deployment import load_resolved_project
    from optigate.deployment.inventory import inventory
    from optigate.promote.lock import default_locks_dir

    project = load_resolved_project(args.config)
    known = [environment.name for environment in project.environments]
    wanted = [name.strip() for name in (args.env or "").split(",") if name.strip()]
    unknown = [name for name in wanted if name not in known]
    if unknown:
        raise UsageError(f"--env {','.join(unknown)}: no such environment in {args.config}; known: {', '.join(known)}")
    deployments = project.deployments(",".join(wanted) or None, default_locks_dir(args.config))
    stacks = [inventory(deployment) for deployment in deployments]
    if args.json:
        print(json.dumps(summary_json(stacks), indent=2))
        return 0
    _say("optigate summary: what `cdk deploy` would create, from the resolved config (nothing synthesized)")
    for deployment, stack in zip(deployments, stacks, strict=True):
        _say("")
        _print_stack(deployment, stack)
        print_details(deployment)
        if args.gate:
            print_gate(deployment)
    _say("")
    for line in fleet_lines(stacks):
        text = line.lstrip()
        _say(text, len(line) - len(text))
    return 0


def summary_json(stacks) -> dict[str, Any]:
    """`summary --json`: `stacks` (one StackInventory each: names, counts, `resource_counts` by CloudFormation type,
    `cost` in USD per month), `environments`, `teams` and `fleet` (totals), `resource_counts` (the fleet's),
    `price_source`."""
    from optigate.deployment.inventory import PRICE_SOURCE, fleet

    return {"price_source": PRICE_SOURCE, "stacks": [stack.to_json() for stack in stacks], **fleet(stacks)}


def _say(text: str, indent: int = 0, hanging: int = 2) -> None:
    """`text` wrapped at spaces to the summary's width, `indent` columns in (continuations `hanging` more), unpadded."""
    from rich.markup import escape

    width = min(WIDTH, console.width)
    lines = textwrap.wrap(
        text,
        width=width,
        initial_indent=" " * indent,
        subsequent_indent=" " * (indent + hanging),
        break_long_words=True,  # only a word longer than a whole line is broken
        break_on_hyphens=False,
    ) or [""]
    for line in lines:
        console.print(escape(line.rstrip()), highlight=False, soft_wrap=True)


def _plural(count: int, noun: str) -> str:
    plural = noun[:-1] + "ies" if noun.endswith("y") else noun + ("es" if noun.endswith("s") else "s")
    return f"{count} {noun if count == 1 else plural}"


def _dollars(amount: float | None) -> str:
    return "no list price" if amount is None else f"${amount:,.0f}"


def _rollout(deployment) -> str:
    """The strategy, and the shadow variant's share and what its candidate changes, when the plan has one."""
    team, shadow = deployment.team, deployment.endpoint.shadow
    rollout: str = team.rollout.strategy
    if shadow is not None and team.rollout.shadow is not None:
        changed = ", ".join(f"{k}={v}" for k, v in team.rollout.shadow.candidate.items()) or "same"
        rollout += f" {shadow.sampling_percentage}% → {changed}"
    return rollout


# Over 80 lines: one line per resource a stack creates, in the order the summary prints them.
def stack_lines(deployment, stack) -> list[tuple[int, str]]:
    """(indent, text) of what one stack creates: endpoint, components, alarms, autoscaling, gate, monthly cost."""
    environment = deployment.environment
    lines = [
        (0, f"{stack.stack}: team {stack.team} in {stack.environment} ({stack.region}, account {environment.account})")
    ]
    instances = stack.cost.runs or f"{stack.instance_count} × {stack.instance_type}"
    if stack.pools:
        instances += f" (pools in priority order: {', '.join(stack.pools)})"
    variants = ", ".join(stack.variants)
    lines.append((2, f"endpoint {stack.endpoint}: {instances}; variants {variants}; rollout {_rollout(deployment)}"))
    created = [
        "1 endpoint",
        _plural(stack.models, "model"),
        _plural(len(stack.inference_components), "inference component"),
        _plural(len(stack.alarms), "alarm"),
        _plural(1 if stack.scaling else 0, "scalable target"),
        _plural(stack.dashboards, "dashboard"),
        _plural(len(stack.buckets), "bucket"),
    ]
    if stack.gate is not None:
        created += [
            _plural(len(stack.gate.state_machines), "state machine"),
            _plural(len(stack.gate.functions), "function"),
            "1 model package group",
        ]
    lines.append((2, "creates: " + ", ".join(created)))
    if stack.inference_components:
        lines.append((2, "inference components: " + ", ".join(stack.inference_components)))
    lines.append((2, "alarms: " + ", ".join(stack.alarms)))
    scaling = stack.scaling
    if scaling is not None:
        to_zero = "yes (a request that finds no copy adds one)" if scaling.scale_to_zero else "no"
        lines.append(
            (
                2,
                f"autoscaling: {scaling.min_capacity}-{scaling.max_capacity} {scaling.unit}, target "
                f"{scaling.target} {scaling.target_metric}; scale to zero: {to_zero}",
            )
        )
    elif stack.scaling_suspended:
        lines.append((2, "autoscaling: suspended for this deploy (the instance count scaling last set is kept)"))
    else:
        lines.append((2, f"autoscaling: none ({stack.instance_count} fixed); scale to zero: no"))
    if stack.buckets:
        lines.append((2, "buckets: " + ", ".join(stack.buckets)))
    gate = stack.gate
    if gate is not None:
        lines.append(
            (
                2,
                f"gate: state machines {', '.join(gate.state_machines)}; functions {', '.join(gate.functions)}; "
                f"model package group {gate.package_group}"
                + (
                    f"; {_plural(gate.workload_configs, 'managed benchmark workload')}" if gate.workload_configs else ""
                ),
            )
        )
    cost = stack.cost
    if cost.min_usd is None:
        lines.append((2, f"cost per month: unknown (no list price for {', '.join(cost.unpriced)})"))
    else:
        lines.append(
            (
                2,
                f"cost per month: {_dollars(cost.min_usd)} at minimum capacity "
                f"({_plural(cost.min_instances, 'instance')}), {_dollars(cost.max_usd)} at maximum "
                f"({_plural(cost.max_instances, 'instance')})",
            )
        )
    if cost.per_million_output_tokens is not None:
        bound = cost.per_million_output_tokens_bound
        lines.append(
            (
                2,
                f"cost per million output tokens: ${cost.per_million_output_tokens:.3f} expected"
                + (f", ${bound:.3f} bound" if bound is not None else "")
                + f" (the planner's, at the gate's request lengths; one replica: {cost.priced_per_token_at})",
            )
        )
    return lines


def _print_stack(deployment, stack) -> None:
    for indent, text in stack_lines(deployment, stack):
        _say(text, indent)


def fleet_lines(stacks) -> list[str]:
    """The fleet's totals per environment, overall and per team (across its environments): stacks, instances and
    monthly cost at minimum and maximum capacity."""
    from optigate.deployment.inventory import PRICE_SOURCE, total

    environments = list(dict.fromkeys(stack.environment for stack in stacks))
    teams = list(dict.fromkeys(stack.team for stack in stacks))
    lines = ["fleet: cost per month at minimum and maximum capacity", f"  prices: {PRICE_SOURCE}"]
    by_environment = [(name, total([s for s in stacks if s.environment == name])) for name in environments]
    lines += _totals_table("environment", [*by_environment, ("fleet", total(stacks))])
    lines += ["", *_totals_table("team", [(name, total([s for s in stacks if s.team == name])) for name in teams])]
    unpriced = sorted({stack.stack for stack in stacks if stack.cost.min_usd is None})
    if unpriced:
        lines.append(f"  not priced (no list price for their instance type): {', '.join(unpriced)}")
    return lines


def _totals_table(first_column: str, rows) -> list[str]:
    """Rows of totals under a header, right-aligned, unpadded at the end."""
    widths = [max(len(first_column), *(len(name) for name, _ in rows)), 6, 9, 12, 12]

    def row(cells) -> str:
        first, *rest = cells
        aligned = "".join("  " + cell.rjust(width) for cell, width in zip(rest, widths[1:], strict=True))
        return ("  " + first.ljust(widths[0]) + aligned).rstrip()

    lines = [row((first_column, "stacks", "instances", "at minimum", "at maximum"))]
    for name, totals in rows:
        instances = f"{totals.min_instances}-{totals.max_instances}"
        lines.append(row((name, str(totals.stacks), instances, _dollars(totals.min_usd), _dollars(totals.max_usd))))
    return lines


def _print_pools(deployment) -> None:
    """One line per instance pool: what the shared settings give on it, and what it decides."""
    from optigate.cli.pool_table import pool_rows

    resolved = deployment.resolved
    if not resolved.pools:
        return
    gate = "; the gate measures priority 1 only" if deployment.candidate is not None else ""
    _say(f"instance pools (one environment on each{gate}):", 2)
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
        _say(line, 4)


def _print_lines(lines: list[str], indent: int) -> None:
    """Lines built whole (optigate.cli.adapter_lines): neither wrapped nor padded to the console's width."""
    from rich.markup import escape

    for line in lines:
        console.print(escape(" " * indent + line), highlight=False, soft_wrap=True)


def _print_components(deployment) -> None:
    """An adapter team's live inference components (its endpoint plan's) and the rolling update its `rollout` asks
    of the base."""
    from optigate.cli.adapter_lines import live_component_lines, rollout_lines

    plan = deployment.endpoint
    if plan.components is None:
        return
    _say("inference components (the base model, each adapter on it):", 2)
    _print_lines(live_component_lines(deployment.endpoint_name, plan.components, plan.scaling), 4)
    _print_lines(rollout_lines(plan.components.rollout), 2)


def print_details(deployment) -> None:
    """A stack's image, LMI settings and every value optigate chose, wrapped at spaces and indented."""
    from optigate.deployment.compilation import recompile_note

    served, endpoint = deployment.served, deployment.endpoint
    image = endpoint.image_uri.split("/")[-1]
    if endpoint.served_package_arn is not None:
        image += f" (approved package {endpoint.served_package_arn.split('/', 1)[-1]})"
    settings = ", ".join(f"{key.removeprefix('OPTION_')}={value}" for key, value in endpoint.environment.items())
    _say(f"image: {image}", 2)
    _say(f"LMI settings: {settings or '-'}", 2)
    _print_pools(deployment)
    _print_components(deployment)
    plan = deployment.resolved.plan
    if plan is not None and plan.expected is not None:
        expected = plan.expected
        line = (
            f"decode TPOT at batch 1: expected {expected.tpot_ms_batch1:.1f} ms ({expected.basis}: "
            f"{expected.bandwidth_efficiency:.0%} of peak bandwidth), bound {plan.decode_tpot_ms_batch1:.1f} ms"
        )
        _say(line, 2)
        if expected.basis != "literature estimate":
            _say(f"calibration: {expected.source}", 4)
    if plan is not None and plan.setting_notes:
        _say("vLLM engine switches (what each changed in the plan):", 2)
        for note in plan.setting_notes:
            _say(f"• {note}", 4)
    recompile = recompile_note(served.compiled_for if served else None, deployment.resolved)
    if recompile:
        _say(f"note: {recompile}", 2)
    if not served:  # an approved package's weights are the optimization job's, not the team's checkpoint
        _say("weights:", 2)
        for note in deployment.resolved.weights_notes:
            _say(f"• {note}", 4)
    notes = deployment.resolved.notes
    _say("chosen by optigate:" + ("" if notes else " nothing"), 2)
    for note in notes:
        _say(f"• {note}", 4)


def gate_lines(plan) -> list[str]:
    """What a team's gate measures (its GatePlan), one line each."""
    benchmark = plan.benchmark
    workers = f"{benchmark.shards} worker{'s' if benchmark.shards > 1 else ''}"
    levels = ", ".join(str(c) for c in benchmark.measured_concurrency)
    per_worker = ", ".join(str(c) for c in benchmark.levels)
    requests = ", ".join(str(benchmark.shards * r) for r in benchmark.requests_per_level)
    per_worker_requests = ", ".join(str(r) for r in benchmark.requests_per_level)
    shown = plan.thresholds.to_dict().items()
    thresholds = ", ".join(f"{key}={value}" for key, value in shown if key != "concurrency")
    lines = [
        f"levels (measured concurrency): {levels} ({workers} × {per_worker} streams)",
        f"requests per level and round: {requests} ({workers} × {per_worker_requests})",
        rounds_line(benchmark),
        f"prompt/output tokens: {benchmark.prompt_tokens}/{benchmark.max_new_tokens}",
        f"on: {plan.instance_count} × {plan.instance_type}",
        budget_line(plan),
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


def rounds_line(benchmark) -> str:
    """How many rounds (a block of the twin, then one of the candidate, at every level) and when the gate looks."""
    first, budget = benchmark.rounds
    if benchmark.max_rounds is None:
        return f"rounds: {budget} (baseline twin, then candidate, at every level), judged once after the last"
    minutes = f" or {benchmark.max_minutes:g} minutes" if benchmark.max_minutes is not None else ""
    looks = budget - first + 1
    return (
        f"rounds: {first} to {budget}{minutes} (baseline twin, then candidate, at every level), judged after each "
        f"from round {first}, stopping once decided: {looks} looks at {100 - 5 / looks:.3g} % each"
    )


def budget_line(plan) -> str:
    """What the benchmark costs: both endpoints per minute, the time budget's price, a round at the planner's
    figures (a lower bound)."""
    per_minute = plan.usd_per_benchmark_minute
    if per_minute is None:
        return "benchmark cost: unknown (no list price for the instance type)"
    endpoints = f"twin and candidate, {plan.instance_count} × {plan.instance_type} each"
    parts = [f"benchmark cost: ${per_minute * 60:,.2f} an hour ({endpoints})"]
    round_s = plan.round_seconds_at_least()
    _, budget = plan.benchmark.rounds
    if round_s is not None:
        parts.append(
            f"a round at least {round_s / 60:.1f} min (${round_s / 60 * per_minute:,.2f}), {budget} rounds at least "
            f"${budget * round_s / 60 * per_minute:,.2f} at the planner's batch-1 figures"
        )
    if plan.benchmark.max_minutes is not None:
        parts.append(f"at most ${plan.benchmark.max_minutes * per_minute:,.2f} by max_minutes")
    return "; ".join(parts)


def print_gate(deployment) -> None:
    """`summary --gate`: what the team's gate will measure here, when it has one."""
    plan = deployment.gate
    if plan is None:
        return
    _say("gate (what it measures):", 2)
    for line in gate_lines(plan):
        _say(line, 4)
    if plan.components is not None:
        from optigate.cli.adapter_lines import gate_component_lines

        _print_lines(gate_component_lines(plan.components), 4)


def add_summary_parser(commands: argparse._SubParsersAction) -> None:
    summary = commands.add_parser("summary", help="print what would be deployed per environment and team")
    summary.add_argument("--config", default="config", help="config folder (default: config)")
    summary.add_argument("--env", default=None, help="environment(s), comma-separated (default: all)")
    summary.add_argument(
        "--gate", action="store_true", help="also print what each team's gate will measure (default: not printed)"
    )
    summary.add_argument(
        "--json",
        action="store_true",
        help="print the stacks' inventory, costs and fleet totals as JSON instead of text (default: text)",
    )
    summary.set_defaults(handler=cmd_summary)
