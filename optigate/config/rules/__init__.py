"""Config rules over the parsed files alone, one module per area, each rule registered with its ID and listed in its
module's `RULES` (optigate.deployment.all_rules collects the lists).

Each check returns `Problem(path, message, rule)`; the loader turns the path into a file line. A message says
what is wrong and what to do instead, in one sentence where possible. Rules that need the instance catalog,
the SDK's image tables or the capacity plan live in `optigate.deployment.rules` and register the same way
(the config layer imports neither `optigate.plan` nor `optigate.serving`).
"""

from optigate.config.rule_registry import REGISTRY, PathT, Problem, Rule, Severity, did_you_mean
from optigate.config.rules.checkpoint_rules import quantization_problems
from optigate.config.rules.cross_file import (
    capture_trainable,
    check_overrides,
    effective_overrides,
    region_has_sagemaker,
)
from optigate.config.rules.environment_rules import check_environments
from optigate.config.rules.gate_rules import CROSS_CHECK_FAMILIES, GATE_CANDIDATE, cross_check_tokenizer
from optigate.config.rules.model_rules import architecture_fields_problems
from optigate.config.rules.rollout_rules import SHADOW_CANDIDATE
from optigate.config.rules.serving_rules import RENDERED_OPTIONS, check_serving, instance_pool_problems
from optigate.config.rules.team_rules import candidate_problems, check_team

__all__ = [
    "CROSS_CHECK_FAMILIES",
    "GATE_CANDIDATE",
    "REGISTRY",
    "RENDERED_OPTIONS",
    "SHADOW_CANDIDATE",
    "PathT",
    "Problem",
    "Rule",
    "Severity",
    "architecture_fields_problems",
    "candidate_problems",
    "capture_trainable",
    "check_environments",
    "check_overrides",
    "check_serving",
    "check_team",
    "cross_check_tokenizer",
    "did_you_mean",
    "effective_overrides",
    "instance_pool_problems",
    "quantization_problems",
    "region_has_sagemaker",
]
