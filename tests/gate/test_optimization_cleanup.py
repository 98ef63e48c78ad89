"""The cleanup stops the run's optimization job: a job still running when the run ends (its Describe kept failing,
or its Create's answer was lost) would otherwise run on for hours on its instance."""

from __future__ import annotations

from optigate import naming
from optigate.constructs.retries import MAX_ATTEMPTS
from optigate.rehearse.asl import sdk_calls
from optigate.rehearse.gate_handlers import evaluation_writer
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


def test_the_cleanup_stops_the_optimization_job_first_and_goes_on_whatever_the_stop_answers(gate_templates):
    definition = _definition(gate_templates[True])
    states = definition["States"]
    stop = states["CleanupStopOptimizationJob"]
    assert stop["Resource"].endswith(":states:::aws-sdk:sagemaker:stopOptimizationJob")
    assert stop["Next"] == "DeleteEndpoint"
    assert [(c["ErrorEquals"], c["Next"]) for c in stop["Catch"]] == [(["States.ALL"], "DeleteEndpoint")]
    # Every path to the cleanup enters through the stop: what each guarded state catches into.
    entries = {c["Next"] for s in states.values() for c in s.get("Catch", []) if c.get("ResultPath") == "$.failure"}
    assert entries == {"CleanupStopOptimizationJob"}
    (call,) = [c for c in sdk_calls(definition) if c.state == "CleanupStopOptimizationJob"]
    assert parameter_errors(call.service, call.operation, call.parameters) == []
    # Without an optimization job there is nothing to stop.
    assert "CleanupStopOptimizationJob" not in _definition(gate_templates[False])["States"]


def test_a_job_whose_describe_keeps_failing_is_stopped(gate_templates, gate_handlers, emulators, nothing_left):
    scenario = Scenario(
        optimization_job=Outcome.never(),
        on_processing_job=evaluation_writer("pass"),
        throttle={"DescribeOptimizationJob": MAX_ATTEMPTS + 1},  # every attempt of the first describe
    )
    with GateHarness(lambda_handlers=gate_handlers(emulators), scenario=scenario, region=REGION) as harness:
        result = GateRun(gate_templates[True], harness, {"rounds": 4}).execute()
        jobs = harness.client("sagemaker").list_optimization_jobs()["OptimizationJobSummaries"]
    assert result["execution"]["status"] == "FAILED"
    assert "CleanupStopOptimizationJob" in result["states"] and "StopOptimizationJob" not in result["states"]
    assert [job["OptimizationJobStatus"] for job in jobs] in (["STOPPING"], ["STOPPED"])
    nothing_left(result)
