"""The file `optigate bench --json` writes, as one pydantic model, and its defensive reader (issue 29).

Readers never trust a result file: it may be cut short, hand-edited, or written by another optigate version.
:func:`read_result_file` checks a file against :class:`BenchResultFile` and a few rules a schema cannot say
(each level once; an adapter's run at its level's concurrency; a run's times inside one bounded span, since
throughput counts one-second buckets across it), and raises :class:`ResultFileError` naming the file, the JSON
path, what was expected and what was found. Measured values must be finite (no NaN or infinity) and in range.

Verdicts come from a run's raw ``samples`` (and its ``errors``, ``concurrency``, ``adapters``); the summary
fields beside them (percentiles, rates, counts) are checked for type only, and no verdict reads them.

``format_version`` is :data:`FORMAT_VERSION`. A file without one was written before versioning, in the same
layout: it is read when it validates. A file of another version is refused, naming both.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

# The layout this optigate writes and reads (files without the key: the same layout, before versioning), and the
# longest span of a run's times (the merge Lambda, without pydantic, guards with it too).
from optigate.bench.core.result_format import FORMAT_VERSION, MAX_RUN_SPAN_S
from optigate.file_errors import FileError, check_version, expected_of, load_json, shown
from optigate.jsonsafe import json_path

#: The largest latency (ms) or count read; anything beyond is not a measurement.
MAX_MS = 1e9
MAX_COUNT = 2**53

Milliseconds = Annotated[float, Field(ge=0, le=MAX_MS)]
SignedMilliseconds = Annotated[float, Field(ge=-MAX_MS, le=MAX_MS)]
EpochSeconds = Annotated[float, Field(ge=0, le=1e11)]
Count = Annotated[int, Field(ge=0, le=MAX_COUNT)]
Tokens = Annotated[float, Field(ge=0, le=MAX_COUNT)]

#: What one element of each tuple-valued sample list holds (for messages that show the element whole).
ELEMENT_SHAPES = {
    "completions": "[completed_s, output_tokens]",
    "intervals": "[sent_s, ended_s, measured]",
    "token_arrivals": "[arrival_s, tokens]",
    "outcomes": "[ttft_ms or null, tpot_ms or null]",
}


#: What a missing key is, where "this key" says too little.
MISSING = {
    "runs": "a `runs` list (a benchmark result has one)",
    "samples": "the run's raw samples (verdicts come from them)",
}


class _Strict(BaseModel):
    # Strict: "3" is not a number and true is not a count; NaN and infinity are refused everywhere.
    model_config = ConfigDict(strict=True, allow_inf_nan=False, extra="allow")


class BenchSamples(_Strict):
    """A run's raw samples (optigate.bench.core.metrics.RunSamples): everything a verdict is computed from."""

    ttft_ms: list[Milliseconds]
    itl_ms: list[Milliseconds]
    chunk_gap_ms: list[Milliseconds]
    tpot_ms: list[Milliseconds]
    e2e_ms: list[Milliseconds]
    queue_ms: list[SignedMilliseconds]  # a replayed send may leave a hair before its recorded time
    tokens_per_chunk: list[Tokens]
    completions: list[tuple[EpochSeconds, Count]]
    intervals: list[tuple[EpochSeconds, EpochSeconds, bool]]
    token_arrivals: list[tuple[EpochSeconds, Count]]
    finishes: list[EpochSeconds]
    itl_counts: list[Count]
    coalesced_counts: list[Count] = Field(default_factory=list, description="absent before it was recorded")
    outcomes: list[tuple[Milliseconds | None, Milliseconds | None]] = Field(
        default_factory=list, description="absent before goodput: goodput unknown"
    )


class SampleSummary(_Strict):
    """Percentiles of one sample list (optigate.bench.core.metrics.summarize); null when the list was empty."""

    p50: float | None
    p90: float | None
    p95: float | None
    p99: float | None
    mean: float | None
    max: float | None


class BenchRun(_Strict):
    """One concurrency level: its raw samples (what verdicts come from) and summary figures derived from them
    (checked for type when present; a file without them, e.g. hand-made, gets them computed from the samples)."""

    concurrency: Annotated[int, Field(ge=1, le=10**6)]
    errors: dict[str, Count]
    requests: Count | None = None
    successful_requests: Count | None = None
    ttft_ms: SampleSummary | None = None
    itl_ms: SampleSummary | None = None
    chunk_gap_ms: SampleSummary | None = None
    tpot_ms: SampleSummary | None = None
    e2e_ms: SampleSummary | None = None
    queue_ms: SampleSummary | None = None
    tokens_per_chunk: SampleSummary | None = None
    output_tokens: Count | None = None
    output_tokens_per_s: float | None = None
    requests_per_s: float | None = None
    achieved_concurrency: float | None = None
    window_s: float | None = None
    token_frames: Count | None = None
    coalesced_frames: Count | None = None
    coalesced_frame_share: float | None = None
    interrupted: bool = False
    warnings: list[str] = Field(default_factory=list)
    samples: BenchSamples
    adapters: dict[str, BenchRun] | None = None
    schedule: dict[str, Any] | None = None
    refused: str | None = None


