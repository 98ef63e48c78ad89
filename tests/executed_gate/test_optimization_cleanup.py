"""The cleanup stops the run's optimization job: a job still running when the run ends (its Describe kept failing,
or its Create's answer was lost) would otherwise run on for hours on its instance."""

from __future__ import annotations

import pytest

from optigate import naming
from optigate.constructs.retries import MAX_ATTEMPTS
from optigate.rehearse.asl import sdk_calls
from optigate.rehearse.gate_handlers import evaluation_writer
from optigate.rehearse.gate_layout import cleanup_states
from optigate.rehearse.gate_run import GateRun
from optigate.rehearse.harness import REGION, GateHarness
from optigate.rehearse.scenario import Outcome, Scenario
from optigate.rehearse.template import placeholder_definition, state_machines
from optigate.rehearse.validation import parameter_errors


def _definition(template):
    for logical, machine in state_machines(template).items():
        if machine["Properties"].get("StateMachineName") == naming.gate_state_machine_name("chat", "dev"):
            return placeholder_definition(template, logical)
    raise AssertionError(f"no gate state machine in {sorted(state_machines(template))}")


def test_the_cleanup_stops_the_optimization_job_first_unless_it_saw_it_finish(gate_templates):
    definition = _definition(gate_templates[True])
    states = definition["States"]
    stop = states["CleanupStopOptimizationJob"]
    assert stop["Resource"].endswith(":states:::aws-sdk:sagemaker:stopOptimizationJob")
    assert stop["Next"] == "DeleteEndpoint"
    assert [(c["ErrorEquals"], c["Next"]) for c in stop["Catch"]] == [(["States.ALL"], "DeleteEndpoint")]
    # A job whose last describe said it finished is not stopped (the stop would fail in every such run); a job never
    # described (its Create's answer lost) or still running is.
    left = states["OptimizationJobLeftRunning?"]
    assert left["Default"] == "CleanupStopOptimizationJob"
    (finished,) = left["Choices"]
    assert finished["Next"] == "DeleteEndpoint"
    present, statuses = finished["And"]
    assert present == {"Variable": "$.optimization.OptimizationJobStatus", "IsPresent": True}
    assert sorted(c["StringEquals"] for c in statuses["Or"]) == ["COMPLETED", "FAILED", "STOPPED"]
    # Every path to the cleanup after the first create enters through that choice; a failure before it (nothing
    # created yet) is notified and ends, without deletes that could only fail.
    entries = {c["Next"] for s in states.values() for c in s.get("Catch", []) if c.get("ResultPath") == "$.failure"}
    assert entries == {"OptimizationJobLeftRunning?", "NotifyFailure"}
    early = {
        name
        for name, s in states.items()
        if any(c["Next"] == "NotifyFailure" and c.get("ResultPath") == "$.failure" for c in s.get("Catch", []))
    }
    assert early == {"FindLastProof"}  # this gate reads no capture and trains no head: nothing else comes first
    (call,) = [c for c in sdk_calls(definition) if c.state == "CleanupStopOptimizationJob"]
    assert parameter_errors(call.service, call.operation, call.parameters) == []
    # What a rehearsal's progress folds into one line when it fails: the cleanup's deletes and stops, nothing else.
    cleanup = cleanup_states(gate_templates[True])
    assert cleanup == {name for name in states if name.startswith(("Delete", "CleanupStop"))}
    assert "CleanupStopOptimizationJob" in cleanup and "StopOptimizationJob" not in cleanup
    # Without an optimization job there is nothing to stop.
    plain = _definition(gate_templates[False])["States"]
    assert not {"CleanupStopOptimizationJob", "OptimizationJobLeftRunning?"} & set(plain)


@pytest.mark.slow
def test_a_job_whose_describe_keeps_failing_is_stopped(gate_templates, gate_handlers, emulators, nothing_left):
    scenario = Scenario(
        optimization_job=Outcome.never(),
        on_processing_job=evaluation_writer("pass"),
        throttle={"DescribeOptimizationJob": MAX_ATTEMPTS + 1},  # every attempt of the first describe
    )
    with GateHarness(lambda_handlers=gate_handlers(emulators), scenario=scenario, region=REGION) as harness:
        result = GateRun(gate_templates[True], harness, {"requests_per_stream": 4}).execute()
        jobs = harness.client("sagemaker").list_optimization_jobs()["OptimizationJobSummaries"]
    assert result["execution"]["status"] == "FAILED"
    assert "CleanupStopOptimizationJob" in result["states"] and "StopOptimizationJob" not in result["states"]
    assert [job["OptimizationJobStatus"] for job in jobs] in (["STOPPING"], ["STOPPED"])
    nothing_left(result)
