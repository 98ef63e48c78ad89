# Over 400 lines: every benchmark plot shares one style, palette and set of axis helpers.
"""The benchmark plots, drawn so a reviewer can read them in seconds.

- One colour per concurrency level, one line style per side (baseline solid, candidate dashed,
  further sides dotted / dash-dot): a level's pair of curves shares its colour. With one level only (a replay, one
  --concurrency) there is no level to pair: each side has its own colour as well as its line style.
- Axes span the data's bulk: values beyond an upper fence (pooled p95 + 3 × (p95 − p50)) are
  outliers; the axis stops before them and the plot says how many points lie beyond it.
- The legend sits below the axes, never on the data.
- Throughput vs concurrency has its ticks at the measured levels and a 95 % interval bar per side
  and level (two-level bootstrap of :mod:`optigate.stats`, the rule `bench compare` uses:
  blocks, then one-second buckets inside them).
- A range that is tiny next to its values (0.02 ms at 15 ms) is drawn with a minimum span, so
  noise does not look like a trend.

Figures are :class:`matplotlib.figure.Figure` objects (no pyplot, no global state); :func:`png`
renders one. Each side is ``(label, results)``: one result file of `optigate bench --json`, or a
list of them (blocks: runs of the same workload), whose runs are pooled per level.
"""

from __future__ import annotations

import io
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from optigate import stats
from optigate.bench.plot_palette import Palette, side_style

#: An axis's upper fence: the pooled p95 plus this many times its distance from the median.
FENCE_PERCENTILE = 95
FENCE_SPREADS = 3.0
#: An axis spans at least this share of its values' magnitude.
MIN_RELATIVE_SPAN = 0.2
FIGSIZE = (8.4, 4.6)
DPI = 110
PLOT_NAMES = ("ttft_cdf.png", "itl_cdf.png", "throughput_vs_concurrency.png", "latency_vs_throughput.png")

Results = Mapping[str, Any] | Sequence[Mapping[str, Any]]


@dataclass(frozen=True)
class Side:
    """One side of a report: its label and the runs of each concurrency level (one per block)."""

    label: str
    levels: dict[int, list[Mapping[str, Any]]]

    @classmethod
    def of(cls, label: str, results: Results) -> Side:
        files = [results] if isinstance(results, Mapping) else list(results)
        levels: dict[int, list[Mapping[str, Any]]] = {}
        for data in files:
            for run in data.get("runs") or []:
                levels.setdefault(int(run["concurrency"]), []).append(run)
        return cls(label, dict(sorted(levels.items())))

    def samples(self, level: int, metric: str) -> np.ndarray:
        """A level's samples of one metric, its blocks pooled (empty when the runs carry none)."""
        values = [v for run in self.levels.get(level, []) for v in (run.get("samples") or {}).get(metric, [])]
        return np.asarray(values, dtype=float)


def sides_of(results: Sequence[tuple[str, Results]]) -> list[Side]:
    return [Side.of(label, data) for label, data in results]


def levels_of(sides: Sequence[Side]) -> list[int]:
    return sorted({level for side in sides for level in side.levels})


# --------------------------------------------------------------------------- axis rules


@dataclass(frozen=True)
class Bulk:
    """An axis's upper limit from the data's bulk, and what it leaves out."""

    upper: float
    hidden: int  # values beyond `upper`
    largest: float

    def note(self, unit: str = "ms") -> str:
        if not self.hidden:
            return ""
        points = "point" if self.hidden == 1 else "points"
        return (
            f"{self.hidden} {points} beyond {quantity(self.upper, unit)} not shown "
            f"(largest {quantity(self.largest, unit)})"
        )


def bulk(values: np.ndarray) -> Bulk:
    """Everything, unless values lie beyond the upper fence ``p95 + max(3 × (p95 − p50), p50 / 2)``
    (pooled; robust while outliers are under 5 % of the points): then up to the largest value inside
    the fence (a little padding), with the values beyond it counted."""
    data = np.asarray(values, dtype=float)
    data = data[np.isfinite(data)]
    if not len(data):
        return Bulk(math.nan, 0, math.nan)
    low, top = float(data.min()), float(data.max())
    p50, p95 = (float(v) for v in np.percentile(data, [50, FENCE_PERCENTILE]))
    fence = p95 + max(FENCE_SPREADS * (p95 - p50), abs(p50) / 2)
    if top <= fence:
        return Bulk(top, 0, top)
    edge = float(data[data <= fence].max())
    upper = edge + 0.03 * max(edge - low, abs(edge) * 0.01)
    return Bulk(upper, int((data > upper).sum()), top)


