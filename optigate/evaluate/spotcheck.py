"""The records a human should read: from the slices that regressed most, where the candidate lost most.

A slice's regression is its largest harm over the metrics both models were scored on: the drop of
the candidate's mean below the baseline's (for refusal, lower is better: its rise). The spot check
takes the records of the (up to) two slices with the largest positive regression, ranks them by how
much the candidate lost on each, then by any disagreement, and puts the verdict and every slice's
scores first, so the reader knows what to look for before reading rows. When no slice regressed,
the records come from the whole dataset, ranked the same way.
"""

from __future__ import annotations

import html
import json
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from optigate.config.models import EvaluationGate
from optigate.evaluate.quality_verdict import ALL, Verdict, slices_of, status
from optigate.evaluate.scoring import targets
from optigate.judge import Check

SPOT_CHECK_SIZE = 50
SLICES_READ = 2
QUALITY_METRICS = ("qa_f1", "classification_accuracy_score", "factual_knowledge")
LOWER_IS_BETTER = ("refusal",)
STATUS_ORDER = {"fail": 0, "unresolved": 1, "pass": 2}


def quality(scores: dict[str, float]) -> float | None:
    """The record's primary task score: QA F1, else classification accuracy, else factual knowledge."""
    return next((scores[m] for m in QUALITY_METRICS if m in scores), None)


def harm(baseline: dict[str, float], candidate: dict[str, float], metric: str) -> float:
    """How much worse the candidate is on `metric` (negative when it is better)."""
    delta = candidate[metric] - baseline[metric]
    return delta if metric in LOWER_IS_BETTER else -delta


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else 0.0


@dataclass(frozen=True)
class SliceScores:
    """One slice at a glance: its size, its primary metric on both sides, its worst status and why."""

    slice: str
    n: int
    regression: float  # the largest mean harm over the metrics (positive: the candidate is worse)
    worst_metric: str
    metric: str | None
    baseline: float | None
    candidate: float | None
    status: str
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {key: getattr(self, key) for key in self.__dataclass_fields__}


def slice_scores(
    records: list[dict[str, Any]],
    baseline: list[dict[str, float]],
    candidate: list[dict[str, float]],
    thresholds: EvaluationGate,
    checks: Sequence[Check] = (),
) -> list[SliceScores]:
    """Every slice (the whole dataset first, then by regression, largest first)."""
    rows: list[SliceScores] = []
    for name, indexes in slices_of(records, thresholds).items():
        metrics = sorted({m for i in indexes for m in baseline[i] if m in candidate[i]})
        if not metrics:
            continue
        both = {m: [i for i in indexes if m in baseline[i] and m in candidate[i]] for m in metrics}
        harms = {m: _mean([harm(baseline[i], candidate[i], m) for i in both[m]]) for m in metrics}
        worst_metric = max(harms, key=lambda m: (harms[m], m))
        primary = next((m for m in QUALITY_METRICS if m in harms), worst_metric)
        scored = both[primary]
        mine = [c for c in checks if c.slice == name]
        worst = min((status(c) for c in mine), key=lambda s: STATUS_ORDER.get(s, 0), default="unresolved")
        rows.append(
            SliceScores(
                slice=name,
                n=len(indexes),
                regression=harms[worst_metric],
                worst_metric=worst_metric,
                metric=primary,
                baseline=_mean([baseline[i][primary] for i in scored]),
                candidate=_mean([candidate[i][primary] for i in scored]),
                status=worst,
                notes=[f"{c.name}: {c.detail}" for c in mine if not c.passed and c.detail],
            )
        )
    return sorted(rows, key=lambda s: (s.slice != ALL, -s.regression, s.slice))


def regressed_slices(scores: list[SliceScores], count: int = SLICES_READ) -> list[str]:
    """The slices (not the whole dataset) where the candidate lost most, largest regression first."""
    regressed = [s for s in scores if s.slice != ALL and s.regression > 1e-12]
    return [s.slice for s in sorted(regressed, key=lambda s: (-s.regression, s.slice))[:count]]


@dataclass
class SpotCheck:
    status: str
    reasons: list[str]
    warnings: list[str]
    slices: list[SliceScores]
    read_from: list[str]  # the slices the rows come from ("all" when none regressed)
    rows: list[dict[str, Any]]
    sides: tuple[str, str] = ("baseline", "candidate")  # what each side is (endpoint[@variant][#component])
    dataset_records: int | None = None  # how many records were scored
    adapter: str | None = None  # the adapter whose records these are, when an endpoint serves several

    def summary(self) -> dict[str, Any]:
        named = {} if self.adapter is None else {"adapter": self.adapter}
        return {
            "kind": "summary",
            **named,
            "status": self.status,
            "reasons": self.reasons,
            "warnings": self.warnings,
            "read_from": self.read_from,
            "records": len(self.rows),
            "sides": list(self.sides),
            "dataset_records": self.dataset_records,
            "slices": [s.to_dict() for s in self.slices],
        }


