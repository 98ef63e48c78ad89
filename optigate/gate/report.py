"""The gate's report: JSON for machines, one self-contained HTML page for people: inline CSS and the
benchmark plots embedded as base64 PNG, so a copy of the page opens anywhere (the PNGs are also
stored beside it). The page reads top-down: the verdict, the workload and what each side is, why it
was rejected (or what could not be told), the plots, then the checks and every measured figure."""

from __future__ import annotations

import base64
import html
import json
from collections.abc import Iterable, Mapping
from typing import Any

from optigate.gate.decision import GateVerdict
from optigate.gate.report_sections import (
    adapter_check_section,
    capacity_section,
    cross_check_section,
    goodput_section,
    number,
    server_metrics_section,
    table,
)
from optigate.gate.rounds_report import rounds_section

#: How each check's figures are shown, by check name (its words say).
_STYLE = (
    "body{font-family:system-ui,sans-serif;margin:2em;max-width:1300px} "
    "table{border-collapse:collapse;margin:1em 0;font-size:13px}\n"
    "td,th{border:1px solid #ccc;padding:4px 8px;text-align:right;vertical-align:top} th{background:#f4f4f4} "
    "td:last-child{text-align:left}\n"
    ".pass{color:#087f23;font-weight:600} .fail{color:#b00020;font-weight:600} .detail{color:#444}\n"
    ".banner{padding:.6em 1em;border-radius:4px;font-size:1.2em;font-weight:600} "
    ".approved{background:#e3f4e6;color:#087f23}\n"
    ".rejected{background:#fbe4e7;color:#b00020} .inconclusive{background:#fff4d6;color:#8a5a00} "
    ".unsure{color:#8a5a00;font-weight:600} figure{display:inline-block;margin:.5em} img{max-width:560px} "
    "pre{background:#f7f7f7;padding:.6em}\n"
    "dl.shape{display:grid;grid-template-columns:max-content auto;gap:.2em 1em;margin:.8em 0} "
    "dl.shape dt{font-weight:600} dl.shape dd{margin:0}\n"
    ".plots{display:flex;flex-wrap:wrap;gap:.5em} figcaption{font-size:12px;color:#555;text-align:center}\n"
    ".xcheck{padding:.4em 1em;border-left:4px solid #8a5a00;background:#fffaf0}"
)

#: A plot: (file name, PNG bytes) is embedded; a bare file name is only listed (nothing to embed).
Plot = tuple[str, bytes] | str


def render_json(verdict: GateVerdict) -> str:
    """Stable key order, no NaN (non-finite figures are null)."""
    return json.dumps(verdict.to_dict(), indent=2, allow_nan=False) + "\n"


def _interval(check: dict[str, Any]) -> str:
    if check["ci_low"] is None or check["ci_high"] is None:
        return "—"
    return f"{number(check['ci_low'], check['name'])} … {number(check['ci_high'], check['name'])}"


def _usd(value: float | None) -> str:
    return "—" if value is None else f"${value:,.3f}"


def _change_text(change: Mapping[str, Any]) -> str:
    if not change:
        return "no change recorded"
    return ", ".join(
        f"{key} {json.dumps(value, sort_keys=True) if isinstance(value, dict | list) else value}"
        for key, value in sorted(change.items())
    )


def shape(data: Mapping[str, Any], workload: Mapping[str, Any] | None = None) -> list[tuple[str, str]]:
    """The workload and both sides, from the verdict and the gate's benchmark settings (`workload`:
    gate.benchmark, e.g. prompt_tokens, max_new_tokens, blocks)."""
    workload = workload or {}
    levels = [level["concurrency"] for level in data["levels"]] or list(data["thresholds"].get("concurrency") or [])
    parts = []
    traffic = data.get("traffic")
    if traffic:
        parts.append(_traffic_text(traffic))
    elif workload.get("prompt_tokens") is not None or workload.get("max_new_tokens") is not None:
        parts.append(
            f"{workload.get('prompt_tokens', '?')} prompt → {workload.get('max_new_tokens', '?')} output tokens"
        )
    if traffic and traffic.get("kind") == "replay":  # open loop: the recorded arrivals set the load, not a level
        parts.append("open loop on the recorded schedule" if levels else "no run measured")
    else:
        parts.append("closed loop, concurrency " + ", ".join(map(str, levels)) if levels else "no level measured")
    sent = sorted({level[side]["requests"] for level in data["levels"] for side in ("baseline", "candidate")})
    if sent:
        shown = f"{sent[0]}" if len(sent) == 1 else f"{sent[0]}–{sent[-1]}"
        parts.append(f"{shown} requests per side and level")
    if workload.get("blocks"):
        parts.append(f"{workload['blocks']} interleaved blocks a side (A B A B …)")
    where = f"{data['team']}/{data['environment']}"
    return [
        ("workload", " · ".join(parts)),
        ("baseline", f"{where} as deployed (its live model, benchmarked on a twin endpoint)"),
        ("candidate", f"{where} with the change: {_change_text(data['change'])}"),
    ]


