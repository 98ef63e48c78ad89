"""Each inference component with compute has a rolling update in the API's ranges, rolled back on its template's alarms.

UpdateInferenceComponent's DeploymentConfig (AWS::SageMaker::InferenceComponent's write-only DeploymentConfig, which
CloudFormation passes on an update) requires RollingUpdatePolicy, whose MaximumBatchSize and WaitIntervalInSeconds
are required (botocore's SageMaker model); the ranges are botocore's (WaitIntervalInSeconds,
MaximumExecutionTimeoutInSeconds, CapacitySizeValue, the capacity types) and, for MaximumBatchSize, the API
reference's "between 5% to 50% of the copy count of the inference component", read from the same model's
documentation of the member (https://docs.aws.amazon.com/sagemaker/latest/APIReference/
API_InferenceComponentRollingUpdatePolicy.html). AutoRollbackConfiguration names 1-10 alarms; each must be an
AWS::CloudWatch::Alarm of the same template, so the roll-back cannot name an alarm nobody made. Anything the rule
cannot read (an intrinsic where a number belongs, a missing range in botocore) is a finding: fail closed.

An adapter component (Specification.BaseInferenceComponentName, no ComputeResourceRequirements) is not checked: it
"uses the compute resources of the base inference component" (API reference, InferenceComponentSpecification) and has
no copies for a batch to be a share of.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from typing import Any, Final

from tests.template_rules.assembly import Stack

ID: Final = "SM-InferenceComponentRollout"
COMPONENT: Final = "AWS::SageMaker::InferenceComponent"


@dataclass(frozen=True)
class Finding:
    where: str
    why: str

    def __str__(self) -> str:
        return f"{self.where}: {self.why}"


@dataclass(frozen=True)
class Limits:
    batch_percent: tuple[int, int]  # MaximumBatchSize, a share of the copy count
    wait: tuple[int, int]
    timeout: tuple[int, int]
    capacity_types: frozenset[str]
    min_capacity_value: int
    alarms: tuple[int, int]
    required: frozenset[str]


@cache
def limits() -> Limits:
    """The ranges of botocore's SageMaker model (see the module docstring); RuntimeError when one is gone."""
    import botocore.session

    model = botocore.session.get_session().get_service_model("sagemaker")
    policy = model.shape_for("InferenceComponentRollingUpdatePolicy")
    members = policy.members

    def bounds(shape: Any) -> tuple[int, int]:
        if "min" not in shape.metadata or "max" not in shape.metadata:
            raise RuntimeError(f"botocore no longer bounds {shape.name}")
        return shape.metadata["min"], shape.metadata["max"]

    found = re.findall(r"between (\d+)% to (\d+)%", members["MaximumBatchSize"].documentation)
    if len(found) != 1:
        raise RuntimeError("botocore's MaximumBatchSize no longer states its 5-50% range")
    size = model.shape_for("InferenceComponentCapacitySize").members
    alarm_list = model.shape_for("AutoRollbackConfig").members["Alarms"]
    return Limits(
        batch_percent=(int(found[0][0]), int(found[0][1])),
        wait=bounds(members["WaitIntervalInSeconds"]),
        timeout=bounds(members["MaximumExecutionTimeoutInSeconds"]),
        capacity_types=frozenset(size["Type"].enum),
        min_capacity_value=size["Value"].metadata["min"],
        alarms=bounds(alarm_list),
        required=frozenset(policy.required_members),
    )


def _has_compute(properties: dict[str, Any]) -> bool:
    specifications = [properties.get("Specification") or {}, *(properties.get("Specifications") or [])]
    return any(isinstance(s, dict) and "ComputeResourceRequirements" in s for s in specifications)


def _integer(value: Any, name: str, low: int, high: int) -> str | None:
    if not isinstance(value, int) or isinstance(value, bool):
        return f"{name} is {value!r}, not a number the rule can check"
    if not low <= value <= high:
        return f"{name} {value} is outside {low}-{high}"
    return None


