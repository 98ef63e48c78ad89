"""The evaluation job: run fmeval's pipeline against baseline and candidate on the same records,
compare them, and write the verdict, per-record scores and the spot check.

Runs locally (`optigate evaluate ...`) and as the SageMaker Processing job of `EvaluationJob`
(`python -m optigate.evaluate.job`, inputs under /opt/ml/processing/input, output under
/opt/ml/processing/output). Exit code: 0 pass, 1 fail, 2 usage or input error (the dataset's
file:line, or the endpoint, in one line), 3 cannot resolve (too few records, including none).

Dataset: JSONL with `model_input` (or `prompt` / `question`), `target_output` (or `answer`; a
string, a number or a list of acceptable answers; `0` and `""` are valid), optional `id`,
`category`, `task` (`qa` or `classification`) and `prompt_tokens` (estimated from the text when
absent).

Adapters (an endpoint serving LoRA adapters through inference components): `--adapter NAME
BASELINE_COMPONENT CANDIDATE_COMPONENT [DATASET]`, repeated, evaluates each adapter's component on
the two endpoints on its own dataset (default --dataset); verdict.json is the overall verdict (fail
if any adapter fails, else unresolved if any is unresolved, else pass) with "adapters": {name:
verdict}; each adapter's own files are under adapters/<name>/ (optigate.evaluate.adapter_verdicts).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from optigate.config.models import EvaluationGate
from optigate.evaluate import spotcheck
from optigate.evaluate.adapter_verdicts import SPEC_FIELDS, AdapterSpec, AdapterVerdicts, overall, parse_adapters
from optigate.evaluate.dataset import load_dataset
from optigate.evaluate.input_errors import INPUT_ERROR_EXIT, InputError, endpoint_problem
from optigate.evaluate.quality_verdict import Verdict, compare

__all__ = ["EXIT_CODES", "evaluate", "evaluate_adapters", "load_dataset", "main"]

PROMPT_TEMPLATE = "$model_input"
CLASSIFICATION_METRIC = "classification_accuracy_score"
EXIT_CODES = {"pass": 0, "fail": 1, "unresolved": 3}
#: score_model's signature: a runner and the records, to fmeval's output rows keyed by record id.
Scorer = Callable[[Any, list[dict[str, Any]]], dict[str, dict[str, Any]]]


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

    if not records:
        return {}
    # The first record alone: an endpoint that does not answer fails once, not once per record.
    rows = [run(records[0])]
    pool = ThreadPoolExecutor(max_workers=workers)
    try:
        rows += pool.map(run, records[1:])
    finally:
        pool.shutdown(cancel_futures=True)
    return {row["id"]: row for row in rows}


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


def _endpoint_name(runner: Any) -> str:
    spec = getattr(runner, "endpoint", None)
    if spec is None:
        return str(runner)
    suffix = f"@{spec.target_variant}" if spec.target_variant else ""
    suffix += f"#{spec.inference_component}" if spec.inference_component else ""
    return f"{spec.endpoint_name}{suffix}"


def _scored(side: str, runner: Any, records: list[dict[str, Any]], score: Scorer) -> dict[str, dict[str, Any]]:
    """`score(runner, records)`, with a failed endpoint call said in one line (an `InputError`)."""
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        return score(runner, records)
    except (BotoCoreError, ClientError) as error:
        raise endpoint_problem(error, side, _endpoint_name(runner), getattr(runner, "endpoint_url", None)) from error


def evaluate(
    records: list[dict[str, Any]],
    baseline_runner: Any,
    candidate_runner: Any,
    thresholds: EvaluationGate,
    out: Path,
    *,
    score: Scorer | None = None,
) -> Verdict:
    """Score both sides, judge them and write verdict.json, scores.jsonl and the spot check to `out`.

    No records: nothing is sent to the endpoints and the verdict is unresolved (never a pass).
    `score` defaults to fmeval's pipeline (`score_model`); a failed endpoint call raises `InputError`.
    """
    return _evaluated(records, baseline_runner, candidate_runner, thresholds, out, score=score)[0]


def _evaluated(
    records: list[dict[str, Any]],
    baseline_runner: Any,
    candidate_runner: Any,
    thresholds: EvaluationGate,
    out: Path,
    *,
    score: Scorer | None = None,
    adapter: str | None = None,
) -> tuple[Verdict, spotcheck.SpotCheck]:
    """`evaluate`, also returning the spot check (naming `adapter` when one adapter is evaluated)."""
    scorer: Scorer = score or score_model
    baseline_rows = _scored("baseline", baseline_runner, records, scorer) if records else {}
    candidate_rows = _scored("candidate", candidate_runner, records, scorer) if records else {}
    baseline = [scores_of(baseline_rows[r["id"]]) for r in records]
    candidate = [scores_of(candidate_rows[r["id"]]) for r in records]
    baseline_outputs = [baseline_rows[r["id"]].get("model_output") or "" for r in records]
    candidate_outputs = [candidate_rows[r["id"]].get("model_output") or "" for r in records]
    verdict = compare(records, baseline, candidate, thresholds)
    out.mkdir(parents=True, exist_ok=True)
    written = {**verdict.to_dict(), "records": len(records), "thresholds": _judged_by(thresholds)}
    (out / "verdict.json").write_text(json.dumps(written, indent=2))
    with (out / "scores.jsonl").open("w") as handle:
        for record, base, cand, base_out, cand_out in zip(
            records, baseline, candidate, baseline_outputs, candidate_outputs, strict=True
        ):
            row = {
                "id": record["id"],
                "line": record.get("line"),
                "category": record["category"],
                "prompt_tokens": record["prompt_tokens"],
                "baseline_output": base_out,
                "candidate_output": cand_out,
                "baseline": base,
                "candidate": cand,
            }
            handle.write(json.dumps(row) + "\n")
    sides = (_endpoint_name(baseline_runner), _endpoint_name(candidate_runner))
    spot = spotcheck.select(
        records, baseline, candidate, baseline_outputs, candidate_outputs, thresholds, verdict, sides=sides
    )
    if adapter is not None:
        spot = spotcheck.for_adapter(spot, adapter)
    spotcheck.write(spot, out)
    return verdict, spot


#: Where each adapter's own verdict.json, scores.jsonl and spot check go, under the output folder.
ADAPTERS_FOLDER = "adapters"


def evaluate_adapters(
    evaluated: Sequence[tuple[str, list[dict[str, Any]], Any, Any]],
    thresholds: EvaluationGate,
    out: Path,
    *,
    score: Scorer | None = None,
) -> AdapterVerdicts:
    """Each adapter `(name, records, baseline runner, candidate runner)` judged on its own records (its files in
    `out/adapters/<name>/`), then the overall verdict in `out/verdict.json` and the spot check of the adapters
    that decided it (failing, else unresolved, else every one) in `out/spotcheck.*`, each record naming its
    adapter. An adapter without records is unresolved, so the whole is never a pass."""
    verdicts: dict[str, Verdict] = {}
    spots: dict[str, spotcheck.SpotCheck] = {}
    for name, records, baseline_runner, candidate_runner in evaluated:
        verdicts[name], spots[name] = _evaluated(
            records, baseline_runner, candidate_runner, thresholds, out / ADAPTERS_FOLDER / name,
            score=score, adapter=name,
        )  # fmt: skip
    counts = {name: len(records) for name, records, _, _ in evaluated}
    result = overall(verdicts, [name for name, *_ in evaluated], counts)
    written = {**result.to_dict(), "records": sum(counts.values()), "thresholds": _judged_by(thresholds)}
    (out / "verdict.json").write_text(json.dumps(written, indent=2))
    shown = [name for name in spots if verdicts[name].status == result.status] or list(spots)
    spotcheck.write_adapters(result.status, result.reasons, result.warnings, [spots[name] for name in shown], out)
    return result


def _judged_by(thresholds: EvaluationGate) -> dict[str, Any]:
    """The thresholds the verdict was judged by (the dataset is the job's input, not a threshold)."""
    return thresholds.model_dump(exclude={"dataset_s3_uri"})


def thresholds_from_team(path: str | None) -> EvaluationGate:
    if not path:
        return EvaluationGate()
    from optigate.config.loader import ConfigError, load_team

    try:
        return load_team(path, rules=False).gate.evaluation
    except ConfigError as error:
        raise InputError(str(error)) from None


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="optigate evaluate", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--dataset",
        required=True,
        help="a local JSONL file of records (model_input, target_output, category); required",
    )
    side = "endpoint, endpoint@variant or endpoint#inference-component; required"
    parser.add_argument("--baseline", required=True, help=side)
    parser.add_argument("--candidate", required=True, help=side)
    parser.add_argument(
        "--config", help="the team file whose gate.evaluation thresholds apply (default: the built-in thresholds)"
    )
    parser.add_argument(
        "--out", required=True, help="local folder for verdict.json, scores.jsonl, spotcheck.*; required"
    )
    parser.add_argument(
        "--region",
        default=os.environ.get("AWS_REGION", "us-east-1"),
        help="the endpoints' region (default: $AWS_REGION, else us-east-1)",
    )
    parser.add_argument(
        "--endpoint-url", help="e.g. the emulator: http://127.0.0.1:8080 (default: the region's SageMaker runtime)"
    )
    parser.add_argument(
        "--schema",
        choices=["inputs", "messages"],
        default="inputs",
        help="request body: LMI's inputs+parameters or OpenAI-style messages (default: inputs)",
    )
    parser.add_argument("--stream", action="store_true", help="use InvokeEndpointWithResponseStream (default: off)")
    parser.add_argument("--max-new-tokens", type=int, default=64, help="tokens generated per record (default: 64)")
    team_file = "overrides the team file (default: the team file's, else the built-in value)"
    parser.add_argument("--max-metric-drop-abs", type=float, help=team_file)
    parser.add_argument("--max-refusal-rate-increase", type=float, help=team_file)
    parser.add_argument("--long-context-prompt-tokens", type=int, help=team_file)
    parser.add_argument(
        "--exit-zero-on-verdict",
        action="store_true",
        help="exit 0 whenever verdict.json was written (pass, fail or unresolved) and leave the verdict to whoever "
        "reads its status, e.g. a Processing job, which a non-zero exit fails; input errors still exit 2",
    )
    parser.add_argument(
        "--adapter",
        action="append",
        nargs="+",
        metavar="VALUE",
        help=f"{' '.join(SPEC_FIELDS[:3])} [{SPEC_FIELDS[3]}]: evaluate this adapter's inference component on "
        "--baseline and --candidate (endpoint names) on its own dataset (default: --dataset); repeat per adapter. "
        "The verdict is then per adapter (see optigate.evaluate.adapter_verdicts)",
    )
    return parser


