"""cdk-nag 3.x acknowledgements, kept in one place so every one carries a reason.

cdk-nag 3 matches an acknowledgement to one finding exactly: a wildcard in an IAM statement is
the finding `AwsSolutions-IAM5[Resource::<arn as cdk-nag prints it>]` (or `[Action::…]`), and a
bare `AwsSolutions-IAM5` does not cover it. `allow` therefore adds a statement and acknowledges
precisely the wildcards it contains, with the reason they are needed.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import jsii
from aws_cdk import Acknowledgment, AspectPriority, Aspects, IAspect, Stack, Validations
from aws_cdk import aws_iam as iam
from constructs import IConstruct

MIN_REASON_LENGTH = 40  # a reason a reviewer can check, not "not needed"


def acknowledge(construct: IConstruct, rule_id: str, reason: str, *more_rule_ids: str) -> None:
    """Acknowledge cdk-nag findings on `construct` (and what it contains), with the reason why (one
    jsii call for all of them: a whole-app synth makes hundreds)."""
    if len(reason.strip()) < MIN_REASON_LENGTH:
        raise ValueError(f"acknowledging {rule_id} on {construct.node.path} needs a real reason, got {reason!r}")
    rules = dict.fromkeys((rule_id, *more_rule_ids))
    Validations.of(construct).acknowledge(*(Acknowledgment(id=rule, reason=reason) for rule in rules))


def nag_text(resolved: Any) -> str:
    """A resolved CloudFormation value as cdk-nag prints it in finding IDs (`<AWS::Partition>`, `<Id.Arn>`)."""
    if isinstance(resolved, str):
        return resolved
    if isinstance(resolved, dict) and "Fn::Join" in resolved:
        separator, parts = resolved["Fn::Join"]
        return separator.join(nag_text(part) for part in parts)
    if isinstance(resolved, dict) and "Ref" in resolved:
        return f"<{resolved['Ref']}>"
    if isinstance(resolved, dict) and "Fn::GetAtt" in resolved:
        logical_id, attribute = resolved["Fn::GetAtt"]
        return f"<{logical_id}.{attribute}>"
    return json.dumps(resolved, separators=(",", ":"))


def wildcard_findings(scope: IConstruct, actions: list[str], resources: list[str]) -> list[str]:
    findings = [f"AwsSolutions-IAM5[Action::{action}]" for action in actions if "*" in action]
    # Only a resource with a `*` is resolved (a jsii call each). A token without one that resolved to
    # a wildcard would go unacknowledged, and cdk-nag would fail the synth: never a silent pass.
    stack = Stack.of(scope) if any("*" in resource and "${Token[" in resource for resource in resources) else None
    for resource in resources:
        if "*" not in resource:
            continue
        text = nag_text(stack.resolve(resource)) if stack is not None and "${Token[" in resource else resource
        if "*" in text:
            findings.append(f"AwsSolutions-IAM5[Resource::{text}]")
    return findings


def allow(
    role: iam.IRole,
    actions: list[str],
    resources: list[str],
    *,
    why_wildcard: str | None = None,
    conditions: dict[str, Any] | None = None,
) -> None:
    """Add a statement to `role`; any wildcard in it must come with `why_wildcard`."""
    role.add_to_principal_policy(iam.PolicyStatement(actions=actions, resources=resources, conditions=conditions))
    findings = wildcard_findings(role, actions, resources)
    if findings and not why_wildcard:
        raise ValueError(f"{role.node.path}: wildcard in {actions} on {resources} needs a reason")
    if findings:
        acknowledge(role, findings[0], why_wildcard or "", *findings[1:])


def acknowledge_generated_wildcards(scope: IConstruct, reason_for: Callable[[list[str]], str | None]) -> None:
    """Acknowledge the wildcards of IAM policies CDK generated under `scope` (task grants, logging,
    tracing), one finding at a time. `reason_for(actions)` gives the reason for a statement, or
    None to leave it unacknowledged (so an unexpected wildcard still fails the synth).

    A role whose inline policy outgrows IAM's size limit has its statements moved into overflow managed
    policies (`<role>/OverflowPolicyN`) by a CDK aspect at synth time, after this runs: each role under
    `scope` also gets a read-only aspect that acknowledges the policies that exist by then."""
    for child in scope.node.find_all():
        if isinstance(child, iam.CfnPolicy | iam.CfnManagedPolicy):
            _acknowledge_policy(child, reason_for)
        elif isinstance(child, iam.Role):
            Aspects.of(child).add(_OverflowPolicies(reason_for), priority=AspectPriority.READONLY)


def _acknowledge_policy(
    policy: iam.CfnPolicy | iam.CfnManagedPolicy, reason_for: Callable[[list[str]], str | None]
) -> None:
    document = Stack.of(policy).resolve(policy.policy_document)
    for statement in document.get("Statement", []):
        actions = statement.get("Action", [])
        actions = [actions] if isinstance(actions, str) else actions
        resources = statement.get("Resource", [])
        resources = resources if isinstance(resources, list) else [resources]
        reason = reason_for(actions)
        if reason is None:
            continue
        findings = [f"AwsSolutions-IAM5[Action::{a}]" for a in actions if "*" in a]
        findings += [f"AwsSolutions-IAM5[Resource::{nag_text(r)}]" for r in resources if "*" in nag_text(r)]
        if findings:
            acknowledge(policy, findings[0], reason, *findings[1:])


@jsii.implements(IAspect)
class _OverflowPolicies:
    """Acknowledges the overflow managed policies CDK splits off a role (they exist only once its
    mutating aspect has run; this one is read-only, so it runs after)."""

    def __init__(self, reason_for: Callable[[list[str]], str | None]) -> None:
        self.reason_for = reason_for

    def visit(self, node: IConstruct) -> None:
        if isinstance(node, iam.CfnManagedPolicy):
            _acknowledge_policy(node, self.reason_for)
