"""The live endpoint's plan (optigate.deployment.endpoint.EndpointPlan), resolved without CDK: one test per decision
the stack used to make (the served package or the baseline, the canary of strategy `none`, the scalable target's
minimum, scaling suspended or its maximum replaced, `{region}` in adapter URIs)."""

from __future__ import annotations

from optigate.deployment import load_resolved_project
from optigate.deployment.endpoint import EndpointPlan
from optigate.promote.lock import ServedPackage
from optigate.serving import images
from tests.conftest import CONFIG, edited_config

PACKAGE = "arn:aws:sagemaker:us-east-1:111111111111:model-package/optigate-dev-chat/3"


def _deployments(config=CONFIG) -> dict[tuple[str, str], object]:
    return {(d.team.team, d.environment.name): d for d in load_resolved_project(config).deployments()}


def _plan(team: str, environment: str, config=CONFIG) -> EndpointPlan:
    return _deployments(config)[(team, environment)].endpoint


def test_the_baseline_is_served_without_an_approved_package():
    deployment = _deployments()[("chat", "staging")]
    plan = deployment.endpoint
    assert plan.served_package_arn is None and plan.served_model == "baseline"
    assert plan.image_uri == deployment.resolved.image_uri("us-east-1")
    assert plan.model_data_uri == deployment.team.model.source.artifact_uri.replace("{region}", "us-east-1")
    assert plan.environment == deployment.resolved.environment


def test_an_approved_package_is_served_instead_of_the_baseline():
    from dataclasses import replace

    deployment = _deployments()[("chat", "dev")]
    served = ServedPackage(
        model_package_arn=PACKAGE,
        image="123.dkr.ecr.us-east-1.amazonaws.com/lmi:approved",
        model_data_uri="s3://gate/optimized/run-1/",
        environment={"OPTION_SPECULATIVE_DRAFT_MODEL": "/opt/ml/additional-model-data-sources/draft"},
    )
    plan = replace(deployment, served=served).endpoint
    assert (plan.served_package_arn, plan.served_model) == (PACKAGE, PACKAGE)
    assert (plan.image_uri, plan.model_data_uri) == (served.image, served.model_data_uri)
    assert plan.environment == served.environment


def test_strategy_none_shifts_all_traffic_at_once(tmp_path):
    config = edited_config(tmp_path, "teams/chat.yaml", "strategy: canary", "strategy: none")
    blue_green = _plan("chat", "staging", config).blue_green
    assert blue_green is not None and blue_green.canary_percentage == 100
    canary = _plan("chat", "staging").blue_green
    assert canary is not None and canary.canary_percentage == 25  # the team file's canary otherwise


def test_a_model_backed_endpoints_minimum_of_zero_instances_is_one():
    """The config refuses min_capacity 0 without adapters and scale_to_zero; the plan still never writes a variant's
    scalable target below one instance (a team built past the loader)."""
    from dataclasses import replace

    from optigate.deployment.endpoint import resolve_endpoint

    deployment = _deployments()[("chat", "staging")]
    team = deployment.team
    autoscaling = team.serving.autoscaling.model_copy(update={"min_capacity": 0})
    team = team.model_copy(update={"serving": team.serving.model_copy(update={"autoscaling": autoscaling})})
    resolved_team = replace(deployment.resolved_team, team=team)
    plan = resolve_endpoint(
        resolved_team, deployment.environment, deployment.overrides, deployment.instance_count, deployment.placement
    )
    assert plan.scaling is not None and plan.scaling.unit == "instances" and plan.scaling.min_capacity == 1


def test_an_adapter_teams_copies_keep_their_minimum():
    scaling = _plan("support", "staging").scaling
    assert scaling is not None and scaling.unit == "copies"
    assert scaling.min_capacity == _deployments()[("support", "staging")].team.serving.autoscaling.min_capacity


def test_an_environments_maximum_replaces_the_team_files():
    assert _plan("chat", "staging").scaling.max_capacity == 4  # the team file's
    assert _plan("chat", "dev").scaling.max_capacity == 1  # dev's autoscaling_max_capacity


