"""Policy documents and the grants a role holds, matched as IAM matches them: actions case-insensitively with
`*`/`?`, resources case-sensitively with `*`/`?` (a `*` also matches `/` and `:`). SageMaker reports resource
names lower-cased in some ARNs (https://github.com/boto/boto3/issues/4606, and CloudFormation-created SageMaker
resources: https://github.com/aws-solutions/research-service-workbench-on-aws/pull/1048), so a SageMaker ARN
must be matched both as written and lower-cased. An explicit `Deny` that matches wins. Conditions are not
evaluated (a conditional grant counts as a grant)."""

from __future__ import annotations

import fnmatch
import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Final

from optigate.rehearse.template import render
from tests.template_rules.assembly import Stack, token_values
from tests.template_rules.iam.parameters import Unresolved

POLICY_RESOURCES: Final = {  # type -> where its policy documents are
    "AWS::IAM::Policy": ("PolicyDocument",),
    "AWS::IAM::ManagedPolicy": ("PolicyDocument",),
    "AWS::IAM::Role": ("AssumeRolePolicyDocument",),
    "AWS::KMS::Key": ("KeyPolicy",),
    "AWS::S3::BucketPolicy": ("PolicyDocument",),
    "AWS::SNS::TopicPolicy": ("PolicyDocument",),
    "AWS::SQS::QueuePolicy": ("PolicyDocument",),
    "AWS::Events::EventBusPolicy": ("Statement",),
}


@dataclass(frozen=True)
class Finding:
    stack: str
    where: str  # "<policy or role logical id>" or "<state machine logical id>/<state>" or "<function>"
    kind: str  # unknown-action | denied | unresolved | no-action
    detail: str
    action: str = ""

    def __str__(self) -> str:
        return f"{self.stack} {self.where}: {self.kind}: {self.detail}"


@dataclass(frozen=True)
class Need:
    """One permission a call needs: `action` on `resource` ("*" when the action has no resource type)."""

    action: str
    resource: str | Unresolved
    why: str = ""


def policy_documents(template: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """(logical id, document) for every policy document in a template."""
    for logical, resource in template.get("Resources", {}).items():
        properties = resource.get("Properties", {})
        for key in POLICY_RESOURCES.get(resource["Type"], ()):
            document = properties.get(key)
            if key == "Statement" and document is not None:
                document = {"Statement": [document]}
            if isinstance(document, dict):
                yield logical, document
        if resource["Type"] == "AWS::IAM::Role":
            for policy in properties.get("Policies") or []:
                yield f"{logical}/{policy.get('PolicyName', '?')}", policy["PolicyDocument"]


def statements(document: dict[str, Any]) -> list[dict[str, Any]]:
    statements = document.get("Statement", [])
    return [statements] if isinstance(statements, dict) else list(statements)


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


@dataclass(frozen=True)
class Grant:
    effect: str
    actions: tuple[str, ...]
    not_actions: tuple[str, ...]
    resources: tuple[str, ...]
    not_resources: tuple[str, ...]
    source: str

    def covers_action(self, action: str) -> bool:
        action = action.lower()
        if self.not_actions:
            return not any(fnmatch.fnmatchcase(action, a.lower()) for a in self.not_actions)
        return any(fnmatch.fnmatchcase(action, a.lower()) for a in self.actions)

    def covers_resource(self, arn: str) -> bool:
        if self.not_resources:
            return not any(fnmatch.fnmatchcase(arn, r) for r in self.not_resources)
        return any(fnmatch.fnmatchcase(arn, r) for r in self.resources)


def role_grants(stack: Stack, role_logical: str) -> list[Grant]:
    """Every statement of the policies attached to a role of the template (identity policies only)."""
    lookup = token_values(stack)
    resources = stack.template.get("Resources", {})
    documents: list[tuple[str, dict[str, Any]]] = []
    role = resources.get(role_logical, {})
    for policy in role.get("Properties", {}).get("Policies") or []:
        documents.append((f"{role_logical}/{policy.get('PolicyName')}", policy["PolicyDocument"]))
    managed = {json.dumps(a, sort_keys=True) for a in role.get("Properties", {}).get("ManagedPolicyArns") or []}
    for logical, resource in resources.items():
        properties = resource.get("Properties", {})
        if resource["Type"] not in ("AWS::IAM::Policy", "AWS::IAM::ManagedPolicy"):
            continue
        attached = {"Ref": role_logical} in (properties.get("Roles") or [])
        if attached or json.dumps({"Ref": logical}, sort_keys=True) in managed:
            documents.append((logical, properties["PolicyDocument"]))
    grants = []
    for source, document in documents:
        for statement in statements(document):
            grants.append(
                Grant(
                    statement.get("Effect", "Allow"),
                    tuple(as_list(statement.get("Action", []))),
                    tuple(as_list(statement.get("NotAction", []))),
                    tuple(str(r) for r in as_list(render(statement.get("Resource", []), lookup))),
                    tuple(str(r) for r in as_list(render(statement.get("NotResource", []), lookup))),
                    source,
                )
            )
    return grants


def _arn_variants(arn: str) -> list[str]:
    """The forms an ARN is authorized in: SageMaker's also lower-cased."""
    return [arn, arn.lower()] if arn.split(":")[2:3] == ["sagemaker"] and arn != arn.lower() else [arn]


def permitted(grants: list[Grant], action: str, resource: str) -> bool:
    """`action` on `resource` is allowed by an Allow and denied by no Deny (conditions not evaluated)."""
    for arn in _arn_variants(resource):
        matching = [g for g in grants if g.covers_action(action) and g.covers_resource(arn)]
        if any(g.effect == "Deny" for g in matching) or not any(g.effect == "Allow" for g in matching):
            return False
    return True


def granted_patterns(grants: list[Grant], action: str) -> list[str]:
    return sorted({r for g in grants if g.effect == "Allow" and g.covers_action(action) for r in g.resources})


def role_logical(stack: Stack, role_arn: Any) -> str | None:
    if isinstance(role_arn, dict) and "Fn::GetAtt" in role_arn:
        logical = role_arn["Fn::GetAtt"][0]
        return logical if logical in stack.template.get("Resources", {}) else None
    return None


def unmet_needs(stack: Stack, where: str, grants: list[Grant], needs: list[Need]) -> list[Finding]:
    findings = []
    for need in needs:
        if isinstance(need.resource, Unresolved):
            anywhere = need.action != "?" and any(g.effect == "Allow" and g.covers_action(need.action) for g in grants)
            state = "granted on some resource" if anywhere else "granted nowhere"
            detail = f"{need.action} on {need.resource} ({need.why}); {state}"
            findings.append(Finding(stack.name, where, "unresolved", detail, need.action))
            if need.action != "?" and not anywhere:
                findings.append(Finding(stack.name, where, "denied", detail, need.action))
        elif not permitted(grants, need.action, need.resource):
            patterns = granted_patterns(grants, need.action) or ["nothing"]
            detail = f"{need.action} on {need.resource} ({need.why}); the role grants it on {patterns}"
            findings.append(Finding(stack.name, where, "denied", detail, need.action))
    return findings
