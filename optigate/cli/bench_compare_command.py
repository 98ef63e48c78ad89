"""`optigate bench compare`: baseline vs candidate benchmark results, per metric and concurrency level."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from rich.table import Table

from optigate.cli.errors import CliError, UsageError
from optigate.cli.output import console, write_json
from optigate.cli.parser import RawHelpFormatter

if TYPE_CHECKING:  # numpy stays out of `optigate --help`
    from optigate.bench.goodput import Slo

COMPARE_EXIT_CODES = """exit codes:
  0  no metric is worse (and, with --decide, every decided metric is better or equivalent)
  1  a metric is worse: its interval excludes zero and its estimate lies beyond the margin on the
     regressing side, or the candidate failed every request at a level where the baseline did not
  2  usage or input error: unreadable files, or workloads that differ (see --allow-different-workloads)
  3  no metric is worse, but with --decide a decided metric is inconclusive (the data cannot tell),
     or at some level neither side completed a request (nothing was measured there)

Verdicts: better / worse (the interval excludes zero and the estimate is beyond the margin),
equivalent (the interval lies inside the margin), inconclusive (anything else). Intervals resample
runs (blocks), then requests inside them, and assume at least 2 % run-to-run drift; Holm's method
keeps the chance of any false better/worse across everything compared at 5 %. With one run a side
only changes of about 9 % are labelled, with three about 5 %; equivalence within 3 % takes about
fifteen runs a side."""


def _read_results(paths: str, side: str) -> list[tuple[str, dict]]:
    """Each result file of a side, checked (optigate.bench.result_file) so that comparing it cannot fail half-way."""
    from optigate.bench.result_file import ResultFileError, read_result_file

    out = []
    written_by = "give a file that `optigate bench --json` wrote"
    for path in (p.strip() for p in paths.split(",") if p.strip()):
        try:
            data = read_result_file(path)
        except FileNotFoundError:
            raise UsageError(f"{side} {path}: no such file; {written_by}") from None
        except OSError as error:
            raise UsageError(f"{side} {path}: cannot read it ({error.strerror or error}); {written_by}") from error
        except ResultFileError as error:
            raise UsageError(f"{side} {error}; {written_by} (or benchmark again)") from None
        out.append((path, data))
    if not out:
        raise UsageError(f"no {side} result file given; {written_by}")
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


def _slo(text: str | None) -> Slo | None:
    from optigate.bench.goodput import Slo

    if not text:
        return None
    try:
        return Slo.parse(text)
    except ValueError as error:
        raise UsageError(f"--slo {text}: {error}") from error


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


def _verdict_cell(verdict: str) -> str:
    """A verdict in its colour: better green, worse red, equivalent cyan, inconclusive dim."""
    colour = {"better": "green", "worse": "red", "equivalent": "cyan"}.get(verdict, "dim")
    return f"[{colour}]{verdict}[/{colour}]"


def _delta_table(title: str, deltas: list, sides: tuple[str, str] = ("baseline", "candidate")) -> Table:
    """One row per delta; deltas of one adapter's traffic name it in an `adapter` column. `sides`: the two
    figures' column names (`--label`, else baseline and candidate)."""
    import math

    from rich import box

    table = Table(title=title, box=box.SIMPLE_HEAD, padding=(0, 1))
    per_adapter = any(d.adapter is not None for d in deltas)
    columns = ("metric", "stat", "c", *sides, "delta", "interval", "verdict")
    for column in (("adapter",) if per_adapter else ()) + columns:
        # Names whole (never folded mid-word); figures wrap at their spaces when the terminal is narrow.
        whole = column in ("adapter", "metric", "stat", "verdict")
        table.add_column(column, justify="left" if whole else "right", no_wrap=whole)
    for d in deltas:
        relative = f" ({d.relative:+.1%})" if math.isfinite(d.relative) else ""
        interval = f"[{d.low:+,.2f}, {d.high:+,.2f}] {d.confidence:.2%}" if math.isfinite(d.low) else (d.note or "–")
        table.add_row(
            *((d.adapter,) if per_adapter else ()),
            d.metric,
            d.statistic,
            str(d.concurrency),
            _figure(d.baseline, "baseline failed" in d.note or "both" in d.note),
            _figure(d.candidate, "candidate failed" in d.note or "both" in d.note),
            f"{d.delta:+,.2f}{relative}" if math.isfinite(d.delta) else "–",
            interval,
            _verdict_cell(d.verdict),
        )
    return table


