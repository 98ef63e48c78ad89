"""Every inference component with compute in every synthesized template rolls out by a rolling update within the
API's ranges and rolls back on alarms of its own template (template rule SM-InferenceComponentRollout); the example
adapter team's base carries what its `rollout: canary` block means."""

from __future__ import annotations

import pytest

from tests.template_rules import registry
from tests.template_rules.assembly import Stack
from tests.template_rules.rules import inference_component_rollout


def _with_compute(stacks: list[Stack]) -> int:
    return sum(
        1
        for stack in stacks
        for resource in stack.template.get("Resources", {}).values()
        if resource["Type"] == inference_component_rollout.COMPONENT
        and "ComputeResourceRequirements" in resource["Properties"].get("Specification", {})
    )


# A template check: slow; kept by --fast over the example app (tests/tiers.py), over the pipeline's assembly (half a
# minute to synthesize) in the full suite only.
@pytest.mark.parametrize(
    "which",
    [
        pytest.param("app_stacks", marks=[pytest.mark.slow, pytest.mark.fast_tier]),
        pytest.param("pipeline_stacks", marks=pytest.mark.slow),
    ],
)
def test_every_component_with_compute_is_guarded(which, request):
    stacks = request.getfixturevalue(which)
    assert _with_compute(stacks) >= 3  # support's base in each environment: the check is not vacuous
    assert [str(f) for stack in stacks for f in registry.findings(stack, inference_component_rollout.ID)] == []


def test_support_rolls_its_base_by_its_canary_block_and_leaves_the_adapters_alone(app_stacks):
    (stack,) = [s for s in app_stacks if s.name == "optigate-staging-support"]
    components = {
        r["Properties"]["InferenceComponentName"]: r["Properties"]
        for r in stack.template["Resources"].values()
        if r["Type"] == inference_component_rollout.COMPONENT
    }
    policy = components["support-staging-base"]["DeploymentConfig"]["RollingUpdatePolicy"]
    # canary: traffic_percentage 10, wait_minutes 10 (support.yaml keeps the defaults)
    assert policy["MaximumBatchSize"] == policy["RollbackMaximumBatchSize"] == {"Type": "CAPACITY_PERCENT", "Value": 10}
    assert policy["WaitIntervalInSeconds"] == 600
    adapters = [name for name in components if name != "support-staging-base"]
    assert len(adapters) == 3 and all("DeploymentConfig" not in components[name] for name in adapters)
