"""`optigate bench --against URL|ENDPOINT`: benchmark two endpoints round by round (at every level a run of the
baseline, `--endpoint`, then one of the candidate, `--against`) and compare them after each round with anytime-valid
intervals (optigate.bench.sequential, as `bench compare --rounds`); with `--until-decided`, stop at the first round
after which every figure `--decide` names is decided (better, worse or within the margin), or when a figure is worse,
or at `--max-rounds` / `--max-minutes`. Looking after every round is what the intervals are made for: however often
they are read, a figure is called better or worse falsely in at most 5 % of comparisons.

Exit codes: 0 decided and no figure worse, 1 a figure worse, 2 usage or input error, 3 the budget ended undecided."""

from __future__ import annotations

import argparse
import time
from dataclasses import replace
from typing import Any

from optigate.cli.errors import CANNOT_RESOLVE_EXIT, USAGE_EXIT, CliError, UsageError
from optigate.cli.output import console, write_json

#: The default budget: rounds, and the first look (Holm over every figure decides nothing sooner, see --rounds).
DEFAULT_MAX_ROUNDS, DEFAULT_MIN_ROUNDS = 12, 4


def add_rounds_arguments(bench: argparse.ArgumentParser) -> None:
    group = bench.add_argument_group("two endpoints, round by round (--against)")
    group.add_argument(
        "--against",
        metavar="URL|ENDPOINT",
        help="the candidate: an http(s) URL (e.g. a second `optigate emulate`) or a SageMaker endpoint in --region; "
        "--endpoint is the baseline. Each round runs every level on the baseline, then on the candidate "
        "(default: one endpoint, no comparison)",
    )
    group.add_argument(
        "--until-decided",
        action="store_true",
        help="with --against: stop after the first round in which every --decide figure is decided, or one is "
        "worse (default: run every round of the budget)",
    )
    group.add_argument(
        "--max-rounds",
        type=int,
        default=DEFAULT_MAX_ROUNDS,
        help=f"with --against: at most this many rounds (default: {DEFAULT_MAX_ROUNDS})",
    )
    group.add_argument(
        "--min-rounds",
        type=int,
        default=DEFAULT_MIN_ROUNDS,
        help=f"with --until-decided: the first round it may stop after (default: {DEFAULT_MIN_ROUNDS})",
    )
    group.add_argument(
        "--max-minutes",
        type=float,
        help="with --against: stop before a round that would end past this many minutes (default: no time budget)",
    )
    group.add_argument(
        "--decide",
        default="all",
        metavar="METRICS",
        help="with --until-decided: the figures that must be decided: all, or e.g. itl_ms,ttft_ms:p99 (default: all)",
    )
    group.add_argument(
        "--margin-pct", type=float, default=3.0, help="with --against: practical margin, percent (default: 3)"
    )


def check_rounds_arguments(args: argparse.Namespace) -> None:
    """--until-decided and the budget only with --against; a budget that allows a look."""
    if not args.against:
        for option, given in (
            ("--until-decided", args.until_decided),
            ("--max-minutes", args.max_minutes is not None),
            ("--max-rounds", args.max_rounds != DEFAULT_MAX_ROUNDS),
            ("--min-rounds", args.min_rounds != DEFAULT_MIN_ROUNDS),
        ):
            if given:
                raise UsageError(f"{option} applies to two endpoints: add --against URL|ENDPOINT (the candidate)")
        return
    if args.find_capacity or args.mode in ("open", "replay") or args.duration:
        raise UsageError(
            "--against compares closed-loop runs of --requests each: drop --find-capacity, --mode open/replay and "
            "--duration"
        )
    if not 1 <= args.min_rounds <= args.max_rounds:
        raise UsageError(f"--min-rounds {args.min_rounds} --max-rounds {args.max_rounds}: expected 1 <= min <= max")
    if args.max_minutes is not None and not args.max_minutes > 0:
        raise UsageError(f"--max-minutes {args.max_minutes}: must be positive")


def _every_request_failed(data: dict) -> str | None:
    return next(
        (f"c={run['concurrency']}: every request failed" for run in data["runs"] if not run.get("successful_requests")),
        None,
    )


