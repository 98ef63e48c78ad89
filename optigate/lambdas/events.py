# Over 400 lines: one standard-library file staged beside each handler: the event machinery and every seam's event.
"""One typed event per seam between the gate's state machines and each of their Lambda functions.

Each seam is one dataclass, the one list of its keys: the construct builds the Task's Payload with `to_payload()`
(a value the state machine reads from its state at run time is a `FromState`, written as the key `<key>.$`), the
handler reads its event with `from_event(event)`, which refuses a key the dataclass does not have, a required key
that is missing and a value of the wrong type, with one EventError naming the key; `json_schema()` is the event's
JSON schema (docs/*-event.schema.json, written by `optigate schema --docs docs`). tests/seams renders each Task's
Payload of the synthesized gate and reads it through its event: a key added on one side only fails there.

Standard library only (dataclasses, typing): every Lambda function's code carries this module, and none carries
pydantic or CDK (optigate.constructs.assets, and each function's asset beside its construct).
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import types
import typing
from collections.abc import Callable
from typing import Any, ClassVar, TypeVar, Union

_Event = TypeVar("_Event", bound="Event")
#: A field's metadata flag: an optional key the construct always sends, a JSON null included (`to_payload` leaves out
#: the other optional keys whose value is None). `field(default=None, metadata=NULL_SENT)`.
SENT_AS_NULL = "sent_as_null"
NULL_SENT = types.MappingProxyType({SENT_AS_NULL: True})
_JSON_NAMES = {str: "string", int: "integer", float: "number", bool: "boolean", dict: "object", list: "array"}


class EventError(ValueError):
    """An event its seam does not accept: the message names the seam and the key."""

    def __init__(self, seam: str, key: str, problem: str) -> None:
        super().__init__(f"the {seam} event's {key}: {problem}")
        self.seam, self.key, self.problem = seam, key, problem


@dataclasses.dataclass(frozen=True)
class FromState:
    """A value the state machine fills in at run time: a JSONPath of its state (`$.run.id`), of the context object
    (`$$.State.EnteredTime`) or an intrinsic function (`States.Format(...)`); the Payload names it `<key>.$`."""

    path: str


_Value = TypeVar("_Value")


def resolved(value: _Value | FromState) -> _Value:
    """A field's value as a handler reads it: never a FromState, which only the construct writes (from_event
    reads JSON)."""
    if isinstance(value, FromState):
        raise TypeError(f"{value.path} is filled in by the state machine, not a value of an event")
    return value


def _described(annotation: Any) -> str:
    if annotation is type(None):
        return "null"
    if annotation is Any:
        return "any value"
    origin = typing.get_origin(annotation)
    if origin in (Union, types.UnionType):
        return " or ".join(_described(a) for a in typing.get_args(annotation) if a is not FromState)
    if isinstance(annotation, type) and issubclass(annotation, Event):
        return "an object"
    return _JSON_NAMES.get(origin or annotation, str(annotation))


def _found(value: Any) -> str:
    name = "null" if value is None else _JSON_NAMES.get(type(value), type(value).__name__)
    return f"{name} {json.dumps(value, default=str)[:60]}"


def _read(seam: str, key: str, annotation: Any, value: Any) -> Any:
    """`value` as `annotation` says (the JSON types, Any, unions, lists, dicts, nested events), else EventError."""
    origin = typing.get_origin(annotation)
    if origin in (Union, types.UnionType):
        options = [a for a in typing.get_args(annotation) if a is not FromState]
        if value is None and type(None) in options:
            return None
        for option in options:
            if option is type(None):
                continue
            try:
                return _read(seam, key, option, value)
            except EventError as error:
                if error.key != key or len(options) - (type(None) in options) == 1:
                    raise
        raise EventError(seam, key, f"expected {_described(annotation)}, found {_found(value)}")
    if annotation is Any:
        return value
    if isinstance(annotation, type) and issubclass(annotation, Event):
        return annotation._from(value, seam, f"{key}.")
    kind = origin or annotation
    matches = {
        bool: type(value) is bool,
        int: type(value) is int,
        float: type(value) in (int, float),
        str: type(value) is str,
        dict: isinstance(value, dict),
        list: isinstance(value, list),
    }
    if kind not in matches:
        raise TypeError(f"{seam}: {key}: the events read JSON types, not {annotation}")
    if not matches[kind]:
        raise EventError(seam, key, f"expected {_described(annotation)}, found {_found(value)}")
    arguments = typing.get_args(annotation)
    if kind is list and arguments and arguments[0] is not Any:
        return [_read(seam, f"{key}[{index}]", arguments[0], item) for index, item in enumerate(value)]
    if kind is dict and arguments and arguments[1] is not Any:
        return {name: _read(seam, f"{key}.{name}", arguments[1], item) for name, item in value.items()}
    return value


def _payload(value: Any) -> Any:
    if isinstance(value, Event):
        return value.to_payload()
    if isinstance(value, list):
        return [_payload(item) for item in value]
    return value


def _schema(annotation: Any) -> dict[str, Any]:
    if annotation is Any:
        return {}
    if annotation is type(None):
        return {"type": "null"}
    origin = typing.get_origin(annotation)
    if origin in (Union, types.UnionType):
        options = [_schema(a) for a in typing.get_args(annotation) if a is not FromState]
        if len(options) == 1:
            return options[0]
        if all(set(option) == {"type"} for option in options):
            return {"type": [option["type"] for option in options]}
        return {"anyOf": options}
    if isinstance(annotation, type) and issubclass(annotation, Event):
        return annotation.json_schema(nested=True)
    schema: dict[str, Any] = {"type": _JSON_NAMES[origin or annotation]}
    arguments = typing.get_args(annotation)
    if (origin or annotation) is list and arguments and arguments[0] is not Any:
        schema["items"] = _schema(arguments[0])
    if (origin or annotation) is dict and arguments and arguments[1] is not Any:
        schema["additionalProperties"] = _schema(arguments[1])
    return schema


def _required(field: dataclasses.Field) -> bool:
    return field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING


class Event:
    """A seam's event (subclasses are frozen dataclasses): SEAM names the function it reaches."""

    SEAM: ClassVar[str]
    #: What the schema says besides the keys (what `check` asks of them together, where JSON schema can say it).
    SCHEMA_EXTRA: ClassVar[dict[str, Any]] = {}

    @classmethod
    def _hints(cls) -> dict[str, Any]:
        return typing.get_type_hints(cls)

    def to_payload(self) -> dict[str, Any]:
        """The Task's Payload: every key in the dataclass's order, a FromState as `<key>.$`; an optional key whose
        value is None left out unless it is sent as null."""
        payload: dict[str, Any] = {}
        for field in dataclasses.fields(self):  # type: ignore[arg-type]
            value = getattr(self, field.name)
            if value is None and not _required(field) and not field.metadata.get(SENT_AS_NULL):
                continue
            if isinstance(value, FromState):
                payload[f"{field.name}.$"] = value.path
            else:
                payload[field.name] = _payload(value)
        return payload

    @classmethod
    def from_event(cls: type[_Event], event: Any) -> _Event:
        """The event read through the dataclass: EventError naming the first key that is unknown, missing or of
        the wrong type."""
        return cls._from(event, cls.SEAM, "")

    @classmethod
    def _from(cls: type[_Event], event: Any, seam: str, prefix: str) -> _Event:
        if not isinstance(event, dict):
            raise EventError(seam, prefix.rstrip(".") or "event", f"expected an object, found {_found(event)}")
        fields = {field.name: field for field in dataclasses.fields(cls)}  # type: ignore[arg-type]
        for key in event:
            if key not in fields:
                near = difflib.get_close_matches(str(key), fields, n=1)
                hint = f" (did you mean {near[0]}?)" if near else f" (it has {', '.join(fields)})"
                raise EventError(seam, f"{prefix}{key}", f"not a key of this event{hint}")
        hints = cls._hints()
        values = {}
        for name, field in fields.items():
            if name in event:
                values[name] = _read(seam, f"{prefix}{name}", hints[name], event[name])
            elif _required(field):
                raise EventError(seam, f"{prefix}{name}", "missing (a required key)")
        made = cls(**values)
        made.check(seam, prefix)
        return made

    def check(self, seam: str, prefix: str) -> None:
        """What the keys must satisfy together (none by default); EventError naming a key."""

    @classmethod
    def schema_name(cls) -> str:
        """The schema's file name in docs/: `<seam>-event.schema.json`."""
        return f"{cls.SEAM.replace('_', '-')}-event.schema.json"

    @classmethod
    def render_schema(cls) -> str:
        """The schema's file, as the other schemas in docs/ are written (sorted keys, an $id)."""
        schema = cls.json_schema()
        schema["$id"] = f"https://optigate.dev/schema/{cls.schema_name()}"
        return json.dumps(schema, indent=2, sort_keys=True) + "\n"

    @classmethod
    def json_schema(cls, nested: bool = False) -> dict[str, Any]:
        """The event's JSON schema (draft 2020-12): its keys, which are required, their JSON types; no other key."""
        hints = cls._hints()
        fields = dataclasses.fields(cls)  # type: ignore[arg-type]
        properties = {}
        for field in fields:
            properties[field.name] = _schema(hints[field.name])
            if not _required(field) and field.default is not None:
                properties[field.name]["default"] = field.default
        schema: dict[str, Any] = {}
        if not nested:
            schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
            schema["title"] = f"{cls.__name__}: the {cls.SEAM} event"
        schema["description"] = " ".join((cls.__doc__ or "").split())
        schema["type"] = "object"
        schema["properties"] = properties
        schema["required"] = [field.name for field in fields if _required(field)]
        schema["additionalProperties"] = False
        schema.update(cls.SCHEMA_EXTRA)
        return schema


