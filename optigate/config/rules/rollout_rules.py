"""Rollout rules: the strategy and its shadow block, and what an adapter team's rollout can mean as an inference
component's rolling update (the API's bounds and the batch arithmetic: optigate.config.rolling_update)."""

from __future__ import annotations

from collections.abc import Iterator

from optigate.config.models import TeamConfig
from optigate.config.rolling_update import (
    COMPONENT_BATCH_MAX_PERCENT,
    COMPONENT_BATCH_MIN_PERCENT,
    COMPONENT_TIMEOUT_MAX_SECONDS,
    bakes_within_limit,
    rolling_batch_percent,
    rolling_batches,
)
from optigate.config.rule_registry import Found, PathT, Problem, rule_check

SHADOW_CANDIDATE: PathT = ("rollout", "shadow", "candidate")


def component_max_copies(team: TeamConfig) -> int:
    """The most copies of the base component the team file allows (autoscaling's maximum, else the one copy)."""
    scaling = team.serving.autoscaling
    return scaling.max_capacity if scaling is not None else 1


def rollout_problems(team: TeamConfig) -> list[Problem]:
    """The rollout rules, in the order they are reported: an adapter team's rolling update is checked only when its
    rollout is not a shadow (OG503)."""
    problems = [*shadow_needs_block(team), *shadow_block_needs_strategy(team)]
    shadowed = shadow_without_adapters(team)
    problems += shadowed
    if not shadowed and team.adapters:
        problems += component_rollout_problems(team)
    return problems


@rule_check("OG501", "strategy shadow comes with a shadow block")
def shadow_needs_block(team: TeamConfig) -> Iterator[Found]:
    """`rollout.strategy: shadow` comes with a `rollout.shadow` block.

    Why: the block says what the shadow variant receives (`sampling_percentage`, which has no default) and runs
    (`candidate`), so strategy shadow has no shadow variant to deploy without it.
    """
    rollout = team.rollout
    if rollout.strategy == "shadow" and rollout.shadow is None:
        yield (("rollout", "shadow"), "strategy shadow needs a shadow block with sampling_percentage")


@rule_check("OG502", "a shadow block only with strategy shadow")
def shadow_block_needs_strategy(team: TeamConfig) -> Iterator[Found]:
    """A `rollout.shadow` block is given only with `rollout.strategy: shadow`.

    Why: with any other strategy no shadow variant is deployed, so the block would be ignored while the file
    seems to say a shadow runs.
    """
    rollout = team.rollout
    if rollout.shadow is not None and rollout.strategy != "shadow":
        yield (
            ("rollout", "shadow"),
            f"a shadow block is set but strategy is {rollout.strategy}; set strategy: shadow or remove the block",
        )


@rule_check("OG503", "an endpoint serving adapters is not shadowed")
def shadow_without_adapters(team: TeamConfig) -> Iterator[Found]:
    """A team serving adapters does not use `rollout.strategy: shadow`.

    Why: a shadow variant mirrors a model-backed production variant, and an endpoint serving adapters has none: it
    serves through inference components, so it cannot be shadowed; canary rolls its base component out instead.
    """
    if team.rollout.strategy == "shadow" and team.adapters:
        yield (
            ("rollout", "strategy"),
            "shadow variants mirror a model-backed production variant; "
            "an endpoint serving adapters through inference components cannot be shadowed, use canary",
        )


def component_rollout_problems(team: TeamConfig) -> list[Problem]:
    """What an adapter team's rollout asks that an inference component's rolling update cannot do. The rollout
    governs the base component only: an adapter component reserves no compute and has no copies of its own (it
    "uses the compute resources of the base inference component", InferenceComponentSpecification in the API
    reference), so a batch that is a share of its copy count means nothing for it."""
    return component_batch_in_range(team) or component_rollout_fits_timeout(team)


@rule_check("OG520", "an adapter team's canary is a rolling batch the API takes (5-50% of the base component's copies)")
def component_batch_in_range(team: TeamConfig) -> Iterator[Found]:
    """An adapter team's rolling batch (`rollout.canary.traffic_percentage` with strategy canary, half the copies
    with none) is at least 5% of the base inference component's copies.

    Why: the base component of an adapter team rolls out by UpdateInferenceComponent's
    DeploymentConfig.RollingUpdatePolicy, whose MaximumBatchSize "must be between 5% to 50% of the copy count of
    the inference component" (API_InferenceComponentRollingUpdatePolicy; optigate.config.rolling_update), so
    SageMaker would refuse a smaller batch. Not checked with strategy shadow (OG503).
    """
    if not team.adapters or team.rollout.strategy == "shadow":
        return  # no inference components, or OG503
    batch = rolling_batch_percent(team.rollout)
    if batch < COMPONENT_BATCH_MIN_PERCENT:
        yield (
            ("rollout", "canary", "traffic_percentage"),
            f"an adapter team's canary is the base inference component's rolling batch, which SageMaker takes "
            f"between {COMPONENT_BATCH_MIN_PERCENT}% and {COMPONENT_BATCH_MAX_PERCENT}% of its copies "
            f"(RollingUpdatePolicy.MaximumBatchSize); {batch}% is not one, set at least "
            f"{COMPONENT_BATCH_MIN_PERCENT}",
        )


@rule_check("OG521", "an adapter team's rolling update bakes every batch within the API's 8-hour execution limit")
def component_rollout_fits_timeout(team: TeamConfig) -> Iterator[Found]:
    """An adapter team's rolling update of its base inference component, at autoscaling's maximum copies (one copy
    without autoscaling), bakes every batch for `rollout.canary.wait_minutes` within 28800 s.

    Why: the update rolls out in batches of the copies, at most one batch per copy (optigate.config.rolling_update),
    each waiting its bake time, and SageMaker stops a rolling update after 28800 s
    (RollingUpdatePolicy.MaximumExecutionTimeoutInSeconds at its most), so the last batch could never bake. Not
    checked with strategy shadow (OG503) nor a batch the API does not take (OG520).
    """
    rollout = team.rollout
    if not team.adapters or rollout.strategy == "shadow":
        return  # no inference components, or OG503
    batch = rolling_batch_percent(rollout)
    if batch < COMPONENT_BATCH_MIN_PERCENT:
        return  # OG520
    batches = rolling_batches(batch, component_max_copies(team))
    bake = batches * rollout.canary.wait_minutes * 60
    if not bakes_within_limit(batches, rollout.canary.wait_minutes * 60):
        yield (
            ("rollout", "canary", "wait_minutes"),
            f"{batches} rolling batches of {batch}% each baking {rollout.canary.wait_minutes} min take {bake} s, "
            f"and SageMaker stops a rolling update after {COMPONENT_TIMEOUT_MAX_SECONDS} s "
            "(MaximumExecutionTimeoutInSeconds), so the last batch could never bake; shorten wait_minutes or "
            "raise traffic_percentage",
        )


#: This module's rules, in ID order: optigate.deployment.all_rules collects them (every_rule).
RULES = (
    shadow_needs_block,
    shadow_block_needs_strategy,
    shadow_without_adapters,
    component_batch_in_range,
    component_rollout_fits_timeout,
)
