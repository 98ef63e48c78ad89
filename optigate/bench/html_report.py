# Over 400 lines: the benchmark page and the compare page share their tables, verdict words and layout.
"""A benchmark report: one self-contained HTML page (plots embedded as base64 PNG, inline CSS) that
opens anywhere a copy of it lands, with the PNGs also written beside it; for one result file
(`optigate bench --report`) or a comparison (`optigate bench compare --report`).

The page reads top-down in the order a reviewer needs: the verdict, the workload and what each side
is, a headline of the changes (comparison), the plots, then every number in collapsed tables."""

from __future__ import annotations

import base64
import html
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from optigate.bench.compare import Delta, workload_difference
from optigate.bench.goodput import Slo
from optigate.bench.plots import Results, figures, png

# --------------------------------------------------------------------------- labels and workload


def default_label(data: Mapping[str, Any], path: str | Path | None = None) -> str:
    """A side's name: its `--label`, else the endpoint (with variant or component), else the file's name."""
    if data.get("label"):
        return str(data["label"])
    target = data.get("target") or {}
    name = target.get("endpoint_name")
    if name:
        detail = target.get("target_variant") or target.get("inference_component")
        return f"{name} ({detail})" if detail else str(name)
    return Path(path).stem if path else "results"


def side_labels(
    baseline: Sequence[tuple[str, Mapping[str, Any]]],
    candidate: Sequence[tuple[str, Mapping[str, Any]]],
    labels: Sequence[str] | None = None,
) -> tuple[str, str]:
    """The two sides' labels (`--label BASELINE CANDIDATE`, else from the first file of each side);
    two sides named alike are told apart by their files' names."""
    if labels:
        return str(labels[0]), str(labels[1])
    (base_path, base_data), (cand_path, cand_data) = baseline[0], candidate[0]
    base, cand = default_label(base_data, base_path), default_label(cand_data, cand_path)
    if base == cand and Path(base_path).name != Path(cand_path).name:
        base, cand = f"{base} ({Path(base_path).name})", f"{cand} ({Path(cand_path).name})"
    return base, cand


def _files(results: Results) -> list[Mapping[str, Any]]:
    return [results] if isinstance(results, Mapping) else list(results)


def workload_text(data: Mapping[str, Any]) -> str:
    """One line: prompt and output tokens (a captured workload's own lengths), loop, levels, requests or duration
    per level, schema."""
    load = data.get("load") or {}
    levels = sorted({int(run["concurrency"]) for run in data.get("runs") or []})
    parts = []
    captured = load.get("workload") if isinstance(load.get("workload"), Mapping) else None
    if captured:  # its requests' own lengths were sent (older files recorded unsent synthetic defaults beside it)
        parts.append(captured_text(captured))
    elif load.get("prompt_tokens") is not None or load.get("max_new_tokens") is not None:
        prompt = "prompts file" if load.get("prompt_tokens") is None else f"{load.get('prompt_tokens', '?')} prompt"
        parts.append(f"{prompt} → {load.get('max_new_tokens', '?')} output tokens")
    if load.get("mode") == "open":
        parts.append(f"open loop at {load.get('rate')} requests/s")
    elif load.get("mode") == "replay":
        parts.append("open loop on the recorded schedule")
    elif load.get("mode"):
        parts.append("closed loop")
    parts.append("concurrency " + ", ".join(map(str, levels)) if levels else "no level measured")
    if load.get("duration_s"):
        parts.append(f"{load['duration_s']:g} s per level")
    elif load.get("requests"):
        parts.append(f"{load['requests']} requests per level")
    if load.get("schema"):
        parts.append(f"{load['schema']} schema")
    if not load:
        parts.append("workload not recorded")
    return " · ".join(parts)


def captured_text(shape: Mapping[str, Any]) -> str:
    """A captured workload in one phrase (optigate.bench.core.workload.shape): counts and length percentiles, never
    text."""

    def lengths(key: str) -> str:
        value = shape.get(key)
        found: Mapping[str, Any] = value if isinstance(value, Mapping) else {}
        return "/".join(str(found.get(q, "?")) for q in ("p50", "p90", "p99"))

    return (
        f"{shape.get('kind', 'captured')} of {shape.get('requests', '?')} captured requests: prompt tokens "
        f"p50/p90/p99 {lengths('prompt_tokens')} → output tokens {lengths('max_new_tokens')}"
    )


