"""`optigate rehearse`: a team's whole gate offline, against emulated endpoints and moto."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from types import ModuleType

from rich.markup import escape  # what a run prints is text, not markup: quality[redline]

from optigate.cli.errors import CliError, UsageError
from optigate.cli.output import console
from optigate.cli.team_argument import add_team_arguments, chosen_team

#: How to install what `optigate rehearse` needs beyond optigate itself (moto): pyproject.toml's `rehearse` extra.
REHEARSE_EXTRA = "pip install 'optigate[rehearse]'"


def cmd_rehearse(args: argparse.Namespace) -> int:
    """The team's whole gate offline: emulated endpoints, moto for AWS, the real definition."""
    from optigate.config.loader import ConfigError

    chosen = chosen_team(args, "rehearse", needs_project=True)
    if chosen is None:
        raise UsageError("rehearse: name the team: optigate rehearse chat, or --team chat, or its file; see --help")
    args.team, args.config = chosen.name, chosen.config
    if args.report is not None and not Path(args.report).parent.is_dir():
        raise UsageError(f"--report {args.report}: no folder {Path(args.report).parent}; create it or name another")
    supplied = _adapter_options(args)
    rehearsal = _rehearsal()
    try:
        template, deployment = rehearsal.synthesize_team(args.team, args.env, args.config)
    except ConfigError:
        raise
    except (KeyError, ValueError) as error:
        # A KeyError's str() is its key's repr: the message is its first argument, without the quotes.
        message = error.args[0] if error.args else str(error)
        raise CliError(f"{message}; see `optigate summary` for the teams and environments", exit_code=2) from error
    seeds = _adapter_seeds(deployment, supplied, args.missing_adapter)
    import time

    from optigate.rehearse.gate_layout import cleanup_states
    from optigate.rehearse.progress import StateProgress, failure_cause

    def plain(line: str) -> None:
        console.print(line, markup=False, highlight=False, soft_wrap=True)

    began = time.monotonic()
    candidates = list(rehearsal.rehearsal_kinds(deployment.team)) if args.candidate == "both" else [args.candidate]
    outcomes: list[tuple[str, str, str, bool]] = []  # (candidate, outcome, expected, as expected)
    for candidate in candidates:
        gate_candidate = json.dumps(deployment.team.gate.candidate, default=str)
        kind = (
            f"a faster candidate whose adapter {rehearsal.degraded_adapter(deployment)} loses quality"
            if candidate == "adapter-quality" and deployment.team.adapters
            else "a faster candidate whose drafts are rarely accepted"
            if candidate == "drafts-rejected"
            else f"a {candidate} candidate"
        )
        console.print(f"[bold]rehearsing {deployment.stack_name}: {escape(f'{kind} ({gate_candidate})')}[/bold]")
        progress = StateProgress(plain, verbose=args.verbose, cleanup=cleanup_states(template))
        result = rehearsal.rehearse(template, deployment, candidate, on_history=progress.update, seed_objects=seeds)
        expectation = rehearsal.expectation(candidate, deployment, args.missing_adapter)
        outcome = _outcome(result["execution"])
        met = expectation.met(outcome, (result["report"] or {}).get("checks", []), failure_cause(result["execution"]))
        _print_result(result, outcome, str(expectation), met, verbose=args.verbose)
        if args.report is not None:
            _write_report(result, report_path(Path(args.report), candidate, len(candidates)))
        # The right verdict for another reason is not the rehearsal's: it did not show what it was for.
        shown = outcome if met or outcome != expectation.verdict else f"{outcome} for another reason"
        outcomes.append((candidate, shown, str(expectation), met))
    return _print_verdict(outcomes, time.monotonic() - began)


def _adapter_options(args: argparse.Namespace) -> dict[str, Path]:
    """`--adapter NAME=PATH` as {name: path}, each path there (checked before anything is synthesized)."""
    from optigate.rehearse.adapter_seed import parse_adapter_options

    try:
        supplied = parse_adapter_options(args.adapter)
    except ValueError as error:
        raise UsageError(str(error)) from None
    for name, path in supplied.items():
        if not path.exists():
            raise UsageError(f"--adapter {name}={path}: no such file or folder; give a .tar.gz or a PEFT folder")
    return supplied


