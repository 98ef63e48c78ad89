"""A report folder: PNG plots (TTFT and ITL CDFs, throughput vs concurrency, latency vs
throughput) and an HTML page with the numbers, for one result file or a comparison."""

from __future__ import annotations

import html
import math
from pathlib import Path
from typing import Any

from optigate.bench.compare import Delta

PLOTS = ("ttft_cdf.png", "itl_cdf.png", "throughput_vs_concurrency.png", "latency_vs_throughput.png")


def _cdf(axis, values: list[float], label: str, style: str) -> None:
    import numpy as np

    if not values:
        return
    ordered = np.sort(np.asarray(values))
    axis.plot(ordered, np.arange(1, len(ordered) + 1) / len(ordered), style, label=label, linewidth=1.4)


def write_plots(results: list[tuple[str, dict[str, Any]]], folder: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    folder.mkdir(parents=True, exist_ok=True)
    styles = ["-", "--", ":", "-."]
    written = []
    for metric, name, title in (
        ("ttft_ms", "ttft_cdf.png", "Time to first token"),
        ("itl_ms", "itl_cdf.png", "Inter-token latency (per token)"),
    ):
        figure, axis = plt.subplots(figsize=(7, 4.2))
        for index, (label, data) in enumerate(results):
            for run in data["runs"]:
                _cdf(
                    axis,
                    run.get("samples", {}).get(metric, []),
                    f"{label} c={run['concurrency']}",
                    styles[index % len(styles)],
                )
        axis.set(title=title, xlabel="ms", ylabel="fraction of samples ≤ x", ylim=(0, 1.01))
        axis.grid(alpha=0.3)
        axis.legend(fontsize=7, ncol=2)
        figure.tight_layout()
        figure.savefig(folder / name, dpi=110)
        plt.close(figure)
        written.append(folder / name)

    figure, axis = plt.subplots(figsize=(7, 4.2))
    for label, data in results:
        runs = sorted(data["runs"], key=lambda r: r["concurrency"])
        axis.plot([r["concurrency"] for r in runs], [r["output_tokens_per_s"] for r in runs], "o-", label=label)
    axis.set(title="Throughput vs concurrency", xlabel="concurrency", ylabel="output tokens/s")
    axis.set_xscale("log", base=2)
    axis.grid(alpha=0.3)
    axis.legend()
    figure.tight_layout()
    figure.savefig(folder / "throughput_vs_concurrency.png", dpi=110)
    plt.close(figure)
    written.append(folder / "throughput_vs_concurrency.png")

    figure, axis = plt.subplots(figsize=(7, 4.2))
    for label, data in results:
        runs = sorted(data["runs"], key=lambda r: r["concurrency"])
        throughput = [r["output_tokens_per_s"] for r in runs]
        for statistic, style in (("p50", "o-"), ("p99", "s--")):
            axis.plot(throughput, [r["tpot_ms"][statistic] for r in runs], style, label=f"{label} TPOT {statistic}")
        for run in runs:
            axis.annotate(
                f"c={run['concurrency']}",
                (run["output_tokens_per_s"], run["tpot_ms"]["p50"]),
                fontsize=7,
                xytext=(3, 3),
                textcoords="offset points",
            )
    axis.set(title="Latency vs throughput", xlabel="output tokens/s", ylabel="time per output token (ms)")
    axis.grid(alpha=0.3)
    axis.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(folder / "latency_vs_throughput.png", dpi=110)
    plt.close(figure)
    written.append(folder / "latency_vs_throughput.png")
    return written


def _fmt(value: Any, digits: int = 1) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:,.{digits}f}"
    return html.escape(str(value))


def summary_rows(data: dict[str, Any]) -> list[list[str]]:
    rows = []
    for run in sorted(data["runs"], key=lambda r: r["concurrency"]):
        rows.append(
            [
                str(run["concurrency"]),
                str(run["requests"]),
                _fmt(run["ttft_ms"]["p50"]),
                _fmt(run["ttft_ms"]["p99"]),
                _fmt(run["itl_ms"]["p50"], 2),
                _fmt(run["itl_ms"]["p99"], 2),
                _fmt(run["tpot_ms"]["p50"], 2),
                _fmt(run["output_tokens_per_s"]),
                _fmt(run["requests_per_s"], 2),
                _fmt(run["achieved_concurrency"], 2),
                _fmt(run["tokens_per_chunk"]["mean"], 2),
                _fmt(None if run.get("coalesced_frame_share") is None else run["coalesced_frame_share"] * 100),
                ", ".join(f"{k}: {v}" for k, v in run["errors"].items()) or "–",
            ]
        )
    return rows


