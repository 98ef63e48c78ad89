"""`optigate advise`: the next optimization step for a team, in order, with the block to paste."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from rich.markup import escape
from rich.padding import Padding

from optigate.cli.errors import CANNOT_RESOLVE_EXIT, CliError, UsageError
from optigate.cli.output import console
from optigate.cli.reports import load_gate_report
from optigate.cli.team_argument import add_team_arguments, chosen_team


def _value(key: str, value) -> str:
    from optigate.advise.findings import shown

    return shown(key, value)


def _print_finding(finding, first: bool) -> None:
    from rich import box
    from rich.table import Table

    head = "your gate proves this" if finding.status == "proving" else "next" if first else finding.status
    console.print(f"[bold]step {finding.step}: {finding.title}[/bold] ({head})", highlight=False)
    console.print(Padding(escape(finding.why), (0, 0, 0, 2)), highlight=False)
    if finding.effect:
        table = Table(box=box.SIMPLE_HEAD, padding=(0, 1), title=None)
        table.add_column("planner (re-planned)", no_wrap=True)
        table.add_column("before", justify="right")
        table.add_column("after", justify="right")
        for figure in finding.effect:
            table.add_row(figure.label, _value(figure.key, figure.before), _value(figure.key, figure.after))
        console.print(Padding(table, (0, 0, 0, 2)))
    for note in finding.notes:
        console.print(Padding(escape(f"• {note}"), (0, 0, 0, 2)), highlight=False)
    if finding.candidate_yaml:
        console.print(Padding(f"paste into your team file ({finding.target}):", (0, 0, 0, 2)), highlight=False)
        console.print(Padding(escape(finding.candidate_yaml.rstrip()), (0, 0, 0, 4)), highlight=False)
    if finding.promotion is not None:
        _print_promotion(finding.promotion, "once your gate approves it, promote it into the team file:")


def _print_promotion(promotion, title: str) -> None:
    console.print(Padding(title, (0, 0, 0, 2)), highlight=False)
    for number, step in enumerate(promotion.steps, 1):
        console.print(Padding(escape(f"{number}. {step}"), (0, 0, 0, 4)), highlight=False)
    if promotion.block_yaml:
        console.print(Padding(escape(promotion.block_yaml.rstrip()), (0, 0, 0, 6)), highlight=False)


def _print_adapter_gate(gate) -> None:
    console.print("[bold]the gate of a team serving adapters[/bold]", highlight=False)
    for note in gate.notes:
        console.print(Padding(escape(f"• {note}"), (0, 0, 0, 2)), highlight=False)
    if gate.block_yaml:
        where = ", ".join(gate.keys)
        console.print(Padding(f"paste into your team file ({where}):", (0, 0, 0, 2)), highlight=False)
        console.print(Padding(escape(gate.block_yaml.rstrip()), (0, 0, 0, 4)), highlight=False)


def _print_reading(reading) -> None:
    verdict = {True: "paid off", False: "did not pay off", None: "cannot tell (a person decides)"}[reading.paid_off]
    step = f"step {reading.step}" if reading.step else "a change advise does not place in the sequence"
    console.print(f"[bold]last gate run ({reading.source}): {step} {verdict}[/bold]", highlight=False)
    console.print(Padding(escape(reading.summary), (0, 0, 0, 2)), highlight=False)
    for level in reading.levels:
        parts = []
        for key, label in (("p50_tpot_ms", "TPOT"), ("p99_itl_ms", "p99 ITL"), ("p99_ttft_ms", "p99 TTFT")):
            before, after = level[key]
            if before is not None or after is not None:
                parts.append(f"{label} {_value(key, before)} -> {_value(key, after)} ms")
        before, after = level["cost_per_million_output_tokens"]
        if before is not None or after is not None:
            parts.append(f"$/M {_value('cost_per_million_output_tokens', before)} -> "
                         f"{_value('cost_per_million_output_tokens', after)}")  # fmt: skip
        before, after = level["tokens_per_chunk"]
        if after is not None and before is not None and after != before:
            parts.append(f"tokens/chunk {before:.2f} -> {after:.2f}")
        line = f"c{level['concurrency']}: " + (", ".join(parts) or "no figure measured")
        console.print(Padding(escape(line), (0, 0, 0, 2)), highlight=False)
    if reading.tpot_expected_ratio is not None:
        ratio = f"measured / expected TPOT at concurrency 1: {reading.tpot_expected_ratio:.2f}"
        console.print(Padding(escape(ratio), (0, 0, 0, 2)), highlight=False)
    for reason in reading.reasons[:5]:
        console.print(Padding(escape(f"• {reason}"), (0, 0, 0, 2)), highlight=False)
    for note in reading.notes:
        console.print(Padding(escape(f"• {note}"), (0, 0, 0, 2)), highlight=False)


# Over 80 lines: the command's two modes (next step, --from-report) share its loading and its one-line errors.
def cmd_advise(args: argparse.Namespace) -> int:
    """The next step of the sequence for a team; with --from-report, whether the last one paid off."""
    from optigate.advise import CannotAdvise, advise
    from optigate.advise import from_report as gate_report
    from optigate.advise.promotion import promotion
    from optigate.deployment import deploy, load_resolved_project
    from optigate.gate.decision import APPROVED, REJECTED

    if args.utilization_pct is not None and not 0 <= args.utilization_pct <= 100:
        raise UsageError(f"--utilization-pct {args.utilization_pct:g}: give a share of hours from 0 to 100")
    chosen = chosen_team(args, "advise", needs_project=True)
    if chosen is None:
        raise UsageError("advise: name the team: optigate advise chat, or --team chat, or its file; see --help")
    # Only this team's file is read (with environments.yaml): another team's broken file does not stop its advice.
    args.team, args.config = chosen.name, chosen.config
    project = load_resolved_project(args.config, teams=[chosen.name])
    known_envs = [environment.name for environment in project.environments]
    if args.env is not None and args.env not in known_envs:
        raise UsageError(f"--env {args.env}: no such environment in {args.config}; known: {', '.join(known_envs)}")
    environment = next(e for e in project.environments if args.env in (None, e.name))
    resolved_team = project.teams[args.team]
    deployment = deploy(resolved_team, environment)
    instance_count = deployment.instance_count

    reading = None
    promoted_by = None  # an approved report's change: how to promote it into the team file
    tried: dict[int, str] = {}
    subject = resolved_team
    if args.from_report:
        try:
            data = load_gate_report(Path(args.from_report))
            reading = gate_report.read(data, args.team, args.from_report)
            gate = deployment.gate
            if gate is not None and gate.cost_basis is not None:  # one cost model: the basis plan and summary use
                reading = gate_report.repriced(reading, gate.cost_basis)
        except gate_report.ReportError as error:
            raise UsageError(str(error)) from error
        if reading.outcome == APPROVED:
            promoted = gate_report.applied(resolved_team, reading.change)
            if promoted is None:
                raise UsageError(
                    f"{args.from_report}: its change {json.dumps(reading.change)} is not a serving block the rules "
                    "accept for this team; was the report produced for another version of the team file?"
                )
            subject = promoted
            promoted_by = promotion(resolved_team, reading.change)
        elif reading.outcome == REJECTED and reading.step is not None:
            tried[reading.step] = reading.summary
    try:
        advice = advise(
            subject,
            environment=environment.name,
            instance_count=instance_count,
            min_instances=deployment.placement.min_instances,  # what summary prices at minimum capacity
            utilization_pct=args.utilization_pct,
            tried=tried,
        )
    except CannotAdvise as error:
        raise CliError(str(error), exit_code=CANNOT_RESOLVE_EXIT) from error

    # With a report, the exit code is the gate's verdict on the last step (0 paid off, 1 not, 3 cannot tell).
    code = 0 if reading is None or reading.paid_off else 1 if reading.paid_off is False else CANNOT_RESOLVE_EXIT
    if args.json:
        data = advice.to_dict()
        data["report"] = reading.to_dict() if reading else None
        if data["report"] is not None:
            data["report"]["promotion"] = promoted_by.to_dict() if promoted_by else None
        print(json.dumps(data, indent=2))
        return code
    title = f"optigate advise: {advice.team} ({advice.environment}), concurrency {advice.concurrency}"
    console.print(f"[bold]{escape(title)}[/bold]", highlight=False)
    if reading is not None:
        _print_reading(reading)
        if reading.paid_off and promoted_by is not None:
            _print_promotion(promoted_by, "promote it into the team file:")
        if reading.paid_off:
            console.print("  advice below is for the team with that change promoted into serving", highlight=False)
    recommendations = advice.recommendations
    for prerequisite in advice.prerequisites:
        line = f"before the gate takes any candidate below: {prerequisite}"
        console.print(Padding(escape(line), (0, 0, 0, 2)), highlight=False)
    for finding in recommendations:
        _print_finding(finding, first=finding is advice.next)
    if not recommendations:
        console.print("nothing to change: every step of the sequence is done or does not pay here", highlight=False)
    if advice.adapter_gate is not None:
        _print_adapter_gate(advice.adapter_gate)
    others = [f for f in advice.findings if f not in recommendations]
    if others:
        console.print("[bold]the other steps[/bold]", highlight=False)
    for finding in others:
        line = f"{finding.step}. {finding.title} ({finding.status}): {finding.why}"
        console.print(Padding(escape(line), (0, 0, 0, 2)), highlight=False)
        for note in finding.notes:
            console.print(Padding(escape(f"• {note}"), (0, 0, 0, 4)), highlight=False)
    return code


def add_advise_parser(commands: argparse._SubParsersAction) -> None:
    advise = commands.add_parser(
        "advise", help="the next optimization step for a team, in order, with the gate.candidate block to paste"
    )
    add_team_arguments(advise, required=True)
    advise.add_argument(
        "--env", default=None, help="environment whose instance count prices the endpoint (default: the first)"
    )
    advise.add_argument(
        "--from-report",
        default=None,
        metavar="GATE_REPORT",
        help="the gate's verdict JSON of the last step: whether it paid off, then what comes next (default: none)",
    )
    advise.add_argument(
        "--utilization-pct",
        type=float,
        default=None,
        help="share of hours the endpoint has traffic, to compare it with a scale-to-zero inference component "
        "(default: none, the comparison says it needs this)",
    )
    advise.add_argument("--json", action="store_true", help="print JSON instead of the summary")
    advise.set_defaults(handler=cmd_advise)
