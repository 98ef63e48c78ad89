"""Requests and state machine definitions checked against botocore's service models, as the services
check them: the one implementation the harness (every request at run time) and the tests (every
Task's Parameters, statically) share.

Step Functions' optimized (`arn:aws:states:::sagemaker:createProcessingJob.sync`) and SDK
(`arn:aws:states:::aws-sdk:sagemaker:describeOptimizationJob`) integrations take the API's own
request shape as `Parameters`; a `Key.$` value is filled at run time, so the static check replaces it
by a placeholder of the member's type first.
"""

from __future__ import annotations

import json
from typing import Any

import botocore.session
from botocore.model import ListShape, MapShape, ServiceModel, Shape, StringShape, StructureShape
from botocore.validate import ParamValidator

from optigate.rehearse.asl import sdk_calls

_SESSION = botocore.session.get_session()
_MODELS: dict[str, ServiceModel] = {}


def service_model(service: str) -> ServiceModel:
    """botocore's model of a service (botocore's name: "sagemaker", "stepfunctions", ...), cached."""
    if service not in _MODELS:
        _MODELS[service] = _SESSION.get_service_model(service)
    return _MODELS[service]


# --------------------------------------------------------------------------- requests


def _enum_errors(value: Any, shape: Shape, path: str) -> list[str]:
    """ParamValidator does not check enums; the services do. Walk the request and report bad values."""
    errors: list[str] = []
    if isinstance(shape, StructureShape) and isinstance(value, dict):
        for key, member in shape.members.items():
            if key in value:
                errors += _enum_errors(value[key], member, f"{path}.{key}")
    elif isinstance(shape, ListShape) and isinstance(value, list):
        for i, item in enumerate(value):
            errors += _enum_errors(item, shape.member, f"{path}[{i}]")
    elif isinstance(shape, MapShape) and isinstance(value, dict):
        for key, item in value.items():
            errors += _enum_errors(item, shape.value, f"{path}.{key}")
    elif isinstance(shape, StringShape) and shape.enum and isinstance(value, str) and value not in shape.enum:
        errors.append(
            f"Value '{value}' at '{path}' failed to satisfy constraint: "
            f"Member must satisfy enum value set: {shape.enum}"
        )
    return errors


def request_errors(service: str, operation: str, params: dict) -> list[str]:
    """botocore's ParamValidator (types, required members, unknown keys, min/max) plus enums, one line
    per problem; empty when the request is well formed (or the operation is unknown to botocore)."""
    model = service_model(service)
    if operation not in model.operation_names:
        return []
    shape = model.operation_model(operation).input_shape
    if shape is None:
        return [] if not params else [f"{operation} takes no parameters, got {sorted(params)}"]
    report = ParamValidator().validate(params, shape)
    errors = [line for line in report.generate_report().splitlines() if line.strip()] if report.has_errors() else []
    return errors + _enum_errors(params, shape, operation)


def validate_request(service: str, operation: str, params: dict) -> str | None:
    """The error text the service would answer a ValidationException with, or None if well formed."""
    return "\n".join(request_errors(service, operation, params)) or None


def response_errors(service: str, operation: str, result: dict) -> list[str]:
    """A response (an emulated one) checked against the operation's output shape as a request is against its input
    shape: types, required members, members the API does not have, enums. Empty when the API could answer it."""
    model = service_model(service)
    shape = model.operation_model(operation).output_shape
    if shape is None:
        return [] if not result else [f"{operation} returns nothing, got {sorted(result)}"]
    report = ParamValidator().validate(result, shape)
    errors = [line for line in report.generate_report().splitlines() if line.strip()] if report.has_errors() else []
    return errors + _enum_errors(result, shape, operation)


# --------------------------------------------------------------------------- a Task's Parameters


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
    """A Task's Parameters as a request: `Key.$` entries become placeholders of the member's type."""
    if isinstance(parameters, dict) and shape is not None and shape.type_name == "structure":
        out = {}
        by_lower = {member_name.lower(): member_name for member_name in shape.members}
        for key, value in parameters.items():
            name = key.removesuffix(".$")
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
        return {
            key.removesuffix(".$"): _placeholder(shape.value) if key.endswith(".$") else concrete(value, shape.value)
            for key, value in parameters.items()
        }
    if isinstance(parameters, list) and shape is not None and shape.type_name == "list":
        return [concrete(item, shape.member) for item in parameters]
    if shape is not None and shape.type_name == "blob" and isinstance(parameters, (dict, list, str)):
        return json.dumps(parameters).encode()
    if shape is not None and shape.type_name == "string" and isinstance(parameters, (dict, list)):
        return json.dumps(parameters)  # a JSON document Step Functions serializes (startExecution's Input)
    return parameters


def parameter_errors(service: str, operation: str, parameters: dict[str, Any]) -> list[str]:
    """What the service would reject in the request a Task's Parameters make (empty when valid)."""
    model = service_model(service)
    if operation not in model.operation_names:
        return [f"{service} has no operation {operation}"]
    shape = model.operation_model(operation).input_shape
    if service == "lambda" and operation == "Invoke":
        parameters = {k: v for k, v in parameters.items() if not k.startswith("Payload")}  # any JSON
    return request_errors(service, operation, concrete(parameters, shape))


# --------------------------------------------------------------------------- definitions


def check_definition(definition: dict | str) -> list[str]:
    """Static check Step Functions does at CreateStateMachine: Parameters of SDK and optimized SageMaker tasks
    may only name members of the API's request shape (``Key.$`` counts as ``Key``)."""
    definition = json.loads(definition) if isinstance(definition, str) else definition
    problems: list[str] = []

    def keys(value: Any, shape: Shape, path: str) -> None:
        if isinstance(shape, StructureShape) and isinstance(value, dict):
            for key, item in value.items():
                member = key.removesuffix(".$")
                if member not in shape.members:
                    problems.append(
                        f"{path}: the field '{member}' is not supported by Step Functions (not in {shape.name})"
                    )
                elif not key.endswith(".$"):
                    keys(item, shape.members[member], f"{path}.{member}")
        elif isinstance(shape, ListShape) and isinstance(value, list):
            for i, item in enumerate(value):
                keys(item, shape.member, f"{path}[{i}]")

    for call in sdk_calls(definition):
        if not (call.sdk_integration or call.service == "sagemaker"):
            continue
        model = service_model(call.service)
        if call.operation not in model.operation_names:
            problems.append(f"{call.state}: {call.service} has no operation {call.operation}")
            continue
        shape = model.operation_model(call.operation).input_shape
        if shape is not None:
            keys(call.parameters, shape, f"{call.state}.Parameters")

    return problems
