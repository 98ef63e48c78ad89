"""Every optimized SageMaker integration (`arn:aws:states:::sagemaker:<action>`) of every state machine of every
synthesized template sends only parameters on the sourced list (template rule SFN-OptimizedParametersKnown,
optigate/rehearse/data/sfn_optimized_sagemaker.json): Step Functions refuses any other at CreateStateMachine, which
rolls back the whole team stack (issue 36, finding 3)."""

from __future__ import annotations

import pytest

from tests.template_rules import registry
from tests.template_rules.assembly import Stack
from tests.template_rules.rules import sfn_optimized_parameters_known
from tests.template_rules.rules.sfn_optimized_parameters_known import optimized_action


def _findings(stacks: list[Stack]) -> list[str]:
    return [str(f) for stack in stacks for f in registry.findings(stack, sfn_optimized_parameters_known.ID)]


def _optimized(stacks: list[Stack]) -> set[str]:
    """The state names of every optimized SageMaker Task the stacks' state machines hold."""
    from optigate.rehearse.template import every_state

    return {
        name
        for stack in stacks
        for _, name, state in every_state(stack.template)
        if optimized_action(str(state.get("Resource", ""))) is not None
    }


# The pipeline's assembly takes half a minute to synthesize: its variant runs in the full suite only.
@pytest.mark.parametrize("which", ["app_stacks", pytest.param("pipeline_stacks", marks=pytest.mark.slow)])
def test_every_optimized_sagemaker_task_sends_only_listed_parameters(which, request):
    stacks = request.getfixturevalue(which)
    # The evaluation's createProcessingJob.sync exists only as an optimized integration: the check is not vacuous.
    assert "Evaluate" in _optimized(stacks)
    assert _findings(stacks) == []
