"""Every aws-sdk integration of every state machine of every synthesized template is one Step Functions supports
(template rule SFN-SdkActionSupported, the checked list tests/template_rules/data/sfn_sdk_actions.json): an
unsupported one is rejected at deploy and rolls back the whole team stack (issue 25, finding 2)."""

from __future__ import annotations

import pytest

from tests.template_rules import registry
from tests.template_rules.assembly import Stack
from tests.template_rules.rules import sfn_sdk_actions_supported
from tests.template_rules.rules.sfn_sdk_actions_supported import sdk_action


def _findings(stacks: list[Stack]) -> list[str]:
    return [str(f) for stack in stacks for f in registry.findings(stack, sfn_sdk_actions_supported.ID)]


def _actions(stacks: list[Stack]) -> set[str]:
    """Every aws-sdk action the stacks' state machines call."""
    from optigate.rehearse.template import every_state

    return {
        action
        for stack in stacks
        for _, _, state in every_state(stack.template)
        if (action := sdk_action(str(state.get("Resource", "")))) is not None
    }


# The pipeline's assembly takes half a minute to synthesize: its variant runs in the full suite only.
@pytest.mark.parametrize("which", ["app_stacks", pytest.param("pipeline_stacks", marks=pytest.mark.slow)])
def test_every_sdk_integration_of_every_state_machine_is_supported(which, request):
    stacks = request.getfixturevalue(which)
    assert _actions(stacks)  # the gates call SageMaker through the SDK integration: the check is not vacuous
    assert _findings(stacks) == []


def test_the_example_app_exercises_the_cross_check(app_stacks):
    """research runs SageMaker's managed benchmark: its gate is among the checked templates."""
    research = next(s for s in app_stacks if s.name == "optigate-prod-research")
    assert any(r["Type"] == "AWS::SageMaker::AIWorkloadConfig" for r in research.template["Resources"].values())


@pytest.mark.slow
def test_the_list_names_exactly_what_the_state_machines_call(app_stacks, pipeline_stacks):
    """No stale entry: every supported action on the list is called by some state machine of the example
    project (an entry nothing uses would keep an unchecked claim alive)."""
    listed = sfn_sdk_actions_supported.supported()
    assert _actions(app_stacks) | _actions(pipeline_stacks) == listed
