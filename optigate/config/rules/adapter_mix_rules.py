"""Rules of `gate.benchmark.adapter_mix`: the share of the gate's benchmark requests each inference component
of an adapter team gets, by adapter name (`base`: the base model's own component)."""

from __future__ import annotations

import math
from collections.abc import Iterator

from optigate.config.models import TeamConfig
from optigate.config.rule_registry import Found, PathT, Problem, did_you_mean, rule_check

ADAPTER_MIX: PathT = ("gate", "benchmark", "adapter_mix")
#: The base model's own component in a mix (beside the team's adapters).
BASE = "base"


def adapter_mix_problems(team: TeamConfig) -> list[Problem]:
    """The mix's rules in the order they are reported, one rule function each: without adapters only that; else
    each key's name, then its weight, key by key."""
    mix = team.gate.benchmark.adapter_mix
    if mix is None:
        return []
    if not team.adapters:
        return mix_needs_adapters(team)
    problems: list[Problem] = []
    for key in mix:
        problems += mix_names_known(team, key)
        problems += mix_weight_positive(team, key)
    return problems


@rule_check("OG430", "adapter_mix names only `base` and the team's adapters")
def mix_names_known(team: TeamConfig, key: str) -> Iterator[Found]:
    """Key `key` of `gate.benchmark.adapter_mix` (of a team serving adapters) is `base` or the name of one of the
    team's adapters, checked one key at a time.

    Why: each request of the gate's benchmark goes to one inference component, the base model's own (`base`) or an
    adapter's; the gate refuses a mix naming a component that does not exist (optigate.deployment.adapter_mix).
    """
    if team.gate.benchmark.adapter_mix is None or not team.adapters:
        return
    names = [BASE, *(adapter.name for adapter in team.adapters)]
    if key not in names:
        hint = did_you_mean(key, names) or f"; expected one of {', '.join(names)}"
        yield (*ADAPTER_MIX, key), f"'{key}' is neither `base` nor one of the team's adapters{hint}"


@rule_check("OG431", "adapter_mix weights are finite numbers above 0")
def mix_weight_positive(team: TeamConfig, key: str) -> Iterator[Found]:
    """The weight of key `key` of `gate.benchmark.adapter_mix` (of a team serving adapters) is a finite number above
    0, checked one key at a time.

    Why: the weights are relative shares of the benchmark's requests (each divided by their sum); an adapter that
    should get nothing is left out of the mix, and the gate refuses a weight that is not a finite number above 0
    (optigate.deployment.adapter_mix).
    """
    mix = team.gate.benchmark.adapter_mix
    if mix is None or not team.adapters:
        return
    weight = mix[key]
    if not (math.isfinite(weight) and weight > 0):
        yield (
            (*ADAPTER_MIX, key),
            f"weight {weight} for '{key}': weights are relative shares of the requests, finite and above 0 "
            "(leave an adapter out of the mix to send it nothing)",
        )


@rule_check("OG432", "adapter_mix only for a team that serves adapters")
def mix_needs_adapters(team: TeamConfig) -> Iterator[Found]:
    """`gate.benchmark.adapter_mix` is set only for a team that serves adapters; without adapters the other mix
    rules are not checked.

    Why: the mix spreads the benchmark over an endpoint's inference components, and the endpoint of a team without
    adapters is model-backed: it has no components to spread over.
    """
    if team.gate.benchmark.adapter_mix is not None and not team.adapters:
        yield (
            ADAPTER_MIX,
            "adapter_mix spreads the benchmark over inference components, but this team serves no adapters "
            "(its endpoint has no components to spread over): remove adapter_mix",
        )


#: This module's rules, in ID order: optigate.deployment.all_rules collects them (every_rule).
RULES = (
    mix_names_known,
    mix_weight_positive,
    mix_needs_adapters,
)
