"""The gate's report.json as one pydantic model, and its defensive reader (issue 29).

What GateVerdict.to_dict writes and `optigate advise --from-report` and `optigate plan --calibrate` read back. A
report may be cut short, hand-edited or written by another optigate version: :func:`read_gate_report` checks it
against :class:`GateReportFile`, then a few rules a schema cannot say (the outcome is the one its checks give and
`approved` agrees with it; each level once), and raises :class:`GateReportError` naming the file, the JSON path,
what was expected and what was found. The writer never writes NaN or infinity (render_json: null), so neither is
read anywhere in the file, nor a figure out of range.

Strict where a reader depends on it (the outcome, the change, the levels' figures, the plan the prediction came
from); the rest (thresholds, deltas, the shadow, cross-check, capacity, server metrics, traffic and adapter check
sections) is checked for shape only: no reader takes a decision from them.

``format_version`` is :data:`FORMAT_VERSION`. A report without one was written before versioning, in the same
layout: it is read when it validates. A report of another version is refused, naming both.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from optigate.file_errors import FileError, check_version, expected_of, load_json, shown
from optigate.gate.report_format import FORMAT_VERSION
from optigate.jsonsafe import json_path

#: The largest magnitude of a figure read: anything beyond is no measurement (and would overflow arithmetic).
MAX_FIGURE = 1e15
MAX_COUNT = 2**53

Figure = Annotated[float, Field(ge=0, le=MAX_FIGURE)]  # latencies, rates, costs, ratios: never below 0
Signed = Annotated[float, Field(ge=-MAX_FIGURE, le=MAX_FIGURE)]  # gains and differences, in % or points
Count = Annotated[int, Field(ge=0, le=MAX_COUNT)]
Level = Annotated[int, Field(ge=1, le=10**6)]

#: The outcomes (optigate.gate.decision.verdict.OUTCOMES), and each check's.
Outcome = Literal["APPROVED", "REJECTED", "INCONCLUSIVE"]
CheckOutcome = Literal["pass", "fail", "inconclusive"]


class _Strict(BaseModel):
    # Strict: "3" is not a number and true is not a count; NaN and infinity are refused. Keys a later optigate adds
    # within the same format version are kept.
    model_config = ConfigDict(strict=True, allow_inf_nan=False, extra="allow")


class ReportCheck(_Strict):
    """One check of the verdict (optigate.gate.decision.checks.check_dict)."""

    name: str
    concurrency: Level | None
    passed: bool
    outcome: CheckOutcome
    measured: Signed | str | None  # the quality check measures a word (pass, fail)
    threshold: Signed | str | None
    ci_low: Signed | None
    ci_high: Signed | None
    detail: str
    adapter: str | None = None


class SideFigures(_Strict):
    """One side's figures at one level, its blocks pooled (verdict._figures); null where nothing was measured."""

    requests: Count
    successful_requests: Count
    errors: dict[str, Count] = Field(default_factory=dict)
    p50_ttft_ms: Figure | None = None
    p99_ttft_ms: Figure | None = None
    p50_itl_ms: Figure | None = None
    p99_itl_ms: Figure | None = None
    p50_tpot_ms: Figure | None = None
    p99_tpot_ms: Figure | None = None
    output_tokens_per_s: Figure | None = None
    mean_tokens_per_chunk: Figure | None = None
    window_s: Figure | None = None


class AdapterSides(_Strict):
    """An adapter's figures at a level; a side that sent it nothing: null."""

    baseline: SideFigures | None
    candidate: SideFigures | None


class ReportLevel(_Strict):
    """One concurrency level both benchmarks measured."""

    concurrency: Level
    baseline: SideFigures
    candidate: SideFigures
    throughput_gain_pct: Signed | None = None
    goodput: dict[str, Any] | None = None
    adapters: dict[str, AdapterSides] | None = None


class LevelCost(_Strict):
    """USD per million output tokens at one level (null: no price or no throughput)."""

    concurrency: Level
    baseline: Figure | None
    candidate: Figure | None
    baseline_output_tokens_per_s: Figure | None = None
    candidate_output_tokens_per_s: Figure | None = None