def _adapter_seeds(deployment: object, supplied: dict[str, Path], left_out: list[str]) -> dict[str, bytes]:
    """The candidate's new adapter versions for the emulated S3 (optigate.rehearse.adapter_seed), each said."""
    from optigate.rehearse.adapter_seed import adapter_seeds

    try:
        seeds, said = adapter_seeds(deployment, supplied, left_out)
    except ValueError as error:
        raise UsageError(f"--adapter {error}") from None
    for name, what in said.items():
        console.print(f"  new version of adapter {name}: {what}", markup=False, highlight=False, soft_wrap=True)
    return seeds


def _print_result(result: dict, outcome: str, expected: str, met: bool, verbose: bool) -> None:
    """What one run showed: its checks (the failed ones; every one with -v), the verdict, what was left behind."""

    if verbose:
        console.print("  path: " + " → ".join(result["states"]), markup=False, highlight=False, soft_wrap=True)
    execution = result["execution"]
    report = result["report"] or {}
    checks = report.get("checks", [])
    for check in checks:
        outcome_of_check = check.get("outcome") or ("pass" if check["passed"] else "fail")
        if outcome_of_check == "pass" and not verbose:
            continue
        mark = {"pass": "[green]pass[/green]", "inconclusive": "[yellow]inconclusive[/yellow]"}.get(
            outcome_of_check, "[red]FAIL[/red]"
        )
        where = f" @c{check['concurrency']}" if check.get("concurrency") else ""
        name = check["name"] + (f"[{check['adapter']}]" if check.get("adapter") else "")  # an adapter's own check
        text = f"{name}{where}: {check.get('detail', '')}"
        console.print(f"  {mark} {escape(text)}", highlight=False)
    passed = sum(1 for check in checks if check.get("outcome", "pass" if check["passed"] else "fail") == "pass")
    allowance = result.get("host_allowance_ms") or {}
    if any(value > 0 for value in allowance.values()):
        added = ", ".join(
            f"{metric.removesuffix('_ms').upper()} +{value:.1f} ms" for metric, value in allowance.items()
        )
        console.print(
            f"  host allowance: the twin measured above its emulated p99 ({added}); added to the budgets "
            "for this rehearsal only (the host runs client, emulators and moto)",
            highlight=False,
            soft_wrap=True,
        )
    from optigate.rehearse.progress import failure_cause

    error = execution.get("error")
    # The failure in one line (a Lambda's stack trace left out); -v gives the cause as the execution ended with it.
    cause = f"{error}: {execution.get('cause', '')}" if verbose and error else failure_cause(execution)
    why = f" ({cause})" if cause else ""
    as_expected = "as expected" if met else f"expected {expected}"
    console.print(
        f"  verdict: {outcome}{why}, {as_expected}; checks passed: {passed} of {len(checks)}",
        markup=False,
        highlight=False,
        soft_wrap=True,
    )
    packages = ", ".join(p["ModelApprovalStatus"] for p in result["packages"]) or "none"
    left = sum(len(v) for v in result["left"].values())
    console.print(
        f"  model package: {packages}; SageMaker resources left: {left}; notifications: {len(result['messages'])}"
    )
    for name, live in result["live"].items():
        if live["config"] == live["original_config"]:
            where = "its original config"
        else:
            where = f"{live['config']} (NOT its original {live['original_config']})"
        console.print(f"  live endpoint {name}: {live['status']} on {where}", markup=False, highlight=False)


def report_path(requested: Path, candidate: str, candidates: int) -> Path:
    """Where `--report` puts a candidate's gate report: the file asked for, or with several candidates the
    candidate's name before its suffix (report.json: report.faster.json, report.slower.json)."""
    if candidates == 1:
        return requested
    return requested.with_name(f"{requested.stem}.{candidate}{requested.suffix or '.json'}")


def html_path(report: Path) -> Path:
    """Where the report's HTML goes beside its JSON: report.json -> report.html (report.html -> report.html.html)."""
    return report.with_name(report.name + ".html") if report.suffix == ".html" else report.with_suffix(".html")


def _write_report(result: dict, path: Path) -> None:
    """The report.json the gate's decision wrote to the emulated S3, byte for byte, and the report.html beside it
    (its plots embedded), or a line saying there is none."""
    body = result.get("report_body")
    if body is None:
        console.print(f"  gate report: none (the gate stopped before its decision); {path} not written", markup=False)
        return
    written = [(path, body)]
    if result.get("report_html") is not None:
        written.append((html_path(path), result["report_html"]))
    for target, data in written:
        try:
            target.write_bytes(data)
        except OSError as error:
            raise UsageError(
                f"--report {target}: cannot write it ({error.strerror or error}); name a writable file"
            ) from None
    written_to = " and ".join(str(t) for t, _ in written)
    console.print(f"  gate report: {written_to}", markup=False, highlight=False, soft_wrap=True)


