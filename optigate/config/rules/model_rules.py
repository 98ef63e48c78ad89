"""Model rules: the model's source and the architecture fields that must be able to size it."""

from __future__ import annotations

from optigate.config.models import ArchitectureFields, TeamConfig
from optigate.config.rules.registry import Problem, Rule, rule

SOURCE_ONE_KIND = rule("OG101", "model.source gives exactly one of s3_uri, jumpstart, hugging_face")
SIZABLE = rule("OG102", "architecture fields give intermediate_size or num_parameters")
KV_HEADS_DIVIDE = rule("OG103", "num_key_value_heads divides num_attention_heads")
WHOLE_HEAD_SIZE = rule("OG104", "without head_dim, hidden_size / num_attention_heads is a whole head size")
MOE_NEEDS_EXPERTS_PER_TOKEN = rule("OG105", "mixture-of-experts fields come with num_experts_per_tok")
EXPERTS_PER_TOKEN_NEEDS_EXPERTS = rule("OG106", "num_experts_per_tok comes with num_local_experts")
EXPERTS_PER_TOKEN_AT_MOST_EXPERTS = rule("OG107", "num_experts_per_tok is at most num_local_experts")


def architecture_fields_problems(spec: ArchitectureFields) -> list[Problem]:
    """Architecture fields that cannot size a model; the planner is never asked about such fields."""
    problems: list[Problem] = []

    def add(broken: Rule, field: str | None, message: str) -> None:
        problems.append(Problem(("model", "architecture", *((field,) if field else ())), message, broken))

    if spec.intermediate_size is None and spec.num_parameters is None:
        add(SIZABLE, None, "give intermediate_size or num_parameters so the weights can be sized")
    if spec.num_key_value_heads and spec.num_attention_heads % spec.num_key_value_heads:
        add(
            KV_HEADS_DIVIDE,
            "num_key_value_heads",
            f"{spec.num_key_value_heads} does not divide num_attention_heads ({spec.num_attention_heads})",
        )
    if spec.head_dim is None and spec.hidden_size % spec.num_attention_heads:
        per_head = spec.hidden_size / spec.num_attention_heads
        add(
            WHOLE_HEAD_SIZE,
            "num_attention_heads",
            f"hidden_size {spec.hidden_size} / num_attention_heads {spec.num_attention_heads} = {per_head:g} is not a "
            "whole head size; give head_dim as in the model's config.json",
        )
    moe_fields = [name for name in ("num_local_experts", "moe_intermediate_size") if getattr(spec, name) is not None]
    if moe_fields and spec.num_experts_per_tok is None:
        add(
            MOE_NEEDS_EXPERTS_PER_TOKEN,
            moe_fields[0],
            f"{' and '.join(moe_fields)} describe a mixture of experts; give num_experts_per_tok too "
            "(without it the experts cannot be sized)",
        )
    if spec.num_experts_per_tok is not None:
        if spec.num_local_experts is None:
            add(
                EXPERTS_PER_TOKEN_NEEDS_EXPERTS,
                "num_experts_per_tok",
                "give num_local_experts (experts per layer) with num_experts_per_tok",
            )
        elif spec.num_experts_per_tok > spec.num_local_experts:
            add(
                EXPERTS_PER_TOKEN_AT_MOST_EXPERTS,
                "num_experts_per_tok",
                f"{spec.num_experts_per_tok} exceeds num_local_experts ({spec.num_local_experts})",
            )
    return problems


def architecture_problems(team: TeamConfig) -> list[Problem]:
    """Architecture fields that cannot size a model (known names are checked against the catalog later)."""
    spec = team.model.architecture
    return [] if isinstance(spec, str) else architecture_fields_problems(spec)


def source_problems(team: TeamConfig) -> list[Problem]:
    source = team.model.source
    given = [name for name in ("s3_uri", "jumpstart", "hugging_face") if getattr(source, name) is not None]
    if len(given) != 1:
        what = "none" if not given else " and ".join(given)
        return [
            Problem(
                ("model", "source"),
                f"give exactly one of s3_uri, jumpstart, hugging_face (got {what})",
                SOURCE_ONE_KIND,
            )
        ]
    return []


#: This module's rules, in ID order: optigate.deployment.all_rules collects them (every_rule).
RULES = (
    SOURCE_ONE_KIND,
    SIZABLE,
    KV_HEADS_DIVIDE,
    WHOLE_HEAD_SIZE,
    MOE_NEEDS_EXPERTS_PER_TOKEN,
    EXPERTS_PER_TOKEN_NEEDS_EXPERTS,
    EXPERTS_PER_TOKEN_AT_MOST_EXPERTS,
)
