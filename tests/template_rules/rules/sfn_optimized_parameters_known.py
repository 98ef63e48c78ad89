"""Every optimized SageMaker integration a state machine calls sends only parameters on the sourced list.

Step Functions checks an optimized integration's (`arn:aws:states:::sagemaker:<action>`) Parameters, nested members
too, against its own list at CreateStateMachine ("SCHEMA_VALIDATION_FAILED: The field "X" is not supported by Step
Functions at /States/<state>/Parameters"), which rolls back the whole team stack; that list trails SageMaker's API
(`MetricsConfig`, `InferenceAmiVersion`, `ModelDataSource`, ...). statelint, cfn-lint and moto cannot see it. The
list, each action with its sources, is optigate/rehearse/data/sfn_optimized_sagemaker.json
(optigate.rehearse.optimized_parameters); a Task sending a field outside it is reported: call
`arn:aws:states:::aws-sdk:sagemaker:<action>` instead, which takes the SDK's request shape.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from optigate.rehearse.asl import iter_states
from optigate.rehearse.optimized_parameters import unknown_fields
from optigate.rehearse.template import placeholder_definition, state_machines
from tests.template_rules.assembly import Stack

ID: Final = "SFN-OptimizedParametersKnown"
OPTIMIZED: Final = ":states:::sagemaker:"


@dataclass(frozen=True, order=True)
class Finding:
    machine: str  # "<stack>/<state machine logical id>"
    state: str
    action: str  # camelCase, as the Resource names it
    fields: tuple[str, ...]

    def __str__(self) -> str:
        return (
            f"{self.machine}: {self.state} sends {', '.join(self.fields)} to the optimized sagemaker:{self.action}, "
            f"which the list of its parameters does not name; use arn:aws:states:::aws-sdk:sagemaker:{self.action}"
        )


def optimized_action(resource: str) -> str | None:
    """The action of an optimized SageMaker Task resource (without .sync), None for any other resource."""
    if OPTIMIZED not in resource:
        return None
    return resource.split(OPTIMIZED, 1)[1].split(".", 1)[0]


def unknown_calls(definition: dict[str, Any]) -> list[tuple[str, str, tuple[str, ...]]]:
    """(state, action, fields) of every optimized SageMaker Task (branches and Map processors included) sending a
    field the list does not name."""
    calls = []
    for name, state in iter_states(definition):
        action = optimized_action(str(state.get("Resource", ""))) if state.get("Type") == "Task" else None
        if action is not None and (fields := unknown_fields(action, state.get("Parameters", {}))):
            calls.append((name, action, tuple(fields)))
    return calls


def check(stack: Stack) -> list[Finding]:
    """A finding for each optimized SageMaker Task of each state machine of the stack that sends an unlisted field."""
    return sorted(
        Finding(f"{stack.name}/{logical}", state, action, fields)
        for logical in state_machines(stack.template)
        for state, action, fields in unknown_calls(placeholder_definition(stack.template, logical))
    )
