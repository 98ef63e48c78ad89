"""Every JSONPath a state machine reads from an AWS API's answer is guarded (no unguarded optional reads).

Every JSONPath a state reads from an AWS API's answer must reach a member
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
from dataclasses import dataclass, field, replace
from typing import Any, Final

from botocore.model import ListShape

from optigate.rehearse.template import placeholder_definition, state_machines
from tests.template_rules.assembly import Stack
from tests.template_rules.dataflow.json_paths import WILDCARD, parse_path, paths_in
from tests.template_rules.dataflow.values import (
    MAP_ITEM,
    MAX_DEPTH,
    OPAQUE,
    Api,
    Facts,
    ListOf,
    Path,
    Record,
    bounded,
    build,
    merge,
    read,
    rebase,
    record_paths,
    same,
    task_result,
    write,
)

ID: Final = "SFN-OptionalReadGuarded"


@dataclass(frozen=True, order=True)
class Finding:
    state: str
    where: str  # "Parameters.image.$", "Choices[1].Variable", "ResultSelector.arns.$"
    path: str  # the JSONPath as written
    why: str
    machine: str = ""  # "<stack>/<state machine logical id>" when found by `check`

    def __str__(self) -> str:
        where = f"{self.machine}: " if self.machine else ""
        return f"{where}{self.state} ({self.where}) reads {self.path}: {self.why}"


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
                inner = Facts({(): inner_input}, frozenset(record_paths(inner_input, ())))
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
        after = facts if result is None else _apply_result(facts, state, bounded(result))
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
            merged = merge(facts_in.get(target), out)
            if not same(facts_in.get(target), merged):
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


def check(stack: Stack) -> list[Finding]:
    """Each unguarded read of each state machine of the stack (tokens rendered as placeholders)."""
    return [
        replace(finding, machine=f"{stack.name}/{logical}")
        for logical in state_machines(stack.template)
        for finding in unguarded_optional_reads(placeholder_definition(stack.template, logical))
    ]
