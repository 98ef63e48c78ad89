"""The events' own rules (optigate.lambdas.events): nested keys are named by their path, a state path is never a
handler's value, anything but an object is refused, and every function but the benchmark worker has its event."""

from __future__ import annotations

import pytest

from optigate.lambdas import events
from optigate.lambdas.events import EventError, FromState, StageEvent, resolved
from optigate.rehearse.gate_handlers import HANDLER_FOLDERS
from optigate.rehearse.gate_layout import WORKER
from tests.fixtures.seams import SEAMS


def test_a_nested_key_is_named_by_its_path():
    head = {"model": {}, "output": "s3://b/o/", "environment": {}, "num_speculative_tokens": "3"}
    with pytest.raises(EventError) as refused:
        StageEvent.from_event({"trained_head": head})
    assert refused.value.key == "trained_head.num_speculative_tokens"
    with pytest.raises(EventError) as refused:
        StageEvent.from_event({"copies": [{"source": "s3://a/", "targte": "s3://b/"}]})
    assert refused.value.key == "copies[0].targte" and "did you mean target?" in str(refused.value)


def test_the_stager_takes_exactly_one_mode():
    for event in ({}, {"copies": [], "adapter_mix": {"live": {}, "sides": {}}}):
        with pytest.raises(EventError, match="exactly one of copies, trained_head, adapter_check, adapter_mix"):
            StageEvent.from_event(event)


def test_a_state_path_is_the_constructs_never_a_handlers_value():
    assert resolved("s3://b/k") == "s3://b/k"
    with pytest.raises(TypeError, match=r"\$\.x is filled in by the state machine"):
        resolved(FromState("$.x"))


def test_every_event_is_refused_as_anything_but_an_object():
    for event in events.EVENTS:
        with pytest.raises(EventError) as refused:
            event.from_event(["not", "an", "object"])
        assert refused.value.seam == event.SEAM


def test_every_function_but_the_benchmark_workers_has_its_event_named_after_its_handler():
    """A seam's event names the handler folder its function runs (its schema's file name says which)."""
    assert set(SEAMS) == set(HANDLER_FOLDERS) - {WORKER}
    assert {role: SEAMS[role].SEAM for role in SEAMS} == {role: HANDLER_FOLDERS[role] for role in SEAMS}
    assert set(events.EVENTS) == set(SEAMS.values())