# Over 80 lines: a command read top to bottom: inputs, like-with-like checks, verdicts, outputs, exit code.
def cmd_bench_compare(args: argparse.Namespace) -> int:
    """Baseline vs candidate per metric and concurrency level: better, worse, equivalent or inconclusive."""

    from optigate.bench.compare import compare_adapters, compare_levels, error_rate, levels_of, workload_difference
    from optigate.bench.html_report import side_labels, write_report

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
    refused = [
        f"{label} c={run.get('concurrency')}: {run['refused']}"
        for label, data in labelled
        for run in data.get("runs", [])
        if run.get("refused")
    ]
    if refused:  # a replay that fell behind its schedule measured the client (optigate.bench.core.runner)
        raise CliError(f"cannot judge: the client shaped the load in {refused[0]}", exit_code=3)
    base_levels = levels_of([data for _, data in baselines])
    cand_levels = levels_of([data for _, data in candidates])
    if args.rounds:
        return _compare_rounds(args, baselines, candidates, base_levels, cand_levels)
    slo = _slo(args.slo)
    deltas = compare_levels(base_levels, cand_levels, margin_pct=_margins(args), slo=slo)
    if not deltas:
        raise UsageError(
            f"the two sides share no concurrency level (baseline {sorted(base_levels)}, candidate "
            f"{sorted(cand_levels)}); benchmark both at the same --concurrency"
        )
    blocks = f"{len(baselines)} vs {len(candidates)} run(s) per side"
    # The sides' names as --label gives them (report and terminal alike), else their roles.
    sides = (str(args.label[0]), str(args.label[1])) if args.label else ("baseline", "candidate")
    versus = f"{sides[1]} (candidate) vs {sides[0]} (baseline)" if args.label else "candidate vs baseline"
    console.print(
        _delta_table(f"{versus} ({blocks}; margin ±{args.margin_pct:g} %, Holm over all deltas)", deltas, sides)
    )
    # An inference-component endpoint's results are split by adapter: each adapter compared on its own.
    adapter_deltas = compare_adapters(base_levels, cand_levels, margin_pct=_margins(args))
    if adapter_deltas:
        title = "per adapter (Holm over every per-adapter delta)"
        console.print(_delta_table(title, adapter_deltas, sides))
    rates = {}
    for level in sorted(set(base_levels) & set(cand_levels)):
        rate = {"baseline": error_rate(base_levels[level]), "candidate": error_rate(cand_levels[level])}
        rates[level] = rate
        shown = ", ".join(
            f"{name} {'–' if r is None else f'{r:.1%}'}" for name, r in zip(sides, rate.values(), strict=True)
        )
        console.print(f"c={level}: error rate {shown}")
    worse = [d for d in deltas + adapter_deltas if d.verdict == "worse"]
    decided = _decided(deltas, args.decide)
    undecided = [d for d in decided if d.verdict == "inconclusive"]
    # Fail closed: a level where neither side completed a request measured nothing, so it passes nothing.
    unmeasured = [level for level, rate in rates.items() if all(r is None or r >= 1.0 for r in rate.values())]
    code = 1 if worse else 3 if undecided or unmeasured else 0
    if unmeasured and not worse:
        levels = ", ".join(f"c={level}" for level in unmeasured)
        console.print(
            f"[yellow]inconclusive[/yellow]: neither side completed a request at {levels}; "
            "nothing was measured there (exit 3): fix the endpoints and benchmark again"
        )
    if worse:
        console.print(f"[red]worse[/red]: {len(worse)} metric(s) regressed by more than the margin (exit 1)")
    elif undecided:
        console.print(f"[yellow]inconclusive[/yellow]: {len(undecided)} decided metric(s) cannot be told (exit 3)")
    if args.json:
        payload = {
            "deltas": [d.to_dict() for d in deltas],
            **({"adapter_deltas": [d.to_dict() for d in adapter_deltas]} if adapter_deltas else {}),
            "error_rates": {str(level): rate for level, rate in rates.items()},
            "baseline_runs": [path for path, _ in baselines],
            "candidate_runs": [path for path, _ in candidates],
            "workload_difference": difference,
            "exit_code": code,
        }
        write_json(args.json, payload, indent=2)
    if args.report:
        names = side_labels(baselines, candidates, args.label)
        results = [(names[0], [data for _, data in baselines]), (names[1], [data for _, data in candidates])]
        console.print(f"wrote {write_report(results, args.report, deltas, adapter_deltas, slo)}")
    return code


def _round_table(title: str, deltas: list) -> Table:
    """One row per figure: the candidate's change over the twin and its anytime-valid interval, in percent (goodput:
    in points)."""
    import math

    from rich import box

    from optigate.bench.compare import GOODPUT

    table = Table(title=title, box=box.SIMPLE_HEAD, padding=(0, 1))
    for column in ("metric", "stat", "c", "rounds", "change", "interval", "verdict"):
        whole = column in ("metric", "stat", "verdict")
        table.add_column(column, justify="left" if whole else "right", no_wrap=whole)
    for d in deltas:
        unit = " pts" if d.metric == GOODPUT else " %"  # goodput: candidate minus baseline share, in points
        bounded = math.isfinite(d.low_pct) and math.isfinite(d.high_pct)
        interval = (
            f"[{d.low_pct:+.1f}{unit}, {d.high_pct:+.1f}{unit}] {d.confidence:.2%}" if bounded else "cannot bound yet"
        )
        change = f"{d.change_pct:+.1f}{unit}" if math.isfinite(d.change_pct) else "–"
        table.add_row(
            d.metric,
            d.statistic,
            str(d.concurrency),
            str(d.rounds),
            change,
            interval,
            _verdict_cell(d.verdict),
        )
    return table


