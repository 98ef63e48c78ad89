"""Walking a Step Functions definition for the AWS API calls its Task states make."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

# Step Functions' integration names -> botocore's service names
SERVICE_NAMES = {"states": "stepfunctions", "sfn": "stepfunctions"}


@dataclass(frozen=True)
class SdkCall:
    state: str
    service: str  # botocore's name
    operation: str  # PascalCase, as in botocore
    parameters: dict[str, Any]
    sdk_integration: bool  # arn:...:states:::aws-sdk:<service>:<action> (not an optimized integration)


def iter_states(definition: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every state, including those of Parallel branches and Map processors."""
    for name, state in definition.get("States", {}).items():
        yield name, state
        for branch in state.get("Branches", []):
            yield from iter_states(branch)
        for key in ("ItemProcessor", "Iterator"):
            if key in state:
                yield from iter_states(state[key])


def sdk_calls(definition: dict[str, Any]) -> Iterator[SdkCall]:
    """Every Task that calls an AWS API through an optimized or an SDK integration."""
    for name, state in iter_states(definition):
        resource = state.get("Resource", "")
        if state.get("Type") != "Task" or ":states:::" not in resource:
            continue
        integration = resource.split(":states:::", 1)[1]
        sdk = integration.startswith("aws-sdk:")
        if sdk:
            _, service, action = integration.split(":", 2)
        else:
            service, action = integration.split(":", 1)
        action = action.split(".")[0]  # .sync / .sync:2 / .waitForTaskToken
        operation = action[0].upper() + action[1:]
        yield SdkCall(name, SERVICE_NAMES.get(service, service), operation, state.get("Parameters", {}), sdk)


def retry_problems(definition: dict[str, Any]) -> list[str]:
    """Every Task must retry exactly what its kind of integration raises for a transient fault, as the one
    table (optigate.constructs.retries) says: a name of another kind of integration never matches."""
    from optigate.constructs.retries import TRANSIENT, integration_kind

    problems = []
    for name, state in iter_states(definition):
        if state.get("Type") != "Task":
            continue
        kind = integration_kind(state["Resource"])
        expected = set(TRANSIENT[kind].errors) if kind in TRANSIENT else None
        if expected is None:
            problems.append(f"{name}: no retry table entry for {kind} ({state['Resource']})")
            continue
        retried = [set(retry["ErrorEquals"]) for retry in state.get("Retry", [])]
        if expected not in retried:
            problems.append(f"{name}: retries {sorted(set().union(*retried))}, {kind} raises {sorted(expected)}")
        unknown = set().union(*retried) - expected - {"States.ALL", "States.TaskFailed", "States.Timeout"}
        if unknown:
            problems.append(f"{name}: retries {sorted(unknown)}, which {kind} never raises")
    return problems