class BenchResultFile(_Strict):
    """What `optigate bench --json` writes (optigate.bench.core.runner.run_levels) and `bench compare` reads."""

    format_version: Literal[1] | None = Field(
        default=None, description="the layout's version; absent in files written before versioning (same layout)"
    )
    # Provenance no verdict reads (bench compare refuses a side without `load` itself, naming the workload).
    target: dict[str, Any] | None = None
    load: dict[str, Any] | None = Field(
        default=None,
        description="the load sent (optigate.bench.core.load.LoadSpec's fields): prompt_tokens and max_new_tokens are "
        "null when the requests carried their own (a workload: its shape under `workload`, counts and length "
        "percentiles; prompt_tokens also with a prompts file); warmup is true only when a warm-up request preceded "
        "each level (the closed loop's: an open loop and a replay send none). Files written before recorded the "
        "synthetic defaults and warmup true there whatever was sent",
    )
    finished_at: float | None = None
    interrupted: bool = False
    runs: Annotated[list[BenchRun], Field(min_length=1)]
    label: str | None = None
    error: str | None = None
    inference_components: list[dict[str, Any]] | None = None


class UnreadableShard(_Strict):
    """A shard the merge could not read or merge, and why (the merge Lambda cannot say where: it has no schema)."""

    key: str
    reason: str


class MergedResultFile(BenchResultFile):
    """What the benchmark fleet's merge Lambda writes (optigate/lambdas/benchmark_merge) and the gate's decision
    reads: a bench result of one run, the shards' samples merged, and the shards it came from. A shard it could not
    read is in ``unreadable_shards`` and the file has no run: the decision fails closed on it."""

    runs: Annotated[list[BenchRun], Field(max_length=1, description="the merged run; none when a shard was unreadable")]
    shards: Count
    shard_keys: list[str] | None = Field(default=None, description="absent before it was recorded")
    unreadable_shards: list[UnreadableShard] = Field(default_factory=list)


class ResultFileError(FileError):
    """A result file that cannot be read: where (file and JSON path), what was expected and what was found."""


#: This reader's words for what a pydantic error expected (optigate.file_errors has the common ones).
_WORDS = {"too_short": "at least one run", "literal_error": f"format version {FORMAT_VERSION}"}


def _at(data: Any, loc: tuple[Any, ...]) -> Any:
    for part in loc:
        data = data[part]
    return data


def _first_error(file: str, data: Any, error: ValidationError) -> ResultFileError:
    first = error.errors(include_url=False)[0]
    loc = tuple(first["loc"])
    # Inside a tuple-valued sample list: show the element whole, as the file has it.
    for depth in range(1, len(loc) - 1):
        if loc[depth - 1] == "samples" and loc[depth] in ELEMENT_SHAPES and isinstance(loc[depth + 1], int):
            element = loc[: depth + 2]
            try:
                value = _at(data, element)
            except (KeyError, IndexError, TypeError):
                break
            return ResultFileError(file, json_path(element), ELEMENT_SHAPES[str(loc[depth])], shown(value))
    if first["type"] == "missing":
        expected = MISSING.get(str(loc[-1]), "this key")
        return ResultFileError(file, json_path(loc), expected, "nothing (the key is missing)")
    return ResultFileError(file, json_path(loc), expected_of(first, _WORDS), shown(first.get("input")))


def _check_runs(file: str, result: BenchResultFile, data: dict[str, Any]) -> None:
    """What the schema cannot say: each level once, adapters at their level, a run's times in one span."""
    seen: dict[int, int] = {}
    for index, run in enumerate(result.runs):
        where = f"runs[{index}]"
        if run.concurrency in seen:
            raise ResultFileError(
                file,
                f"{where}.concurrency",
                f"a level no other run has (runs[{seen[run.concurrency]}] has it)",
                str(run.concurrency),
            )
        seen[run.concurrency] = index
        _check_times(file, where, run)
        for name, adapter in (run.adapters or {}).items():
            inner = f"{where}.adapters.{name}"
            if adapter.concurrency != run.concurrency:
                raise ResultFileError(
                    file, f"{inner}.concurrency", f"its level's concurrency {run.concurrency}", str(adapter.concurrency)
                )
            if adapter.adapters:
                raise ResultFileError(file, f"{inner}.adapters", "no adapters inside an adapter's run", "some")
            _check_times(file, inner, adapter)


