"""The seams' fixtures: every Task of every synthesized gate (and its fleet) that invokes a Lambda function, with the
function's role (optigate.rehearse.gate_layout: found by the state machines' structure, never by names), and sample
states to render a Payload template with."""

from __future__ import annotations

import dataclasses
import types
import typing
from typing import Any, Union

import pytest
from hypothesis import strategies as st

from optigate.lambdas import events
from optigate.lambdas.events import Event, FromState


@dataclasses.dataclass(frozen=True)
class InvokingTask:
    stack: str
    state: str
    role: str  # optigate.rehearse.gate_layout's WORKER, MERGE, DECIDE, STAGE, CROSS_CHECK, SERVER_METRICS
    payload: Any  # the Task's Payload template (Parameters.Payload)


def invoking_tasks(templates: dict[str, dict]) -> list[InvokingTask]:
    """Each Task of each gate (and its benchmark fleet) of `templates` that invokes one of the gate's functions."""
    from optigate.rehearse.asl import iter_states
    from optigate.rehearse.gate_layout import _PARTITION, _invoked_function, _probe, gate_layout
    from optigate.rehearse.template import render_definition, state_machines

    found = []
    for stack, template in sorted(templates.items()):
        machines = state_machines(template)
        if not any(r["Properties"].get("StateMachineName", "").endswith("-gate") for r in machines.values()):
            continue
        layout = gate_layout(template)
        for logical in (layout.gate, layout.fleet):
            definition = render_definition(template, logical, {**_PARTITION, "*": _probe})
            for name, state in iter_states(definition):
                function = _invoked_function(state) if state.get("Type") == "Task" else None
                if function in layout.functions:
                    payload = state.get("Parameters", {}).get("Payload")
                    if payload is None:  # the payload-only form: the state's input is the event
                        payload = {"$": "(the state's input)"}
                    found.append(InvokingTask(stack, name, layout.functions[function], payload))
    return found


@pytest.fixture(scope="session")
def gate_tasks(example_app) -> list[InvokingTask]:
    """Every invoking Task of the example app's gates (every team with a candidate, every environment)."""
    assert example_app.error is None, example_app.error
    return invoking_tasks(example_app.templates)


def _options(annotation: Any) -> list[Any]:
    if typing.get_origin(annotation) in (Union, types.UnionType):
        return [a for a in typing.get_args(annotation) if a is not FromState]
    return [annotation]


def values_of(annotation: Any, *, from_state: bool = False) -> st.SearchStrategy[Any]:
    """JSON values of the type `annotation` says; `from_state`: what a JSONPath of the state fills in (a value: not
    a null, not an empty list)."""
    options = _options(annotation)
    if from_state and len(options) > 1:
        options = [a for a in options if a is not type(None)]
    if len(options) > 1:
        return st.one_of([values_of(a, from_state=from_state) for a in options])
    (annotation,) = options
    if annotation is Any:
        return st.one_of(st.text(max_size=8), st.integers(), st.dictionaries(st.text(max_size=5), st.text(max_size=5)))
    if annotation is type(None):
        return st.none()
    if isinstance(annotation, type) and issubclass(annotation, Event):
        hints = typing.get_type_hints(annotation)
        required = {
            f.name: values_of(hints[f.name])
            for f in dataclasses.fields(annotation)
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        }
        return st.fixed_dictionaries(required)
    origin = typing.get_origin(annotation) or annotation
    arguments = typing.get_args(annotation)
    if origin is list:
        return st.lists(values_of(arguments[0] if arguments else Any), min_size=1 if from_state else 0, max_size=3)
    if origin is dict:
        return st.dictionaries(st.text(max_size=5), values_of(arguments[1] if arguments else Any), max_size=3)
    simple = {
        str: st.text(max_size=20),
        int: st.integers(min_value=-(2**40), max_value=2**40),
        float: st.one_of(st.integers(max_value=2**40), st.floats(allow_nan=False, allow_infinity=False)),
        bool: st.booleans(),
    }
    return simple[origin]


def _event_type(annotation: Any) -> type[Event] | None:
    for option in _options(annotation):
        if isinstance(option, type) and issubclass(option, Event):
            return option
    return None


def render(draw: Any, template: Any, annotation: Any) -> Any:
    """A Payload template as the state machine would send it: each `"<key>.$": <path>` becomes `<key>` with a value
    drawn for the type the event gives that key (a key the event does not have keeps its name: from_event refuses
    it); inside a value the event does not type further, any JSON value."""
    event = _event_type(annotation)
    if isinstance(template, dict):
        hints = typing.get_type_hints(event) if event is not None else {}
        mapping = [a for a in _options(annotation) if typing.get_origin(a) is dict]
        values = typing.get_args(mapping[0])[1] if mapping and typing.get_args(mapping[0]) else Any
        out = {}
        for key, value in template.items():
            name = key.removesuffix(".$")
            typed = hints.get(name, Any) if event is not None else values
            if event is not None and name not in hints:
                out[key] = value
            elif key.endswith(".$"):
                out[name] = draw(values_of(typed, from_state=True))
            else:
                out[key] = render(draw, value, typed)
        return out
    if isinstance(template, list):
        (item,) = [a for a in _options(annotation) if typing.get_origin(a) is list] or [list[Any]]
        (argument,) = typing.get_args(item) or (Any,)
        return [render(draw, value, argument) for value in template]
    return template


def state_paths(template: Any) -> list[str]:
    """Every JSONPath, context path or intrinsic function a Payload template reads (its `.$` keys' values)."""
    if isinstance(template, dict):
        return [
            path for key, value in template.items() for path in ([value] if key.endswith(".$") else state_paths(value))
        ]
    if isinstance(template, list):
        return [path for value in template for path in state_paths(value)]
    return []


SEAMS: dict[str, type[Event]] = {"decide": events.DecideEvent, "stage": events.StageEvent}