# --------------------------------------------------------------------------------------------------------- gate_decide


@dataclasses.dataclass(frozen=True, kw_only=True)
class BenchmarkRounds(Event):
    """The rounds the gate's benchmark ran (optigate.constructs.gate.stages.benchmark_rounds): the run, the streams
    per worker at each level, how many rounds are done and when the first began, and the budget's looks
    (BenchmarkPlan.looks). Each (round, level, side) result is where the fleet wrote it
    (optigate.naming.benchmark_result_key)."""

    run_id: str | FromState
    per_shard: list[int]
    done: int | FromState
    started: str | FromState | None = None  # the first round's start, and the last one's end (ISO 8601)
    ended: str | FromState | None = None
    min_rounds: int
    max_rounds: int
    max_minutes: float | None = None
    # Why the last look stopped the rounds (optigate.gate.decision.looks), when the gate looked after each round.
    reason: str | FromState | None = None
    why: str | FromState | None = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class DecideEvent(Event):
    """The decision's inputs (optigate/lambdas/gate_decide, DecideVerdict): the plan's figures, where both sides'
    benchmark results are (`<side>_keys`, one merged fleet result per level and block, as the gate sends; or
    `<side>_key`, one `optigate bench --json` file), the evaluation's verdict and where the report goes, and what
    the optional stages found (server metrics, shadow, cross-check, workload, adapter check)."""

    SEAM: ClassVar[str] = "gate_decide"

    team: str
    environment: str
    change: dict[str, Any] | None = dataclasses.field(default=None, metadata=NULL_SENT)
    thresholds: dict[str, Any] | None = dataclasses.field(default=None, metadata=NULL_SENT)
    price_per_hour_usd: float | None = dataclasses.field(default=None, metadata=NULL_SENT)
    instance_count: int | None = dataclasses.field(default=None, metadata=NULL_SENT)
    cost_basis: dict[str, Any] | None = dataclasses.field(default=None, metadata=NULL_SENT)
    prediction: dict[str, Any] | None = dataclasses.field(default=None, metadata=NULL_SENT)
    bucket: str
    baseline_keys: list[Any] | FromState | None = None
    candidate_keys: list[Any] | FromState | None = None
    baseline_key: str | None = None
    candidate_key: str | None = None
    # The deployed gate's benchmark, round by round: both sides' keys follow from it, and each look's confidence.
    rounds: BenchmarkRounds | None = None
    # A look after a round (JudgeRound): answer whether to stop (optigate.gate.decision.looks), write no report.
    look: bool = False
    evaluation_key: str | FromState | None = None
    report_prefix: str | FromState
    server_metrics: dict[str, Any] | FromState | None = None
    speculation: dict[str, Any] | None = None
    shadow: dict[str, Any] | None = None
    cross_check: dict[str, Any] | None = None
    workload: dict[str, Any] | FromState | None = None
    adapter_check: dict[str, Any] | FromState | None = None

    def check(self, seam: str, prefix: str) -> None:
        if self.look and self.rounds is None:
            raise EventError(seam, f"{prefix}rounds", "missing: a look judges the rounds so far")
        if self.rounds is not None:
            return
        for side in ("baseline", "candidate"):
            if not getattr(self, f"{side}_keys") and getattr(self, f"{side}_key") is None:
                raise EventError(seam, f"{prefix}{side}_keys", f"missing, and no {side}_key or rounds either")