def span(low: float, high: float, relative: float = MIN_RELATIVE_SPAN) -> tuple[float, float]:
    """Axis limits around [low, high] spanning at least `relative` of the values' magnitude, padded."""
    centre = (low + high) / 2
    width = max(high - low, relative * abs(centre), 1e-9)
    pad = 0.08 * width
    lower = centre - width / 2 - pad
    return (max(lower, 0.0) if low >= 0 else lower), centre + width / 2 + pad


def quantity(value: float, unit: str = "ms") -> str:
    if unit == "ms" and abs(value) >= 1000:
        return f"{value / 1000:,.1f} s"
    if unit == "ms":
        return f"{value:,.0f} ms" if abs(value) >= 100 else f"{value:,.1f} ms"
    return f"{value:,.3g} {unit}"


# --------------------------------------------------------------------------- legend


def _legend(figure, sides: Sequence[Side], palette: Palette, extra: Sequence[Any] = ()) -> None:
    """To the right of the axes, one column: the levels' colours, then the sides' line styles (and colours, when each
    side has its own; long labels wrapped), then any extra entries."""
    import textwrap

    from matplotlib.lines import Line2D

    handles = [
        Line2D([], [], color=colour, linewidth=0 if palette.sides else 3, label=f"c={level}")
        for level, colour in palette.levels.items()
    ]
    handles += [
        Line2D(
            [],
            [],
            color=palette.side_colour(index),
            linestyle=side_style(index),
            linewidth=2.2 if palette.sides else 1.6,
            label=textwrap.fill(side.label, 24),
        )
        for index, side in enumerate(sides)
    ]
    handles += list(extra)
    figure.legend(handles=handles, loc="outside right upper", fontsize=8, frameon=False, handlelength=2.6)


def _figure(title: str):
    from matplotlib.figure import Figure

    figure = Figure(figsize=FIGSIZE, dpi=DPI, layout="constrained")
    axis = figure.add_subplot()
    axis.set_title(title, fontsize=11)
    axis.grid(alpha=0.3)
    return figure, axis


def _note(axis, text: str, corner: str = "lower right") -> None:
    """A note in a corner of the plot (a CDF's lower right is empty: its curves rise on the left)."""
    if text:
        top = corner.startswith("upper")
        axis.text(
            0.99 if corner.endswith("right") else 0.01,
            0.97 if top else 0.03,
            text,
            transform=axis.transAxes,
            ha="right" if corner.endswith("right") else "left",
            va="top" if top else "bottom",
            fontsize=8,
            color="0.25",
            bbox={"facecolor": "white", "edgecolor": "0.8", "alpha": 0.9, "boxstyle": "round,pad=0.3"},
        )


def _empty(axis, text: str) -> None:
    axis.text(0.5, 0.5, text, transform=axis.transAxes, ha="center", va="center", color="0.4")


# --------------------------------------------------------------------------- figures


def cdf_figure(sides: Sequence[Side], metric: str, title: str, xlabel: str):
    """Empirical CDFs of one metric: a curve per side and level (blocks pooled)."""
    figure, axis = _figure(title)
    levels = levels_of(sides)
    palette = Palette.of(levels_of(sides), len(sides))
    drawn = []
    for index, side in enumerate(sides):
        for level in levels:
            values = np.sort(side.samples(level, metric))
            if not len(values):
                continue
            fraction = np.arange(1, len(values) + 1) / len(values)
            axis.plot(
                values,
                fraction,
                color=palette.colour(index, level),
                linestyle=side_style(index),
                linewidth=1.5,
                drawstyle="steps-post",
                label=f"{side.label} c={level}",
                gid=f"side{index}:c{level}",
            )
            drawn.append(values)
    axis.set(xlabel=xlabel, ylabel="fraction of samples ≤ x", ylim=(0, 1.02))
    if not drawn:
        _empty(axis, "no samples recorded (results written without raw samples, or every request failed)")
    else:
        pooled = np.concatenate(drawn)
        limits = bulk(pooled)
        low = float(pooled.min())
        axis.set_xlim(max(0.0, low - 0.03 * (limits.upper - low)), limits.upper)
        _note(axis, limits.note())
    _legend(figure, sides, palette)
    return figure