class PredictedFigure(_Strict):
    """The planner's figure beside the one measured."""

    predicted: Figure | None
    expected: Figure | None = None
    measured: Figure | None
    measured_as: str
    ratio: Figure | None
    expected_ratio: Figure | None = None


class ReportPlan(_Strict):
    """The plan a prediction came from (optigate.deployment.serving's prediction): what `plan --calibrate` keys a
    calibration by, and the overheads the expected figure assumed."""

    instance_type: str
    accelerator: str
    weight_precision: str | None
    engine: Literal["vllm", "trtllm", "neuron"] | None
    step_overhead_ms: Figure | None = None
    allreduce_ms_per_step: Figure | None = None
    basis: str | None = None
    speculative_decoding: str | None = None


class Prediction(_Strict):
    """The planner's prediction beside the measurement (prediction.prediction_vs_measurement)."""

    decode_tpot_ms_batch1: PredictedFigure
    prefill_ms: PredictedFigure | None = None
    cost_per_million_output_tokens: PredictedFigure | None = None
    kv_capacity_tokens: PredictedFigure | None = None
    plan: ReportPlan | None = None
    note: str = ""


class GateReportFile(_Strict):
    """What the gate's decision writes to report.json (GateVerdict.to_dict, optigate.gate.report.render_json)."""

    format_version: Literal[1] | None = Field(
        default=None, description="the layout's version; absent in reports written before versioning (same layout)"
    )
    team: Annotated[str, Field(min_length=1)]
    environment: str
    approved: bool
    outcome: Outcome
    summary: str
    reasons: list[str]
    checks: list[ReportCheck]
    cost_per_million_output_tokens: list[LevelCost]
    # What the costs price (optigate.plan.cost.CostBasis.to_json); absent in reports written before it (whole
    # instances).
    cost_basis: dict[str, Any] | None = None
    prediction_vs_measurement: Prediction | None = None
    levels: list[ReportLevel]
    change: dict[str, Any]
    # Sections no reader takes a decision from: their shape only.
    thresholds: dict[str, Any] = Field(default_factory=dict)
    deltas: list[dict[str, Any]] = Field(default_factory=list)
    shadow: dict[str, Any] | None = None
    cross_check: dict[str, Any] | None = None
    capacity: dict[str, Any] | None = None
    server_metrics: dict[str, Any] | None = None
    traffic: dict[str, Any] | None = None
    adapter_check: dict[str, Any] | None = None


class GateReportError(FileError):
    """A gate report that cannot be read: where (file and JSON path), what was expected and what was found."""


#: This reader's words for what a pydantic error expected (optigate.file_errors has the common ones).
_WORDS = {"string_too_short": "a name"}

#: What a missing key is, where "this key" says too little.
_MISSING = {
    "outcome": "the gate's outcome (APPROVED, REJECTED or INCONCLUSIVE)",
    "team": "the team the gate ran for",
    "levels": "the levels both benchmarks measured (a list, maybe empty)",
    "checks": "the gate's checks",
    "change": "the change the candidate made (an object)",
}


def _first_error(file: str, error: ValidationError) -> GateReportError:
    # Several members of a union fail together (a figure or null): the first names what the file has.
    first = error.errors(include_url=False)[0]
    loc = tuple(part for part in first["loc"] if not (isinstance(part, str) and "[" in part))
    if first["type"] == "missing":
        expected = _MISSING.get(str(loc[-1]), "this key")
        return GateReportError(file, json_path(loc), expected, "nothing (the key is missing)")
    return GateReportError(file, json_path(loc), expected_of(first, _WORDS), shown(first.get("input")))


def _non_finite(file: str, data: Any) -> None:
    """NaN or infinity anywhere (the writer writes null instead), found without recursion: nesting is the file's."""
    stack: list[tuple[tuple[Any, ...], Any]] = [((), data)]
    while stack:
        loc, value = stack.pop()
        if isinstance(value, float) and not math.isfinite(value):
            raise GateReportError(file, json_path(loc), "a finite number or null", shown(value))
        if isinstance(value, dict):
            stack.extend(((*loc, key), item) for key, item in reversed(value.items()))
        elif isinstance(value, list):
            stack.extend(((*loc, index), item) for index, item in reversed(list(enumerate(value))))


