"""Every rule (the config rules and the deployment rules: each module that declares some lists them in its `RULES`,
and RULE_MODULES lists those modules), and the acknowledgements of notes that only the whole list can check."""

from __future__ import annotations

from collections.abc import Collection, Iterator

from optigate.config import models
from optigate.config.models import Acknowledgement, TeamConfig
from optigate.config.rule_registry import Found, rule_check, rules_of
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
    serving_rules,
    workload_rules,
)
from optigate.deployment import compilation, gate_workload, placement, pools, reference_gaps, rules
from optigate.deployment import team as resolution

#: Every module that declares rules, each listing them in its RULES (tests/config/test_rule_registry.py checks that
#: no rule is declared outside these lists).
RULE_MODULES = (
    models,
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
    listed = [*(found for module in RULE_MODULES for found in rules_of(module.RULES)), *rules_of(RULES)]
    return sorted(listed, key=lambda found: found.id)


#: Long enough to say what was checked, as cdk-nag asks a suppression's reason to be more than a word.
MIN_REASON_CHARS = 40


def acknowledgement_problems(team: TeamConfig) -> list[Problem]:
    """Each `acknowledge` entry: a registered note's ID, with a reason; reported at the entry's line, entry by
    entry in the order the rules are reported."""
    problems: list[Problem] = []
    for index, entry in enumerate(team.acknowledge):
        problems += acknowledged_id_exists(entry, index)
        problems += acknowledged_a_note(entry, index)
        problems += acknowledged_with_reason(entry, index)
    return problems


@rule_check("OG701", "an acknowledgement names a registered rule")
def acknowledged_id_exists(entry: Acknowledgement, index: int) -> Iterator[Found]:
    """An `acknowledge` entry's `id` is the ID of a registered rule (every rule, docs/rules.md).

    Why: an acknowledgement of no rule silences nothing, and a mistyped ID would leave the note it meant printed;
    the closest ID is suggested.
    """
    registered = {found.id: found for found in every_rule()}
    if registered.get(entry.id) is None:
        yield (
            ("acknowledge", index, "id"),
            f"no rule has the ID {entry.id!r}{did_you_mean(entry.id, sorted(registered))}; "
            "docs/rules.md lists every rule",
        )


@rule_check("OG702", "an acknowledgement names a note, never a refusal")
def acknowledged_a_note(entry: Acknowledgement, index: int) -> Iterator[Found]:
    """An `acknowledge` entry that names a registered rule names a note, not a refusal.

    Why: a refusal makes the config invalid, and is fixed, never accepted; a note (a combination the SageMaker docs
    neither allow nor forbid) changes nothing, and a team that has checked it may accept it, as cdk-nag's
    suppressions (docs/guide.md). An unregistered ID is OG701's.
    """
    found = {found.id: found for found in every_rule()}.get(entry.id)
    if found is not None and found.severity is not Severity.NOTE:
        yield (
            ("acknowledge", index, "id"),
            f"{entry.id} is a refusal ({found.title}), and only notes can be acknowledged; change the "
            "config so that it passes the rule",
        )


@rule_check("OG703", f"an acknowledgement gives a reason of at least {MIN_REASON_CHARS} characters")
def acknowledged_with_reason(entry: Acknowledgement, index: int) -> Iterator[Found]:
    """An `acknowledge` entry's `reason` has at least 40 characters, leading and trailing spaces aside.

    Why: the reason tells whoever reads the file next what was checked, and where; cdk-nag likewise asks a
    suppression's reason to be more than a word.
    """
    if len(entry.reason.strip()) < MIN_REASON_CHARS:
        yield (
            ("acknowledge", index, "reason"),
            f"say why the team accepts {entry.id} in at least {MIN_REASON_CHARS} characters "
            "(what was checked, and where), for whoever reads the file next",
        )


#: This module's rules, in ID order.
RULES = (acknowledged_id_exists, acknowledged_a_note, acknowledged_with_reason)


def unacknowledged(team: TeamConfig, notes: Collection[Problem]) -> tuple[list[Problem], int]:
    """The notes the team has not acknowledged, and how many it has."""
    accepted = {entry.id for entry in team.acknowledge}
    shown = [note for note in notes if note.rule_id not in accepted]
    return shown, sum(1 for note in notes if note.rule_id in accepted)
