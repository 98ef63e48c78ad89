"""An inference component's rolling update as the API bounds it, and the arithmetic of batches over copies: shared by
the rules that refuse what cannot roll out (optigate.config.rules.rollout_rules, OG520 and OG521; in an environment
that raises the copies, optigate.config.rules.cross_file, OG613) and the resolution that writes the policy
(optigate.deployment.component_rollout), so neither reads the other.

An update of the base inference component rolls out by UpdateInferenceComponent's
DeploymentConfig.RollingUpdatePolicy (https://docs.aws.amazon.com/sagemaker/latest/APIReference/
API_InferenceComponentRollingUpdatePolicy.html; botocore 1.44 InferenceComponentRollingUpdatePolicy):
MaximumBatchSize "must be between 5% to 50% of the copy count of the inference component";
WaitIntervalInSeconds 0-3600; MaximumExecutionTimeoutInSeconds 600-28800.
"""

from __future__ import annotations

import math

from optigate.config.models import Rollout

COMPONENT_BATCH_MIN_PERCENT = 5
COMPONENT_BATCH_MAX_PERCENT = 50
COMPONENT_WAIT_MAX_SECONDS = 3600
COMPONENT_TIMEOUT_MIN_SECONDS = 600
COMPONENT_TIMEOUT_MAX_SECONDS = 28800


def rolling_batch_percent(rollout: Rollout) -> int:
    """The rolling batch (CAPACITY_PERCENT of the base component's copies) an adapter team's rollout asks for:
    canary's traffic_percentage; `none`, the largest batch the API takes (half the copies, as `none` is half
    the instances first for a model-backed endpoint)."""
    return rollout.canary.traffic_percentage if rollout.strategy == "canary" else COMPONENT_BATCH_MAX_PERCENT


def rolling_batches(batch_percent: int, max_copies: int) -> int:
    """How many batches a rolling update may take: one per `batch_percent` share, and never more than one per copy
    (a batch holds at least one copy; how SageMaker rounds a share of few copies is not documented)."""
    return min(math.ceil(100 / batch_percent), max(1, max_copies))


def bakes_within_limit(batches: int, wait_seconds: int) -> bool:
    """Whether `batches` each baking `wait_seconds` end before the API stops the update
    (MaximumExecutionTimeoutInSeconds at its most): the last batch must have time to bake."""
    return batches * wait_seconds < COMPONENT_TIMEOUT_MAX_SECONDS


def most_batches_within_limit(wait_seconds: int) -> int:
    """The most batches that each bake `wait_seconds` within the API's time limit (with no bake, any number)."""
    return -(-COMPONENT_TIMEOUT_MAX_SECONDS // wait_seconds) - 1 if wait_seconds else COMPONENT_TIMEOUT_MAX_SECONDS