def throughput_interval(runs: Sequence[Mapping[str, Any]]) -> tuple[float, float, float] | None:
    """A side's output tokens/s at one level (the mean of its blocks') and its 95 % interval: the
    two-level bootstrap `bench compare` uses (blocks, then one-second buckets), under the same
    minimum of buckets; None when the runs carry no samples or too few buckets."""
    from optigate.bench.core.metrics import RunSamples
    from optigate.bench.throughput import MIN_THROUGHPUT_BUCKETS, throughput_buckets

    if not runs or any("samples" not in run for run in runs):
        return None
    blocks = [RunSamples.from_result(dict(run)) for run in runs]
    buckets = [throughput_buckets(block) for block in blocks]
    if sum(len(b) for b in buckets) < MIN_THROUGHPUT_BUCKETS or any(not len(b) for b in buckets):
        return None
    points = [float(run["output_tokens_per_s"]) for run in runs]
    point, replicates = stats.two_level_mean_replicates(points, buckets)
    low, high = stats.percentile_interval(replicates)
    return point, low, high


def throughput_figure(sides: Sequence[Side]):
    """Output tokens/s at each level, ticks at the levels, a 95 % interval bar per side and level."""
    from matplotlib.ticker import FixedLocator, NullLocator

    figure, axis = _figure("Throughput vs concurrency (bars: 95 % interval)")
    levels = levels_of(sides)
    palette = Palette.of(levels_of(sides), len(sides))
    logarithmic = len(levels) > 1 and levels[0] > 0 and levels[-1] / levels[0] >= 4
    without = 0
    tops = [0.0]
    for index, side in enumerate(sides):
        shift = (index - (len(sides) - 1) / 2) * 0.06
        xs, ys = [], []
        for level in side.levels:
            runs = side.levels[level]
            x = level * (1 + shift) if logarithmic else level + shift * max(1.0, (levels[-1] - levels[0]) / 4)
            interval = throughput_interval(runs)
            y = interval[0] if interval else float(np.mean([run["output_tokens_per_s"] for run in runs]))
            xs.append(x)
            ys.append(y)
            tops.append(y if interval is None else interval[2])
            if interval is None:
                without += 1
                axis.plot([x], [y], marker="o", color=palette.colour(index, level), markerfacecolor="white", zorder=3)
                continue
            axis.errorbar(
                [x],
                [y],
                yerr=[[y - interval[1]], [interval[2] - y]],
                fmt="o",
                color=palette.colour(index, level),
                capsize=4,
                elinewidth=1.6,
                zorder=3,
                label=f"side{index}:c{level}",  # the legend is built from its own handles
            )
        colour = palette.side_colour(index)
        axis.plot(xs, ys, color=colour, linestyle=side_style(index), linewidth=1.3, zorder=2, label=side.label)
    if logarithmic:
        axis.set_xscale("log")
    axis.xaxis.set_major_locator(FixedLocator(levels))
    axis.xaxis.set_minor_locator(NullLocator())
    axis.set_xticklabels([str(level) for level in levels])
    if levels:
        low, high = levels[0], levels[-1]
        axis.set_xlim(low / 1.25, high * 1.25) if logarithmic else axis.set_xlim(low - 0.6, high + 0.6)
    axis.set(xlabel="concurrency (requests in flight)", ylabel="output tokens/s", ylim=(0, max(tops) * 1.12 or 1))
    if without:
        _note(
            axis,
            f"{without} hollow point(s): no interval (fewer than 5 one-second buckets or no raw samples)",
            "upper left",
        )
    _legend(figure, sides, palette)
    return figure


def _percentile(side: Side, level: int, metric: str, q: float) -> float:
    """A side's figure at a level: the reported percentile of one run, the pooled one of several blocks."""
    runs = side.levels[level]
    key = f"p{q:g}"
    if len(runs) == 1 and key in (runs[0].get(metric) or {}):
        value = runs[0][metric][key]
        return math.nan if value is None else float(value)
    values = side.samples(level, metric)
    return float(np.percentile(values, q)) if len(values) else math.nan


