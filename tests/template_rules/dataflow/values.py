"""The types of values in a state's input (botocore output shapes, records the definition built, opaque JSON),
the facts known at a state (which paths hold what, which exist on every path in), and how reads, writes and
built values (Parameters, ResultSelector) change them. Approximations are documented in
rules/sfn_optional_reads_guarded.py."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from botocore.model import ListShape, MapShape, Shape, StructureShape

from optigate.rehearse.asl import SERVICE_NAMES
from optigate.rehearse.validation import service_model
from tests.template_rules.dataflow.json_paths import WILDCARD, parse_path, paths_in, show

# --------------------------------------------------------------------------- types of values


@dataclass(frozen=True)
class Opaque:
    """JSON whose members the check does not know (execution input, a Lambda's answer, an error)."""


OPAQUE = Opaque()


@dataclass(frozen=True, eq=False)
class Api:
    """A value of a botocore shape inside an API's answer; `always` names members present whenever the
    Task succeeded although the model marks them optional, `opaque` members hold arbitrary JSON."""

    shape: Shape
    origin: str  # "sagemaker DescribeOptimizationJob", for the report
    always: frozenset[str] = frozenset()
    opaque: frozenset[str] = frozenset()

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, Api)
            and self.shape is other.shape
            and (self.origin, self.always, self.opaque) == (other.origin, other.always, other.opaque)
        )

    def __hash__(self) -> int:
        return hash((id(self.shape), self.origin, self.always, self.opaque))


@dataclass(frozen=True)
class Record:
    """A JSON object the definition built (Parameters, ResultSelector, Result): its fields are set."""

    fields: tuple[tuple[str, frozenset[Any]], ...]

    def get(self, key: str) -> frozenset[Any] | None:
        for name, types in self.fields:
            if name == key:
                return types
        return None


@dataclass(frozen=True)
class ListOf:
    """An array (an indefinite path's result): it may be empty."""

    items: frozenset[Any]


Type = Opaque | Api | Record | ListOf
Path = tuple[str | int, ...]  # member names and list indexes below `$`
MAP_ITEM = "$$MapItem"  # pseudo-root of a Map iteration's item in the facts
MAX_DEPTH = 4  # records nested deeper become opaque (keeps loops that re-wrap a value finite)


# --------------------------------------------------------------------------- facts


@dataclass
class Facts:
    roots: dict[Path, frozenset[Any]]
    present: frozenset[Path]

    def copy(self) -> Facts:
        return Facts(dict(self.roots), self.present)

    def knows(self, path: Path) -> bool:
        """`path` exists on every path here (a path below it that exists implies it)."""
        if not path:
            return True
        size = len(path)
        return any(p[:size] == path for p in self.present)

    def with_present(self, paths: Iterable[Path]) -> Facts:
        return Facts(dict(self.roots), self.present | frozenset(paths))


def merge(a: Facts | None, b: Facts) -> Facts:
    if a is None:
        return b.copy()
    roots = dict(a.roots)
    for path, types in b.roots.items():
        roots[path] = roots.get(path, frozenset()) | types
    return Facts(roots, a.present & b.present)


def same(a: Facts | None, b: Facts) -> bool:
    return a is not None and a.roots == b.roots and a.present == b.present


def record_paths(types: frozenset[Any], base: Path) -> set[Path]:
    """Paths a value makes present: its root, and every field of a record on all of its alternatives."""
    out = {base}
    records = [t for t in types if isinstance(t, Record)]
    if records and len(records) == len(types):
        keys = set.intersection(*({name for name, _ in r.fields} for r in records))
        for key in keys:
            inner = frozenset().union(*(r.get(key) or frozenset() for r in records))
            out |= record_paths(inner, (*base, key))
    return out


def write(facts: Facts, at: Path, value: frozenset[Any]) -> Facts:
    """`value` written at `at` (ResultPath): what was below is replaced, the parents now exist."""
    size = len(at)
    roots = {p: t for p, t in facts.roots.items() if p[:size] != at}
    roots[at] = value
    present = {p for p in facts.present if p[:size] != at}
    present |= {at[:i] for i in range(size)}
    present |= record_paths(value, at)
    return Facts(roots, frozenset(present))