def candidate_target(args: argparse.Namespace, baseline: Any) -> Any:
    """The --against target: a URL (the baseline's endpoint name kept: the emulator serves any) or an endpoint."""
    against = str(args.against)
    if against.startswith(("http://", "https://")):
        return replace(baseline, endpoint_url=against, target_variant=None, inference_component=None)
    return replace(baseline, endpoint_name=against, target_variant=None, inference_component=None)


# Over 80 lines: the loop read in the order it runs: a round on each side, the look, the stop, the outputs.
def cmd_bench_rounds(args: argparse.Namespace, levels: list[int], target: Any, spec: Any) -> int:
    """The rounds (see the module); `target` and `spec` the baseline's, as `bench` resolved them."""
    from optigate.bench.core.event_loop import run_loop
    from optigate.bench.core.metrics import RunSamples
    from optigate.bench.core.runner import run_levels
    from optigate.bench.sequential import compare_rounds
    from optigate.cli.bench_compare_command import _decided, _round_table, _slo

    candidate = candidate_target(args, target)
    slo = _slo(args.slo) if args.slo else None  # the goodput share compared too
    sides: dict[str, list[dict]] = {"baseline": [], "candidate": []}
    blocks: dict[str, dict[int, list[RunSamples]]] = {"baseline": {}, "candidate": {}}
    deltas: list = []
    started = time.monotonic()
    stopped = f"the budget of {args.max_rounds} rounds is spent"
    for round_number in range(1, args.max_rounds + 1):
        for side, where in (("baseline", target), ("candidate", candidate)):
            data = run_loop(run_levels(where, levels, spec, timeout=args.timeout))
            failed = data.get("error") or _every_request_failed(data)
            if failed or not data["runs"]:
                where_text = f"round {round_number}, the {side} ({where.url})"
                raise CliError(f"{where_text}: {failed or 'no run'}; nothing compared", exit_code=USAGE_EXIT)
            sides[side].append(data)
            for run in data["runs"]:
                blocks[side].setdefault(int(run["concurrency"]), []).append(RunSamples.from_result(run))
        deltas = compare_rounds(blocks["baseline"], blocks["candidate"], margin_pct=args.margin_pct, slo=slo)
        worse = [d for d in deltas if str(d.verdict) == "worse"]
        open_figures = [d for d in _decided(deltas, args.decide) if not d.decided]
        minutes = (time.monotonic() - started) / 60
        console.print(
            f"round {round_number}: {len(open_figures)} figure(s) undecided, {len(worse)} worse, {minutes:.1f} min",
            highlight=False,
        )
        if args.until_decided and round_number >= args.min_rounds and (worse or not open_figures):
            stopped = "a figure is worse" if worse else "every figure it decides is decided"
            break
        if args.max_minutes is not None and minutes * (round_number + 1) / round_number > args.max_minutes:
            stopped = f"one more round would pass --max-minutes {args.max_minutes:g}"
            break
    rounds = len(sides["baseline"])
    console.print(_round_table(f"{candidate.url} vs {target.url}, {rounds} round(s): {stopped}", deltas))
    worse = [d for d in deltas if str(d.verdict) == "worse"]
    open_figures = [d for d in _decided(deltas, args.decide) if not d.decided]
    code = 1 if worse else CANNOT_RESOLVE_EXIT if open_figures else 0
    if args.json:
        write_json(
            args.json,
            {
                "rounds": rounds,
                "stopped": stopped,
                "deltas": [d.to_dict() for d in deltas],
                "baseline": sides["baseline"],
                "candidate": sides["candidate"],
                "exit_code": code,
            },
        )
        console.print(f"wrote {args.json}")
    if code == CANNOT_RESOLVE_EXIT:
        console.print(
            f"[yellow]inconclusive[/yellow]: {len(open_figures)} figure(s) undecided after {rounds} round(s) (exit 3): "
            "raise --max-rounds, or accept the intervals as they are"
        )
    elif worse:
        console.print(f"[red]worse[/red]: {len(worse)} figure(s) regressed by more than the margin (exit 1)")
    return code
