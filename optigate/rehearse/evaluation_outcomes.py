"""An adapter team's evaluation in a rehearsal: the processing job's own output for chosen outcomes per adapter.

The request's container arguments are read with the job's own parser (the endpoints, the thresholds, each
`--adapter`); each adapter gets synthetic records whose answers make the real rule
(optigate.evaluate.quality_verdict.compare) reach the outcome asked for, and the real job code
(optigate.evaluate.job.evaluate_adapters) writes verdict.json, the per-adapter files and the spot check, which
go to the job's S3 output as the container's upload would put them. An outcome that does not come out as asked
raises, which fails the job: a rehearsal never writes a verdict the job could not have written.
"""

from __future__ import annotations

import json
import math
import tempfile
from collections.abc import Mapping
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from optigate.config.models import EvaluationGate

#: What a rehearsal may ask of an adapter's evaluation (the job's verdict words).
OUTCOMES = ("pass", "fail", "unresolved")
#: Records per adapter, unless the tolerance needs more to resolve it.
RECORDS = 200


def _record_count(outcome: str, tolerance: float) -> int:
    """Enough records to resolve `tolerance` (pass and fail), or too few to (unresolved)."""
    resolvable = max(RECORDS, math.ceil(2 / tolerance)) if tolerance > 0 else RECORDS
    if outcome != "unresolved":
        return resolvable
    # One record moves the mean by 1/n: more than the tolerance, so the interval cannot clear it.
    return max(1, math.floor(1 / (2 * tolerance))) if 0 < tolerance < 0.5 else 0


def _answers(outcome: str, ids: list[str], tolerance: float) -> tuple[dict[str, str], dict[str, str]]:
    """Each side's answer by record id: the baseline always right; the candidate wrong on enough records to
    drop beyond the tolerance when the outcome is fail."""
    right = {rid: f"answer {rid}" for rid in ids}
    if outcome != "fail":
        return right, dict(right)
    lost = min(len(ids), math.ceil(len(ids) * tolerance) + math.ceil(len(ids) * 0.04))
    return right, {rid: ("something else" if i < lost else answer) for i, (rid, answer) in enumerate(right.items())}


def _score_answers(runner: Any, records: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    from optigate.evaluate.scoring import qa_rows

    return qa_rows(runner.answers, records)


def _side(endpoint: str, component: str, answers: dict[str, str]) -> SimpleNamespace:
    """A stand-in for the job's SageMaker runner: its endpoint and component (what the spot check names)."""
    spec = SimpleNamespace(endpoint_name=endpoint, target_variant=None, inference_component=component)
    return SimpleNamespace(endpoint=spec, answers=answers)


def write_adapter_outcomes(arguments: list[str], outcomes: Mapping[str, str], default: str, out: Path) -> str:
    """The job's output in `out` for the job `arguments` when each adapter's evaluation comes out as
    `outcomes[name]` (else `default`); returns the overall status. Raises ValueError on an outcome the
    request cannot have (no --adapter, an adapter it does not evaluate, a word the job does not write)."""
    from optigate.evaluate import job
    from optigate.evaluate.adapter_verdicts import parse_adapters
    from optigate.evaluate.dataset import load_dataset

    args = job.build_parser().parse_args(arguments)
    adapters = parse_adapters(args.adapter, args.dataset)
    names = [adapter.name for adapter in adapters]
    if not adapters:
        raise ValueError("the processing job evaluates no adapters: per-adapter outcomes need an adapter team's gate")
    unknown = sorted(set(outcomes) - set(names))
    if unknown:
        raise ValueError(f"the processing job evaluates adapters {names}, not {unknown}")
    wanted = {name: outcomes.get(name, default) for name in names}
    if not set(wanted.values()) <= set(OUTCOMES):
        raise ValueError(f"an evaluation outcome is one of {OUTCOMES}, not {sorted(set(wanted.values()))}")
    thresholds: EvaluationGate = job.thresholds_of(args)
    tolerance = thresholds.max_metric_drop_abs
    evaluated = []
    for adapter in adapters:
        count = _record_count(wanted[adapter.name], tolerance)
        ids = [f"{adapter.name}-{i:04d}" for i in range(count)]
        dataset = out.parent / "datasets" / f"{adapter.name}.jsonl"
        dataset.parent.mkdir(parents=True, exist_ok=True)
        dataset.write_text(
            "".join(
                json.dumps({"id": rid, "model_input": f"Question {rid}?", "target_output": f"answer {rid}"}) + "\n"
                for rid in ids
            )
        )
        records = load_dataset(dataset)
        baseline, candidate = _answers(wanted[adapter.name], ids, tolerance)
        evaluated.append(
            (
                adapter.name,
                records,
                _side(args.baseline, adapter.baseline_component, baseline),
                _side(args.candidate, adapter.candidate_component, candidate),
            )
        )
    result = job.evaluate_adapters(evaluated, thresholds, out, score=_score_answers)
    came = {name: verdict.status for name, verdict in result.adapters.items()}
    if came != wanted:
        raise ValueError(f"the synthetic evaluation came out {came}, not {wanted} (tolerance {tolerance})")
    return result.status


def upload_adapter_outcomes(request: dict[str, Any], outcomes: Mapping[str, str], default: str, s3: Any) -> str:
    """`write_adapter_outcomes` for a CreateProcessingJob request, every file put under its S3 output."""
    from optigate.config.models import split_s3_uri

    output = request["ProcessingOutputConfig"]["Outputs"][0]["S3Output"]["S3Uri"]
    bucket, key = split_s3_uri(output)
    arguments = [str(a) for a in request["AppSpecification"].get("ContainerArguments", [])]
    with tempfile.TemporaryDirectory(prefix="optigate-evaluation-") as folder:
        out = Path(folder) / "output"
        status = write_adapter_outcomes(arguments, outcomes, default, out)
        for path in sorted(p for p in out.rglob("*") if p.is_file()):
            name = f"{key.rstrip('/')}/{path.relative_to(out).as_posix()}"
            s3.put_object(Bucket=bucket, Key=name, Body=path.read_bytes())
    return status
