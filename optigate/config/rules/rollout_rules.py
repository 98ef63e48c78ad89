"""Rollout rules: the strategy and its shadow block."""

from __future__ import annotations

from optigate.config.models import TeamConfig
from optigate.config.rules.registry import PathT, Problem, rule

SHADOW_CANDIDATE: PathT = ("rollout", "shadow", "candidate")

SHADOW_NEEDS_BLOCK = rule("OG501", "strategy shadow comes with a shadow block")
SHADOW_BLOCK_NEEDS_STRATEGY = rule("OG502", "a shadow block only with strategy shadow")
SHADOW_WITHOUT_ADAPTERS = rule("OG503", "an endpoint serving adapters is not shadowed")


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
    return problems
