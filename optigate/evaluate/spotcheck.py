"""The records a human should read: in the two hardest slices, where the models disagree most."""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

from optigate.config.models import EvaluationGate
from optigate.evaluate.compare import ALL, slices_of

SPOT_CHECK_SIZE = 50
QUALITY_METRICS = ("qa_f1", "classification_accuracy_score", "factual_knowledge")


def quality(scores: dict[str, float]) -> float | None:
    """The record's primary task score: QA F1, else classification accuracy, else factual knowledge."""
    return next((scores[m] for m in QUALITY_METRICS if m in scores), None)


def hardest_slices(
    records: list[dict[str, Any]],
    baseline: list[dict[str, float]],
    candidate: list[dict[str, float]],
    thresholds: EvaluationGate,
    count: int = 2,
) -> list[str]:
    """Slices where the two models score lowest on average (ties: more disagreement, then size)."""
    scored = []
    for name, indexes in slices_of(records, thresholds).items():
        scores = [(quality(baseline[i]), quality(candidate[i])) for i in indexes]
        pairs = [(b, c) for b, c in scores if b is not None and c is not None]
        if name == ALL or not pairs:
            continue
        mean = sum(b + c for b, c in pairs) / (2 * len(pairs))
        disagreement = sum(abs(b - c) for b, c in pairs) / len(pairs)
        scored.append((mean, -disagreement, -len(pairs), name))
    return [entry[-1] for entry in sorted(scored)[:count]]


def select(
    records,
    baseline,
    candidate,
    baseline_outputs,
    candidate_outputs,
    thresholds: EvaluationGate,
    size: int = SPOT_CHECK_SIZE,
) -> list[dict[str, Any]]:
    slices = slices_of(records, thresholds)
    chosen_slices = hardest_slices(records, baseline, candidate, thresholds)
    pool = sorted({i for name in chosen_slices for i in slices[name]})

    def disagreement(i: int) -> tuple[float, float]:
        score_gap = sum(abs(candidate[i].get(m, 0.0) - baseline[i].get(m, 0.0)) for m in baseline[i])
        text_gap = 0.0 if baseline_outputs[i].strip() == candidate_outputs[i].strip() else 1.0
        return (score_gap, text_gap)

    ranked = sorted(pool, key=disagreement, reverse=True)[:size]
    return [
        {
            "id": records[i].get("id", i),
            "slices": [name for name in chosen_slices if i in slices[name]],
            "prompt": records[i]["model_input"],
            "target": records[i].get("target_output", ""),
            "baseline_output": baseline_outputs[i],
            "candidate_output": candidate_outputs[i],
            "baseline_scores": baseline[i],
            "candidate_scores": candidate[i],
        }
        for i in ranked
    ]


def write(spot: list[dict[str, Any]], folder: Path) -> tuple[Path, Path]:
    folder.mkdir(parents=True, exist_ok=True)
    jsonl = folder / "spotcheck.jsonl"
    jsonl.write_text("".join(json.dumps(row) + "\n" for row in spot))
    rows = "".join(
        "<tr>"
        + "".join(
            f"<td>{html.escape(str(v))}</td>"
            for v in (
                row["id"],
                ", ".join(row["slices"]),
                row["prompt"][:400],
                row["target"],
                row["baseline_output"],
                row["candidate_output"],
            )
        )
        + "<td><label><input type=checkbox> candidate acceptable</label></td></tr>"
        for row in spot
    )
    page = f"""<!doctype html><html><head><meta charset="utf-8"><title>optigate spot check</title>
<style>body{{font-family:system-ui,sans-serif;margin:2em}} \
td,th{{border:1px solid #ccc;padding:4px;vertical-align:top;font-size:13px}} \
table{{border-collapse:collapse}}</style></head>
<body><h1>Spot check: {len(spot)} records where baseline and candidate disagree most</h1>
<p>From the two hardest slices. Read each pair; \
a quantized model's damage shows in long-context and multi-step prompts first.</p>
<table><tr><th>id</th><th>slices</th><th>prompt</th><th>target</th><th>baseline</th><th>candidate</th><th>review</th></tr>{rows}</table></body></html>"""
    page_path = folder / "spotcheck.html"
    page_path.write_text(page)
    return jsonl, page_path
