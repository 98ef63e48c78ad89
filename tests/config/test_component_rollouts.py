"""What an adapter team's `rollout` means for its base inference component (optigate.deployment.component_rollout,
carried on the endpoint's plan): the rolling batch, bake, roll-back batch and time limit, per environment, within the
API's documented ranges."""

from __future__ import annotations

import re

import pytest

from optigate.config.rolling_update import (
    COMPONENT_BATCH_MAX_PERCENT,
    COMPONENT_BATCH_MIN_PERCENT,
    COMPONENT_TIMEOUT_MAX_SECONDS,
    COMPONENT_TIMEOUT_MIN_SECONDS,
    COMPONENT_WAIT_MAX_SECONDS,
)
from optigate.deployment import load_resolved_project
from optigate.deployment.component_rollout import ComponentRollout
from tests.conftest import CONFIG, edited_config


def _deployments(config=CONFIG) -> dict[tuple[str, str], object]:
    return {(d.team.team, d.environment.name): d for d in load_resolved_project(config).deployments()}


def component_rollout(deployment) -> ComponentRollout | None:
    """The rolling update the deployment's endpoint plan gives its base component (None without adapters)."""
    components = deployment.endpoint.components
    return components.rollout if components is not None else None


def test_support_rolls_its_base_in_ten_percent_batches_baking_ten_minutes_and_rolls_back_as_it_rolled():
    deployments = _deployments()
    staging = deployments[("support", "staging")]
    rollout = component_rollout(staging)
    assert rollout is not None
    # canary: traffic_percentage 10 and wait_minutes 10 (the defaults), auto_rollback on
    assert (rollout.batch_percent, rollout.wait_seconds, rollout.rollback_batch_percent) == (10, 600, 10)
    assert rollout.auto_rollback
    # up to 4 copies (autoscaling max_capacity): at most 4 batches, each starting its copies and baking
    resolved = staging.resolved
    startup = resolved.model_data_download_timeout_seconds + resolved.container_startup_health_check_timeout_seconds
    assert rollout.timeout_seconds == min(COMPONENT_TIMEOUT_MAX_SECONDS, 4 * (startup + 600))
    # dev caps autoscaling at one copy: one batch
    dev = component_rollout(deployments[("support", "dev")])
    assert dev is not None and dev.timeout_seconds == max(COMPONENT_TIMEOUT_MIN_SECONDS, startup + 600)


def test_teams_without_adapters_roll_out_by_blue_green_not_by_a_component_policy():
    deployments = _deployments()
    assert component_rollout(deployments[("chat", "prod")]) is None
    assert component_rollout(deployments[("research", "dev")]) is None


def test_strategy_none_is_the_largest_batch_the_api_takes_and_keeps_the_alarm_rollback(tmp_path):
    config = edited_config(tmp_path, "teams/support.yaml", "strategy: canary", "strategy: none")
    rollout = component_rollout(_deployments(config)[("support", "prod")])
    assert rollout is not None
    assert rollout.batch_percent == rollout.rollback_batch_percent == COMPONENT_BATCH_MAX_PERCENT == 50
    assert rollout.auto_rollback


def test_auto_rollback_off_is_carried(tmp_path):
    config = edited_config(
        tmp_path, "teams/support.yaml", "strategy: canary", "strategy: canary\n  auto_rollback: false"
    )
    rollout = component_rollout(_deployments(config)[("support", "prod")])
    assert rollout is not None and not rollout.auto_rollback


def test_an_environment_that_raises_the_copies_past_the_time_limit_is_refused_by_validate_and_at_synth(tmp_path):
    """OG521 sees the team file's copies; an environment's autoscaling_max_capacity may add batches: validate refuses
    it (OG613, optigate.config.rules.cross_file), and the resolution refuses it too rather than write a policy that
    can never finish."""
    from optigate.config.loader import ConfigError
    from optigate.deployment.component_rollout import component_rollout as resolve_rollout

    config = edited_config(
        tmp_path, "teams/support.yaml", "strategy: canary", "strategy: canary\n  canary: {wait_minutes: 60}"
    )
    staging = _deployments(config)[("support", "staging")]
    assert component_rollout(staging) is not None  # 4 copies: 4 h of bake
    with pytest.raises(ValueError, match="28800 s limit"):  # 8 copies: 8 h of bake
        resolve_rollout(staging.team, staging.resolved, "dev", max_copies=8)
    config = edited_config(tmp_path, "environments.yaml", "autoscaling_max_capacity: 1", "autoscaling_max_capacity: 8")
    with pytest.raises(ConfigError, match="8 copies of team 'support's base component in dev"):
        _deployments(config)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("batch_percent", 4),
        ("batch_percent", 51),
        ("wait_seconds", 3601),
        ("timeout_seconds", 599),
        ("timeout_seconds", 28801),
        ("rollback_batch_percent", 0),
    ],
)
def test_a_policy_outside_the_apis_ranges_is_refused(field, value):
    with pytest.raises(ValueError, match=field):
        ComponentRollout(**{field: value})


def test_the_ranges_are_botocores_and_the_api_references():
    """The constants are the API's: botocore's min/max of WaitIntervalInSeconds and MaximumExecutionTimeoutInSeconds,
    and the 5-50% the reference states for MaximumBatchSize (only in its text)."""
    import botocore.session

    model = botocore.session.get_session().get_service_model("sagemaker")
    policy = model.shape_for("InferenceComponentRollingUpdatePolicy")
    wait = policy.members["WaitIntervalInSeconds"].metadata
    timeout = policy.members["MaximumExecutionTimeoutInSeconds"].metadata
    assert wait["max"] == COMPONENT_WAIT_MAX_SECONDS
    assert (timeout["min"], timeout["max"]) == (COMPONENT_TIMEOUT_MIN_SECONDS, COMPONENT_TIMEOUT_MAX_SECONDS)
    (bounds,) = re.findall(r"between (\d+)% to (\d+)%", policy.members["MaximumBatchSize"].documentation)
    assert tuple(map(int, bounds)) == (COMPONENT_BATCH_MIN_PERCENT, COMPONENT_BATCH_MAX_PERCENT)
    assert set(policy.required_members) == {"MaximumBatchSize", "WaitIntervalInSeconds"}