def test_suspended_scaling_has_no_scalable_target_and_says_so(tmp_path):
    config = edited_config(tmp_path, "environments.yaml", "autoscaling_max_capacity: 1", "suspend_autoscaling: true")
    plan = _plan("chat", "dev", config)
    assert plan.scaling is None and plan.scaling_suspended
    assert not _plan("chat", "staging", config).scaling_suspended
    # An adapter team's base component then starts one copy and rolls in one batch.
    components = _plan("support", "dev", config).components
    assert components is not None and components.compute.copies == 1


def test_adapter_uris_are_in_the_environments_region():
    plan = _plan("support", "prod")
    assert plan.components is not None
    assert [a.s3_uri for a in plan.components.adapters] == [
        f"s3://acme-ml-adapters-us-west-2/support/{name}.tar.gz" for name in ("triage-v3", "summarise-v7", "reply-v2")
    ]
    assert not any(a.approved for a in plan.components.adapters)


def test_a_model_backed_endpoint_rolls_by_blue_green_and_an_adapter_team_by_its_base_component():
    chat, support = _plan("chat", "prod"), _plan("support", "prod")
    assert chat.components is None and chat.blue_green is not None
    assert support.blue_green is None and support.components is not None and support.components.rollout is not None


def test_the_shadow_variant_runs_the_shadow_candidate_on_the_baselines_weights():
    deployment = _deployments()[("research", "prod")]
    shadow = deployment.endpoint.shadow
    assert shadow is not None and shadow.serving is deployment.shadow
    assert shadow.sampling_percentage == 20
    assert shadow.image_uri == deployment.shadow.image_uri("us-west-2")
    assert shadow.model_data_uri == deployment.endpoint.model_data_uri


def test_an_approved_adapter_version_replaces_the_team_files():
    from dataclasses import replace

    deployment = _deployments()[("support", "prod")]
    served = ServedPackage(
        model_package_arn=PACKAGE,
        image="123.dkr.ecr.us-west-2.amazonaws.com/lmi:approved",
        model_data_uri="s3://gate/optimized/run-1/",
        adapters={"triage": "s3://acme-ml-adapters-{region}/support/triage-v4.tar.gz"},
    )
    components = replace(deployment, served=served).endpoint.components
    assert components is not None
    triage, summarise, _ = components.adapters
    assert (triage.s3_uri, triage.approved) == ("s3://acme-ml-adapters-us-west-2/support/triage-v4.tar.gz", True)
    assert summarise.s3_uri == "s3://acme-ml-adapters-us-west-2/support/summarise-v7.tar.gz"
    assert not summarise.approved


def test_the_live_variant_is_the_baselines_serving_on_the_environments_instances():
    deployment = _deployments()[("chat", "prod")]
    variant = deployment.endpoint.variant
    resolved = deployment.resolved
    assert (variant.variant_name, variant.instance_type) == ("AllTraffic", resolved.serving.instance_type)
    assert variant.instance_count == deployment.endpoint.instance_count == 2  # prod's instance_count for chat
    assert variant.model_data_download_timeout_seconds == resolved.model_data_download_timeout_seconds
    assert variant.instance_pools == () and variant.provision_timeout_seconds is None


def test_pools_and_the_host_ami_are_decided_by_the_plan_and_the_shadow_runs_on_one_priority_1_instance(tmp_path):
    """The live variant falls back through the team's pools; the shadow gets one instance of the first type, named
    Shadow, with the AMI its own image needs."""
    pools = (
        "  instance_pools:\n"
        "    - {instance_type: ml.p5.48xlarge, priority: 1}\n"
        "    - {instance_type: ml.p5e.48xlarge, priority: 2}\n"
    )
    line = "  instance_type: ml.p5.48xlarge\n"
    config = edited_config(tmp_path, "teams/research.yaml", line, line + pools)
    deployment = _deployments(config)[("research", "prod")]
    plan = deployment.endpoint
    assert plan.variant.instance_pools == (("ml.p5.48xlarge", 1), ("ml.p5e.48xlarge", 2))
    assert plan.shadow is not None
    shadow = plan.shadow.variant
    assert (shadow.variant_name, shadow.instance_count, shadow.instance_pools) == ("Shadow", 1, ())
    assert shadow.provision_timeout_seconds is None
    assert shadow.inference_ami_version == images.inference_ami_version_for(
        images.tag_of(plan.shadow.image_uri), ["ml.p5.48xlarge"]
    )
