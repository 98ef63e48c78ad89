"""A synthesized CloudFormation template read offline: its state machines, and their definitions (or
any property) with the CloudFormation tokens (Ref, Fn::GetAtt, Fn::Sub, Fn::Join) rendered.

Values come from a `substitutions` mapping: `LogicalId` (a Ref, also of a pseudo parameter such as
`AWS::Region`) or `LogicalId.Attribute` (a GetAtt) to a value, and `*` to a fallback
`f(logical_id, attribute_or_None)` for everything else.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from typing import Any, Final

STATE_MACHINE: Final = "AWS::StepFunctions::StateMachine"
#: Stands for any token where only the shape of a request matters (e.g. validation): an ARN-shaped string.
TOKEN: Final = "arn:aws:iam::111111111111:role/token-placeholder"

Substitutions = Mapping[str, Any]


def resources_of_type(template: dict[str, Any], resource_type: str) -> dict[str, dict[str, Any]]:
    """Logical id -> resource, for the resources of one CloudFormation type."""
    return {logical: r for logical, r in template.get("Resources", {}).items() if r["Type"] == resource_type}


def state_machines(template: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return resources_of_type(template, STATE_MACHINE)


def placeholders(template: dict[str, Any] | None = None) -> dict[str, Callable[[str, str | None], str]]:
    """Substitutions that render every token as :data:`TOKEN`, except a Lambda function's ARN (given the
    template): a Task whose Resource is a function is a Lambda integration, whatever the function's name."""
    resources = (template or {}).get("Resources", {})

    def fallback(logical: str, attribute: str | None) -> str:
        if attribute == "Arn" and resources.get(logical, {}).get("Type") == "AWS::Lambda::Function":
            return f"arn:aws:lambda:us-east-1:111111111111:function:{logical}"
        return TOKEN

    return {"*": fallback}


def render_definition(template: dict[str, Any], logical_id: str, substitutions: Substitutions) -> dict[str, Any]:
    """A state machine's definition (parsed) with its tokens replaced by `substitutions`."""
    body = state_machines(template)[logical_id]["Properties"]["DefinitionString"]
    if isinstance(body, str):
        return json.loads(body)
    return json.loads(_resolve(body, substitutions))


def placeholder_definition(template: dict[str, Any], logical_id: str | None = None) -> dict[str, Any]:
    """A state machine's definition (the only or first one, unless named) with every token a placeholder."""
    return render_definition(template, logical_id or next(iter(state_machines(template))), placeholders(template))


def render_value(value: Any, substitutions: Substitutions) -> Any:
    """A template property with its tokens replaced."""
    if isinstance(value, dict):
        if len(value) == 1 and next(iter(value)) in ("Ref", "Fn::GetAtt", "Fn::Sub", "Fn::Join"):
            return _resolve(value, substitutions)
        return {k: render_value(v, substitutions) for k, v in value.items()}
    if isinstance(value, list):
        return [render_value(v, substitutions) for v in value]
    return value


def _resolve(token: dict[str, Any], substitutions: Substitutions) -> str:
    if "Ref" in token:
        logical = token["Ref"]
        return str(substitutions[logical] if logical in substitutions else substitutions["*"](logical, None))
    if "Fn::GetAtt" in token:
        logical, attribute = token["Fn::GetAtt"]
        key = f"{logical}.{attribute}"
        return str(substitutions[key] if key in substitutions else substitutions["*"](logical, attribute))
    if "Fn::Sub" in token:
        text = token["Fn::Sub"] if isinstance(token["Fn::Sub"], str) else token["Fn::Sub"][0]

        def variable(match: re.Match[str]) -> str:
            name = match.group(1)
            inner = {"Fn::GetAtt": name.split(".", 1)} if "." in name else {"Ref": name}
            return _resolve(inner, substitutions)

        return re.sub(r"\$\{([^}]+)\}", variable, text)
    if "Fn::Join" in token:
        separator, parts = token["Fn::Join"]
        return separator.join(p if isinstance(p, str) else _resolve(p, substitutions) for p in parts)
    raise ValueError(f"cannot render {token!r}")
