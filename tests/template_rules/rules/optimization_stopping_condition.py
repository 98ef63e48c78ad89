"""Every CreateOptimizationJob a state machine sends bounds the job with the StoppingCondition keys the SDK sends.

botocore gives CreateOptimizationJob the StoppingCondition shape it shares with training jobs (MaxRuntimeInSeconds,
MaxWaitTimeInSeconds, MaxPendingTimeInSeconds), whose members are documented for "a training or compilation job";
no reference says an optimization job takes more than a runtime bound. The SageMaker Python SDK's optimize() sends
``{"MaxRuntimeInSeconds": max_runtime_in_sec}`` only (aws/sagemaker-python-sdk,
sagemaker-serve/src/sagemaker/serve/model_builder_utils.py, both builders of ``create_optimization_job_args``, at
commit a24812666d258d9d19c9a82d0c9385ca0bd3ba01). A key the service rejects fails every optimization gate at its
first call, so the keys are limited to what the SDK sends until a reference says otherwise.

The SDK's set is read from the installed SDK's source (every dict literal assigned to
``create_optimization_job_args["StoppingCondition"]``), not imported; a missing or empty set fails closed.
StoppingCondition is required by CreateOptimizationJob (botocore), so a job without one is a finding too.
"""

from __future__ import annotations

import ast
import importlib.util
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Final

from optigate.rehearse.asl import iter_states
from optigate.rehearse.template import placeholder_definition, state_machines
from tests.template_rules.assembly import Stack

ID: Final = "SFN-OptimizationStoppingCondition"
CREATE_JOB: Final = "sagemaker:createOptimizationJob"


@dataclass(frozen=True)
class Finding:
    machine: str
    state: str
    why: str

    def __str__(self) -> str:
        return f"{self.machine}: {self.state} {self.why}"


@cache
def sdk_stopping_condition_keys() -> frozenset[str]:
    """The StoppingCondition keys the installed SageMaker SDK's optimize() sends (see the module docstring)."""
    spec = importlib.util.find_spec("sagemaker.serve")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the SageMaker SDK (sagemaker.serve) is not installed: it says which keys optimize() sends")
    source = Path(next(iter(spec.submodule_search_locations))) / "model_builder_utils.py"
    keys: set[str] = set()
    for node in ast.walk(ast.parse(source.read_text())):
        if not (isinstance(node, ast.Assign) and isinstance(node.value, ast.Dict)):
            continue
        for target in node.targets:
            if (
                isinstance(target, ast.Subscript)
                and isinstance(target.value, ast.Name)
                and target.value.id == "create_optimization_job_args"
                and isinstance(target.slice, ast.Constant)
                and target.slice.value == "StoppingCondition"
            ):
                keys |= {k.value for k in node.value.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)}
    if not keys:
        raise RuntimeError(f"{source} no longer builds optimize()'s StoppingCondition where expected")
    return frozenset(keys)


def job_findings(definition: dict, machine: str = "") -> list[Finding]:
    """A finding for each CreateOptimizationJob Task whose StoppingCondition keys differ from the SDK's."""
    allowed = sdk_stopping_condition_keys()
    findings = []
    for name, state in iter_states(definition):
        if state.get("Type") != "Task" or not state.get("Resource", "").endswith(CREATE_JOB):
            continue
        bounds = (state.get("Parameters") or {}).get("StoppingCondition")
        if not isinstance(bounds, dict):
            findings.append(Finding(machine, name, "sends no StoppingCondition (required by CreateOptimizationJob)"))
            continue
        keys = {key.removesuffix(".$") for key in bounds}
        if keys != allowed:
            findings.append(
                Finding(
                    machine,
                    name,
                    f"sends StoppingCondition keys {sorted(keys)}; the SageMaker SDK's optimize() sends "
                    f"{sorted(allowed)}",
                )
            )
    return findings


def check(stack: Stack) -> list[Finding]:
    return [
        finding
        for logical in state_machines(stack.template)
        for finding in job_findings(placeholder_definition(stack.template, logical), f"{stack.name}/{logical}")
    ]