SUMMARY_HEADER = [
    "concurrency",
    "requests",
    "TTFT p50 ms",
    "TTFT p99 ms",
    "ITL p50 ms",
    "ITL p99 ms",
    "TPOT p50 ms",
    "output tok/s",
    "req/s",
    "achieved conc.",
    "tokens/frame",
    "coalesced %",
    "errors",
]


def _table(header: list[str], rows: list[list[str]]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{cell}</td>" for cell in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def delta_rows(deltas: list[Delta]) -> list[list[str]]:
    rows = []
    for d in deltas:
        css = {"better": "better", "worse": "worse", "equivalent": "equivalent"}.get(d.verdict, "same")
        finite = math.isfinite(d.low) and math.isfinite(d.high)
        relative = f" ({d.relative:+.1%})" if math.isfinite(d.relative) else ""
        rows.append(
            [
                html.escape(d.metric),
                d.statistic,
                str(d.concurrency),
                _figure(d.baseline, d.note, "baseline"),
                _figure(d.candidate, d.note, "candidate"),
                f"{d.delta:+,.2f}{relative}" if math.isfinite(d.delta) else "–",
                f"[{d.low:+,.2f}, {d.high:+,.2f}] at {d.confidence:.2%}" if finite else html.escape(d.note or "–"),
                f"±{d.margin_pct:g} %",
                f'<span class="{css}">{d.verdict}</span>',
            ]
        )
    return rows


def _figure(value: float, note: str, side: str) -> str:
    """A side's figure; "failed" when every request of that side failed (never a number then)."""
    if math.isfinite(value):
        return _fmt(value, 2)
    return "failed" if f"{side} failed" in note or "both" in note else "–"


def write_report(
    results: list[tuple[str, dict[str, Any]]], folder: str | Path, deltas: list[Delta] | None = None
) -> Path:
    folder = Path(folder)
    write_plots(results, folder)
    sections = []
    for label, data in results:
        target = data.get("target", {})
        sections.append(
            f"<h2>{html.escape(label)}</h2><p>{html.escape(str(target))}</p>"
            + _table(SUMMARY_HEADER, summary_rows(data))
        )
    if deltas:
        sections.append(
            "<h2>Candidate vs baseline</h2><p>Intervals resample runs, then requests inside them; each is "
            "shown at the confidence Holm's method tested it at (any false better/worse across the table: "
            "5 %). <b>better</b>/<b>worse</b>: the interval excludes zero and the estimate lies beyond the "
            "margin; <b>equivalent</b>: the interval lies inside it; <b>inconclusive</b>: the data cannot tell.</p>"
            + _table(
                ["metric", "stat", "concurrency", "baseline", "candidate", "delta", "interval", "margin", "verdict"],
                delta_rows(deltas),
            )
        )
    images = "".join(
        f'<figure><img src="{name}" alt="{name}"><figcaption>{name}</figcaption></figure>' for name in PLOTS
    )
    page = f"""<!doctype html><html><head><meta charset="utf-8"><title>optigate benchmark</title>
<style>body{{font-family:system-ui,sans-serif;margin:2em;max-width:1200px}} \
table{{border-collapse:collapse;margin:1em 0;font-size:13px}}
td,th{{border:1px solid #ccc;padding:4px 8px;text-align:right}} th{{background:#f4f4f4}} \
.better{{color:#087f23;font-weight:600}}
.worse{{color:#b00020;font-weight:600}} \
.same{{color:#666}} .equivalent{{color:#0b6e99}} \
figure{{display:inline-block;margin:.5em}} img{{max-width:560px}}</style></head>
<body><h1>optigate benchmark report</h1>
<p>TTFT: request sent → first token. ITL: per token (a chunk of k tokens counts as k gaps of Δt/k). \
TPOT: (E2E − TTFT)/(tokens − 1). Queue time is reported apart from TTFT.</p>
{"".join(sections)}{images}</body></html>"""
    index = folder / "index.html"
    index.write_text(page)
    return index
