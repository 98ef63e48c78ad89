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
from optigate.gate.decision.wording import WORDS

#: How each check's figures are shown, by check name (its words say).
_UNITS = {str(name): words.unit for name, words in WORDS.items() if words.unit}


# One line per rule group, as the page has always carried them.
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


def _number(value: Any, name: str = "") -> str:
    if value is None:
        return "—"
    if isinstance(value, str):
        return html.escape(value)
    unit = _UNITS.get(name)
    if unit == "ms":
        return f"{value:,.1f} ms"
    if unit == "%":
        return f"{value:+.1f} %"
    if unit == "fraction":
        return f"{value:.2%}"
    if unit == "points":
        return f"{value:+.1f} pts"
    if isinstance(value, float):
        return f"{value:,.3g}" if abs(value) < 1 else f"{value:,.2f}"
    return html.escape(str(value))


def _interval(check: dict[str, Any]) -> str:
    if check["ci_low"] is None or check["ci_high"] is None:
        return "—"
    return f"{_number(check['ci_low'], check['name'])} … {_number(check['ci_high'], check['name'])}"


def _table(header: list[str], rows: list[list[str]]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{cell}</td>" for cell in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _server_metrics_section(section: Mapping[str, Any]) -> str:
    """The endpoints' own figures over the benchmark (optigate.gate.server_metrics.figures_to_report's shape)."""
    title = "<h2>Server metrics (the endpoints' own, for the benchmark's window)</h2>"
    if not section.get("available"):
        return f"{title}<p>{html.escape(str(section.get('why') or 'none read'))}.</p>"
    rows = [
        [
            html.escape(row["figure"]),
            html.escape(row["unit"]),
            *(_figure(row[side]) for side in ("baseline", "candidate")),
        ]
        for row in section["rows"]
    ]
    notes = [*section.get("findings", [])]
    for side, missing in (section.get("missing") or {}).items():
        notes += [f"{side}: {figure} missing ({why})" for figure, why in missing.items()]
    items = "".join(f"<li>{html.escape(note)}</li>" for note in notes)
    source = html.escape(str(section.get("source", "")))
    return f"{title}<p>{source}.</p>" + _table(["figure", "unit", "baseline", "candidate"], rows) + f"<ul>{items}</ul>"


def _figure(value: Any) -> str:
    return "—" if value is None else f"{value:,.3g}"


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


def _cross_check_value(value: Any, metric: str) -> str:
    if value is None:
        return "—"
    return f"{value:,.1f} ms" if metric.endswith("_ms") else f"{value:,.1f} tokens/s"


def cross_check_section(cross: Mapping[str, Any]) -> str:
    """SageMaker's managed benchmark (AIPerf) beside optigate's figures, per level and side."""
    results = {
        True: '<span class="fail">beyond tolerance</span>',
        False: '<span class="pass">within</span>',
        None: "—",
    }
    rows = []
    for run in cross["runs"]:
        if run["outcome"] == "unavailable":
            rows.append(
                [
                    str(run["concurrency"]),
                    html.escape(run["side"]),
                    "—",
                    "—",
                    "—",
                    "—",
                    "—",
                    '<span class="unsure">unavailable</span> '
                    f'<span class="detail">{html.escape(str(run["reason"]))}</span>',
                ]
            )
            continue
        for row in run["metrics"]:
            difference = row["difference"]
            rows.append(
                [
                    str(run["concurrency"]),
                    html.escape(run["side"]),
                    html.escape(row["metric"]),
                    _cross_check_value(row["optigate"], row["metric"]),
                    _cross_check_value(row["aiperf"], row["metric"]) + f' <span class="detail">'
                    f"({html.escape(row['aiperf_source'])})</span>",
                    "—" if difference is None else f"{difference:+,.1f}",
                    "—" if row["allowed"] is None else f"±{row['allowed']:,.1f}",
                    results[row["disagrees"]],
                ]
            )
    tolerance = html.escape(json.dumps(cross["tolerance"], sort_keys=True))
    return (
        "<h2>Cross-check: SageMaker's managed benchmark (NVIDIA AIPerf)</h2><p>The same two endpoints and workload "
        "loaded by CreateAIBenchmarkJob after optigate's own benchmark of each level. optigate's numbers decide; this "
        "never passes or fails the gate. AIPerf's TTFT includes its own client's overhead (hundreds of ms at high "
        "concurrency); its inter-token latency is a per-request mean, compared with optigate's p99 TPOT; its "
        "throughput spans the whole run. A difference beyond the larger of the absolute and relative allowance is "
        f"flagged. Tolerance: {tolerance}.</p>"
        + _table(["concurrency", "run", "metric", "optigate", "AIPerf", "AIPerf − optigate", "allowed", "result"], rows)
    )


def _share(value: Any) -> str:
    return "—" if value is None else f"{value:.1%}"


def capacity_section(capacity: Mapping[str, Any]) -> str:
    """Each side's capacity within the SLO, side by side, with the headline and where the SLO holds per level."""
    statuses = {
        "holds": '<span class="pass">holds</span>',
        "fails": '<span class="fail">fails</span>',
        "uncertain": '<span class="unsure">uncertain</span>',
    }
    rows = []
    for label in ("baseline", "candidate"):
        side = capacity[label]
        up_to = "none" if side["holds_up_to"] is None else f"c={side['holds_up_to']}"
        estimate = "—" if side["estimate"] is None else f"{'≥ ' if side['at_least'] else '≈ '}{side['estimate']:.3g}"
        levels = ", ".join(f"c={row['concurrency']} {statuses[row['slo']]}" for row in side["levels"])
        rows.append([label, html.escape(up_to), html.escape(estimate), levels])
    instances = capacity.get("instances_at_peak")
    peak = (
        f" At today's peak of {capacity['peak_concurrency']:g} streams: {instances['baseline']} instances for the "
        f"baseline, {instances['candidate']} for the candidate."
        if instances
        else ""
    )
    return (
        f"<h2>Capacity within the SLO</h2><p><b>{html.escape(str(capacity['headline']))}</b>.{html.escape(peak)} "
        f"SLO: {html.escape(capacity['slo']['text'])}. At a level the SLO holds when the upper end of the 95 % "
        "interval of each p99 is within its budget, fails when the lower end of one is over it, and is uncertain in "
        "between; capacity is the highest level up to which it holds at every level, the estimate where the point "
        "p99s cross the budget before the next level (per endpoint of "
        f"{capacity['instance_count']} instance(s)).</p>"
        + _table(["side", "holds up to", "estimate (streams)", "per level"], rows)
    )


def goodput_section(levels: Iterable[Mapping[str, Any]]) -> str:
    """Each level's goodput: the share and rate of requests within the SLO, per side, and the difference."""
    rows = []
    for level in levels:
        good = level.get("goodput")
        if not good:
            continue
        low, high = good["ci_pts"]
        interval = "—" if low is None or high is None else f"{low:+.1f} … {high:+.1f} pts"
        base, cand = good["baseline"], good["candidate"]
        rows.append(
            [
                str(level["concurrency"]),
                f"{_share(base['share'])} ({base['met']}/{base['requests']})",
                f"{_share(cand['share'])} ({cand['met']}/{cand['requests']})",
                _number(good["difference_pts"], "goodput"),
                interval,
                _number(base["rate_per_s"]),
                _number(cand["rate_per_s"]),
            ]
        )
    if not rows:
        return ""
    header = ["concurrency", "baseline", "candidate", "difference", "95 % CI", "baseline req/s", "candidate req/s"]
    return (
        "<h2>Goodput</h2><p>Requests within the SLO (TTFT within the TTFT budget, time per output token within the "
        "ITL budget; a failed request never), as a share of the requests sent and as requests per second.</p>"
        + _table(header, rows)
    )


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
            _number(c["measured"], c["name"]),
            _interval(c),
            _number(c["threshold"], c["name"]) if c["name"] != "coverage" else _number(c["threshold"]),
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
    if data.get("capacity"):
        sections.append(capacity_section(data["capacity"]))
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
        _table(["check", "concurrency", "measured", "95 % CI", "threshold", "result", "detail"], check_rows),
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
                        _number(fig["p50_ttft_ms"], "p99_ttft"),
                        _number(fig["p99_ttft_ms"], "p99_ttft"),
                        _number(fig["p99_itl_ms"], "p99_itl"),
                        _number(fig["p50_tpot_ms"], "p99_ttft"),
                        _number(fig["output_tokens_per_s"]),
                        _number(fig["mean_tokens_per_chunk"]),
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
        sections.append("<h2>Measured</h2>" + _table(header, level_rows))
    sections.append(goodput_section(data["levels"]))
    cost_rows = [
        [
            str(c["concurrency"]),
            _usd(c["baseline"]),
            _usd(c["candidate"]),
            _number(c["baseline_output_tokens_per_s"]),
            _number(c["candidate_output_tokens_per_s"]),
        ]
        for c in data["cost_per_million_output_tokens"]
    ]
    if cost_rows:
        sections.append(
            "<h2>Cost per million output tokens</h2><p>instance price × instance count ÷ measured output tokens "
            "per second (— when no price is known).</p>"
            + _table(["concurrency", "baseline", "candidate", "baseline tokens/s", "candidate tokens/s"], cost_rows)
        )
    shadow = data.get("shadow")
    if shadow:
        sides = (("production", shadow.get("production") or {}), ("shadow (candidate)", shadow.get("shadow") or {}))
        rows = [
            [
                label,
                html.escape(str(side.get("variant"))),
                _number(side.get("invocations")),
                _number(side.get("errors_5xx")),
                _number(side.get("p99_model_latency_ms"), "p99_ttft"),
            ]
            for label, side in sides
        ]
        share = html.escape(str(shadow.get("sampling_percentage")))
        minutes = html.escape(str(shadow.get("window_minutes")))
        sections.append(
            f"<h2>Mirrored live traffic</h2><p>{share} % of live requests mirrored to the candidate for {minutes} "
            "minutes (CloudWatch, per variant). ModelLatency covers a whole streamed response and has no interval "
            "here; the benchmark judges latency.</p>"
            + _table(["side", "variant", "invocations", "5XX", "p99 ModelLatency"], rows)
        )
    comparison = data["prediction_vs_measurement"]
    if comparison:
        rows = [
            [
                html.escape(key),
                _number(row["predicted"]),
                _number(row.get("expected")),
                _number(row["measured"]),
                html.escape(row["measured_as"]),
                "—" if row["ratio"] is None else f"{row['ratio']:.2f}×",
            ]
            for key, row in comparison.items()
            if isinstance(row, dict) and "measured_as" in row
        ]
        sections.append(
            f"<h2>Planner prediction vs measurement</h2><p>{html.escape(comparison['note'])}.</p>"
            + _table(["figure", "bound", "expected", "measured", "measured as", "measured / bound"], rows)
        )
    if data.get("server_metrics"):
        sections.append(_server_metrics_section(data["server_metrics"]))
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
