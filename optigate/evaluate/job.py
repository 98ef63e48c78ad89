"""The evaluation job: run fmeval's pipeline against baseline and candidate on the same records,
compare them, and write the verdict, per-record scores and the spot check.

Runs locally (`optigate evaluate ...`) and as the SageMaker Processing job of `EvaluationJob`
(`python -m optigate.evaluate.job`, inputs under /opt/ml/processing/input, output under
/opt/ml/processing/output). Exit code: 0 pass, 1 fail, 3 cannot resolve.

Dataset: JSONL with `model_input` (or `prompt` / `question`), `target_output` (or `answer`;
alternatives joined by `<OR>`), optional `id`, `category`, `task` (`qa` or `classification`)
and `prompt_tokens` (estimated from the text when absent).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from optigate.config.models import EvaluationGate
from optigate.evaluate import spotcheck
from optigate.evaluate.compare import Verdict, compare
from optigate.evaluate.scoring import estimate_tokens

PROMPT_TEMPLATE = "$model_input"
CLASSIFICATION_METRIC = "classification_accuracy_score"
EXIT_CODES = {"pass": 0, "fail": 1, "unresolved": 3}


def load_dataset(path: str | Path) -> list[dict[str, Any]]:
    path = Path(path)
    if path.is_dir():  # a Processing input channel: the one JSONL file in it
        files = sorted(path.glob("*.jsonl"))
        if len(files) != 1:
            raise ValueError(f"{path}: expected exactly one .jsonl file, found {len(files)}")
        path = files[0]
    records = []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        raw = json.loads(line)
        model_input = raw.get("model_input") or raw.get("prompt") or raw.get("question")
        target = raw.get("target_output") or raw.get("answer")
        if model_input is None or target is None:
            raise ValueError(
                f"{path}:{number}: a record needs model_input (or prompt/question) and target_output (or answer)"
            )
        if isinstance(target, list):
            target = "<OR>".join(map(str, target))
        records.append(
            {
                "id": str(raw.get("id", number)),
                "model_input": str(model_input),
                "target_output": str(target),
                "category": str(raw.get("category", "")),
                "task": raw.get("task", "qa"),
                "prompt_tokens": int(raw.get("prompt_tokens") or estimate_tokens(str(model_input))),
            }
        )
    ids = [r["id"] for r in records]
    if len(set(ids)) != len(ids):
        raise ValueError(f"{path}: record ids must be unique")
    return records


def score_model(
    runner: Any, records: list[dict[str, Any]], valid_labels: list[str] | None = None, workers: int = 8
) -> dict[str, dict[str, Any]]:
    """fmeval's transform pipeline over the records: prompt, model output, then the scores.

    Records go through `TransformPipeline.execute_record` on a thread pool: the work is waiting
    for the endpoint, and Ray's per-transform actor start-up (seconds each, importing torch)
    would dominate a dataset of a few hundred records. Keyed by record id.
    """
    from concurrent.futures import ThreadPoolExecutor

    from fmeval.eval_algorithms.classification_accuracy import ClassificationAccuracyScores
    from fmeval.eval_algorithms.factual_knowledge import FactualKnowledgeScores
    from fmeval.transforms.common import GeneratePrompt, GetModelOutputs
    from fmeval.transforms.transform_pipeline import TransformPipeline

    from optigate.evaluate.transforms import QAScores, RefusalScore

    common = [
        GeneratePrompt(["model_input"], ["prompt"], PROMPT_TEMPLATE),
        GetModelOutputs({"prompt": ["model_output"]}, runner),
    ]
    qa_pipeline = TransformPipeline([*common, FactualKnowledgeScores(), QAScores(), RefusalScore()])
    classification = [r for r in records if r["task"] == "classification"]
    labels = valid_labels or sorted({r["target_output"] for r in classification})
    classification_pipeline = TransformPipeline(
        [*common, ClassificationAccuracyScores(valid_labels=labels), RefusalScore()]
    )

    def run(record: dict[str, Any]) -> dict[str, Any]:
        pipeline = classification_pipeline if record["task"] == "classification" else qa_pipeline
        return pipeline.execute_record(dict(record))

    with ThreadPoolExecutor(max_workers=workers) as pool:
        return {row["id"]: row for row in pool.map(run, records)}


SCORE_KEYS = (
    "factual_knowledge",
    "factual_knowledge_quasi_exact",
    "qa_exact_match",
    "qa_quasi_exact_match",
    "qa_f1",
    CLASSIFICATION_METRIC,
    "refusal",
)


def scores_of(row: dict[str, Any]) -> dict[str, float]:
    return {key: float(row[key]) for key in SCORE_KEYS if key in row and row[key] is not None}


def evaluate(
    records: list[dict[str, Any]], baseline_runner: Any, candidate_runner: Any, thresholds: EvaluationGate, out: Path
) -> Verdict:
    baseline_rows = score_model(baseline_runner, records)
    candidate_rows = score_model(candidate_runner, records)
    baseline = [scores_of(baseline_rows[r["id"]]) for r in records]
    candidate = [scores_of(candidate_rows[r["id"]]) for r in records]
    verdict = compare(records, baseline, candidate, thresholds)
    out.mkdir(parents=True, exist_ok=True)
    written = {**verdict.to_dict(), "records": len(records), "thresholds": _judged_by(thresholds)}
    (out / "verdict.json").write_text(json.dumps(written, indent=2))
    with (out / "scores.jsonl").open("w") as handle:
        for record, base, cand in zip(records, baseline, candidate, strict=True):
            handle.write(
                json.dumps(
                    {
                        "id": record["id"],
                        "category": record["category"],
                        "prompt_tokens": record["prompt_tokens"],
                        "baseline_output": baseline_rows[record["id"]]["model_output"],
                        "candidate_output": candidate_rows[record["id"]]["model_output"],
                        "baseline": base,
                        "candidate": cand,
                    }
                )
                + "\n"
            )
    spot = spotcheck.select(
        records,
        baseline,
        candidate,
        [baseline_rows[r["id"]]["model_output"] or "" for r in records],
        [candidate_rows[r["id"]]["model_output"] or "" for r in records],
        thresholds,
    )
    spotcheck.write(spot, out)
    return verdict


def _judged_by(thresholds: EvaluationGate) -> dict[str, Any]:
    """The thresholds the verdict was judged by (the dataset is the job's input, not a threshold)."""
    return thresholds.model_dump(exclude={"dataset_s3_uri"})


def thresholds_from_team(path: str | None) -> EvaluationGate:
    if not path:
        return EvaluationGate()
    from optigate.config.loader import load_team

    return load_team(path, rules=False).gate.evaluation


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="optigate evaluate", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--dataset", required=True, help="JSONL records")
    parser.add_argument("--baseline", required=True, help="endpoint, endpoint@variant or endpoint#inference-component")
    parser.add_argument("--candidate", required=True, help="endpoint, endpoint@variant or endpoint#inference-component")
    parser.add_argument("--config", help="the team file whose gate.evaluation thresholds apply")
    parser.add_argument("--out", required=True, help="folder for verdict.json, scores.jsonl, spotcheck.*")
    parser.add_argument("--region", default=os.environ.get("AWS_REGION", "us-east-1"))
    parser.add_argument("--endpoint-url", help="e.g. the emulator: http://127.0.0.1:8080")
    parser.add_argument("--schema", choices=["inputs", "messages"], default="inputs")
    parser.add_argument("--stream", action="store_true", help="use InvokeEndpointWithResponseStream")
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--max-metric-drop-abs", type=float, help="overrides the team file")
    parser.add_argument("--max-refusal-rate-increase", type=float, help="overrides the team file")
    parser.add_argument("--long-context-prompt-tokens", type=int, help="overrides the team file")
    return parser


def main(argv: list[str] | None = None) -> int:
    from optigate.evaluate.runner import EndpointSpec, SageMakerEndpointRunner

    args = build_parser().parse_args(argv)
    records = load_dataset(args.dataset)
    runners = [
        SageMakerEndpointRunner(
            EndpointSpec.parse(spec),
            region=args.region,
            endpoint_url=args.endpoint_url,
            schema=args.schema,
            stream=args.stream,
            max_new_tokens=args.max_new_tokens,
        )
        for spec in (args.baseline, args.candidate)
    ]
    thresholds = thresholds_from_team(args.config)
    names = ("max_metric_drop_abs", "max_refusal_rate_increase", "long_context_prompt_tokens")
    overrides = {key: getattr(args, key) for key in names if getattr(args, key) is not None}
    thresholds = EvaluationGate.model_validate({**thresholds.model_dump(), **overrides})
    verdict = evaluate(records, runners[0], runners[1], thresholds, Path(args.out))
    summary = "; ".join(verdict.reasons) or "every metric within its tolerance"
    print(f"{verdict.status.upper()}: {len(records)} records; {summary}")
    for warning in verdict.warnings:
        print(f"  warning: {warning}")
    return EXIT_CODES[verdict.status]


if __name__ == "__main__":
    sys.exit(main())
