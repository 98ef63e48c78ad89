"""A synthesized CloudFormation template read offline: its state machines, and their definitions (or
any property) with the CloudFormation functions evaluated (Ref, Fn::GetAtt, Fn::Sub, Fn::Join, Fn::Select,
Fn::Split): the one token renderer of the rehearsal and of the tests' template rules.

What a Ref or Fn::GetAtt stands for comes from a lookup `f(logical_id, attribute_or_None)`, or from a
`substitutions` mapping: `LogicalId` (a Ref, also of a pseudo parameter such as `AWS::Region`) or
`LogicalId.Attribute` (a GetAtt) to a value, and `*` to a fallback lookup for everything else.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Mapping
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


Lookup = Callable[[str, str | None], Any]


def lookup_of(substitutions: Substitutions) -> Lookup:
    """`substitutions` as a lookup; its values are rendered as text, as CloudFormation's functions yield text."""
    fallback = substitutions["*"]

    def lookup(logical: str, attribute: str | None) -> str:
        key = logical if attribute is None else f"{logical}.{attribute}"
        return str(substitutions[key] if key in substitutions else fallback(logical, attribute))

    return lookup


def render_definition(template: dict[str, Any], logical_id: str, substitutions: Substitutions) -> dict[str, Any]:
    """A state machine's definition (parsed) with its tokens replaced by `substitutions`."""
    body = state_machines(template)[logical_id]["Properties"]["DefinitionString"]
    if isinstance(body, str):
        return json.loads(body)
    return json.loads(render(body, lookup_of(substitutions)))


def placeholder_definition(template: dict[str, Any], logical_id: str | None = None) -> dict[str, Any]:
    """A state machine's definition (the only or first one, unless named) with every token a placeholder."""
    return render_definition(template, logical_id or next(iter(state_machines(template))), placeholders(template))


def every_state(template: dict[str, Any]) -> Iterator[tuple[str, str, dict[str, Any]]]:
    """(state machine logical id, state name, state) of every state of every state machine of `template`, Map and
    Parallel branches included, tokens as placeholders."""
    from optigate.rehearse.asl import iter_states

    for logical in state_machines(template):
        for name, state in iter_states(placeholder_definition(template, logical)):
            yield logical, name, state


def render_value(value: Any, substitutions: Substitutions) -> Any:
    """A template property with its tokens replaced by `substitutions`."""
    return render(value, lookup_of(substitutions))


def render(value: Any, lookup: Lookup) -> Any:
    """A template value with CloudFormation's functions evaluated (Ref, GetAtt, Sub, Join, Select, Split);
    another function is rendered as `unresolved:<function>`."""
    if isinstance(value, list):
        return [render(v, lookup) for v in value]
    if not isinstance(value, dict):
        return value
    if len(value) != 1 or not next(iter(value)).startswith(("Ref", "Fn::")):
        return {k: render(v, lookup) for k, v in value.items()}
    function, argument = next(iter(value.items()))
    if function == "Ref":
        return lookup(argument, None)
    if function == "Fn::GetAtt":
        logical, attribute = argument if isinstance(argument, list) else argument.split(".", 1)
        return lookup(logical, attribute)
    if function == "Fn::Join":
        separator, parts = argument
        return separator.join(str(p) for p in render(parts, lookup))
    if function == "Fn::Select":
        index, items = argument
        return render(items, lookup)[int(render(index, lookup))]
    if function == "Fn::Split":
        separator, text = argument
        return str(render(text, lookup)).split(separator)
    if function == "Fn::Sub":
        text, variables = (argument, {}) if isinstance(argument, str) else argument
        variables = render(variables, lookup)

        def variable(match: re.Match[str]) -> str:
            name = match.group(1)
            if name in variables:
                return str(variables[name])
            if "." in name and not name.startswith("AWS::"):
                return str(lookup(*name.split(".", 1)))
            return str(lookup(name, None))

        return re.sub(r"\$\{([^}!]+)\}", variable, text)
    return f"unresolved:{function}"