def target_text(data: Mapping[str, Any]) -> str:
    target = data.get("target") or {}
    names = (
        ("endpoint_name", "endpoint"),
        ("target_variant", "variant"),
        ("inference_component", "component"),
        ("region", "region"),
        ("endpoint_url", "via"),
    )
    return ", ".join(f"{word} {target[key]}" for key, word in names if target.get(key)) or "target not recorded"


def slo_text(slo: Slo) -> str:
    """The SLO a comparison judged goodput against, in one line."""
    return (
        f"{slo.text()}, judged per request: goodput is the share of a side's requests within it (its TTFT and its own "
        "time per output token; a failed request never is)"
    )


# --------------------------------------------------------------------------- verdicts


def bench_verdict(data: Mapping[str, Any]) -> tuple[str, str]:
    """(css class, sentence) for one result file."""
    runs = sorted(data.get("runs") or [], key=lambda r: r["concurrency"])
    sent = sum(run["requests"] for run in runs)
    failed: dict[str, int] = {}
    for run in runs:
        for kind, count in (run.get("errors") or {}).items():
            failed[kind] = failed.get(kind, 0) + count
    errors = sum(failed.values())
    kinds = ", ".join(f"{kind} {count}" for kind, count in sorted(failed.items(), key=lambda kv: -kv[1]))
    levels = ", ".join(str(run["concurrency"]) for run in runs)
    if data.get("interrupted"):
        return "inconclusive", f"INTERRUPTED: partial results, {sent} requests measured at c={levels or '–'}"
    if not sent:
        return "rejected", "NOTHING MEASURED: no request was sent"
    if errors >= sent:
        return "rejected", f"FAILED: every one of {sent} requests failed ({kinds})"
    best = max(runs, key=lambda r: r["output_tokens_per_s"])
    peak = f"; up to {best['output_tokens_per_s']:,.0f} output tokens/s (c={best['concurrency']})"
    if errors:
        return "inconclusive", f"COMPLETED WITH ERRORS: {errors} of {sent} requests failed ({kinds}){peak}"
    return "approved", f"COMPLETED: all {sent} requests succeeded at c={levels}{peak}"


_NAMES = {
    "ttft_ms": "TTFT",
    "itl_ms": "ITL",
    "tpot_ms": "TPOT",
    "e2e_ms": "E2E",
    "output_tokens_per_s": "output tokens/s",
    "goodput_share": "goodput (share within the SLO)",
}


def _describe(d: Delta) -> str:
    relative = f" {d.relative:+.1%}" if math.isfinite(d.relative) else ""
    statistic = "" if d.statistic == "mean" else f" {d.statistic}"
    adapter = f" of adapter {d.adapter}" if d.adapter is not None else ""
    return f"{_NAMES.get(d.metric, d.metric)}{statistic}{adapter} at c={d.concurrency}{relative}"


def compare_verdict(deltas: Sequence[Delta]) -> tuple[str, str]:
    """(css class, sentence): worse beats better; nothing labelled is said as such."""
    worse = [d for d in deltas if d.verdict == "worse"]
    better = [d for d in deltas if d.verdict == "better"]
    equivalent = [d for d in deltas if d.verdict == "equivalent"]

    def some(chosen: list[Delta]) -> str:
        ranked = sorted(chosen, key=lambda d: -abs(d.relative) if math.isfinite(d.relative) else 0)
        shown = ", ".join(_describe(d) for d in ranked[:3])
        return shown + (f" and {len(ranked) - 3} more" if len(ranked) > 3 else "")

    if worse:
        return "rejected", f"WORSE: {len(worse)} of {len(deltas)} metrics regressed beyond the margin ({some(worse)})"
    if better:
        return "approved", f"BETTER: {len(better)} of {len(deltas)} metrics improved, none worse ({some(better)})"
    if deltas and len(equivalent) == len(deltas):
        return "approved", f"EQUIVALENT: all {len(deltas)} metrics within their margins"
    return "inconclusive", (
        f"NO CHANGE SHOWN: nothing better or worse; {len(deltas) - len(equivalent)} of {len(deltas)} metrics "
        "inconclusive (the data cannot tell; more runs a side narrow the intervals)"
    )