def _print_verdict(outcomes: list[tuple[str, str, str, bool]], seconds: float) -> int:
    """The last line, as the demo's: whether every candidate got the verdict it must, and the exit code.

    The faster candidate must be approved, the slower one and the one whose adapter loses quality rejected:
    anything else is a failed rehearsal (exit 1), or an inconclusive one (exit 3) when the gate could not tell."""
    wrong = [(c, o, e) for c, o, e, met in outcomes if not met and o != "INCONCLUSIVE"]
    undecided = [(c, o, e) for c, o, e, met in outcomes if not met and o == "INCONCLUSIVE"]
    took = f"{int(seconds) // 60}m{int(seconds) % 60:02d}s"
    if wrong or undecided:
        code = 1 if wrong else 3
        word = "FAILED" if wrong else "INCONCLUSIVE"
        what = "; ".join(f"the {c} candidate {o}, expected {e}" for c, o, e in wrong + undecided)
        console.print(f"rehearsal {word}: {what} (exit {code}, after {took})", markup=False, highlight=False)
        return code
    verdicts = ", ".join(f"{c} {o}" for c, o, _, _ in outcomes)
    console.print(f"rehearsal passed: {verdicts}, as the gate must decide (in {took})", markup=False, highlight=False)
    return 0


def _rehearsal() -> ModuleType:
    """optigate.rehearse.rehearsal, or one line naming the extra when a package it needs is not installed."""
    try:
        from optigate.rehearse import rehearsal
    except ModuleNotFoundError as error:
        missing = error.name or str(error)
        if missing.partition(".")[0] == "optigate":  # a module of optigate itself: a broken install, not the extra
            raise
        raise UsageError(
            f"optigate rehearse needs the rehearse extra ({missing} is missing): {REHEARSE_EXTRA}"
        ) from error
    return rehearsal


def _outcome(execution: dict) -> str:
    """APPROVED (the execution succeeded), INCONCLUSIVE (it failed with `Inconclusive`), else REJECTED."""
    if execution["status"] == "SUCCEEDED":
        return "APPROVED"
    return "INCONCLUSIVE" if execution.get("error") == "Inconclusive" else "REJECTED"


def add_rehearse_parser(commands: argparse._SubParsersAction) -> None:
    rehearse = commands.add_parser(
        "rehearse", help="run a team's gate offline against emulated endpoints (needs the rehearse extra)"
    )
    add_team_arguments(rehearse, required=True)
    rehearse.add_argument("--env", default=None, help="environment (default: the first in environments.yaml)")
    rehearse.add_argument(
        "--candidate",
        choices=["faster", "slower", "adapter-quality", "drafts-rejected", "both"],
        default="both",
        help="which emulated candidate goes through the gate: adapter-quality is a faster base whose adapter loses "
        "quality (the first the candidate changes, else the first; teams with adapters); drafts-rejected a faster "
        "one whose speculative drafts are rarely accepted (speculative candidates); both: faster and slower, or for "
        "a team with adapters faster and adapter-quality, and drafts-rejected too for a speculative candidate "
        "(default: both)",
    )
    rehearse.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="one line per state visit, the path, every check and the verdict's cause (default: one line per "
        "state, loops folded, only the checks that did not pass)",
    )
    rehearse.add_argument(
        "--adapter",
        action="append",
        default=[],
        metavar="NAME=PATH",
        help="the new version of adapter NAME the candidate changes (gate.candidate.adapters): a .tar.gz, or a folder "
        "(adapter_config.json, adapter_model.safetensors) packed as one, put where its S3 URI says for the gate's "
        "archive check to read; repeat for several (default: an archive generated to match the candidate's "
        "max_lora_rank, base model and architecture)",
    )
    rehearse.add_argument(
        "--missing-adapter",
        action="append",
        default=[],
        metavar="NAME",
        help="leave adapter NAME's new version out of the emulated S3, to see the gate refuse a missing archive: "
        "the rehearsal then passes only if the gate stops on archive-missing for it, before any endpoint",
    )
    rehearse.add_argument(
        "--report",
        default=None,
        metavar="FILE",
        help="write the gate's report (the report.json its decision wrote) to FILE, for `advise --from-report` and "
        "`plan --calibrate`, and its report.html beside it (FILE's name with .html); with several candidates, one "
        "file each: FILE's name with the candidate before its suffix (default: none, no file written)",
    )
    rehearse.set_defaults(handler=cmd_rehearse)