def _traffic_text(traffic: Mapping[str, Any]) -> str:
    """The team's captured traffic in one phrase: counts and length percentiles, never text."""

    def lengths(key: str) -> str:
        found = traffic.get(key) or {}
        return "/".join(str(found.get(q, "?")) for q in ("p50", "p90", "p99"))

    text = (
        f"{traffic.get('kind', 'captured')} of {traffic.get('requests', '?')} captured requests "
        f"({traffic.get('source', '?')}): prompt tokens p50/p90/p99 {lengths('prompt_tokens')}, "
        f"output tokens {lengths('max_new_tokens')}"
    )
    if traffic.get("sessions"):
        text += f", {traffic['sessions']} sessions"
    if traffic.get("duration_s"):
        text += f", recorded over {traffic['duration_s']:g} s at {traffic.get('mean_rate_per_s') or 0:g}/s"
    return text


def _figures(plots: Iterable[Plot]) -> str:
    embedded, listed = [], []
    for plot in plots:
        if isinstance(plot, str):
            listed.append(html.escape(plot))
            continue
        name, data = plot
        alt = html.escape(name.removesuffix(".png").replace("_", " "), quote=True)
        encoded = base64.b64encode(data).decode("ascii")
        embedded.append(
            f'<figure><img src="data:image/png;base64,{encoded}" alt="{alt}">'
            f"<figcaption>{html.escape(name)} (also stored beside this page)</figcaption></figure>"
        )
    out = '<div class="plots">' + "".join(embedded) + "</div>" if embedded else ""
    if listed:
        out += f'<p class="detail">Plots stored beside this report: {", ".join(listed)}.</p>'
    return out