# --------------------------------------------------------------------------- tables


def _fmt(value: Any, digits: int = 1) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:,.{digits}f}" if math.isfinite(value) else "–"
    return html.escape(str(value))


def summary_rows(data: Mapping[str, Any]) -> list[list[str]]:
    """One row per level; an inference-component endpoint's level is followed by a row per adapter
    ("16 · reply": that adapter's share of the level)."""
    rows = []
    for level in sorted(data["runs"], key=lambda r: r["concurrency"]):
        parts = [(str(level["concurrency"]), level)]
        adapters = (level.get("adapters") or {}).items()
        parts += [(f"{level['concurrency']} · {html.escape(name)}", sub) for name, sub in adapters]
        rows += [_summary_row(label, run) for label, run in parts]
    return rows


def _summary_row(label: str, run: Mapping[str, Any]) -> list[str]:
    return [
        label,
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


def _css(verdict: str) -> str:
    return {"better": "better", "worse": "worse", "equivalent": "equivalent"}.get(verdict, "same")


def delta_rows(deltas: list[Delta]) -> list[list[str]]:
    rows = []
    for d in deltas:
        finite = math.isfinite(d.low) and math.isfinite(d.high)
        relative = f" ({d.relative:+.1%})" if math.isfinite(d.relative) else ""
        rows.append(
            [
                html.escape(d.metric if d.adapter is None else f"{d.metric} [{d.adapter}]"),
                d.statistic,
                str(d.concurrency),
                _figure(d.baseline, d.note, "baseline"),
                _figure(d.candidate, d.note, "candidate"),
                f"{d.delta:+,.2f}{relative}" if math.isfinite(d.delta) else "–",
                f"[{d.low:+,.2f}, {d.high:+,.2f}] at {d.confidence:.2%}" if finite else html.escape(d.note or "–"),
                f"±{d.margin_pct:g} %",
                f'<span class="{_css(d.verdict)}">{d.verdict}</span>',
            ]
        )
    return rows


#: The headline: the figures a reviewer looks at first, one row each, one column per level.
HEADLINE = (
    ("ttft_ms", "p50"),
    ("ttft_ms", "p99"),
    ("itl_ms", "p50"),
    ("itl_ms", "p99"),
    ("tpot_ms", "p50"),
    ("e2e_ms", "p50"),
    ("output_tokens_per_s", "mean"),
    ("goodput_share", "share"),  # with --slo
)


def headline_table(deltas: Sequence[Delta]) -> str:
    """Relative change and verdict per headline figure (rows) and level (columns)."""
    levels = sorted({d.concurrency for d in deltas})
    found = {(d.metric, d.statistic, d.concurrency): d for d in deltas}
    rows = []
    for metric, statistic in HEADLINE:
        if not any((metric, statistic, level) in found for level in levels):
            continue
        cells = [html.escape(_NAMES[metric] + ("" if statistic in ("mean", "share") else f" {statistic}"))]
        for level in levels:
            d = found.get((metric, statistic, level))
            if d is None:
                cells.append("–")
                continue
            change = f"{d.relative:+.1%} " if math.isfinite(d.relative) else ""
            cells.append(f'{change}<span class="{_css(d.verdict)}">{d.verdict}</span>')
        rows.append(cells)
    return _table(["candidate vs baseline", *(f"c={level}" for level in levels)], rows)


def _figure(value: float, note: str, side: str) -> str:
    """A side's figure; "failed" when every request of that side failed (never a number then)."""
    if math.isfinite(value):
        return _fmt(value, 2)
    return "failed" if f"{side} failed" in note or "both" in note else "–"


# --------------------------------------------------------------------------- plots and page


def plot_pngs(results: Sequence[tuple[str, Results]]) -> dict[str, bytes]:
    """The four plots as PNG bytes by file name."""
    return {name: png(figure) for name, figure in figures(results).items()}


def write_plots(results: Sequence[tuple[str, Results]], folder: Path) -> list[Path]:
    """The four PNGs into `folder` (sides ``(label, results)``, baseline first)."""
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for name, data in plot_pngs(results).items():
        (folder / name).write_bytes(data)
        written.append(folder / name)
    return written


def embedded_figures(pngs: Mapping[str, bytes] | Sequence[tuple[str, bytes]]) -> str:
    """<figure>s with the PNGs inline (data: URIs): the page needs nothing beside it."""
    items = pngs.items() if isinstance(pngs, Mapping) else pngs
    out = []
    for name, data in items:
        encoded = base64.b64encode(data).decode("ascii")
        alt = html.escape(name.removesuffix(".png").replace("_", " "), quote=True)
        out.append(
            f'<figure><img src="data:image/png;base64,{encoded}" alt="{alt}">'
            f"<figcaption>{html.escape(name)} (also stored beside this page)</figcaption></figure>"
        )
    return '<div class="plots">' + "".join(out) + "</div>"


STYLE = (
    "body{font-family:system-ui,sans-serif;margin:2em;max-width:1240px;color:#222}\n"
    "table{border-collapse:collapse;margin:1em 0;font-size:13px}\n"
    "td,th{border:1px solid #ccc;padding:4px 8px;text-align:right} th{background:#f4f4f4}\n"
    ".better{color:#087f23;font-weight:600} .worse{color:#b00020;font-weight:600} .same{color:#666}\n"
    ".equivalent{color:#0b6e99}\n"
    ".banner{padding:.6em 1em;border-radius:4px;font-size:1.15em;font-weight:600;margin:.4em 0}\n"
    ".approved{background:#e3f4e6;color:#087f23} .rejected{background:#fbe4e7;color:#b00020}\n"
    ".inconclusive{background:#fff4d6;color:#8a5a00}\n"
    "dl.shape{display:grid;grid-template-columns:max-content auto;gap:.2em 1em;margin:.8em 0}\n"
    "dl.shape dt{font-weight:600} dl.shape dd{margin:0}\n"
    ".plots{display:flex;flex-wrap:wrap;gap:.5em} figure{margin:0} img{max-width:600px;width:100%}\n"
    "figcaption{font-size:12px;color:#555;text-align:center} details{margin:1em 0} summary{cursor:pointer}\n"
    ".fine{color:#555;font-size:13px}"
)


def page(title: str, banner: tuple[str, str], shape: list[tuple[str, str]], body: str) -> str:
    """The page skeleton: title, verdict banner, workload and sides (a definition list), then `body`."""
    css, sentence = banner
    items = "".join(f"<dt>{html.escape(term)}</dt><dd>{html.escape(text)}</dd>" for term, text in shape)
    return f"""<!doctype html><html><head><meta charset="utf-8"><title>{html.escape(title)}</title>
<style>{STYLE}</style></head>
<body><h1>{html.escape(title)}</h1>
<p class="banner {css}">{html.escape(sentence)}</p>
<dl class="shape">{items}</dl>
{body}</body></html>
"""


DEFINITIONS = (
    "TTFT: request sent → first token. ITL: per token (a chunk of k tokens counts as k gaps of "
    "Δt/k). TPOT: (E2E − TTFT)/(tokens − 1). Queue time is reported apart from TTFT."
)


def definitions(sides: int, comparing: bool, levels: int = 2) -> str:
    """The metrics' definitions and how to read the curves: line styles are named only when there are sides to tell
    apart (optigate.bench.plots draws the first side solid, the second dashed, further ones dotted); with one level,
    each side has its own colour too (optigate.bench.plot_palette)."""
    if sides <= 1:
        curves = "Curves: one colour per concurrency level."
    elif levels == 1:
        each = "baseline solid, candidate dashed" if comparing else "one line style per result"
        curves = f"Curves: one level, so one colour per side as well: {each}, as the legend shows."
    elif comparing:
        curves = "Curves: one colour per concurrency level, baseline solid, candidate dashed."
    else:
        curves = "Curves: one colour per concurrency level, one line style per result, as the legend shows."
    return f'<p class="fine">{DEFINITIONS} {curves}</p>'


COMPARE_NOTE = (
    '<p class="fine">Intervals resample runs, then requests inside them; each is shown at the confidence Holm\'s '
    "method tested it at (any false better/worse across the table: 5 %). <b>better</b>/<b>worse</b>: the interval "
    "excludes zero and the estimate lies beyond the margin; <b>equivalent</b>: the interval lies inside it; "
    "<b>inconclusive</b>: the data cannot tell.</p>"
)


def write_report(
    results: Sequence[tuple[str, Results]],
    folder: str | Path,
    deltas: list[Delta] | None = None,
    adapter_deltas: list[Delta] | None = None,
    slo: Slo | None = None,
) -> Path:
    """`index.html` (self-contained) and the four PNGs in `folder`. `results`: one ``(label, results)``
    per side, baseline first; a side's results are one result file or a list of them (runs). `adapter_deltas`:
    an inference-component endpoint's deltas per adapter (they count in the verdict, in a table of their own).
    `slo`: the budgets goodput was judged against (`bench compare --slo`), stated with the workload."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    comparing = deltas is not None and len(results) >= 2
    roles = ("baseline", "candidate") if comparing else ("",) * len(results)
    # The plots' legends carry each side's role with its label (a PNG may travel without the page).
    plotted = [
        ((f"{role}: {label}" if role else label), side) for (label, side), role in zip(results, roles, strict=False)
    ]
    pngs = plot_pngs(plotted)
    for name, image in pngs.items():
        (folder / name).write_bytes(image)
    shape: list[tuple[str, str]] = []
    first = _files(results[0][1])
    shape.append(("workload", workload_text(first[0]) if first else "no results"))
    if comparing:
        labelled = [(label, dict(data)) for label, side in results for data in _files(side)]
        difference = workload_difference(labelled)
        if difference:
            shape.append(("workloads differ", difference))
    if slo is not None:
        shape.append(("SLO", slo_text(slo)))
    for (label, side), role in zip(results, roles, strict=False):
        files = _files(side)
        runs = f"; {len(files)} runs" if len(files) > 1 else ""
        shape.append((f"{role}: {label}" if role else label, (target_text(files[0]) if files else "") + runs))
    body = []
    if comparing:
        title = f"optigate bench compare: {results[1][0]} vs {results[0][0]}"
        banner = compare_verdict([*(deltas or []), *(adapter_deltas or [])])
        body.append(headline_table(deltas or []))
    else:
        title = f"optigate benchmark: {results[0][0]}"
        banner = bench_verdict({"runs": [run for data in first for run in data.get("runs") or []]})
        level_rows = [[str(r[0]), r[2], r[4], r[7], r[12]] for r in summary_rows(first[0])] if first else []
        body.append(_table(["concurrency", "TTFT p50 ms", "ITL p50 ms", "output tok/s", "errors"], level_rows))
    body.append(embedded_figures(pngs))
    levels = {int(run["concurrency"]) for _, side in results for data in _files(side) for run in data.get("runs") or []}
    body.append(definitions(len(results), comparing, len(levels)))
    for (label, side), role in zip(results, roles, strict=False):
        for data in _files(side):
            body.append(
                f"<details><summary>{html.escape(f'{role}: {label}' if role else label)}: every figure per level"
                f"</summary>{_table(SUMMARY_HEADER, summary_rows(data))}</details>"
            )
    if comparing and deltas:
        body.append(
            f"<details><summary>Candidate vs baseline: all {len(deltas)} deltas with their intervals</summary>"
            + COMPARE_NOTE
            + _table(
                ["metric", "stat", "concurrency", "baseline", "candidate", "delta", "interval", "margin", "verdict"],
                delta_rows(deltas),
            )
            + "</details>"
        )
    if comparing and adapter_deltas:
        body.append(
            f"<details><summary>Per adapter: {len(adapter_deltas)} deltas (Holm over every per-adapter delta)"
            "</summary>"
            + _table(
                ["metric", "stat", "concurrency", "baseline", "candidate", "delta", "interval", "margin", "verdict"],
                delta_rows(adapter_deltas),
            )
            + "</details>"
        )
    index = folder / "index.html"
    index.write_text(page(title, banner, shape, "\n".join(body)))
    return index
