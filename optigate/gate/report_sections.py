"""Sections of the gate's HTML report beside its checks: the managed cross-check, capacity and goodput at the SLO,
and the servers' own metrics; with the cells every section writes (numbers in their check's unit, tables)."""

from __future__ import annotations

import html
import json
from collections.abc import Iterable, Mapping
from typing import Any

from optigate.gate.decision.wording import WORDS

UNITS = {str(name): words.unit for name, words in WORDS.items() if words.unit}


# One line per rule group, as the page has always carried them.
def number(value: Any, name: str = "") -> str:
    if value is None:
        return "—"
    if isinstance(value, str):
        return html.escape(value)
    unit = UNITS.get(name)
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


def table(header: list[str], rows: list[list[str]]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{cell}</td>" for cell in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def server_metrics_section(section: Mapping[str, Any]) -> str:
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
    return f"{title}<p>{source}.</p>" + table(["figure", "unit", "baseline", "candidate"], rows) + f"<ul>{items}</ul>"


def _figure(value: Any) -> str:
    return "—" if value is None else f"{value:,.3g}"


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
        + table(["concurrency", "run", "metric", "optigate", "AIPerf", "AIPerf − optigate", "allowed", "result"], rows)
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
        + table(["side", "holds up to", "estimate (streams)", "per level"], rows)
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
                number(good["difference_pts"], "goodput"),
                interval,
                number(base["rate_per_s"]),
                number(cand["rate_per_s"]),
            ]
        )
    if not rows:
        return ""
    header = ["concurrency", "baseline", "candidate", "difference", "95 % CI", "baseline req/s", "candidate req/s"]
    return (
        "<h2>Goodput</h2><p>Requests within the SLO (TTFT within the TTFT budget, time per output token within the "
        "ITL budget; a failed request never), as a share of the requests sent and as requests per second.</p>"
        + table(header, rows)
    )


def adapter_check_section(checked: Mapping[str, Any]) -> str:
    """Each new adapter version's archive as the stager checked it before anything was created (lambdas/
    stage_candidate check_adapters): its rank, the base it names and how far that base was checked. An "unknown"
    base was not compared by its Hugging Face id (a local path, or a team whose model names none) and is said with
    why; its architecture was compared wherever the archive shows it."""
    rows = []
    for name, found in sorted(checked.items()):
        found = found if isinstance(found, Mapping) else {}
        check = str(found.get("base_model_check") or "?")
        why = str(found.get("base_model_why") or "")
        result = (
            '<span class="pass">same</span>'
            if check == "same"
            else f'<span class="unsure">{html.escape(check)}</span> <span class="detail">{html.escape(why)}</span>'
        )
        files = found.get("architecture_checked")
        architecture = ", ".join(map(str, files)) if isinstance(files, list) and files else "nothing to compare"
        rows.append(
            [
                html.escape(str(name)),
                html.escape(str(found.get("uri", "—"))),
                number(found.get("rank")),
                html.escape(str(found.get("base_model") or "—")),
                result,
                html.escape(architecture),
            ]
        )
    header = ["adapter", "archive", "rank", "base_model_name_or_path", "base model (its id)", "architecture from"]
    return (
        "<h2>New adapter versions</h2><p>Each archive was checked before anything was created, as vLLM will load it. "
        "The base model's id is compared when the adapter names a Hugging Face id and the team's model has one "
        "(another id was refused); otherwise it is unknown, and only the base's architecture (the LoRA tensors' "
        "shapes and layers, a config.json) was compared.</p>" + table(header, rows)
    )