def thresholds_of(args: argparse.Namespace) -> EvaluationGate:
    """The team file's `gate.evaluation`, with the command line's overrides."""
    from pydantic import ValidationError

    thresholds = thresholds_from_team(args.config)
    names = ("max_metric_drop_abs", "max_refusal_rate_increase", "long_context_prompt_tokens")
    overrides = {key: getattr(args, key) for key in names if getattr(args, key) is not None}
    try:
        return EvaluationGate.model_validate({**thresholds.model_dump(), **overrides})
    except ValidationError as error:
        problems = "; ".join(f"--{'-'.join(map(str, e['loc'])).replace('_', '-')}: {e['msg']}" for e in error.errors())
        raise InputError(problems) from None


def _runner(args: argparse.Namespace, spec: str) -> Any:
    from optigate.evaluate.model_runner import EndpointSpec, SageMakerEndpointRunner

    return SageMakerEndpointRunner(
        EndpointSpec.parse(spec),
        region=args.region,
        endpoint_url=args.endpoint_url,
        schema=args.schema,
        stream=args.stream,
        max_new_tokens=args.max_new_tokens,
    )


def run(args: argparse.Namespace) -> int:
    if args.adapter:
        return run_adapters(args, parse_adapters(args.adapter, args.dataset))
    records = load_dataset(args.dataset)  # before fmeval is imported: a bad line is said at once
    thresholds = thresholds_of(args)
    runners: list[Any] = [None, None]
    if records:  # no records: no endpoint is called, the verdict is unresolved
        runners = [_runner(args, spec) for spec in (args.baseline, args.candidate)]
    verdict = evaluate(records, runners[0], runners[1], thresholds, Path(args.out))
    summary = "; ".join(verdict.reasons) or "every metric within its tolerance"
    print(f"{verdict.status.upper()}: {len(records)} records; {summary}")
    for warning in verdict.warnings:
        print(f"  warning: {warning}")
    return 0 if args.exit_zero_on_verdict else EXIT_CODES[verdict.status]


