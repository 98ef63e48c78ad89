"""Every state machine Task's call is permitted by the state machine's role.

Each Task of each state machine (and each Distributed Map, which starts child executions) needs IAM actions on
resources (iam.needs); the role must grant each action on a `Resource` pattern that matches the ARN the call
will use, built from the Task's `Parameters` as they will be evaluated (iam.parameters), so patterns are matched
against names as they will be. A value the check cannot compute is reported as ``unresolved``, never passed
silently (and ``denied`` too when the role grants the action nowhere).
"""

from __future__ import annotations

from typing import Final

from optigate.rehearse.asl import iter_states
from optigate.rehearse.template import render_definition, state_machines
from tests.template_rules.assembly import Stack, token_values
from tests.template_rules.iam.needs import task_needs
from tests.template_rules.iam.parameters import known_input
from tests.template_rules.iam.policies import Finding, role_grants, role_logical, unmet_needs

ID: Final = "IAM-StateMachineCallPermitted"


def check(stack: Stack) -> list[Finding]:
    """A `denied` or `unresolved` finding for each permission a state needs that its role does not grant."""
    lookup = token_values(stack)
    findings = []
    for logical, machine in state_machines(stack.template).items():
        role = role_logical(stack, machine["Properties"].get("RoleArn"))
        if role is None:
            findings.append(Finding(stack.name, logical, "unresolved", "RoleArn is not a role of this template"))
            continue
        grants = role_grants(stack, role)
        definition = render_definition(stack.template, logical, {"*": lookup})
        known = known_input(definition)
        own_arn = lookup(logical, None)
        for name, state in iter_states(definition):
            findings += unmet_needs(stack, f"{logical}/{name}", grants, task_needs(state, known, stack, own_arn))
    return findings