# --------------------------------------------------------------------------- what an SDK result holds


def _member(shape: StructureShape, name: str) -> str | None:
    if name in shape.members:
        return name
    for member in shape.members:
        if member[:1].lower() + member[1:] == name[:1].lower() + name[1:]:
            return member
    return None


def _api(service: str, operation: str, **extra: Any) -> frozenset[Any]:
    try:
        model = service_model(service)
    except Exception:  # a service botocore does not know: nothing to check against
        return frozenset({OPAQUE})
    if operation not in model.operation_names:
        return frozenset({OPAQUE})
    shape = model.operation_model(operation).output_shape
    if shape is None:
        return frozenset({Record(())})
    return frozenset({Api(shape, f"{service} {operation}", **extra)})


# SDK integrations name some services differently from botocore
_SDK_SERVICES = {**SERVICE_NAMES, "cloudwatchlogs": "logs", "eventbridge": "events"}


def task_result(resource: str) -> frozenset[Any]:
    """The types a Task's raw result may have (before ResultSelector)."""
    if ":states:::" not in resource:
        return frozenset({OPAQUE})  # a Lambda or activity ARN: the function's own answer
    integration = resource.split(":states:::", 1)[1]
    if integration.startswith("aws-sdk:"):
        _, service, action = integration.split(":", 2)
        return _api(_SDK_SERVICES.get(service, service), action[:1].upper() + action[1:])
    service, action = integration.split(":", 1)
    action, _, pattern = action.partition(".")
    operation = action[:1].upper() + action[1:]
    service = _SDK_SERVICES.get(service, service)
    if pattern.startswith("waitForTaskToken"):
        return frozenset({OPAQUE})
    if pattern.startswith("sync"):
        if service == "sagemaker" and operation.startswith("Create"):
            return _api(service, "Describe" + operation.removeprefix("Create"))
        if service == "stepfunctions" and operation == "StartExecution":
            return _api(service, "DescribeExecution", always=frozenset({"output"}), opaque=frozenset({"output"}))
        return frozenset({OPAQUE})
    if service == "lambda" and operation == "Invoke":
        return _api(service, operation, always=frozenset({"Payload"}), opaque=frozenset({"Payload"}))
    return _api(service, operation)


# --------------------------------------------------------------------------- reading


def walk(
    types: frozenset[Any], rest: list[Any], base: Path, facts: Facts, problems: list[str] | None
) -> frozenset[Any]:
    """The types at `base + rest`, from `types` at `base`; appends why a step may find nothing."""
    out: set[Any] = set()
    for start in types:
        current: frozenset[Any] = frozenset({start})
        path = base
        for segment in rest:
            if segment is WILDCARD:
                current = frozenset({ListOf(frozenset({OPAQUE}))})
                break
            step: set[Any] = set()
            for value in current:
                step |= _step(value, segment, path, facts, problems)
            path = (*path, segment)
            current = frozenset(step)
            if current == frozenset({OPAQUE}):
                break
        out |= current
    return frozenset(out)


def _origin(value: Api) -> str:
    return f"{value.shape.name} ({value.origin})" if value.origin else value.shape.name