def run_adapters(args: argparse.Namespace, adapters: list[AdapterSpec]) -> int:
    """Each adapter's component on the two endpoints, on its own records; the overall verdict decides the exit."""
    for side, endpoint in (("--baseline", args.baseline), ("--candidate", args.candidate)):
        if "#" in endpoint or "@" in endpoint:
            raise InputError(
                f"{side} {endpoint}: with --adapter it names the endpoint only; each adapter names its components"
            )
    loaded: dict[str, list[dict[str, Any]]] = {}
    for adapter in adapters:  # every dataset read before any endpoint is called: a bad line is said at once
        if adapter.dataset not in loaded:
            loaded[adapter.dataset] = load_dataset(adapter.dataset)
    thresholds = thresholds_of(args)
    evaluated = []
    for adapter in adapters:
        records = loaded[adapter.dataset]
        sides = (f"{args.baseline}#{adapter.baseline_component}", f"{args.candidate}#{adapter.candidate_component}")
        runners = [_runner(args, spec) for spec in sides] if records else [None, None]
        evaluated.append((adapter.name, records, runners[0], runners[1]))
    result = evaluate_adapters(evaluated, thresholds, Path(args.out))
    total = sum(result.records.values())
    summary = "; ".join(result.reasons) or "every metric of every adapter within its tolerance"
    print(f"{result.status.upper()}: {len(adapters)} adapters, {total} records; {summary}")
    for name, verdict in result.adapters.items():
        print(f"  adapter {name}: {verdict.status} ({result.records[name]} records)")
    for warning in result.warnings:
        print(f"  warning: {warning}")
    return 0 if args.exit_zero_on_verdict else EXIT_CODES[result.status]


def main(argv: list[str] | None = None) -> int:
    """Exit code: 0 pass, 1 fail, 2 usage or input error (one line on stderr), 3 cannot resolve."""
    args = build_parser().parse_args(argv)
    try:
        return run(args)
    except InputError as error:
        print(f"error: {error}", file=sys.stderr)
        return INPUT_ERROR_EXIT


if __name__ == "__main__":
    sys.exit(main())
