"""Rules of `gate.benchmark.adapter_mix`: the share of the gate's benchmark requests each inference component
of an adapter team gets, by adapter name (`base`: the base model's own component)."""

from __future__ import annotations

import math

from optigate.config.models import TeamConfig
from optigate.config.rules.registry import PathT, Problem, did_you_mean, rule

ADAPTER_MIX: PathT = ("gate", "benchmark", "adapter_mix")
#: The base model's own component in a mix (beside the team's adapters).
BASE = "base"

MIX_NAMES_KNOWN = rule("OG430", "adapter_mix names only `base` and the team's adapters")
MIX_WEIGHTS_POSITIVE = rule("OG431", "adapter_mix weights are finite numbers above 0")
MIX_NEEDS_ADAPTERS = rule("OG432", "adapter_mix only for a team that serves adapters")


def adapter_mix_problems(team: TeamConfig) -> list[Problem]:
    mix = team.gate.benchmark.adapter_mix
    if mix is None:
        return []
    if not team.adapters:
        message = (
            "adapter_mix spreads the benchmark over inference components, but this team serves no adapters "
            "(its endpoint has no components to spread over): remove adapter_mix"
        )
        return [Problem(ADAPTER_MIX, message, MIX_NEEDS_ADAPTERS)]
    names = [BASE, *(adapter.name for adapter in team.adapters)]
    problems: list[Problem] = []
    for key, weight in mix.items():
        if key not in names:
            hint = did_you_mean(key, names) or f"; expected one of {', '.join(names)}"
            message = f"'{key}' is neither `base` nor one of the team's adapters{hint}"
            problems.append(Problem((*ADAPTER_MIX, key), message, MIX_NAMES_KNOWN))
        if not (math.isfinite(weight) and weight > 0):
            message = (
                f"weight {weight} for '{key}': weights are relative shares of the requests, finite and above 0 "
                "(leave an adapter out of the mix to send it nothing)"
            )
            problems.append(Problem((*ADAPTER_MIX, key), message, MIX_WEIGHTS_POSITIVE))
    return problems


#: This module's rules, in ID order: optigate.deployment.all_rules collects them (every_rule).
RULES = (
    MIX_NAMES_KNOWN,
    MIX_WEIGHTS_POSITIVE,
    MIX_NEEDS_ADAPTERS,
)