def _check_times(file: str, where: str, run: BenchRun) -> None:
    samples = run.samples
    times = [
        *((f"intervals[{i}]", (s, e)) for i, (s, e, _) in enumerate(samples.intervals)),
        *((f"token_arrivals[{i}]", (t,)) for i, (t, _) in enumerate(samples.token_arrivals)),
        *((f"completions[{i}]", (t,)) for i, (t, _) in enumerate(samples.completions)),
        *((f"finishes[{i}]", (t,)) for i, t in enumerate(samples.finishes)),
    ]
    if not times:
        return
    # Measured from the median: one value gone astray cannot move it far, so the stray value is the one named.
    ordered = sorted(t for _, values in times for t in values)
    middle = ordered[len(ordered) // 2]
    for name, values in times:
        if any(abs(t - middle) > MAX_RUN_SPAN_S for t in values):
            raise ResultFileError(
                file,
                f"{where}.samples.{name}",
                f"times within {MAX_RUN_SPAN_S / 3600:g} h of the run's others (around {middle:.3f} s)",
                shown(list(values)),
            )


def _load(text: str | bytes, file: str, what: str) -> dict[str, Any]:
    """The file's JSON object, its format version checked (a newer one named as such); else ResultFileError."""
    data = load_json(text, file, ResultFileError)
    if not isinstance(data, dict):
        raise ResultFileError(file, "", what, shown(data))
    check_version(data, file, ResultFileError, FORMAT_VERSION)
    return data


def _validated(text: str | bytes, file: str, model: type[BenchResultFile], what: str) -> dict[str, Any]:
    data = _load(text, file, what)
    try:
        result = model.model_validate_json(text)
    except ValidationError as error:
        raise _first_error(file, data, error) from None
    _check_runs(file, result, data)
    for run in data["runs"]:
        _fill_summary(run)
    return data


def parse_merged_result(body: bytes, source: str) -> dict[str, Any]:
    """A merged fleet result (`source`: where it was read, e.g. its S3 URI) checked as :func:`parse_result` checks a
    bench result: the parsed JSON (its ``unreadable_shards`` for the caller to refuse), or ResultFileError."""
    data = _validated(body, source, MergedResultFile, "an object with `runs` (a merged fleet result)")
    if not data["runs"] and not data.get("unreadable_shards"):
        raise ResultFileError(source, "runs", "one merged run (or `unreadable_shards` saying why none)", "[]")
    return data


def parse_result(text: str | bytes, file: str) -> dict[str, Any]:
    """A result file's content checked (see the module docstring): the parsed JSON, or ResultFileError."""
    return _validated(text, file, BenchResultFile, "an object with `runs` (a benchmark result)")


def _fill_summary(run: dict[str, Any]) -> None:
    """A run's missing summary figures, computed from its samples as the writer computes them."""
    from optigate.bench.core.metrics import RunSamples

    computed = RunSamples.from_result(run).to_result(include_samples=False)
    computed.pop("adapters", None)
    for key, value in computed.items():
        run.setdefault(key, value)
    for adapter in (run.get("adapters") or {}).values():
        _fill_summary(adapter)


def read_result_file(path: str | Path) -> dict[str, Any]:
    """A result file of `optigate bench --json`, checked: its parsed JSON, or ResultFileError (OSError unread)."""
    return parse_result(Path(path).read_bytes(), str(path))


#: The result file's JSON schema, in optigate's docs (`optigate schema --docs docs` writes it; --check compares).
RESULT_SCHEMA_NAME = "bench-result.schema.json"
#: The merged fleet result's, beside it.
MERGED_SCHEMA_NAME = "merged-result.schema.json"


def _render(model: type[BaseModel], name: str) -> str:
    """A model's JSON schema, generated as the config files' are (optigate.config.schema)."""
    schema = model.model_json_schema(mode="validation")
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = f"https://optigate.dev/schema/{name}"
    return json.dumps(schema, indent=2, sort_keys=True) + "\n"


def render_result_schema() -> str:
    """The JSON schema of :class:`BenchResultFile`."""
    return _render(BenchResultFile, RESULT_SCHEMA_NAME)


def render_merged_schema() -> str:
    """The JSON schema of :class:`MergedResultFile`."""
    return _render(MergedResultFile, MERGED_SCHEMA_NAME)


#: Each read-back file's schema in optigate's docs: file name -> its renderer (`optigate schema --docs` writes them).
FILE_SCHEMAS = {RESULT_SCHEMA_NAME: render_result_schema, MERGED_SCHEMA_NAME: render_merged_schema}
