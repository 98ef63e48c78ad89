"""Validate the SDK calls a state machine makes against botocore's service models.

Step Functions' optimized (`arn:aws:states:::sagemaker:createProcessingJob.sync`) and SDK
(`arn:aws:states:::aws-sdk:sagemaker:describeOptimizationJob`) integrations take the API's own
request shape as `Parameters`; a `Key.$` value is filled at run time, so it is replaced by a
placeholder of the member's type before botocore's ParamValidator checks the request.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import botocore.session
from botocore.model import Shape
from botocore.validate import ParamValidator

from optigate.testing import asl

TOKEN = "arn:aws:iam::111111111111:role/token-placeholder"


def definition_of(template: dict[str, Any], logical_id: str | None = None) -> dict[str, Any]:
    """The state machine definition of a synthesized template, CloudFormation tokens as placeholders."""
    machines = {k: r for k, r in template["Resources"].items() if r["Type"] == "AWS::StepFunctions::StateMachine"}
    resource = machines[logical_id] if logical_id else next(iter(machines.values()))
    body = resource["Properties"]["DefinitionString"]
    if isinstance(body, dict):
        separator, parts = body["Fn::Join"]
        body = separator.join(part if isinstance(part, str) else TOKEN for part in parts)
    return json.loads(body)


def sdk_calls(definition: dict[str, Any]) -> Iterator[tuple[str, str, str, dict[str, Any]]]:
    """(state name, service, operation, parameters) for every Task that calls an AWS API."""
    for call in asl.sdk_calls(definition):
        yield call.state, call.service, call.operation, call.parameters


def _placeholder(shape: Shape) -> Any:
    kind = shape.type_name
    if kind == "string":
        return shape.enum[0] if shape.enum else "placeholder-value-0123456789"
    if kind in ("integer", "long"):
        return int(shape.metadata.get("min", 1))
    if kind in ("float", "double"):
        return float(shape.metadata.get("min", 1))
    if kind == "boolean":
        return True
    if kind == "timestamp":
        return "2026-01-01T00:00:00Z"
    if kind == "blob":
        return b"{}"
    if kind == "list":
        return [_placeholder(shape.member)]
    if kind == "map":
        return {"key": _placeholder(shape.value)}
    return {name: _placeholder(member) for name, member in shape.members.items() if name in shape.required_members}


def concrete(parameters: Any, shape: Shape | None) -> Any:
    """Replace `Key.$` entries by placeholders of the member's type; recurse through the shape."""
    if isinstance(parameters, dict) and shape is not None and shape.type_name == "structure":
        out = {}
        by_lower = {member_name.lower(): member_name for member_name in shape.members}
        for key, value in parameters.items():
            name = key[:-2] if key.endswith(".$") else key
            # Step Functions writes every parameter in PascalCase, also for camelCase APIs
            # (states:startExecution's StateMachineArn is the API's stateMachineArn).
            name = by_lower.get(name.lower(), name)
            member = shape.members.get(name)
            if key.endswith(".$"):
                out[name] = _placeholder(member) if member is not None else value
            else:
                out[name] = concrete(value, member)
        return out
    if isinstance(parameters, dict) and shape is not None and shape.type_name == "map":
        return {k[:-2] if k.endswith(".$") else k: (_placeholder(shape.value) if k.endswith(".$") else concrete(v, shape.value)) for k, v in parameters.items()}
    if isinstance(parameters, list) and shape is not None and shape.type_name == "list":
        return [concrete(item, shape.member) for item in parameters]
    if shape is not None and shape.type_name == "blob" and isinstance(parameters, (dict, list, str)):
        return json.dumps(parameters).encode()
    if shape is not None and shape.type_name == "string" and isinstance(parameters, (dict, list)):
        return json.dumps(parameters)  # a JSON document Step Functions serializes (startExecution's Input)
    return parameters


def validate(service: str, operation: str, parameters: dict[str, Any]) -> list[str]:
    """botocore's validation errors for this request (empty when valid)."""
    model = botocore.session.get_session().get_service_model(service)
    shape = model.operation_model(operation).input_shape
    if service == "lambda" and operation == "Invoke":
        parameters = {k: v for k, v in parameters.items() if not k.startswith("Payload")}  # any JSON
    report = ParamValidator().validate(concrete(parameters, shape), shape)
    text = report.generate_report()
    return [line for line in text.splitlines() if line.strip()] if report.has_errors() else []