# ----------------------------------------------------------------------------------------------------- stage_candidate


@dataclasses.dataclass(frozen=True, kw_only=True)
class Copy(Event):
    """One prefix to copy: every object under `source` to the same relative key under `target`."""

    source: str | FromState
    target: str | FromState


@dataclasses.dataclass(frozen=True, kw_only=True)
class TrainedHead(Event):
    """The EAGLE head an optimization job trained: the model it registered (DescribeModel's answer), the job's
    output, the baseline's prefix, the candidate's OPTION_* environment and the head's folder and token count."""

    model: dict[str, Any] | FromState
    output: str | FromState
    baseline: str | None = None
    environment: dict[str, Any]
    num_speculative_tokens: int
    head_dir: str = "speculative_head"


@dataclasses.dataclass(frozen=True, kw_only=True)
class AdapterCheck(Event):
    """The new adapter versions' archives (name: S3 URI) and the limits each is checked against
    (optigate.deployment.adapter_archive.AdapterLimits.event(), which reads them further)."""

    adapters: dict[str, str]
    max_lora_rank: int
    base_models: list[str]
    modules: list[str]
    architecture: dict[str, Any]


@dataclasses.dataclass(frozen=True, kw_only=True)
class AdapterMix(Event):
    """The live components (label: name) whose Invocations give the mix, and each side's components (`twin`,
    `cand`: label: name) the benchmark spreads its requests over."""

    live: dict[str, str]
    sides: dict[str, dict[str, str]]


