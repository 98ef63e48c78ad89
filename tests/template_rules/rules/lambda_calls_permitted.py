"""Every AWS call a Lambda handler makes is permitted by the function's execution role.

Each function's handler (found through the assembly's asset manifest) is scanned for the boto3 calls it makes
(iam.handlers); its role must grant each call's action (on `*` when the action has no resource type; otherwise
by action only: the handlers take their buckets and keys from events).
"""

from __future__ import annotations

from typing import Final

from optigate.rehearse.template import resources_of_type
from tests.template_rules.assembly import Stack
from tests.template_rules.iam.database import COMPOSITE_ACTIONS, iam_action, privilege, resource_formats
from tests.template_rules.iam.handlers import handler_calls, handler_source
from tests.template_rules.iam.parameters import Unresolved
from tests.template_rules.iam.policies import Finding, Need, role_grants, role_logical, unmet_needs

ID: Final = "IAM-LambdaCallPermitted"


def check(stack: Stack) -> list[Finding]:
    """A `denied` finding for each handler call its role does not grant (`no-action`: no IAM action known)."""
    findings = []
    for logical, function in resources_of_type(stack.template, "AWS::Lambda::Function").items():
        role = role_logical(stack, function["Properties"].get("Role"))
        source = handler_source(stack, function)
        if role is None or source is None or not source.exists():
            what = "its role is not in this template" if role is None else "its handler source is not in the assembly"
            findings.append(Finding(stack.name, logical, "unresolved", what))
            continue
        grants = role_grants(stack, role)
        root = next((p for p in source.parents if (p / "optigate").is_dir()), source.parent)
        needs = []
        for service, operation in sorted(handler_calls(source, root)):
            actions = COMPOSITE_ACTIONS.get((service, operation)) or (iam_action(service, operation),)
            for action in actions:
                if privilege(action) is None:
                    findings.append(
                        Finding(stack.name, logical, "no-action", f"no IAM action for {service} {operation}")
                    )
                    continue
                resource: str | Unresolved = "*"
                if resource_formats(action, required_only=False):
                    resource = Unresolved(f"{operation}'s resource comes from the event")
                needs.append(Need(action, resource, f"{source.name} calls {service} {operation}"))
        findings += [f for f in unmet_needs(stack, logical, grants, needs) if f.kind != "unresolved"]
    return findings
