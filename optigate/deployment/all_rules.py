"""Every rule (the config rules and the deployment rules: each module that declares some lists them in its `RULES`,
and RULE_MODULES lists those modules), and the acknowledgements of notes that only the whole list can check."""

from __future__ import annotations

from collections.abc import Collection

from optigate.config.models import TeamConfig
from optigate.config.rules import (
    Problem,
    Rule,
    Severity,
    adapter_candidate_rules,
    adapter_evaluation_rules,
    adapter_mix_rules,
    checkpoint_rules,
    component_rules,
    cross_file,
    did_you_mean,
    environment_rules,
    gate_rules,
    model_rules,
    rollout_rules,
    rule,
    serving_rules,
    workload_rules,
)
from optigate.config.rules.registry import rules_of
from optigate.deployment import compilation, gate_workload, placement, pools, reference_gaps, rules
from optigate.deployment import team as resolution

#: Every module that declares rules, each listing them in its RULES (tests/config/test_rule_registry.py checks that
#: no rule is declared outside these lists).
RULE_MODULES = (
    model_rules,
    checkpoint_rules,
    serving_rules,
    adapter_candidate_rules,
    adapter_evaluation_rules,
    adapter_mix_rules,
    component_rules,
    gate_rules,
    rollout_rules,
    workload_rules,
    environment_rules,
    cross_file,
    rules,
    compilation,
    gate_workload,
    placement,
    pools,
    reference_gaps,
    resolution,
)


def every_rule() -> list[Rule]:
    """Every rule, of RULE_MODULES and this module's own, in ID order."""
    listed = [*(found for module in RULE_MODULES for found in rules_of(module.RULES)), *RULES]
    return sorted(listed, key=lambda found: found.id)


#: Long enough to say what was checked, as cdk-nag asks a suppression's reason to be more than a word.
MIN_REASON_CHARS = 40

ACKNOWLEDGED_ID_EXISTS = rule("OG701", "an acknowledgement names a registered rule")
ACKNOWLEDGED_A_NOTE = rule("OG702", "an acknowledgement names a note, never a refusal")
ACKNOWLEDGED_WITH_REASON = rule("OG703", f"an acknowledgement gives a reason of at least {MIN_REASON_CHARS} characters")

#: This module's rules, in ID order.
RULES = (ACKNOWLEDGED_ID_EXISTS, ACKNOWLEDGED_A_NOTE, ACKNOWLEDGED_WITH_REASON)


def acknowledgement_problems(team: TeamConfig) -> list[Problem]:
    """Each `acknowledge` entry: a registered note's ID, with a reason; reported at the entry's line."""
    registered = {found.id: found for found in every_rule()}
    problems: list[Problem] = []
    for index, entry in enumerate(team.acknowledge):
        found = registered.get(entry.id)
        if found is None:
            problems.append(
                Problem(
                    ("acknowledge", index, "id"),
                    f"no rule has the ID {entry.id!r}{did_you_mean(entry.id, sorted(registered))}; "
                    "docs/rules.md lists every rule",
                    ACKNOWLEDGED_ID_EXISTS,
                )
            )
        elif found.severity is not Severity.NOTE:
            problems.append(
                Problem(
                    ("acknowledge", index, "id"),
                    f"{entry.id} is a refusal ({found.title}), and only notes can be acknowledged; change the "
                    "config so that it passes the rule",
                    ACKNOWLEDGED_A_NOTE,
                )
            )
        if len(entry.reason.strip()) < MIN_REASON_CHARS:
            problems.append(
                Problem(
                    ("acknowledge", index, "reason"),
                    f"say why the team accepts {entry.id} in at least {MIN_REASON_CHARS} characters "
                    "(what was checked, and where), for whoever reads the file next",
                    ACKNOWLEDGED_WITH_REASON,
                )
            )
    return problems


def unacknowledged(team: TeamConfig, notes: Collection[Problem]) -> tuple[list[Problem], int]:
    """The notes the team has not acknowledged, and how many it has."""
    accepted = {entry.id for entry in team.acknowledge}
    shown = [note for note in notes if note.rule_id not in accepted]
    return shown, sum(1 for note in notes if note.rule_id in accepted)