@dataclasses.dataclass(frozen=True, kw_only=True)
class StageEvent(Event):
    """The staging function's event (optigate/lambdas/stage_candidate), one of its four modes: the candidate's
    `copies`, a `trained_head` to stage, an `adapter_check` of new adapter archives, or an `adapter_mix` to read."""

    SEAM: ClassVar[str] = "stage_candidate"
    SCHEMA_EXTRA: ClassVar[dict[str, Any]] = {"minProperties": 1, "maxProperties": 1}

    copies: list[Copy] | None = None
    trained_head: TrainedHead | None = None
    adapter_check: AdapterCheck | None = None
    adapter_mix: AdapterMix | None = None

    def check(self, seam: str, prefix: str) -> None:
        modes = [field.name for field in dataclasses.fields(self) if getattr(self, field.name) is not None]
        if len(modes) != 1:
            names = ", ".join(field.name for field in dataclasses.fields(self))
            raise EventError(seam, prefix + (modes[1] if modes else "copies"), f"expected exactly one of {names}")


# ----------------------------------------------------------------------------------------------------- benchmark_merge


@dataclasses.dataclass(frozen=True, kw_only=True)
class MergeEvent(Event):
    """The merge of a fleet run's shards (optigate/lambdas/benchmark_merge, MergeShards): each worker's summary
    (its `bucket` and `key` among it), and where the merged result goes."""

    SEAM: ClassVar[str] = "benchmark_merge"

    shards: list[dict[str, Any]] | FromState
    bucket: str
    key: str | FromState


# ------------------------------------------------------------------------------------------------- read_server_metrics


@dataclasses.dataclass(frozen=True, kw_only=True)
class ServerWindow(Event):
    """Each side's temporary endpoint (`baseline`, `candidate`) and the window, an ISO 8601 time or epoch seconds
    each (optigate.bench.server_metrics.read_sides reads it)."""

    sides: dict[str, str]
    start: str | float | FromState
    end: str | float | FromState


@dataclasses.dataclass(frozen=True, kw_only=True)
class ServerMetricsEvent(Event):
    """The read of the temporary endpoints' container metrics over the benchmark
    (optigate/lambdas/read_server_metrics, ReadServerMetrics)."""

    SEAM: ClassVar[str] = "read_server_metrics"

    server_metrics: ServerWindow


# --------------------------------------------------------------------------------------------------- ai_benchmark_jobs


@dataclasses.dataclass(frozen=True, kw_only=True)
class BenchmarkJobEvent(Event):
    """One operation on a managed benchmark job (optigate/lambdas/ai_benchmark_jobs: CreateAIBenchmarkJob,
    DescribeAIBenchmarkJob or StopAIBenchmarkJob, which the handler checks) and its request, as the SageMaker API
    reference gives it."""

    SEAM: ClassVar[str] = "ai_benchmark_jobs"

    operation: str
    request: dict[str, Any]


#: Every seam's event: `optigate schema --docs docs` writes (and --check compares) each one's JSON schema.
EVENTS: tuple[type[Event], ...] = (DecideEvent, StageEvent, MergeEvent, ServerMetricsEvent, BenchmarkJobEvent)


def event_schemas() -> dict[str, Callable[[], str]]:
    """docs/ file name -> its schema's renderer, for every seam's event."""
    return {event.schema_name(): event.render_schema for event in EVENTS}