def select(
    records: list[dict[str, Any]],
    baseline: list[dict[str, float]],
    candidate: list[dict[str, float]],
    baseline_outputs: list[str],
    candidate_outputs: list[str],
    thresholds: EvaluationGate,
    verdict: Verdict,
    size: int = SPOT_CHECK_SIZE,
    sides: tuple[str, str] = ("baseline", "candidate"),
) -> SpotCheck:
    slices = slices_of(records, thresholds)
    scores = slice_scores(records, baseline, candidate, thresholds, verdict.checks)
    chosen = regressed_slices(scores) or [ALL]
    pool = sorted({i for name in chosen for i in slices.get(name, [])})

    def loss(i: int) -> tuple[float, float, float]:
        shared = [m for m in baseline[i] if m in candidate[i]]
        lost = max((harm(baseline[i], candidate[i], m) for m in shared), default=0.0)
        gap = sum(abs(candidate[i][m] - baseline[i][m]) for m in shared)
        text_gap = 0.0 if baseline_outputs[i].strip() == candidate_outputs[i].strip() else 1.0
        return (lost, gap, text_gap)

    ranked = sorted(pool, key=lambda i: (tuple(-x for x in loss(i)), i))[:size]
    rows = [
        {
            "kind": "record",
            "id": records[i].get("id", i),
            "line": records[i].get("line"),
            "slices": [name for name in chosen if i in slices.get(name, [])],
            "prompt": records[i]["model_input"],
            "answers": targets(records[i].get("target_output", "")),
            "baseline_output": baseline_outputs[i],
            "candidate_output": candidate_outputs[i],
            "baseline_scores": baseline[i],
            "candidate_scores": candidate[i],
        }
        for i in ranked
    ]
    return SpotCheck(verdict.status, verdict.reasons, verdict.warnings, scores, chosen, rows, sides, len(records))


def for_adapter(spot: SpotCheck, adapter: str) -> SpotCheck:
    """The spot check of one adapter's records, each row naming the adapter."""
    rows = [
        {"kind": "record", "adapter": adapter, **{k: v for k, v in row.items() if k != "kind"}} for row in spot.rows
    ]
    return replace(spot, rows=rows, adapter=adapter)


def _score(value: float | None) -> str:
    return "–" if value is None else f"{value:.3f}"


def _text(value: str, limit: int | None = None) -> str:
    if value == "":
        return "<em>(empty)</em>"
    shown = value if limit is None or len(value) <= limit else value[:limit] + " …"
    return html.escape(shown)


def _answers(answers: list[str]) -> str:
    if len(answers) == 1:
        return _text(answers[0])
    return "<ul>" + "".join(f"<li>{_text(a)}</li>" for a in answers) + "</ul>"


def _record_scores(row: dict[str, Any]) -> str:
    base, cand = row["baseline_scores"], row["candidate_scores"]
    return "<br>".join(f"{html.escape(m)} {_score(base[m])} → {_score(cand[m])}" for m in sorted(base) if m in cand)


def _drop(scores: SliceScores) -> str:
    if scores.regression <= 1e-12:
        return "none"
    return f"{scores.regression:.3f} ({html.escape(scores.worst_metric)})"


def _verdict_head(status: str, reasons_list: list[str], warnings_list: list[str], sides: str) -> str:
    reasons = (
        "".join(f"<li>{html.escape(r)}</li>" for r in reasons_list) or "<li>every metric within its tolerance</li>"
    )
    warnings = "".join(f"<li>{html.escape(w)}</li>" for w in warnings_list)
    return f"""<h1>Verdict: {html.escape(status.upper())}</h1>
{sides}
<ul>{reasons}</ul>{f"<p>Warnings:</p><ul>{warnings}</ul>" if warnings else ""}"""


