"""The rounds in the gate's report: how many of the budget, why they stopped, what the decision cost, and the path of
each benchmark check's interval after every look (a table and a plot), from the verdict's `rounds`
(optigate.gate.decision.looks.rounds_summary, its `path` the looks as each wrote them)."""

from __future__ import annotations

import html
import math
from collections.abc import Mapping, Sequence
from typing import Any

#: The report's plot of the looks.
ROUNDS_PLOT = "rounds_path.png"
#: Panels in the plot: the checks first undecided (they made the gate go on), then the others, up to this many.
MAX_PANELS = 6


def _money(value: Any) -> str:
    return "—" if value is None else f"${value:,.2f}"


def _minutes(value: Any) -> str:
    return "—" if value is None else f"{value:,.1f}"


def rounds_section(rounds: Mapping[str, Any]) -> str:
    """The headline (rounds of the budget, why they stopped, the cost) and each look's undecided checks."""
    done, budget = rounds.get("done"), rounds.get("max_rounds")
    confidence = rounds.get("confidence")
    level = f"{100 * confidence:.3g} %" if isinstance(confidence, int | float) else "—"
    cost = (
        f"{_minutes(rounds.get('benchmark_minutes'))} minutes of benchmark on both endpoints: "
        f"{_minutes(rounds.get('endpoint_minutes'))} endpoint-minutes, {_money(rounds.get('usd'))}"
    )
    rows = []
    for look in rounds.get("path") or []:
        undecided = [
            f"{c['name']}@c{c['concurrency']}" if c.get("concurrency") is not None else str(c["name"])
            for c in look.get("checks") or []
            if c.get("outcome") == "inconclusive"
        ]
        rows.append(
            f"<tr><td>{html.escape(str(look.get('rounds')))}</td><td>{html.escape(str(look.get('outcome')))}</td>"
            f"<td>{html.escape(', '.join(undecided) or 'none')}</td></tr>"
        )
    table = (
        "<table><tr><th>after round</th><th>benchmark checks</th><th>undecided</th></tr>" + "".join(rows) + "</table>"
        if rows
        else ""
    )
    return (
        f"<h2>Rounds</h2><p><b>{html.escape(str(done))} of at most {html.escape(str(budget))} rounds</b>: "
        f"{html.escape(str(rounds.get('why') or ''))}.</p><p>{html.escape(cost)}. Each look's intervals are at "
        f"{level} ({html.escape(str(rounds.get('looks')))} looks share the 5 %), so looking after every round "
        "decides falsely no more often than one look at 95 %.</p>" + table
    )


def _panels(path: Sequence[Mapping[str, Any]]) -> list[tuple[str, list[tuple[int, float, float, float]], float]]:
    """Each (check, level) with an interval in some look: its label, (round, low, estimate, high) per look, and its
    threshold; the undecided ones at the last look first."""
    series: dict[tuple[str, Any], list[tuple[int, float, float, float]]] = {}
    thresholds: dict[tuple[str, Any], float] = {}
    last_outcome: dict[tuple[str, Any], str] = {}
    for look in path:
        for check in look.get("checks") or []:
            values = (check.get("ci_low"), check.get("measured"), check.get("ci_high"), check.get("threshold"))
            if not all(isinstance(v, int | float) and math.isfinite(v) for v in values):
                continue
            key = (str(check["name"]), check.get("concurrency"))
            low, estimate, high, threshold = (float(v) for v in values)
            series.setdefault(key, []).append((int(look.get("rounds") or 0), low, estimate, high))
            thresholds[key] = threshold
            last_outcome[key] = str(check.get("outcome"))
    ordered = sorted(series, key=lambda key: (last_outcome[key] != "inconclusive", key[0], key[1] or 0))
    return [
        (f"{name}" + (f" at c={level}" if level is not None else ""), series[(name, level)], thresholds[(name, level)])
        for name, level in ordered[:MAX_PANELS]
    ]


def rounds_figure(path: Sequence[Mapping[str, Any]]):
    """Each check's interval after every look (a bar from low to high, the estimate a dot) against its threshold;
    None with fewer than two looks (a fixed size looks once: its checks table says it all) or no interval."""
    panels = _panels(path) if len(path) > 1 else []
    if not panels:
        return None
    from matplotlib.figure import Figure  # no pyplot: no global figure to close

    columns = min(3, len(panels))
    rows = math.ceil(len(panels) / columns)
    figure = Figure(figsize=(3.2 * columns, 2.6 * rows), layout="constrained")
    axes = figure.subplots(rows, columns, squeeze=False)
    for axis, (label, points, threshold) in zip(axes.flat, panels, strict=False):
        xs = [p[0] for p in points]
        axis.vlines(xs, [p[1] for p in points], [p[3] for p in points], color="#1f77b4", linewidth=2)
        axis.plot(xs, [p[2] for p in points], "o", color="#1f77b4", markersize=4)
        axis.axhline(threshold, color="#b00020", linestyle=(0, (4, 2)), linewidth=1.1)
        axis.set_title(label, fontsize=9)
        axis.set_xlabel("after round", fontsize=8)
        axis.set_xticks(xs)
        axis.tick_params(labelsize=8)
    for axis in list(axes.flat)[len(panels) :]:
        axis.set_visible(False)
    figure.suptitle("Each look's interval against its threshold (dashed)", fontsize=10)
    return figure
