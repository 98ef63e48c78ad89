"""The rule registry: each config rule's stable ID, title, severity and home, as cdk-nag and ruff name theirs.

A rule module declares its rules with `rule(...)` beside the checks that report them, and every `Problem` a
check returns carries its rule. IDs group by area (see AREAS); an ID, once given, is never reused for
another rule (tests/config/rule_ids.txt holds the list, so a renumbering is a visible change).
"""

from __future__ import annotations

import difflib
import inspect
import itertools
import re
from dataclasses import dataclass, field
from enum import StrEnum

PathT = tuple[str | int, ...]

#: The hundreds of a rule ID, by area.
AREAS = {
    1: "model",
    2: "serving",
    3: "hardware",
    4: "gate",
    5: "rollout",
    6: "environments and cross-file",
    7: "acknowledgements",
}
RULE_ID = re.compile(r"OG[1-9]\d\d")


class Severity(StrEnum):
    """A refusal stops validation; a note is printed by `optigate validate` and may be acknowledged."""

    REFUSAL = "refusal"
    NOTE = "note"


@dataclass(frozen=True)
class Rule:
    """One rule: its ID, what it checks in one line, its severity, and the module that checks it."""

    id: str
    title: str
    severity: Severity
    home: str
    #: For a rule a pydantic model validator raises: the ValueError's text, which identifies it.
    model_message: str | None = None

    @property
    def area(self) -> str:
        return AREAS[int(self.id[2])]


#: Every registered rule by ID. The config rules register on import of optigate.config.rules; the deployment
#: rules (which need the catalog or the planner) on import of optigate.deployment.rules.
REGISTRY: dict[str, Rule] = {}


def rule(rule_id: str, title: str, severity: Severity = Severity.REFUSAL, *, model_message: str | None = None) -> Rule:
    """Register a rule declared in the calling module (its home); an ID is registered once."""
    if not RULE_ID.fullmatch(rule_id) or int(rule_id[2]) not in AREAS:
        raise ValueError(f"rule ID {rule_id!r} is not OG<area><nn>")
    if rule_id in REGISTRY:
        raise ValueError(f"rule {rule_id} is registered twice ({REGISTRY[rule_id].home})")
    caller = inspect.currentframe().f_back  # type: ignore[union-attr]
    home = caller.f_globals["__name__"] if caller is not None else "?"
    registered = Rule(rule_id, title, Severity(severity), home, model_message)
    REGISTRY[rule_id] = registered
    return registered


def rule_of_model_error(message: str) -> Rule | None:
    """The rule a model validator's ValueError `message` reports, if it is a registered rule."""
    return next((r for r in REGISTRY.values() if r.model_message == message), None)


#: Numbers each Problem in the order it is made (see Problem.made).
_MADE = itertools.count()


def problems_made() -> int:
    """A number above every Problem's `made` so far, and below the next one's."""
    return next(_MADE)


@dataclass(frozen=True)
class Problem:
    """A problem in a config file at a YAML path (the loader adds file and line), reported by `rule`."""

    path: PathT
    message: str
    rule: Rule | None = None  # None: not a config rule (e.g. "the candidate does not resolve" in advise)
    #: When it was made, among all Problems: a check over a file with schema problems keeps only what it found before
    #: it read a key left out for its problem (optigate.config.valid_part).
    made: int = field(default_factory=lambda: next(_MADE), init=False, compare=False, repr=False)

    @property
    def rule_id(self) -> str | None:
        return self.rule.id if self.rule else None


def did_you_mean(value: str, choices: list[str]) -> str:
    """The closest choice, ignoring case (QUANTIZATION is quantization typed with caps lock)."""
    by_lower = {choice.lower(): choice for choice in choices}
    close = difflib.get_close_matches(value.lower(), list(by_lower), n=1, cutoff=0.6)
    return f"; did you mean '{by_lower[close[0]]}'?" if close else ""
