"""Each seam between a gate's state machines and a Lambda function, checked without running anything: every Task of
the synthesized example app that invokes the function, its Payload rendered with sample states (each `<key>.$` filled
with a value of the type the event gives the key), is read by the function's event (optigate.lambdas.events), and
validates against the event's JSON schema. A key added on one side only fails here, not in an executed run."""

from __future__ import annotations

import dataclasses
import typing

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from optigate.lambdas.events import EventError
from tests.fixtures.seams import SEAMS, render, state_paths
from tests.tiers import max_examples

# Fewer sample states in the fast tier (tests/tiers.py): every Task is still rendered and read in each example.
SETTINGS = settings(
    max_examples=max_examples(full=25, fast=4),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)


def _tasks(gate_tasks, role):
    tasks = [task for task in gate_tasks if task.role == role]
    assert tasks, f"no Task of the example app invokes the {role} function: the contract would be vacuous"
    return tasks


def _required(event) -> list[str]:
    return [
        f.name
        for f in dataclasses.fields(event)
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    ]


@pytest.mark.parametrize("role", sorted(SEAMS))
def test_every_payload_names_only_the_events_keys_and_all_its_required_ones(gate_tasks, role):
    event = SEAMS[role]
    fields = {f.name for f in dataclasses.fields(event)}
    for task in _tasks(gate_tasks, role):
        keys = {key.removesuffix(".$") for key in task.payload}
        assert keys <= fields, f"{task.stack} {task.state}: {sorted(keys - fields)} are not keys of {event.__name__}"
        missing = set(_required(event)) - keys
        assert not missing, f"{task.stack} {task.state}: sends no {sorted(missing)}"


@pytest.mark.parametrize("role", sorted(SEAMS))
def test_every_payload_reads_the_state_with_a_path_or_an_intrinsic(gate_tasks, role):
    for task in _tasks(gate_tasks, role):
        for path in state_paths(task.payload):
            assert path.startswith(("$", "States.")), f"{task.stack} {task.state}: {path!r}"


@pytest.mark.fuzz
@pytest.mark.parametrize("role", sorted(SEAMS))
@SETTINGS
@given(data=st.data())
def test_every_payload_rendered_with_a_sample_state_is_read_by_its_event(gate_tasks, role, data):
    event = SEAMS[role]
    schema = event.json_schema()
    for task in _tasks(gate_tasks, role):
        sent = render(data.draw, task.payload, event)
        read = event.from_event(sent)
        assert isinstance(read, event)
        jsonschema.validate(sent, schema)


@pytest.mark.fuzz
@pytest.mark.parametrize("role", sorted(SEAMS))
@SETTINGS
@given(data=st.data())
def test_a_misspelled_or_missing_required_key_is_refused_naming_it(gate_tasks, role, data):
    event = SEAMS[role]
    task = data.draw(st.sampled_from(_tasks(gate_tasks, role)))
    sent = render(data.draw, task.payload, event)
    key = data.draw(st.sampled_from(sorted(set(_required(event)) & set(sent)) or sorted(sent)))
    misspelled = data.draw(st.sampled_from([key + "s", key.upper(), key[:-1], key.replace("_", "-") + "_"]))
    renamed = {misspelled if name == key else name: value for name, value in sent.items()}
    with pytest.raises(EventError) as refused:
        event.from_event(renamed)
    assert refused.value.key == misspelled and misspelled in str(refused.value)
    if key in _required(event):
        with pytest.raises(EventError) as refused:
            event.from_event({name: value for name, value in sent.items() if name != key})
        assert refused.value.key == key and key in str(refused.value)


@pytest.mark.fuzz
@pytest.mark.parametrize("role", sorted(SEAMS))
@SETTINGS
@given(data=st.data())
def test_a_value_of_the_wrong_type_is_refused_naming_its_key(gate_tasks, role, data):
    event = SEAMS[role]
    task = data.draw(st.sampled_from(_tasks(gate_tasks, role)))
    sent = render(data.draw, task.payload, event)
    hints = typing.get_type_hints(event)
    typed = [name for name in sorted(sent) if hints[name] is not typing.Any]
    key = data.draw(st.sampled_from(typed))
    wrong = object()  # no JSON value: no annotation of an event admits it
    with pytest.raises(EventError) as refused:
        event.from_event({**sent, key: wrong})
    assert refused.value.key == key
