"""Every AWS SDK integration a state machine calls is on the checked list of supported actions.

Step Functions' AWS SDK integrations lag the SDKs: an `arn:aws:states:::aws-sdk:<service>:<action>` that Step
Functions does not support yet makes CloudFormation reject the state machine at deploy ("SCHEMA_VALIDATION_FAILED:
The resource provided ... is not recognized"), which rolls back the whole team stack. statelint, cfn-lint and moto
cannot see it. The list, each action with why it is known to be supported (the Step Functions developer guide's
supported-services page), is tests/template_rules/data/sfn_sdk_actions.json; an action missing from it is reported
(call it through a Lambda function with the SDK its asset bundles instead, as the cross-check does).
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from optigate.rehearse.asl import iter_states
from optigate.rehearse.template import placeholder_definition, state_machines
from tests.template_rules.assembly import Stack

ID: Final = "SFN-SdkActionSupported"
LIST: Final = Path(__file__).resolve().parents[1] / "data" / "sfn_sdk_actions.json"
SDK_INTEGRATION: Final = ":states:::aws-sdk:"


@dataclass(frozen=True, order=True)
class Finding:
    machine: str  # "<stack>/<state machine logical id>"
    state: str
    action: str  # "<service>:<action>" as the Resource names it

    def __str__(self) -> str:
        return (
            f"{self.machine}: {self.state} calls aws-sdk:{self.action}, which is not on the list of supported actions"
        )


@functools.cache
def supported_list() -> dict[str, Any]:
    """The checked list (tests/template_rules/data/sfn_sdk_actions.json), parsed."""
    return json.loads(LIST.read_text())


def supported() -> frozenset[str]:
    return frozenset(supported_list()["supported"])


def sdk_action(resource: str) -> str | None:
    """`<service>:<action>` of an aws-sdk Task resource (without an integration pattern such as
    .waitForTaskToken), None for any other resource."""
    if SDK_INTEGRATION not in resource:
        return None
    return resource.split(SDK_INTEGRATION, 1)[1].split(".", 1)[0]


def unsupported_calls(definition: dict[str, Any]) -> list[tuple[str, str]]:
    """(state, service:action) of every aws-sdk Task (branches and Map processors included) not on the list."""
    allowed = supported()
    return [
        (name, action)
        for name, state in iter_states(definition)
        if state.get("Type") == "Task"
        and (action := sdk_action(str(state.get("Resource", "")))) is not None
        and action not in allowed
    ]


def check(stack: Stack) -> list[Finding]:
    """A finding for each aws-sdk Task of each state machine of the stack whose action is not on the list."""
    return sorted(
        Finding(f"{stack.name}/{logical}", state, action)
        for logical in state_machines(stack.template)
        for state, action in unsupported_calls(placeholder_definition(stack.template, logical))
    )