def _outcome_of(checks: list[ReportCheck]) -> str:
    """The outcome the checks give (optigate.gate.decision.verdict.outcome_of, on the written checks)."""
    outcomes = {check.outcome for check in checks}
    if not checks or "fail" in outcomes:
        return "REJECTED"
    return "INCONCLUSIVE" if "inconclusive" in outcomes else "APPROVED"


def _check_report(file: str, report: GateReportFile) -> None:
    """What the schema cannot say: the outcome its checks give, `approved` agreeing, each level once."""
    for index, check in enumerate(report.checks):
        if check.passed != (check.outcome == "pass"):
            found = f"passed {json.dumps(check.passed)} with outcome {check.outcome!r}"
            raise GateReportError(file, f"checks[{index}].passed", "true exactly when the outcome is 'pass'", found)
    given = _outcome_of(report.checks)
    if report.outcome != given:
        counted = f"{len(report.checks)} checks" if report.checks else "no checks"
        expected = f"{given}, the outcome its {counted} give"
        raise GateReportError(file, "outcome", expected, shown(report.outcome))
    if report.approved != (report.outcome == "APPROVED"):
        expected = f"{json.dumps(report.outcome == 'APPROVED')} (the outcome is {report.outcome})"
        raise GateReportError(file, "approved", expected, json.dumps(report.approved))
    levels = {
        "levels": [level.concurrency for level in report.levels],
        "cost_per_million_output_tokens": [cost.concurrency for cost in report.cost_per_million_output_tokens],
    }
    for name, concurrencies in levels.items():
        seen: dict[int, int] = {}
        for index, concurrency in enumerate(concurrencies):
            if concurrency in seen:
                expected = f"a level no other entry has ({name}[{seen[concurrency]}] has it)"
                raise GateReportError(file, f"{name}[{index}].concurrency", expected, str(concurrency))
            seen[concurrency] = index


def parse_gate_report(text: str | bytes, file: str) -> dict[str, Any]:
    """A gate report's content checked (see the module docstring): the parsed JSON, or GateReportError."""
    data = load_json(text, file, GateReportError, "JSON (a gate report)")
    if not isinstance(data, dict) or not {"outcome", "checks"} & data.keys():
        # Not a broken report but another file (a bench result, say): its keys say which.
        found = shown(data) if not isinstance(data, dict) else f"an object with keys {shown(sorted(data))}"
        raise GateReportError(file, "", "an object with `outcome` and `checks` (the gate's report)", found)
    check_version(data, file, GateReportError, FORMAT_VERSION)
    _non_finite(file, data)
    try:
        report = GateReportFile.model_validate_json(text)
    except ValidationError as error:
        raise _first_error(file, error) from None
    except (ValueError, RecursionError) as error:  # pydantic's own JSON parser past its limits
        raise GateReportError(file, "", "JSON (a gate report)", str(error) or type(error).__name__) from None
    _check_report(file, report)
    return data


def read_gate_report(path: str | Path) -> dict[str, Any]:
    """A gate report (report.json), checked: its parsed JSON, or GateReportError (OSError when it cannot be read)."""
    return parse_gate_report(Path(path).read_bytes(), str(path))


#: The gate report's JSON schema, in optigate's docs (`optigate schema --docs docs` writes it; --check compares).
REPORT_SCHEMA_NAME = "gate-report.schema.json"


def render_report_schema() -> str:
    """The JSON schema of :class:`GateReportFile`, generated as the config files' are (optigate.config.schema)."""
    schema = GateReportFile.model_json_schema(mode="validation")
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = f"https://optigate.dev/schema/{REPORT_SCHEMA_NAME}"
    return json.dumps(schema, indent=2, sort_keys=True) + "\n"