def _compare_rounds(
    args: argparse.Namespace,
    baselines: list[tuple[str, dict]],
    candidates: list[tuple[str, dict]],
    base_levels: dict,
    cand_levels: dict,
) -> int:
    """`bench compare --rounds`: the files paired in order as rounds, with anytime-valid intervals
    (optigate.bench.sequential)."""
    from optigate.bench.sequential import compare_rounds

    if len(baselines) != len(candidates):
        raise UsageError(
            f"--rounds pairs the files in order, a baseline run then a candidate run: give as many of each "
            f"(got {len(baselines)} baseline and {len(candidates)} candidate)"
        )
    if args.report:
        raise UsageError("--rounds writes no HTML report yet: leave out --report (--json keeps the deltas)")
    deltas = compare_rounds(base_levels, cand_levels, margin_pct=_margins(args), slo=_slo(args.slo))
    if not deltas:
        raise UsageError(
            f"the two sides share no concurrency level (baseline {sorted(base_levels)}, candidate "
            f"{sorted(cand_levels)}); benchmark both at the same --concurrency"
        )
    title = (
        f"candidate vs baseline, {len(baselines)} round(s) (margin ±{args.margin_pct:g} %, anytime-valid intervals, "
        "Holm over all figures)"
    )
    console.print(_round_table(title, deltas))
    worse = [d for d in deltas if d.verdict == "worse"]
    undecided = [d for d in _decided(deltas, args.decide) if not d.decided]
    code = 1 if worse else 3 if undecided else 0
    if worse:
        console.print(f"[red]worse[/red]: {len(worse)} figure(s) regressed by more than the margin (exit 1)")
    elif undecided:
        console.print(
            f"[yellow]inconclusive[/yellow]: {len(undecided)} decided figure(s) cannot be told yet (exit 3): "
            "add a round (a baseline run, then a candidate run) and compare again; the intervals stay valid"
        )
    if args.json:
        payload = {
            "rounds": len(baselines),
            "deltas": [d.to_dict() for d in deltas],
            "baseline_runs": [path for path, _ in baselines],
            "candidate_runs": [path for path, _ in candidates],
            "exit_code": code,
        }
        write_json(args.json, payload, indent=2)
    return code


def add_compare_parser(subcommands: argparse._SubParsersAction) -> None:
    """`bench compare`, a subcommand of `bench` (whose handler hands it on to cmd_bench_compare)."""
    compare_parser = subcommands.add_parser(
        "compare",
        help="baseline vs candidate: better, worse, equivalent or inconclusive per metric",
        description="Compare benchmark results. Each side is one result file of `optigate bench --json`,\n"
        "or several separated by commas: runs of the same workload, ideally interleaved A B A B A B.\n"
        "Each run is a block, and run-to-run drift widens the intervals instead of deciding.",
        epilog=COMPARE_EXIT_CODES,
        formatter_class=RawHelpFormatter,
    )
    compare_parser.add_argument(
        "baseline", help="baseline result file(s) of `optigate bench --json`, comma-separated: one run per file"
    )
    compare_parser.add_argument(
        "candidate", help="candidate result file(s) of `optigate bench --json`, comma-separated: one run per file"
    )
    compare_parser.add_argument(
        "--margin-pct", type=float, default=3.0, help="practical margin, percent of the baseline (default: 3)"
    )
    compare_parser.add_argument(
        "--margin",
        action="append",
        metavar="METRIC=PCT",
        help="a metric's own margin, e.g. itl_ms=5 (repeatable; default: --margin-pct for every metric)",
    )
    compare_parser.add_argument(
        "--decide",
        nargs="?",
        const="all",
        metavar="METRICS",
        help="ask for a decision on these metrics (all, or e.g. itl_ms,ttft_ms:p99): exit 3 when one is inconclusive"
        " (default: no decision; bare --decide: all)",
    )
    compare_parser.add_argument(
        "--allow-different-workloads",
        action="store_true",
        help="compare even when prompt tokens, output tokens, levels, payload schema or mode differ",
    )
    compare_parser.add_argument("--report", help="write both curves and the deltas into this folder (default: none)")
    compare_parser.add_argument(
        "--label",
        nargs=2,
        metavar=("BASELINE", "CANDIDATE"),
        help="the sides' names in the terminal and the report (default: baseline and candidate in the terminal; in the "
        "report each side's `bench --label`, else its endpoint, files' names if alike)",
    )
    compare_parser.add_argument(
        "--slo",
        help="compare goodput too: the share of requests within these budgets, e.g. p99_ttft_ms=800,p99_itl_ms=60"
        " (metric goodput_share, higher is better; default: not compared)",
    )
    compare_parser.add_argument(
        "--rounds",
        action="store_true",
        help="pair the files in order as rounds (baseline run i, then candidate run i) and give anytime-valid "
        "intervals: valid however often you compare again as rounds are added; the first figure is decided at the "
        "earliest in round 5 with one level, round 6 with three (Holm over all figures) (default: off, the runs are "
        "blocks of a fixed-size comparison)",
    )
    compare_parser.add_argument("--json", help="write the deltas here (default: not written)")
