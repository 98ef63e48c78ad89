"""Every registered rule (the config rules and the deployment rules: this module imports each module that declares
some), and the acknowledgements of notes that only the whole registry can check."""

from __future__ import annotations

from collections.abc import Collection

from optigate.config.models import TeamConfig
from optigate.config.rules import REGISTRY, Problem, Rule, Severity, did_you_mean, rule
from optigate.deployment import compilation, pools, reference_gaps, rules  # noqa: F401  (they register their rules)
from optigate.deployment import team as resolution  # noqa: F401  (OG413)


def every_rule() -> list[Rule]:
    """The whole registry in ID order."""
    return [REGISTRY[rule_id] for rule_id in sorted(REGISTRY)]


#: Long enough to say what was checked, as cdk-nag asks a suppression's reason to be more than a word.
MIN_REASON_CHARS = 40

ACKNOWLEDGED_ID_EXISTS = rule("OG701", "an acknowledgement names a registered rule")
ACKNOWLEDGED_A_NOTE = rule("OG702", "an acknowledgement names a note, never a refusal")
ACKNOWLEDGED_WITH_REASON = rule("OG703", f"an acknowledgement gives a reason of at least {MIN_REASON_CHARS} characters")


def acknowledgement_problems(team: TeamConfig) -> list[Problem]:
    """Each `acknowledge` entry: a registered note's ID, with a reason; reported at the entry's line."""
    problems: list[Problem] = []
    for index, entry in enumerate(team.acknowledge):
        found = REGISTRY.get(entry.id)
        if found is None:
            problems.append(
                Problem(
                    ("acknowledge", index, "id"),
                    f"no rule has the ID {entry.id!r}{did_you_mean(entry.id, sorted(REGISTRY))}; "
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
