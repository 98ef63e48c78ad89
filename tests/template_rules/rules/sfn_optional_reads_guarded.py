"""No unguarded optional reads: every JSONPath a state reads from an AWS API's answer must reach a member
the answer always has, or one the state machine set on every path to that state, or one behind a Choice
that tested it with ``IsPresent``.

A JSONPath that names a missing field fails the state with ``States.Runtime``, which no ``Catch`` handles
("States.ALL ... can't catch the States.DataLimitExceeded terminal error or Runtime error types",
https://docs.aws.amazon.com/step-functions/latest/dg/concepts-error-handling.html): the execution fails and
skips its cleanup (endpoints left running, the live endpoint left shadowed). botocore's service models say
which members of an operation's output are *required*; every other member may be absent (``FailureReason``
of a job that did not fail, ``OptimizationOutput`` of a job that is still running,
``CustomerMetadataProperties`` of a hand-registered model package).

How a definition is walked (a forward data-flow analysis over the states of each scope, to a fixed point):

* Facts at a state's entry: *roots*, the paths a state wrote to, each with the set of types it may hold
  there (a botocore output shape, a record the definition built, or opaque JSON; the union over all paths
  in), and *present*, the paths known to exist on every path in (the intersection).
* What an SDK result holds: ``arn:aws:states:::aws-sdk:<service>:<action>`` and optimized request/response
  integrations (``sagemaker:createEndpoint``, ``sns:publish``): the API's output shape (Step Functions returns
  the API's answer, https://docs.aws.amazon.com/step-functions/latest/dg/connect-to-resource.html).
  ``.sync``: the Describe call's answer the integration polls (``sagemaker:createXJob.sync`` ->
  ``DescribeXJob``, ``states:startExecution.sync`` -> ``DescribeExecution``, whose ``Output`` is set when the
  execution succeeded, the only way a ``.sync`` Task succeeds: "This field is set only if the execution
  succeeds", https://docs.aws.amazon.com/step-functions/latest/apireference/API_DescribeExecution.html);
  other ``.sync`` integrations and ``.waitForTaskToken`` are opaque. ``lambda:invoke``: botocore's Invoke output
  with ``Payload`` opaque JSON (the function's answer); a Lambda ARN as Resource: opaque. Member names match
  without regard to the case of their first letter (Step Functions answers ``Output`` for the API's ``output``).
* ``ResultSelector`` reads the raw answer (nothing can guard those reads) and builds a record; ``Parameters`` of
  a Pass state build a record; ``Result`` is a static record; ``ResultPath`` writes the result into the input
  (``null`` drops it, ``$`` replaces it); ``InputPath``/``OutputPath`` re-root the facts; a ``Catch`` writes the
  error (opaque) at its ResultPath; Map and Parallel results are opaque, their item processors and branches
  are walked as scopes of their own (a Map's items from ``ItemsPath``, through ``ItemSelector``).
* Guards (approximations, documented): a Choice rule's branch knows what the rule implies when it matched
  (``IsPresent: true`` -> present; a comparison that matched -> its path exists; ``And`` -> every part; ``Or``
  -> what every part implies); the Default branch and every later rule know what each earlier rule's failure
  implies (``IsPresent: false`` failing -> present; a comparison evaluated either way -> its path exists, as a
  comparison on a missing path is itself a States.Runtime error; ``And`` failing -> for some i, parts before i
  matched and part i failed). Inside one rule, ``And`` parts see what earlier parts imply and ``Or`` parts
  what earlier parts' failure implies (short-circuit). Rules are evaluated in order, so the guard dominates
  the read exactly when every path to the read passes it: that is what the intersection at joins computes.
* A read walks its path from the deepest root under it: through a structure's required member, a member
  known present, or a record's field; an optional member, a map key or a list index (a list may be empty)
  must be known present. The walk stops at opaque JSON, at a wildcard or filter (``[*]``: an indefinite path
  yields what exists, after the members before it were found) and at JSONPath functions.
* Reads checked: ``.$`` values of Parameters, ItemSelector and ResultSelector (also every path argument of an
  intrinsic function), InputPath, OutputPath, ItemsPath, Choice ``Variable`` and ``...Path`` operands (not
  ``IsPresent``), Wait's SecondsPath/TimestampPath, Fail's CausePath/ErrorPath.
* Not modelled: JSONata states, variables (``Assign``), context-object reads other than a Map item, the
  types of values inside opaque JSON.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from botocore.model import ListShape, MapShape, Shape, StructureShape

from optigate.rehearse.asl import SERVICE_NAMES
from optigate.rehearse.validation import service_model

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

# --------------------------------------------------------------------------- findings


@dataclass(frozen=True, order=True)
class Finding:
    state: str
    where: str  # "Parameters.image.$", "Choices[1].Variable", "ResultSelector.arns.$"
    path: str  # the JSONPath as written
    why: str

    def __str__(self) -> str:
        return f"{self.state} ({self.where}) reads {self.path}: {self.why}"


# --------------------------------------------------------------------------- JSONPath


WILDCARD = object()  # [*], .*, filters, slices, recursive descent, functions: the path is indefinite here
_TOKEN = re.compile(
    r"\.\.|\.\*|\[\*\]|\.([A-Za-z_][\w\-]*)(\(\))?|\[(\d+)\]|\['([^']*)'\]|\[\"([^\"]*)\"\]|\[[^\]]*\]|\.([^.\[]+)"
)


def parse_path(text: str) -> list[Any] | None:
    """`$.a.b[0]['c d'][*]` -> ["a", "b", 0, "c d", WILDCARD]; None for context-object (`$$`) paths."""
    if text.startswith("$$") or not text.startswith("$"):
        return None
    segments: list[Any] = []
    position = 1
    while position < len(text):
        match = _TOKEN.match(text, position)
        if match is None:
            segments.append(WILDCARD)  # something this parser does not know: stop checking there
            break
        position = match.end()
        name, call, index, quoted, double, other = match.groups()
        if call:
            segments.append(WILDCARD)
            break
        if name is not None:
            segments.append(name)
        elif index is not None:
            segments.append(int(index))
        elif quoted is not None or double is not None:
            segments.append(quoted if quoted is not None else double)
        elif other is not None:
            segments.append(other)
        else:
            segments.append(WILDCARD)
            break
    return segments


def show(path: Iterable[Any]) -> str:
    text = "$"
    for segment in path:
        text += f"[{segment}]" if isinstance(segment, int) else ("[*]" if segment is WILDCARD else f".{segment}")
    return text


_QUOTED = re.compile(r"'(?:[^'\\]|\\.)*'")
_PATH_ARGUMENT = re.compile(r"\$\$?(?:\.[A-Za-z0-9_\-]+|\.\*|\[[^\]]*\])*")


_ARRAY_GET_ITEM = re.compile(r"States\.ArrayGetItem\(\s*(\$[^,()\s]*)\s*,\s*(\d+)\s*\)")


def paths_in(value: str) -> list[str]:
    """The JSONPaths a `.$` value reads: itself, or every path argument of an intrinsic function
    (`States.ArrayGetItem($.a, 0)` counts as reading `$.a[0]`: an index past the end is taken to fail the state
    like a missing member; not verified against the service)."""
    if not value.startswith("States."):
        return [value]
    text = _ARRAY_GET_ITEM.sub(lambda m: f"{m.group(1)}[{m.group(2)}]", _QUOTED.sub("''", value))
    return [p for p in _PATH_ARGUMENT.findall(text) if p]


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


def _merge(a: Facts | None, b: Facts) -> Facts:
    if a is None:
        return b.copy()
    roots = dict(a.roots)
    for path, types in b.roots.items():
        roots[path] = roots.get(path, frozenset()) | types
    return Facts(roots, a.present & b.present)


def _same(a: Facts | None, b: Facts) -> bool:
    return a is not None and a.roots == b.roots and a.present == b.present


def _record_paths(types: frozenset[Any], base: Path) -> set[Path]:
    """Paths a value makes present: its root, and every field of a record on all of its alternatives."""
    out = {base}
    records = [t for t in types if isinstance(t, Record)]
    if records and len(records) == len(types):
        keys = set.intersection(*({name for name, _ in r.fields} for r in records))
        for key in keys:
            inner = frozenset().union(*(r.get(key) or frozenset() for r in records))
            out |= _record_paths(inner, (*base, key))
    return out


def write(facts: Facts, at: Path, value: frozenset[Any]) -> Facts:
    """`value` written at `at` (ResultPath): what was below is replaced, the parents now exist."""
    size = len(at)
    roots = {p: t for p, t in facts.roots.items() if p[:size] != at}
    roots[at] = value
    present = {p for p in facts.present if p[:size] != at}
    present |= {at[:i] for i in range(size)}
    present |= _record_paths(value, at)
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


def _bounded(types: frozenset[Any], depth: int = 0) -> frozenset[Any]:
    """Records nested deeper than MAX_DEPTH become opaque."""
    out: set[Any] = set()
    for t in types:
        if isinstance(t, Record):
            if depth >= MAX_DEPTH:
                out.add(OPAQUE)
            else:
                out.add(Record(tuple((k, _bounded(v, depth + 1)) for k, v in t.fields)))
        else:
            out.add(t)
    return frozenset(out)


# --------------------------------------------------------------------------- Choice rules


def _rule_paths(rule: dict[str, Any]) -> list[str]:
    """The paths a comparison reads (Variable and a `...Path` operand); none for IsPresent."""
    if "IsPresent" in rule:
        return []
    out = [rule["Variable"]] if "Variable" in rule else []
    out += [v for k, v in rule.items() if k.endswith("Path") and isinstance(v, str)]
    return out


def _as_path(text: str) -> Path | None:
    segments = parse_path(text)
    if segments is None or WILDCARD in segments:
        return None
    return tuple(segments)


def implies(rule: dict[str, Any], matched: bool) -> set[Path]:
    """Paths that exist whenever `rule` evaluated to `matched` (without a States.Runtime error)."""
    if "And" in rule or "Or" in rule:
        parts = rule.get("And") or rule.get("Or") or []
        conjunction = ("And" in rule) == matched  # And matched / Or failed: every part did the same
        if conjunction:
            return set().union(*(implies(p, matched) for p in parts)) if parts else set()
        # And failed / Or matched: for some i, parts before i went the other way and part i went this way
        alternatives = []
        for i, part in enumerate(parts):
            before = set().union(*(implies(p, not matched) for p in parts[:i])) if i else set()
            alternatives.append(before | implies(part, matched))
        return set.intersection(*alternatives) if alternatives else set()
    if "Not" in rule:
        return implies(rule["Not"], not matched)
    if "IsPresent" in rule:
        path = _as_path(rule["Variable"])
        return {path} if path is not None and rule["IsPresent"] == matched else set()
    # a comparison evaluated either way: its paths exist (a missing one is a States.Runtime error)
    return {p for p in (_as_path(t) for t in _rule_paths(rule)) if p is not None}


def _rule_reads(rule: dict[str, Any], facts: Facts, where: str, out: list[tuple[str, str, Facts]]) -> None:
    """Every read of a rule, with the facts it is evaluated under (And/Or short-circuit)."""
    if "And" in rule or "Or" in rule:
        key = "And" if "And" in rule else "Or"
        known = facts
        for i, part in enumerate(rule[key]):
            _rule_reads(part, known, f"{where}.{key}[{i}]", out)
            known = known.with_present(implies(part, key == "And"))
        return
    if "Not" in rule:
        _rule_reads(rule["Not"], facts, f"{where}.Not", out)
        return
    for key, value in rule.items():
        if (key == "Variable" and "IsPresent" not in rule) or (key.endswith("Path") and isinstance(value, str)):
            out.append((f"{where}.{key}", value, facts))


# --------------------------------------------------------------------------- the walk


@dataclass
class _Scope:
    states: dict[str, Any]
    start: str
    entry: Facts
    item: frozenset[Any] | None = None  # a Map iteration's item (for $$.Map.Item.Value)
    findings: list[Finding] = field(default_factory=list)


def _result_path(state: dict[str, Any]) -> Path | str | None:
    """The ResultPath as a path, None for `null`, "$" when absent or `$`."""
    if "ResultPath" not in state:
        return "$"
    if state["ResultPath"] is None:
        return None
    segments = parse_path(state["ResultPath"])
    return tuple(segments) if segments else "$"


def _apply_result(raw: Facts, state: dict[str, Any], result: frozenset[Any]) -> Facts:
    where = _result_path(state)
    if where is None:
        return raw
    if where == "$":
        return write(Facts({}, frozenset()), (), result)
    assert isinstance(where, tuple)
    return write(raw, where, result)


def _with_item(facts: Facts, item: frozenset[Any] | None) -> Facts:
    """Map item reads (`$$.Map.Item.Value...`) resolve through a pseudo-root."""
    if item is None:
        return facts
    roots = dict(facts.roots)
    roots[(MAP_ITEM,)] = item
    return Facts(roots, facts.present | {(MAP_ITEM,)})


def _check(scope: _Scope, state: str, reads: list[tuple[str, str]], facts: Facts) -> None:
    for where, text in reads:
        problems: list[str] = []
        read(facts, text, problems)
        for why in dict.fromkeys(problems):
            scope.findings.append(Finding(state, where, text, why))


def _transfer(scope: _Scope, name: str, state: dict[str, Any], facts: Facts, report: bool) -> list[tuple[str, Facts]]:
    """The facts on each edge out of a state; with `report`, its reads are checked."""
    kind = state.get("Type")
    reads: list[tuple[str, str]] = []
    edges: list[tuple[str, Facts]] = []
    if "InputPath" in state and state["InputPath"] is not None:
        reads.append(("InputPath", state["InputPath"]))
    effective = rebase(facts, state.get("InputPath"))
    effective = _with_item(effective, scope.item)

    if kind == "Choice":
        checks: list[tuple[str, str, Facts]] = []
        known = effective
        for i, rule in enumerate(state.get("Choices", [])):
            _rule_reads(rule, known, f"Choices[{i}]", checks)
            edges.append((rule["Next"], known.with_present(implies(rule, True))))
            known = known.with_present(implies(rule, False))
        if "Default" in state:
            edges.append((state["Default"], known))
        if report:
            for where, text, at in checks:
                _check(scope, name, [(where, text)], at)
            _check(scope, name, reads, facts)
            if state.get("OutputPath") is not None and "OutputPath" in state:
                _check(scope, name, [("OutputPath", state["OutputPath"])], effective)
        return [(target, rebase(f, state.get("OutputPath"))) for target, f in edges]

    result: frozenset[Any] | None = None
    if kind == "Wait":
        for key in ("SecondsPath", "TimestampPath"):
            if key in state:
                reads.append((key, state[key]))
    elif kind == "Fail":
        for key in ("CausePath", "ErrorPath"):
            if key in state:
                reads += [(key, text) for text in paths_in(state[key])]
    elif kind == "Pass":
        if "Parameters" in state:
            result = build(state["Parameters"], effective, reads, "Parameters")
        elif "Result" in state:
            result = _static(state["Result"])
        elif "InputPath" in state or _result_path(state) != "$":
            result = read(facts, state.get("InputPath") or "$", None)  # the input, written at ResultPath
    elif kind == "Task":
        if isinstance(state.get("Parameters"), dict):
            build(state["Parameters"], effective, reads, "Parameters")
        raw = task_result(state.get("Resource", ""))
        result = raw
        if "ResultSelector" in state:
            selector_reads: list[tuple[str, str]] = []
            selector_facts = Facts({(): raw}, frozenset({()}))
            result = build(state["ResultSelector"], selector_facts, selector_reads, "ResultSelector")
            if report:
                _check(scope, name, selector_reads, selector_facts)
    elif kind in ("Map", "Parallel"):
        if "Parameters" in state:
            build(state["Parameters"], effective, reads, "Parameters")
        if kind == "Map":
            items_path = state.get("ItemsPath", "$")
            reads.append(("ItemsPath", items_path))
            listed = read(effective, items_path, None)
            item = _items_of(listed)
            inner_input: frozenset[Any] = item
            selector = state.get("ItemSelector", state.get("Parameters"))
            if isinstance(selector, dict):
                inner_input = build(selector, _with_item(effective, item), reads, "ItemSelector")
            processor = state.get("ItemProcessor") or state.get("Iterator") or {}
            if report and processor:
                inner = Facts({(): inner_input}, frozenset(_record_paths(inner_input, ())))
                scope.findings += analyze_scope(processor, inner, item)
        else:
            if report:
                for branch in state.get("Branches", []):
                    scope.findings += analyze_scope(branch, effective.copy(), None)
        result = frozenset({OPAQUE})
        if "ResultSelector" in state:
            build(state["ResultSelector"], Facts({(): result}, frozenset({()})), [], "ResultSelector")

    if report:
        _check(scope, name, reads, effective)

    if kind in ("Succeed", "Fail"):
        return []
    if kind in ("Pass", "Task", "Map", "Parallel"):
        # a Pass without Parameters, Result, InputPath and ResultPath passes its input on (result None)
        after = facts if result is None else _apply_result(facts, state, _bounded(result))
    else:
        after = facts
    if "OutputPath" in state and state["OutputPath"] is not None:
        if report:
            _check(scope, name, [("OutputPath", state["OutputPath"])], after)
        after = rebase(after, state["OutputPath"])
    if "Next" in state:
        edges.append((state["Next"], after))
    for catch in state.get("Catch", []):
        where = catch.get("ResultPath", "$")
        caught = facts if where is None else _apply_result(facts, {"ResultPath": where}, frozenset({OPAQUE}))
        edges.append((catch["Next"], caught))
    return edges


def _items_of(types: frozenset[Any]) -> frozenset[Any]:
    out: set[Any] = set()
    for t in types:
        if isinstance(t, ListOf):
            out |= t.items
        elif isinstance(t, Api) and isinstance(t.shape, ListShape):
            out.add(Api(t.shape.member, t.origin))
        else:
            out.add(OPAQUE)
    return frozenset(out) or frozenset({OPAQUE})


def _static(value: Any, depth: int = 0) -> frozenset[Any]:
    if isinstance(value, dict) and depth < MAX_DEPTH:
        return frozenset({Record(tuple((k, _static(v, depth + 1)) for k, v in value.items()))})
    return frozenset({OPAQUE})


def analyze_scope(definition: dict[str, Any], entry: Facts, item: frozenset[Any] | None = None) -> list[Finding]:
    """Findings of one scope (a state machine, a Parallel branch, a Map's item processor)."""
    scope = _Scope(definition.get("States", {}), definition["StartAt"], entry, item)
    facts_in: dict[str, Facts] = {scope.start: entry.copy()}
    work = [scope.start]
    rounds = 0
    while work:
        rounds += 1
        if rounds > 100_000:
            raise RuntimeError("optional_reads: no fixed point")
        name = work.pop()
        state = scope.states.get(name)
        if state is None:
            continue
        for target, out in _transfer(scope, name, state, facts_in[name], report=False):
            merged = _merge(facts_in.get(target), out)
            if not _same(facts_in.get(target), merged):
                facts_in[target] = merged
                work.append(target)
    for name, facts in facts_in.items():
        if name in scope.states:
            _transfer(scope, name, scope.states[name], facts, report=True)
    return sorted(set(scope.findings))


def unguarded_optional_reads(definition: dict[str, Any] | str) -> list[Finding]:
    """Every read in a state machine definition that may find nothing (see the module's docstring)."""
    definition = json.loads(definition) if isinstance(definition, str) else definition
    entry = Facts({(): frozenset({OPAQUE})}, frozenset({()}))
    return analyze_scope(definition, entry)


def iter_findings(definitions: dict[str, dict[str, Any]]) -> Iterator[tuple[str, Finding]]:
    """(name, finding) for named definitions."""
    for label, definition in definitions.items():
        for finding in unguarded_optional_reads(definition):
            yield label, finding
