"""How an adapter team's base inference component rolls out an update, and the alarms that roll it back (pure).

The team file's `rollout` becomes the base component's DeploymentConfig (UpdateInferenceComponent; CloudFormation
passes it on an update): RollingUpdatePolicy (batch, bake, roll-back batch, time limit) and AutoRollbackConfiguration
on the same 5XX and p99 model-latency alarms a model-backed endpoint's blue/green update rolls back on. Adapter
components get none: they reserve no compute and have no copies to batch (optigate.config.rules.rollout_rules).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from optigate.config.models import TeamConfig
from optigate.config.rolling_update import (
    COMPONENT_BATCH_MAX_PERCENT,
    COMPONENT_BATCH_MIN_PERCENT,
    COMPONENT_TIMEOUT_MAX_SECONDS,
    COMPONENT_TIMEOUT_MIN_SECONDS,
    COMPONENT_WAIT_MAX_SECONDS,
    bakes_within_limit,
    rolling_batch_percent,
    rolling_batches,
)
from optigate.deployment.serving import ResolvedServing

#: The rollback alarm's p99 ModelLatency without a latency budget: a whole streamed response, so generous.
DEFAULT_P99_MODEL_LATENCY_MS = 60000.0


@dataclass(frozen=True)
class ComponentRollout:
    """The base inference component's DeploymentConfig, in the API's units.

    :param batch_percent: RollingUpdatePolicy.MaximumBatchSize as CAPACITY_PERCENT (5-50 of the copies). @default 10
    :param wait_seconds: WaitIntervalInSeconds, the bake of each batch while the alarms are watched (0-3600).
        @default 600
    :param rollback_batch_percent: RollbackMaximumBatchSize as CAPACITY_PERCENT: the forward batch, so rolling back
        needs no more spare capacity than rolling forward did (SageMaker's default, 100%, provisions the whole old
        fleet at once). @default 10
    :param timeout_seconds: MaximumExecutionTimeoutInSeconds (600-28800). @default 28800
    :param auto_rollback: AutoRollbackConfiguration on the rollback alarms. @default True
    :param p99_model_latency_ms: the latency alarm's threshold. @default 60000
    :param max_5xx_per_minute: the error alarm's threshold. @default 1
    :param strategy: the team file's rollout strategy it comes from: `canary` (the batch is its traffic_percentage)
        or `none` (the largest batch the API takes). @default canary
    """

    batch_percent: int = 10
    wait_seconds: int = 600
    rollback_batch_percent: int = 10
    timeout_seconds: int = COMPONENT_TIMEOUT_MAX_SECONDS
    auto_rollback: bool = True
    p99_model_latency_ms: float = DEFAULT_P99_MODEL_LATENCY_MS
    max_5xx_per_minute: int = 1
    strategy: Literal["canary", "none"] = "canary"

    def __post_init__(self) -> None:
        bounds = {
            "batch_percent": (self.batch_percent, COMPONENT_BATCH_MIN_PERCENT, COMPONENT_BATCH_MAX_PERCENT),
            "wait_seconds": (self.wait_seconds, 0, COMPONENT_WAIT_MAX_SECONDS),
            "rollback_batch_percent": (self.rollback_batch_percent, 1, 100),
            "timeout_seconds": (self.timeout_seconds, COMPONENT_TIMEOUT_MIN_SECONDS, COMPONENT_TIMEOUT_MAX_SECONDS),
        }
        for name, (value, low, high) in bounds.items():
            if not low <= value <= high:
                raise ValueError(f"{name} must be {low}-{high} (InferenceComponentRollingUpdatePolicy), got {value}")


def rollback_latency_ms(team: TeamConfig) -> float:
    """The rollback alarm's p99 ModelLatency: twice the budget of a whole streamed response (TTFT plus every
    token), or a generous minute without budgets."""
    budget = team.gate.benchmark
    if budget.p99_ttft_ms_budget and budget.p99_itl_ms_budget:
        return 2 * (budget.p99_ttft_ms_budget + budget.p99_itl_ms_budget * budget.max_new_tokens)
    return DEFAULT_P99_MODEL_LATENCY_MS


def component_rollout(
    team: TeamConfig, resolved: ResolvedServing, environment: str, max_copies: int
) -> ComponentRollout | None:
    """The base component's rolling update for an adapter team in `environment`, whose copies may reach `max_copies`
    (autoscaling's maximum, an environment's override replacing it; one when fixed or suspended), `resolved` its
    baseline; None for a team without adapters (a model-backed endpoint rolls out by blue/green). What `validate`
    refuses (OG503, OG520, OG521, OG613) raises here too, so a template never carries a policy the API rejects."""
    if not team.adapters:
        return None
    rollout = team.rollout
    if rollout.strategy == "shadow":
        raise ValueError(f"{team.team}: an endpoint serving adapters cannot be shadowed (OG503)")
    batch = rolling_batch_percent(rollout)
    if batch < COMPONENT_BATCH_MIN_PERCENT:
        raise ValueError(f"{team.team}: a rolling batch of {batch}% is below the API's {COMPONENT_BATCH_MIN_PERCENT}%")
    wait = rollout.canary.wait_minutes * 60
    batches = rolling_batches(batch, max_copies)
    if not bakes_within_limit(batches, wait):
        raise ValueError(
            f"{team.team} in {environment}: {batches} batches baking {wait} s each do not fit "
            f"the API's {COMPONENT_TIMEOUT_MAX_SECONDS} s limit (OG521)"
        )
    # Each batch starts its copies (at most the download and start-up timeouts) and then bakes; the time limit
    # allows that for every batch, within the API's range.
    startup = resolved.model_data_download_timeout_seconds + resolved.container_startup_health_check_timeout_seconds
    timeout = min(COMPONENT_TIMEOUT_MAX_SECONDS, max(COMPONENT_TIMEOUT_MIN_SECONDS, batches * (startup + wait)))
    return ComponentRollout(
        batch_percent=batch,
        wait_seconds=wait,
        rollback_batch_percent=batch,
        timeout_seconds=timeout,
        auto_rollback=rollout.auto_rollback,
        p99_model_latency_ms=rollback_latency_ms(team),
        strategy="none" if rollout.strategy == "none" else "canary",
    )