def _step(value: Any, segment: str | int, at: Path, facts: Facts, problems: list[str] | None) -> set[Any]:
    here = (*at, segment)

    def complain(why: str) -> None:
        if problems is not None and not facts.knows(here):
            problems.append(why)

    if isinstance(value, Opaque):
        return {OPAQUE}
    if isinstance(value, Record):
        if isinstance(segment, str) and (found := value.get(segment)) is not None:
            return set(found)
        complain(f"{show(here)} is not set on every path to this state")
        return {OPAQUE}
    if isinstance(value, ListOf):
        if isinstance(segment, int):
            complain(f"{show(here)}: the array may be empty")
            return set(value.items)
        complain(f"{show(here)}: {show(at)} is an array")
        return {OPAQUE}
    shape = value.shape
    if isinstance(shape, StructureShape):
        if not isinstance(segment, str):
            complain(f"{show(here)}: {show(at)} is a {shape.name} structure, not an array")
            return {OPAQUE}
        member = _member(shape, segment)
        if member is None:
            complain(f"{show(here)}: {_origin(value)} has no member {segment}")
            return {OPAQUE}
        if member in value.opaque:
            return {OPAQUE}
        if member not in shape.required_members and member not in value.always:
            complain(f"{show(here)}: {member} is optional in {_origin(value)}")
        return {Api(shape.members[member], value.origin)}
    if isinstance(shape, ListShape):
        if isinstance(segment, int):
            complain(f"{show(here)}: the list {show(at)} ({shape.name}) may be empty")
            return {Api(shape.member, value.origin)}
        complain(f"{show(here)}: {show(at)} is a list ({shape.name})")
        return {OPAQUE}
    if isinstance(shape, MapShape):
        complain(f"{show(here)}: {show(at)} is a map ({shape.name}); the key may be absent")
        return {Api(shape.value, value.origin)}
    if shape.type_name == "string" and shape.metadata.get("jsonvalue"):
        return {OPAQUE}
    complain(f"{show(here)}: {show(at)} is a {shape.type_name}, it has no members")
    return {OPAQUE}


def read(facts: Facts, text: str, problems: list[str] | None) -> frozenset[Any]:
    """The types a JSONPath may yield, with the reasons it may fail appended to `problems`."""
    segments = parse_path(text)
    if segments is None:
        return frozenset({OPAQUE})
    definite: list[Any] = []
    for segment in segments:
        if segment is WILDCARD:
            break
        definite.append(segment)
    # the deepest root at or above the path (a deeper write replaced what an older one put there)
    root = max((p for p in facts.roots if tuple(definite[: len(p)]) == p), key=len, default=None)
    if root is None:
        return frozenset({OPAQUE})
    return walk(facts.roots[root], segments[len(root) :], root, facts, problems)


def rebase(facts: Facts, text: str | None) -> Facts:
    """The facts of the value at a path (InputPath/OutputPath), as the new `$`."""
    if text is None or text == "$":
        return facts
    segments = parse_path(text)
    if segments is None or WILDCARD in segments:
        return Facts({(): frozenset({OPAQUE})}, frozenset({()}))
    at = tuple(segments)
    size = len(at)
    roots = {p[size:]: t for p, t in facts.roots.items() if p[:size] == at}
    if () not in roots:
        roots[()] = read(facts, text, None)
    present = frozenset({p[size:] for p in facts.present if p[:size] == at} | {()})
    return Facts(roots, present)


# --------------------------------------------------------------------------- building values


def build(template: Any, facts: Facts, reads: list[tuple[str, str]], where: str, depth: int = 0) -> frozenset[Any]:
    """The value a Parameters/ItemSelector/ResultSelector template builds; its reads go to `reads`."""
    if isinstance(template, dict):
        fields = []
        for key, value in template.items():
            if key.endswith(".$") and isinstance(value, str):
                for text in paths_in(value):
                    reads.append((f"{where}.{key}", text))
                if value.startswith("States."):
                    types = frozenset({OPAQUE})
                elif value.startswith("$$.Map.Item.Value"):
                    types = read(facts, f"$.{MAP_ITEM}" + value.removeprefix("$$.Map.Item.Value"), None)
                else:
                    types = read(facts, value, None)
                fields.append((key.removesuffix(".$"), types))
            else:
                fields.append((key, build(value, facts, reads, f"{where}.{key}", depth + 1)))
        return frozenset({Record(tuple(fields))}) if depth < MAX_DEPTH else frozenset({OPAQUE})
    if isinstance(template, list):
        for i, value in enumerate(template):
            build(value, facts, reads, f"{where}[{i}]", depth + 1)
    return frozenset({OPAQUE})


def bounded(types: frozenset[Any], depth: int = 0) -> frozenset[Any]:
    """Records nested deeper than MAX_DEPTH become opaque."""
    out: set[Any] = set()
    for t in types:
        if isinstance(t, Record):
            if depth >= MAX_DEPTH:
                out.add(OPAQUE)
            else:
                out.add(Record(tuple((k, bounded(v, depth + 1)) for k, v in t.fields)))
        else:
            out.add(t)
    return frozenset(out)