def _sections(spot: SpotCheck, level: int = 2) -> str:
    """The scores per slice and the spot check's rows (headings at `level`, the adapter named when set)."""
    slice_rows = "".join(
        f"<tr class={s.status}><td>{html.escape(s.slice)}</td><td>{s.n}</td><td>{html.escape(s.status)}</td>"
        f"<td>{html.escape(s.metric or '')}</td><td>{_score(s.baseline)}</td><td>{_score(s.candidate)}</td>"
        f"<td>{_drop(s)}</td>"
        f"<td>{'<br>'.join(html.escape(n) for n in s.notes)}</td></tr>"
        for s in spot.slices
    )
    rows = "".join(
        "<tr>"
        + f"<td>{html.escape(str(row['id']))}</td><td>{html.escape(', '.join(row['slices']))}</td>"
        + f"<td>{_text(row['prompt'], 400)}</td><td>{_answers(row['answers'])}</td>"
        + f"<td>{_text(row['baseline_output'])}</td><td>{_text(row['candidate_output'])}</td>"
        + f"<td>{_record_scores(row)}</td>"
        + "<td><label><input type=checkbox> candidate acceptable</label></td></tr>"
        for row in spot.rows
    )
    read_from = ", ".join(spot.read_from)
    origin = (
        f"From the slices that regressed most: {html.escape(read_from)}."
        if spot.read_from != [ALL]
        else "No slice regressed: from the whole dataset."
    )
    of = "" if spot.adapter is None else f" of adapter {html.escape(spot.adapter)}"
    return f"""<h{level}>Scores per slice{of}</h{level}>
<table><tr><th>slice</th><th>records</th><th>status</th><th>metric</th><th>baseline</th><th>candidate</th>\
<th>largest drop (metric)</th><th>notes</th></tr>{slice_rows}</table>
<h{level}>Spot check{of}: {len(spot.rows)} records where the candidate lost most</h{level}>
<p>{origin} Read each pair; a quantized model's damage shows in long-context and multi-step prompts first.</p>
<table><tr><th>id</th><th>slices</th><th>prompt</th><th>acceptable answers</th><th>baseline</th><th>candidate</th>\
<th>scores (baseline → candidate)</th><th>review</th></tr>{rows}</table>"""


def _sides(spot: SpotCheck) -> str:
    scored = "?" if spot.dataset_records is None else f"{spot.dataset_records}"
    return (
        f"<p>baseline: <b>{html.escape(spot.sides[0])}</b> · candidate: <b>{html.escape(spot.sides[1])}</b> · "
        f"{scored} records scored on each side</p>"
    )


PAGE_HEAD = """<!doctype html><html><head><meta charset="utf-8"><title>optigate spot check</title>
<style>body{font-family:system-ui,sans-serif;margin:2em} \
td,th{border:1px solid #ccc;padding:4px;vertical-align:top;font-size:13px} \
table{border-collapse:collapse;margin-bottom:1.5em} ul{margin:0;padding-left:1.2em} \
tr.fail td{background:#fde8e8} tr.unresolved td{background:#fff6dd}</style></head>
<body>"""


def render(spot: SpotCheck) -> str:
    head = _verdict_head(spot.status, spot.reasons, spot.warnings, _sides(spot))
    return f"{PAGE_HEAD}{head}\n{_sections(spot)}</body></html>"


def render_adapters(status: str, reasons: list[str], warnings: list[str], spots: list[SpotCheck]) -> str:
    """One page: the overall verdict, then per adapter shown its sides, verdict, slices and worst records."""
    head = _verdict_head(status, reasons, warnings, "")
    parts = [
        f"<h2>Adapter {html.escape(spot.adapter or '?')}: {html.escape(spot.status.upper())}</h2>\n{_sides(spot)}\n"
        + _sections(spot, level=3)
        for spot in spots
    ]
    return f"{PAGE_HEAD}{head}\n{''.join(parts)}</body></html>"


def write(spot: SpotCheck, folder: Path) -> tuple[Path, Path]:
    """`spotcheck.jsonl` (the summary line first, then the records) and `spotcheck.html`."""
    folder.mkdir(parents=True, exist_ok=True)
    jsonl = folder / "spotcheck.jsonl"
    jsonl.write_text("".join(json.dumps(row) + "\n" for row in [spot.summary(), *spot.rows]))
    page_path = folder / "spotcheck.html"
    page_path.write_text(render(spot))
    return jsonl, page_path


def write_adapters(
    status: str, reasons: list[str], warnings: list[str], spots: list[SpotCheck], folder: Path
) -> tuple[Path, Path]:
    """The overall spot check of an endpoint's adapters: `spotcheck.jsonl` (the summary line with each adapter's
    summary, then the adapters' records, each naming its adapter) and `spotcheck.html`."""
    folder.mkdir(parents=True, exist_ok=True)
    summary = {
        "kind": "summary",
        "status": status,
        "reasons": reasons,
        "warnings": warnings,
        "adapters": [spot.summary() for spot in spots],
        "records": sum(len(spot.rows) for spot in spots),
    }
    jsonl = folder / "spotcheck.jsonl"
    jsonl.write_text("".join(json.dumps(row) + "\n" for row in [summary, *(r for spot in spots for r in spot.rows)]))
    page_path = folder / "spotcheck.html"
    page_path.write_text(render_adapters(status, reasons, warnings, spots))
    return jsonl, page_path
