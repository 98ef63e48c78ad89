"""Which parts of a synthesized team stack are the gate, found by the structure of the state machines
(which one starts the other, where each Lambda function is invoked), never by names or logical ids.

- the **gate** is the state machine whose Tasks start executions of another (states:startExecution);
- the **fleet** is the state machine it starts;
- the fleet's **worker** is the function its Map runs for each shard, its **merge** the function it
  invokes afterwards, at the top level; the gate's **decide** is the function the gate invokes and
  whose result it keeps, its **stage** one whose result it discards (it copies a candidate's files);
- the gate's **cross-check** function is the one it invokes with a managed benchmark job `operation`
  (optigate/lambdas/ai_benchmark_jobs), when the gate has a cross-check;
- the gate's **cleanup states** are those that catch every error of theirs into `$.cleanup_error` and go on
  (the deletes and stops of the cleanup, which fail on what the run never created).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Final

from optigate.rehearse.asl import iter_states
from optigate.rehearse.template import placeholder_definition, render_definition, resources_of_type, state_machines

WORKER, MERGE, DECIDE, STAGE, CROSS_CHECK = "worker", "merge", "decide", "stage", "cross_check"
SERVER_METRICS = "server_metrics"  # the function that reads the temporary endpoints' container metrics
_PROBE: Final = "cfn-token:"  # a rendered token that names its resource: cfn-token:<LogicalId>[.<Attribute>]
_PARTITION: Final = {"AWS::Partition": "aws"}  # so that integration ARNs read as such
#: Where the cleanup's states put the error they catch (optigate.constructs.gate.stages, component_stages, cross_check).
CLEANUP_ERROR: Final = "$.cleanup_error"


@dataclass(frozen=True)
class GateLayout:
    gate: str  # logical id of the gate's state machine
    fleet: str  # logical id of the benchmark fleet's state machine
    functions: dict[str, str]  # Lambda function logical id -> WORKER | MERGE | DECIDE | STAGE | CROSS_CHECK | ...


def _probe(logical: str, attribute: str | None) -> str:
    return f"{_PROBE}{logical}" + (f".{attribute}" if attribute else "")


def _probed(value: Any) -> str | None:
    """The logical id a probe-rendered value names, if it is one."""
    if isinstance(value, str) and value.startswith(_PROBE):
        return value.removeprefix(_PROBE).split(".", 1)[0]
    return None


def _tasks(definition: dict[str, Any], in_map: bool = False) -> Iterator[tuple[dict[str, Any], bool]]:
    """Every Task state, and whether it runs inside a Map's processor (per item) or not."""
    for state in definition.get("States", {}).values():
        if state.get("Type") == "Task":
            yield state, in_map
        for key in ("ItemProcessor", "Iterator"):
            if key in state:
                yield from _tasks(state[key], in_map=True)
        for branch in state.get("Branches", []):
            yield from _tasks(branch, in_map)


def _invoked_function(task: dict[str, Any]) -> str | None:
    """The function a Task invokes: its Resource (payload-only form) or lambda:invoke's FunctionName."""
    direct = _probed(task.get("Resource"))
    if direct is not None:
        return direct
    if task.get("Resource", "").endswith(":states:::lambda:invoke"):
        return _probed(task.get("Parameters", {}).get("FunctionName"))
    return None


def _reads_server_metrics(task: dict[str, Any]) -> bool:
    """A Task whose payload is the server-metrics read (optigate.constructs.gate.server_metrics)."""
    payload = task.get("Parameters", {}).get("Payload")
    return isinstance(payload, dict) and "server_metrics" in payload


def _runs_benchmark_jobs(task: dict[str, Any]) -> bool:
    """The Task asks its function for a managed benchmark job operation (Create/Describe/StopAIBenchmarkJob)."""
    payload = (
        task.get("Parameters", {}).get("Payload")
        if task.get("Resource", "").endswith(":states:::lambda:invoke")
        else None
    )
    operation = payload.get("operation") if isinstance(payload, dict) else None
    return isinstance(operation, str) and operation.endswith("AIBenchmarkJob")


def _started_machine(task: dict[str, Any]) -> str | None:
    if ":states:::states:startExecution" in task.get("Resource", ""):
        return _probed(task.get("Parameters", {}).get("StateMachineArn"))
    return None


def _is_image(resource: dict[str, Any]) -> bool:
    properties = resource.get("Properties", {})
    return properties.get("PackageType") == "Image" or "ImageUri" in properties.get("Code", {})


def gate_layout(template: dict[str, Any]) -> GateLayout:
    """The gate, its fleet and the role of each Lambda function in a synthesized template."""
    functions = set(resources_of_type(template, "AWS::Lambda::Function"))
    starts: dict[str, set[str]] = {}
    invokes: dict[str, list[tuple[str, bool]]] = {}
    discards: set[str] = set()  # functions whose result the invoking Task discards (ResultPath null)
    benchmark_jobs: set[str] = set()  # functions the gate asks for managed benchmark job operations
    metric_reads: set[str] = set()  # functions the gate asks for the server metrics
    for logical in state_machines(template):
        definition = render_definition(template, logical, {**_PARTITION, "*": _probe})
        tasks = list(_tasks(definition))
        starts[logical] = {m for task, _ in tasks if (m := _started_machine(task)) is not None}
        invokes[logical] = [(f, in_map) for task, in_map in tasks if (f := _invoked_function(task)) in functions]
        benchmark_jobs |= {
            f for task, _ in tasks if _runs_benchmark_jobs(task) and (f := _invoked_function(task)) in functions
        }
        metric_reads |= {
            f for task, _ in tasks if _reads_server_metrics(task) and (f := _invoked_function(task)) in functions
        }
        discards |= {
            f
            for task, _ in tasks
            if "ResultPath" in task and task["ResultPath"] is None and (f := _invoked_function(task)) in functions
        }
    gates = [logical for logical, started in starts.items() if started]
    if len(gates) != 1 or len(starts[gates[0]]) != 1:
        raise ValueError(f"expected one state machine that starts one other (the gate), found {starts}")
    gate, (fleet,) = gates[0], starts[gates[0]]
    # The decision is the gate's container-image function; the staging function (zip) either discards its result
    # (copies) or returns the candidate (a trained head).
    images = {f for f, r in resources_of_type(template, "AWS::Lambda::Function").items() if _is_image(r)}
    roles = {
        function: CROSS_CHECK
        if function in benchmark_jobs
        else SERVER_METRICS
        if function in metric_reads
        else STAGE
        if function in discards or (images and function not in images)
        else DECIDE
        for function, _ in invokes[gate]
    }
    roles |= {function: WORKER if in_map else MERGE for function, in_map in invokes[fleet]}
    missing = {WORKER, MERGE, DECIDE} - set(roles.values())
    if missing:
        raise ValueError(f"no Lambda function found for {sorted(missing)} (functions by role: {roles})")
    return GateLayout(gate=gate, fleet=fleet, functions=roles)


def cleanup_states(template: dict[str, Any]) -> frozenset[str]:
    """The gate's states that catch every error of theirs into CLEANUP_ERROR and go on: the cleanup's deletes and
    stops, which fail on a resource the run never created, or one already going (optigate.rehearse.progress folds
    those misses into one line)."""
    definition = placeholder_definition(template, gate_layout(template).gate)
    return frozenset(
        name
        for name, state in iter_states(definition)
        if state.get("Catch") and all(c.get("ResultPath") == CLEANUP_ERROR for c in state["Catch"])
    )
