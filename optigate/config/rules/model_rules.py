"""Model rules: the model's source and the architecture fields that must be able to size it."""

from __future__ import annotations

from collections.abc import Iterator

from optigate.config.models import ArchitectureFields, TeamConfig
from optigate.config.rule_registry import Found, Problem, rule_check

#: Where the architecture fields' problems are reported: `model.architecture`, then the field.
ARCHITECTURE = ("model", "architecture")


def architecture_fields_problems(spec: ArchitectureFields) -> list[Problem]:
    """Architecture fields that cannot size a model, one rule function each in the order they are reported; the
    planner is never asked about such fields."""
    return [
        *sizable(spec),
        *kv_heads_divide(spec),
        *whole_head_size(spec),
        *moe_needs_experts_per_token(spec),
        *experts_per_token_needs_experts(spec),
        *experts_per_token_at_most_experts(spec),
    ]


@rule_check("OG102", "architecture fields give intermediate_size or num_parameters")
def sizable(spec: ArchitectureFields) -> Iterator[Found]:
    """Architecture fields give `intermediate_size` (the MLP width of a layer) or `num_parameters` (the published
    parameter count).

    Why: the planner sizes the MLP weights from `intermediate_size`, or derives it from the published count less
    the rest of the model (`optigate.plan.team_plan.architecture_for`); with neither the weights cannot be sized.
    """
    if spec.intermediate_size is None and spec.num_parameters is None:
        yield ARCHITECTURE, "give intermediate_size or num_parameters so the weights can be sized"


@rule_check("OG103", "num_key_value_heads divides num_attention_heads")
def kv_heads_divide(spec: ArchitectureFields) -> Iterator[Found]:
    """`num_key_value_heads`, when given, divides `num_attention_heads`.

    Why: with grouped-query attention each key-value head serves an equal group of query heads; a count that does
    not divide them describes no model, and the planner sizes the KV cache, and shards it, by key-value heads.
    """
    if spec.num_key_value_heads and spec.num_attention_heads % spec.num_key_value_heads:
        yield (
            (*ARCHITECTURE, "num_key_value_heads"),
            f"{spec.num_key_value_heads} does not divide num_attention_heads ({spec.num_attention_heads})",
        )


@rule_check("OG104", "without head_dim, hidden_size / num_attention_heads is a whole head size")
def whole_head_size(spec: ArchitectureFields) -> Iterator[Found]:
    """Without `head_dim`, `hidden_size` / `num_attention_heads` is a whole number.

    Why: without `head_dim` the planner takes the head size as hidden_size / num_attention_heads, as a config.json
    without it means (`optigate.plan.architecture.ModelArchitecture.from_config`, which refuses a fraction); a model
    whose heads are sized otherwise states `head_dim` in its config.json.
    """
    if spec.head_dim is None and spec.hidden_size % spec.num_attention_heads:
        per_head = spec.hidden_size / spec.num_attention_heads
        yield (
            (*ARCHITECTURE, "num_attention_heads"),
            f"hidden_size {spec.hidden_size} / num_attention_heads {spec.num_attention_heads} = {per_head:g} is not a "
            "whole head size; give head_dim as in the model's config.json",
        )


@rule_check("OG105", "mixture-of-experts fields come with num_experts_per_tok")
def moe_needs_experts_per_token(spec: ArchitectureFields) -> Iterator[Found]:
    """`num_local_experts` or `moe_intermediate_size` (a mixture of experts) comes with `num_experts_per_tok`;
    reported at the first of the two given.

    Why: the planner places expert layers only when it knows how many experts each token is routed to
    (`optigate.plan.architecture.ModelArchitecture.from_config`); without it the experts cannot be sized.
    """
    moe_fields = [name for name in ("num_local_experts", "moe_intermediate_size") if getattr(spec, name) is not None]
    if moe_fields and spec.num_experts_per_tok is None:
        yield (
            (*ARCHITECTURE, moe_fields[0]),
            f"{' and '.join(moe_fields)} describe a mixture of experts; give num_experts_per_tok too "
            "(without it the experts cannot be sized)",
        )


@rule_check("OG106", "num_experts_per_tok comes with num_local_experts")
def experts_per_token_needs_experts(spec: ArchitectureFields) -> Iterator[Found]:
    """`num_experts_per_tok` comes with `num_local_experts` (the experts per layer).

    Why: the planner places expert layers only when it knows how many experts a layer holds
    (`optigate.plan.architecture.ModelArchitecture.from_config`); without it the experts cannot be sized.
    """
    if spec.num_experts_per_tok is not None and spec.num_local_experts is None:
        yield (
            (*ARCHITECTURE, "num_experts_per_tok"),
            "give num_local_experts (experts per layer) with num_experts_per_tok",
        )


@rule_check("OG107", "num_experts_per_tok is at most num_local_experts")
def experts_per_token_at_most_experts(spec: ArchitectureFields) -> Iterator[Found]:
    """`num_experts_per_tok` is at most `num_local_experts` (checked when both are given; without the second, OG106).

    Why: each token is routed to that many of a layer's experts, which cannot exceed the experts the layer holds.
    """
    if (
        spec.num_experts_per_tok is not None
        and spec.num_local_experts is not None
        and spec.num_experts_per_tok > spec.num_local_experts
    ):
        yield (
            (*ARCHITECTURE, "num_experts_per_tok"),
            f"{spec.num_experts_per_tok} exceeds num_local_experts ({spec.num_local_experts})",
        )


def architecture_problems(team: TeamConfig) -> list[Problem]:
    """Architecture fields that cannot size a model (known names are checked against the catalog later)."""
    spec = team.model.architecture
    return [] if isinstance(spec, str) else architecture_fields_problems(spec)


@rule_check("OG101", "model.source gives exactly one of s3_uri, jumpstart, hugging_face")
def source_problems(team: TeamConfig) -> Iterator[Found]:
    """`model.source` gives exactly one of `s3_uri`, `jumpstart` and `hugging_face`; when it does not, no other
    rule of the team is checked.

    Why: the endpoint downloads the model from one S3 prefix (the source's `artifact_uri`), which each kind of
    source names its own way; with none or several there is no one prefix to deploy.
    """
    source = team.model.source
    given = [name for name in ("s3_uri", "jumpstart", "hugging_face") if getattr(source, name) is not None]
    if len(given) != 1:
        what = "none" if not given else " and ".join(given)
        yield ("model", "source"), f"give exactly one of s3_uri, jumpstart, hugging_face (got {what})"


#: This module's rules, in ID order: optigate.deployment.all_rules collects them (every_rule).
RULES = (
    source_problems,
    sizable,
    kv_heads_divide,
    whole_head_size,
    moe_needs_experts_per_token,
    experts_per_token_needs_experts,
    experts_per_token_at_most_experts,
)
