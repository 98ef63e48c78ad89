"""The parameters Step Functions' optimized SageMaker integrations accept (`arn:aws:states:::sagemaker:<action>`),
from the sourced list `data/sfn_optimized_sagemaker.json`, and the one check of a Task's Parameters against it.

Step Functions validates an optimized integration's Parameters against its own list, nested members too, when the
state machine is created ("SCHEMA_VALIDATION_FAILED: The field "X" is not supported by Step Functions at
/States/<state>/Parameters") and a value filled from a path when the Task runs (States.Runtime). That list trails
SageMaker's API and AWS no longer publishes it: the file holds what its sources support, and a field outside it goes
through `arn:aws:states:::aws-sdk:sagemaker:<action>`, which takes the SDK's request shape. The rehearsal's
emulation of the optimized integration (optigate.rehearse.sync_service) and the template rule
SFN-OptimizedParametersKnown (tests/template_rules) both call :func:`unknown_fields`.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any, Final

LIST: Final = Path(__file__).resolve().parent / "data" / "sfn_optimized_sagemaker.json"
#: What a member takes, besides a structure (an object of its members).
VALUE: Final = "value"  # a scalar or a list of scalars
MAP: Final = "map"  # a map of the caller's own keys
UNLISTED: Final = "unlisted"  # a structure whose members no source names: any literal member is refused


@functools.cache
def optimized_list() -> dict[str, Any]:
    """The sourced list, parsed."""
    parsed: dict[str, Any] = json.loads(LIST.read_text())
    return parsed


def actions() -> frozenset[str]:
    """The optimized SageMaker actions the list knows (camelCase, as in the Resource ARN)."""
    return frozenset(optimized_list()["actions"])


def top_level(action: str) -> frozenset[str]:
    """The top-level parameters the list accepts for `action` (none when it has no sourced parameters)."""
    parameters = optimized_list()["actions"][action]["parameters"]
    return frozenset(parameters or ())


def unknown_fields(action: str, parameters: Any) -> list[str]:
    """The path of every field of `parameters` (a Task's Parameters, or their value at run time) that the list does
    not accept for `action` (`ProductionVariants[0].InferenceAmiVersion`): empty when Step Functions is known to take
    them all. `Key.$` counts as `Key`; what a path fills is checked when the Task runs. An action the list does not
    know refuses every field."""
    entry = optimized_list()["actions"].get(action)
    spec = entry["parameters"] if entry is not None else None
    return _walk(parameters, spec if spec is not None else {}, "")


def _walk(value: Any, spec: Any, path: str) -> list[str]:
    if spec in (VALUE, MAP):
        return []
    members: dict[str, Any] = {} if spec == UNLISTED else spec
    if isinstance(value, list):
        return [found for i, item in enumerate(value) for found in _walk(item, spec, f"{path}[{i}]")]
    if not isinstance(value, dict):
        return []
    found: list[str] = []
    for key, item in value.items():
        name = key.removesuffix(".$")
        where = f"{path}.{name}" if path else name
        if name not in members:
            found.append(where)
        elif not key.endswith(".$"):
            found += _walk(item, members[name], where)
    return found


def refusal(action: str, state: str, fields: list[str]) -> str:
    """Step Functions' message for the first unknown field, then every one, and the way out."""
    first = fields[0].rsplit(".", 1)[-1].split("[", 1)[0]
    return (
        f'SCHEMA_VALIDATION_FAILED: The field "{first}" is not supported by Step Functions '
        f"at /States/{state}/Parameters "
        f"(not on the list of optimized sagemaker:{action} parameters, optigate/rehearse/data/"
        f"{LIST.name}: {', '.join(fields)}); use arn:aws:states:::aws-sdk:sagemaker:{action}, which takes the SDK's "
        "request shape"
    )