# Over 80 lines: the report page's sections in the order a reviewer reads them.
def render_html(verdict: GateVerdict, plots: Iterable[Plot] = (), workload: Mapping[str, Any] | None = None) -> str:
    """The page. `plots`: (name, PNG bytes) pairs, embedded; `workload`: the gate's benchmark settings."""
    data = verdict.to_dict()
    status = str(data["outcome"]).lower()
    results = {
        "pass": '<span class="pass">pass</span>',
        "fail": '<span class="fail">FAIL</span>',
        "inconclusive": '<span class="unsure">INCONCLUSIVE</span>',
    }
    check_rows = [
        [
            html.escape(c["name"] + (f" [adapter {c['adapter']}]" if c.get("adapter") else "")),
            "—" if c["concurrency"] is None else str(c["concurrency"]),
            number(c["measured"], c["name"]),
            _interval(c),
            number(c["threshold"], c["name"]) if c["name"] != "coverage" else number(c["threshold"]),
            results[c["outcome"]],
            f'<span class="detail">{html.escape(c["detail"])}</span>',
        ]
        for c in data["checks"]
    ]
    sections = []
    if data["reasons"]:
        reasons = "".join(f"<li>{html.escape(r)}</li>" for r in data["reasons"])
        why = "Why it was rejected" if data["outcome"] == "REJECTED" else "What it could not tell"
        sections.append(f"<h2>{why}</h2><ul>{reasons}</ul>")
    if data.get("adapter_check"):
        sections.append(adapter_check_section(data["adapter_check"]))
    if data.get("capacity"):
        sections.append(capacity_section(data["capacity"]))
    if data.get("rounds"):
        sections.append(rounds_section(data["rounds"]))
    sections.append(_figures(plots))
    cross = data.get("cross_check")
    if cross:
        sections.append(cross_check_section(cross))
    sections += [
        (
            "<h2>Checks</h2><p>A check with an interval passes only when its 95 % bootstrap interval clears the "
            "threshold (p99 budgets: the upper end; gains: the lower end), fails when the whole interval is on the "
            "wrong side, and is inconclusive when it straddles the threshold. Missing or empty evidence fails "
            "closed. Any failed check rejects; otherwise any inconclusive check leaves the decision to a person "
            "(the model package waits in PendingManualApproval).</p>"
        ),
        table(["check", "concurrency", "measured", "95 % CI", "threshold", "result", "detail"], check_rows),
    ]
    level_rows = []
    for level in data["levels"]:
        # All traffic, then each adapter's share of it (an adapter team's endpoint), per side.
        parts = [("", level)] + [(f" · {name}", sides) for name, sides in (level.get("adapters") or {}).items()]
        for suffix, sides in parts:
            for label in ("baseline", "candidate"):
                fig = sides[label]
                if fig is None:
                    level_rows.append([str(level["concurrency"]), html.escape(label + suffix), "0/0"] + ["—"] * 6)
                    continue
                level_rows.append(
                    [
                        str(level["concurrency"]),
                        html.escape(label + suffix),
                        f"{fig['successful_requests']}/{fig['requests']}",
                        number(fig["p50_ttft_ms"], "p99_ttft"),
                        number(fig["p99_ttft_ms"], "p99_ttft"),
                        number(fig["p99_itl_ms"], "p99_itl"),
                        number(fig["p50_tpot_ms"], "p99_ttft"),
                        number(fig["output_tokens_per_s"]),
                        number(fig["mean_tokens_per_chunk"]),
                    ]
                )
    if level_rows:
        header = [
            "concurrency",
            "run",
            "ok/sent",
            "p50 TTFT",
            "p99 TTFT",
            "p99 ITL",
            "p50 TPOT",
            "output tokens/s",
            "tokens/chunk",
        ]
        sections.append("<h2>Measured</h2>" + table(header, level_rows))
    sections.append(goodput_section(data["levels"]))
    cost_rows = [
        [
            str(c["concurrency"]),
            _usd(c["baseline"]),
            _usd(c["candidate"]),
            number(c["baseline_output_tokens_per_s"]),
            number(c["candidate_output_tokens_per_s"]),
        ]
        for c in data["cost_per_million_output_tokens"]
    ]
    if cost_rows:
        sections.append(
            "<h2>Cost per million output tokens</h2><p>instance price × instance count ÷ measured output tokens "
            "per second (— when no price is known).</p>"
            + table(["concurrency", "baseline", "candidate", "baseline tokens/s", "candidate tokens/s"], cost_rows)
        )
    shadow = data.get("shadow")
    if shadow:
        sides = (("production", shadow.get("production") or {}), ("shadow (candidate)", shadow.get("shadow") or {}))
        rows = [
            [
                label,
                html.escape(str(side.get("variant"))),
                number(side.get("invocations")),
                number(side.get("errors_5xx")),
                number(side.get("p99_model_latency_ms"), "p99_ttft"),
            ]
            for label, side in sides
        ]
        share = html.escape(str(shadow.get("sampling_percentage")))
        minutes = html.escape(str(shadow.get("window_minutes")))
        sections.append(
            f"<h2>Mirrored live traffic</h2><p>{share} % of live requests mirrored to the candidate for {minutes} "
            "minutes (CloudWatch, per variant). ModelLatency covers a whole streamed response and has no interval "
            "here; the benchmark judges latency.</p>"
            + table(["side", "variant", "invocations", "5XX", "p99 ModelLatency"], rows)
        )
    comparison = data["prediction_vs_measurement"]
    if comparison:
        rows = [
            [
                html.escape(key),
                number(row["predicted"]),
                number(row.get("expected")),
                number(row["measured"]),
                html.escape(row["measured_as"]),
                "—" if row["ratio"] is None else f"{row['ratio']:.2f}×",
            ]
            for key, row in comparison.items()
            if isinstance(row, dict) and "measured_as" in row
        ]
        sections.append(
            f"<h2>Planner prediction vs measurement</h2><p>{html.escape(comparison['note'])}.</p>"
            + table(["figure", "bound", "expected", "measured", "measured as", "measured / bound"], rows)
        )
    if data.get("server_metrics"):
        sections.append(server_metrics_section(data["server_metrics"]))
    if data["change"]:
        change = html.escape(json.dumps(data["change"], indent=2, sort_keys=True))
        sections.append(f"<h2>Change</h2><pre>{change}</pre>")
    sections.append("<h2>Thresholds</h2><pre>" + html.escape(json.dumps(data["thresholds"], indent=2)) + "</pre>")
    items = "".join(f"<dt>{html.escape(term)}</dt><dd>{html.escape(text)}</dd>" for term, text in shape(data, workload))
    title = f"optigate gate: {data['team']} / {data['environment']}"
    return f"""<!doctype html><html><head><meta charset="utf-8"><title>{html.escape(title)}</title>
<style>{_STYLE}</style></head>
<body><h1>{html.escape(title)}</h1>
<p class="banner {status}">{html.escape(data["summary"])}</p>
{f'<p class="xcheck">{html.escape(cross["headline"])}</p>' if cross else ""}
<dl class="shape">{items}</dl>
{"".join(sections)}</body></html>
"""
