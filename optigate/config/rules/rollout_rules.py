"""Rollout rules: the strategy and its shadow block, and what an adapter team's rollout can mean as an inference
component's rolling update (the API's bounds and the batch arithmetic: optigate.config.rolling_update)."""

from __future__ import annotations

from optigate.config.models import TeamConfig
from optigate.config.rolling_update import (
    COMPONENT_BATCH_MAX_PERCENT,
    COMPONENT_BATCH_MIN_PERCENT,
    COMPONENT_TIMEOUT_MAX_SECONDS,
    bakes_within_limit,
    rolling_batch_percent,
    rolling_batches,
)
from optigate.config.rules.registry import PathT, Problem, rule

SHADOW_CANDIDATE: PathT = ("rollout", "shadow", "candidate")

SHADOW_NEEDS_BLOCK = rule("OG501", "strategy shadow comes with a shadow block")
SHADOW_BLOCK_NEEDS_STRATEGY = rule("OG502", "a shadow block only with strategy shadow")
SHADOW_WITHOUT_ADAPTERS = rule("OG503", "an endpoint serving adapters is not shadowed")
COMPONENT_BATCH_IN_RANGE = rule(
    "OG520", "an adapter team's canary is a rolling batch the API takes (5-50% of the base component's copies)"
)
COMPONENT_ROLLOUT_FITS_TIMEOUT = rule(
    "OG521", "an adapter team's rolling update bakes every batch within the API's 8-hour execution limit"
)


def component_max_copies(team: TeamConfig) -> int:
    """The most copies of the base component the team file allows (autoscaling's maximum, else the one copy)."""
    scaling = team.serving.autoscaling
    return scaling.max_capacity if scaling is not None else 1


def rollout_problems(team: TeamConfig) -> list[Problem]:
    rollout = team.rollout
    problems: list[Problem] = []
    if rollout.strategy == "shadow" and rollout.shadow is None:
        problems.append(
            Problem(
                ("rollout", "shadow"),
                "strategy shadow needs a shadow block with sampling_percentage",
                SHADOW_NEEDS_BLOCK,
            )
        )
    if rollout.shadow is not None and rollout.strategy != "shadow":
        problems.append(
            Problem(
                ("rollout", "shadow"),
                f"a shadow block is set but strategy is {rollout.strategy}; set strategy: shadow or remove the block",
                SHADOW_BLOCK_NEEDS_STRATEGY,
            )
        )
    if rollout.strategy == "shadow" and team.adapters:
        problems.append(
            Problem(
                ("rollout", "strategy"),
                "shadow variants mirror a model-backed production variant; "
                "an endpoint serving adapters through inference components cannot be shadowed, use canary",
                SHADOW_WITHOUT_ADAPTERS,
            )
        )
    elif team.adapters:
        problems += component_rollout_problems(team)
    return problems


def component_rollout_problems(team: TeamConfig) -> list[Problem]:
    """What an adapter team's rollout asks that an inference component's rolling update cannot do. The rollout
    governs the base component only: an adapter component reserves no compute and has no copies of its own (it
    "uses the compute resources of the base inference component", InferenceComponentSpecification in the API
    reference), so a batch that is a share of its copy count means nothing for it."""
    rollout = team.rollout
    batch = rolling_batch_percent(rollout)
    if batch < COMPONENT_BATCH_MIN_PERCENT:
        return [
            Problem(
                ("rollout", "canary", "traffic_percentage"),
                f"an adapter team's canary is the base inference component's rolling batch, which SageMaker takes "
                f"between {COMPONENT_BATCH_MIN_PERCENT}% and {COMPONENT_BATCH_MAX_PERCENT}% of its copies "
                f"(RollingUpdatePolicy.MaximumBatchSize); {batch}% is not one, set at least "
                f"{COMPONENT_BATCH_MIN_PERCENT}",
                COMPONENT_BATCH_IN_RANGE,
            )
        ]
    batches = rolling_batches(batch, component_max_copies(team))
    bake = batches * rollout.canary.wait_minutes * 60
    if not bakes_within_limit(batches, rollout.canary.wait_minutes * 60):
        return [
            Problem(
                ("rollout", "canary", "wait_minutes"),
                f"{batches} rolling batches of {batch}% each baking {rollout.canary.wait_minutes} min take {bake} s, "
                f"and SageMaker stops a rolling update after {COMPONENT_TIMEOUT_MAX_SECONDS} s "
                "(MaximumExecutionTimeoutInSeconds), so the last batch could never bake; shorten wait_minutes or "
                "raise traffic_percentage",
                COMPONENT_ROLLOUT_FITS_TIMEOUT,
            )
        ]
    return []


#: This module's rules, in ID order: optigate.deployment.all_rules collects them (every_rule).
RULES = (
    SHADOW_NEEDS_BLOCK,
    SHADOW_BLOCK_NEEDS_STRATEGY,
    SHADOW_WITHOUT_ADAPTERS,
    COMPONENT_BATCH_IN_RANGE,
    COMPONENT_ROLLOUT_FITS_TIMEOUT,
)
