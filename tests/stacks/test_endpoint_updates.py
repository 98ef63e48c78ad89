"""Updates of a live endpoint that autoscaling manages (issue 13 item 6).

SageMaker applies a new endpoint config's InitialInstanceCount unless the update retains the variant's
properties (UpdateEndpoint's RetainAllVariantProperties), and refuses to change the instance type of a
variant registered with Application Auto Scaling ("Update endpoints that use auto scaling",
docs.aws.amazon.com/sagemaker/latest/dg/endpoint-scaling-update.html).
"""

from __future__ import annotations

import json

import pytest

from tests.conftest import CONFIG, resources_of


def _scaled_variants(template: dict) -> set[str]:
    """`endpoint/<name>/variant/<variant>` of every scalable target of a template."""
    return {
        r["Properties"]["ResourceId"]
        for r in resources_of(template, "AWS::ApplicationAutoScaling::ScalableTarget").values()
        if r["Properties"]["ScalableDimension"] == "sagemaker:variant:DesiredInstanceCount"
    }


def test_every_autoscaled_endpoint_keeps_its_instance_count_through_an_update(example_app):
    """A promotion (a new config) during a scale-out would otherwise drop chat-prod from 4 instances to 2."""
    autoscaled = 0
    for stack, template in example_app.templates.items():
        targets = _scaled_variants(template)
        for endpoint in resources_of(template, "AWS::SageMaker::Endpoint").values():
            name = endpoint["Properties"]["EndpointName"]
            scaled = any(target.startswith(f"endpoint/{name}/variant/") for target in targets)
            autoscaled += scaled
            assert endpoint["Properties"].get("RetainAllVariantProperties", False) == scaled, stack
    assert autoscaled  # chat scales


def test_the_gate_keeps_the_live_instance_count_in_both_updates(example_app):
    from optigate.rehearse.template import every_state

    updates = 0
    for stack, template in example_app.templates.items():
        for _, name, state in every_state(template):
            if state.get("Type") == "Task" and state["Resource"].lower().endswith("updateendpoint"):
                updates += 1
                assert state["Parameters"].get("RetainAllVariantProperties") is True, (stack, name)
    assert updates  # research shadows: put the shadow on, restore


@pytest.fixture(scope="module")
def suspended(tmp_path_factory) -> dict:
    """chat in dev, deployed once with autoscaling suspended to change its instance type."""
    from aws_cdk import App

    from optigate.config.loader import load_project
    from optigate.deployment import deploy, resolve_team
    from optigate.stacks.app import FEATURE_FLAGS
    from optigate.stacks.team_inference_stack import TeamInferenceStack

    project = load_project(CONFIG)
    (dev,) = [e for e in project.environments.environments if e.name == "dev"]
    dev = dev.model_copy(update={"overrides": dev.overrides.model_copy(update={"suspend_autoscaling": True})})
    outdir = tmp_path_factory.mktemp("suspended")
    app = App(outdir=str(outdir), context=FEATURE_FLAGS)
    deployment = deploy(resolve_team(project.teams["chat"]), dev)
    TeamInferenceStack(app, deployment)
    app.synth()
    return json.loads((outdir / f"{deployment.stack_name}.template.json").read_text())


def test_suspending_autoscaling_removes_the_target_and_keeps_the_count(suspended, example_app):
    """Step one of an instance-type change: the stack update deregisters the variant (CloudFormation deletes
    the target and its policy) and leaves the endpoint as it is, count included."""
    assert resources_of(suspended, "AWS::ApplicationAutoScaling::ScalableTarget") == {}
    assert resources_of(suspended, "AWS::ApplicationAutoScaling::ScalingPolicy") == {}
    (endpoint,) = resources_of(suspended, "AWS::SageMaker::Endpoint").values()
    (before,) = resources_of(example_app.templates["optigate-dev-chat"], "AWS::SageMaker::Endpoint").values()
    assert endpoint["Properties"] == before["Properties"]  # no endpoint update at all in step one
    assert endpoint["Properties"]["RetainAllVariantProperties"] is True
