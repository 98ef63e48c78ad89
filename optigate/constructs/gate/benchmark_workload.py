"""The gate's benchmark workload in its state machine: the captured traffic checked before anything is created or paid
for, and what each fleet execution is told to send (optigate.deployment.gate_workload,
optigate.bench.core.shard_workload); and, with the same worker and reader, the capture an EAGLE head trains from counted
before the optimization job.
"""

from __future__ import annotations

from typing import Any

from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from optigate.constructs.benchmark_fleet import BenchmarkFleet
from optigate.constructs.gate import grants
from optigate.constructs.gate.tasks import CleanupPath, sdk_task
from optigate.deployment.gate import GatePlan
from optigate.lambdas.events import FromState

#: Where the check leaves its result ({until, digest, shape}) in the execution's state.
CHECKED = "$.workload"


def capture_event(plan: GatePlan, capture_uri: str | None) -> dict[str, Any] | None:
    """What the workers read, None without a captured workload (`capture_uri`: the data capture's S3 URI)."""
    return plan.benchmark.workload.event(capture_uri) if plan.benchmark.workload is not None else None


def check_capture(
    scope: Construct,
    plan: GatePlan,
    fleet: BenchmarkFleet,
    cleanup: CleanupPath,
    capture_uri: str | None,
    then: sfn.IChainable,
) -> sfn.IChainable:
    """A captured workload is read once by a fleet worker (with its read grant) before any job or endpoint exists:
    a missing, empty or unreadable capture fails the run as CaptureUnavailable, a replay longer than a worker may run
    as ReplayTooLong, each with the reason. Its pinned window end, digest and shape go to `$.workload`. Else `then`."""
    event = capture_event(plan, capture_uri)
    if event is None:
        return then
    check = cleanup.guarded(
        sdk_task(
            scope,
            "CheckCapturedWorkload",
            "lambda:invoke",
            {"FunctionName": fleet.worker.function_arn, "Payload": {"workload_check": event}},
            grants=[grants.invoke(fleet.worker)],
            result_path=CHECKED,
            result_selector={
                "until.$": "$.Payload.until",
                "digest.$": "$.Payload.digest",
                "shape.$": "$.Payload.shape",
            },
        )
    )
    return check.next(then)


def check_training_data(
    scope: Construct,
    plan: GatePlan,
    fleet: BenchmarkFleet,
    cleanup: CleanupPath,
    training_data_uri: str | None,
    then: sfn.IChainable,
) -> sfn.IChainable:
    """An EAGLE head trained from data capture: a fleet worker (with its read grant) counts the records the job reads
    under the prefix the job gets, before any job or endpoint exists; fewer than the team's min_training_records fail
    the run as TrainingDataUnavailable, naming the prefix and the count found and needed. Else (and without such a
    head) `then`."""
    check = plan.trained_head.training_check(training_data_uri) if plan.trained_head is not None else None
    if check is None:
        return then
    if not fleet.reads_training_data:
        raise ValueError(
            f"{plan.prefix}: the EAGLE head trains from data capture, but the benchmark fleet's workers may not read "
            "it: pass BenchmarkFleet(training_data=...)"
        )
    counted = cleanup.guarded(
        sdk_task(
            scope,
            "CheckTrainingData",
            "lambda:invoke",
            {"FunctionName": fleet.worker.function_arn, "Payload": {"training_data_check": check}},
            grants=[grants.invoke(fleet.worker)],
            result_path=sfn.JsonPath.DISCARD,
        )
    )
    return counted.next(then)


def fleet_input(plan: GatePlan, capture_uri: str | None) -> dict[str, Any]:
    """The workload part of each fleet execution's input, inside the benchmark's Map (whose items carry the check's
    result as `$.workload`): the captured workload with the pinned window and digest, or the synthetic lengths."""
    event = capture_event(plan, capture_uri)
    if event is not None:
        return {"workload": {**event, "until.$": f"{CHECKED}.until", "digest.$": f"{CHECKED}.digest"}}
    if plan.benchmark.synthetic is not None:
        return {"synthetic": plan.benchmark.synthetic.event()}
    return {}


def map_items(plan: GatePlan) -> dict[str, str]:
    """What each benchmark Map item takes from the execution's state: the check's result, with a captured workload."""
    return {"workload.$": CHECKED} if plan.benchmark.workload is not None else {}


def decide_input(plan: GatePlan) -> FromState | None:
    """The workload's shape for the report (DecideEvent.workload: counts, lengths, rate, never text)."""
    return FromState(f"{CHECKED}.shape") if plan.benchmark.workload is not None else None