def latency_throughput_figure(sides: Sequence[Side]):
    """Time per output token (p50 and p99) against output tokens/s, one point per level."""
    from matplotlib.lines import Line2D

    figure, axis = _figure("Latency vs throughput")
    palette = Palette.of(levels_of(sides), len(sides))
    xs_all, ys_all = [], []
    for index, side in enumerate(sides):
        for q, marker, alpha in ((50, "o", 1.0), (99, "^", 0.55)):
            xs, ys = [], []
            for level, runs in side.levels.items():
                x = float(np.mean([run["output_tokens_per_s"] for run in runs]))
                y = _percentile(side, level, "tpot_ms", q)
                if not (math.isfinite(x) and math.isfinite(y)):
                    continue
                xs.append(x)
                ys.append(y)
                colour = palette.colour(index, level)
                axis.plot([x], [y], marker=marker, color=colour, linestyle="none", alpha=alpha, zorder=3)
            colour = palette.side_colour(index)
            axis.plot(xs, ys, color=colour, linestyle=side_style(index), linewidth=1.2, alpha=alpha, zorder=2)
            xs_all += xs
            ys_all += ys
    axis.set(xlabel="output tokens/s", ylabel="time per output token (ms)")
    if xs_all:
        axis.set_xlim(*span(min(xs_all), max(xs_all)))
        axis.set_ylim(*span(min(ys_all), max(ys_all)))
    else:
        _empty(axis, "no successful request")
    extra = [
        Line2D([], [], color="0.4", marker="o", linestyle="none", label="TPOT p50"),
        Line2D([], [], color="0.4", marker="^", linestyle="none", alpha=0.55, label="TPOT p99"),
    ]
    _legend(figure, sides, palette, extra)
    return figure


#: The gate's Pareto view (drawn by the gate beside the four plots, not by `optigate bench`).
PARETO_NAME = "pareto_throughput_vs_p99_ttft.png"


def pareto_figure(sides: Sequence[Side], *, ttft_budget_ms: float | None = None, instances: int = 1):
    """Output tokens/s per instance against p99 TTFT, one point per level and side, each side's points joined in
    level order: a point further right and lower is better, and the budget line shows how far each side's load
    goes within the SLO."""
    from matplotlib.lines import Line2D

    figure, axis = _figure("Throughput per instance vs p99 TTFT (Pareto view)")
    palette = Palette.of(levels_of(sides), len(sides))
    xs_all, ys_all = [], []
    for index, side in enumerate(sides):
        xs, ys = [], []
        for level, runs in side.levels.items():
            x = float(np.mean([run["output_tokens_per_s"] for run in runs])) / max(1, instances)
            y = _percentile(side, level, "ttft_ms", 99)
            if not (math.isfinite(x) and math.isfinite(y)):
                continue
            xs.append(x)
            ys.append(y)
            axis.plot([x], [y], marker="o", color=palette.colour(index, level), linestyle="none", zorder=3)
        axis.plot(xs, ys, color=palette.side_colour(index), linestyle=side_style(index), linewidth=1.3, zorder=2)
        xs_all += xs
        ys_all += ys
    extra = []
    if ttft_budget_ms is not None:
        axis.axhline(ttft_budget_ms, color="#b00020", linestyle=(0, (4, 2)), linewidth=1.2, zorder=1)
        extra.append(Line2D([], [], color="#b00020", linestyle=(0, (4, 2)), label="p99 TTFT budget"))
        ys_all.append(ttft_budget_ms)
    per = "" if instances <= 1 else f" ({instances} instances per endpoint)"
    axis.set(xlabel=f"output tokens/s per instance{per}", ylabel="p99 TTFT (ms)")
    if xs_all:
        axis.set_xlim(*span(min(xs_all), max(xs_all)))
        axis.set_ylim(*span(min(ys_all), max(ys_all)))
    else:
        _empty(axis, "no successful request")
    _legend(figure, sides, palette, extra)
    return figure


def figures(results: Sequence[tuple[str, Results]]) -> dict[str, Any]:
    """The four plots by file name, for sides ``(label, results)`` (baseline first)."""
    sides = sides_of(results)
    return {
        "ttft_cdf.png": cdf_figure(sides, "ttft_ms", "Time to first token (CDF)", "TTFT (ms)"),
        "itl_cdf.png": cdf_figure(sides, "itl_ms", "Inter-token latency (CDF, per token)", "ITL (ms)"),
        "throughput_vs_concurrency.png": throughput_figure(sides),
        "latency_vs_throughput.png": latency_throughput_figure(sides),
    }


def png(figure) -> bytes:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=DPI)
    return buffer.getvalue()