def _capacity(size: Any, name: str, percent_range: tuple[int, int], copies: Any, found: Limits) -> list[str]:
    """A MaximumBatchSize or RollbackMaximumBatchSize: a known type and a value in its range."""
    if not isinstance(size, dict) or size.get("Type") not in found.capacity_types:
        return [f"{name} is {size!r}, not a Type of {sorted(found.capacity_types)} with a Value"]
    value = size.get("Value")
    if size["Type"] == "CAPACITY_PERCENT":
        problem = _integer(value, f"{name} (CAPACITY_PERCENT)", *percent_range)
        return [problem] if problem else []
    problem = _integer(value, f"{name} (COPY_COUNT)", found.min_capacity_value, 10**9)
    if problem:
        return [problem]
    if not isinstance(copies, int) or copies < 1:
        return [f"{name} counts copies, but RuntimeConfig.CopyCount is {copies!r}: the share cannot be checked"]
    share = 100 * value / copies
    if not percent_range[0] <= share <= percent_range[1]:
        return [f"{name} of {value} copies is {share:.0f}% of {copies}, outside {percent_range[0]}-{percent_range[1]}%"]
    return []


def component_findings(
    logical: str, properties: dict[str, Any], alarms: dict[str, str], stack: str = ""
) -> list[Finding]:
    """The findings for one component; `alarms` maps each AWS::CloudWatch::Alarm's logical id to its AlarmName
    property ("" when CloudFormation names it)."""
    where = f"{stack}/{logical}" if stack else logical
    if not _has_compute(properties):
        return []
    found = limits()
    config = properties.get("DeploymentConfig")
    if not isinstance(config, dict):
        return [Finding(where, "has compute but no DeploymentConfig: its updates go out unguarded")]
    problems: list[str] = []
    policy = config.get("RollingUpdatePolicy")
    if not isinstance(policy, dict):
        problems.append("DeploymentConfig has no RollingUpdatePolicy (required by UpdateInferenceComponent)")
        policy = {}
    else:
        missing = sorted(found.required - set(policy))
        if missing:
            problems.append(f"RollingUpdatePolicy lacks {missing} (required by UpdateInferenceComponent)")
    copies = (properties.get("RuntimeConfig") or {}).get("CopyCount")
    if "MaximumBatchSize" in policy:
        problems += _capacity(policy["MaximumBatchSize"], "MaximumBatchSize", found.batch_percent, copies, found)
    if "RollbackMaximumBatchSize" in policy:
        problems += _capacity(
            policy["RollbackMaximumBatchSize"],
            "RollbackMaximumBatchSize",
            (found.min_capacity_value, 100),
            copies,
            found,
        )
    for name, bounds in (("WaitIntervalInSeconds", found.wait), ("MaximumExecutionTimeoutInSeconds", found.timeout)):
        if name in policy and (problem := _integer(policy[name], name, *bounds)):
            problems.append(problem)
    rollback = config.get("AutoRollbackConfiguration")
    named = rollback.get("Alarms") if isinstance(rollback, dict) else None
    if not isinstance(named, list) or not found.alarms[0] <= len(named) <= found.alarms[1]:
        problems.append(
            f"AutoRollbackConfiguration names no {found.alarms[0]}-{found.alarms[1]} alarms: nothing rolls it back"
        )
    else:
        by_name = {name: logical for logical, name in alarms.items() if name}
        for entry in named:
            name = entry.get("AlarmName") if isinstance(entry, dict) else None
            ref = name.get("Ref") if isinstance(name, dict) else None
            if not (ref in alarms or (isinstance(name, str) and name in by_name)):
                problems.append(f"rolls back on {name!r}, which is no AWS::CloudWatch::Alarm of this template")
    return [Finding(where, problem) for problem in problems]


def check(stack: Stack) -> list[Finding]:
    resources = stack.template.get("Resources", {})
    alarms = {
        logical: str((r.get("Properties") or {}).get("AlarmName", ""))
        for logical, r in resources.items()
        if r.get("Type") == "AWS::CloudWatch::Alarm"
    }
    return [
        finding
        for logical, resource in resources.items()
        if resource.get("Type") == COMPONENT
        for finding in component_findings(logical, resource.get("Properties") or {}, alarms, stack.name)
    ]
