"""The rule registry: each config rule's stable ID, title, severity and home, as cdk-nag and ruff name theirs.

Each rule is one function, registered with `@rule_check(...)` in the module that checks it and listed in that module's
`RULES` (its docstring documents the rule in docs/rules.md), and every `Problem` it returns carries its rule. It lives
here, outside optigate.config.rules, so that the models' validators can be rule functions too (that package imports
the models). IDs group by area (see AREAS); an ID, once given, is never reused for another rule
(tests/config/rule_ids.txt holds the list, so a renumbering is a visible change).
"""

from __future__ import annotations

import difflib
import functools
import inspect
import itertools
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import ParamSpec, Protocol, cast

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
    #: Its function's docstring (what it checks, why, the source), printed in docs/rules.md.
    doc: str
    #: For a rule a pydantic model validator raises: the ValueError's text, which identifies it.
    model_message: str | None = None

    @property
    def area(self) -> str:
        return AREAS[int(self.id[2])]


#: Every rule declared so far, by ID, to keep each ID to one rule. The list of every rule is
#: `optigate.deployment.all_rules.every_rule()`, collected from each rule module's `RULES`, not from this.
REGISTRY: dict[str, Rule] = {}


def _register(registered: Rule) -> Rule:
    if not RULE_ID.fullmatch(registered.id) or int(registered.id[2]) not in AREAS:
        raise ValueError(f"rule ID {registered.id!r} is not OG<area><nn>")
    if registered.id in REGISTRY:
        raise ValueError(f"rule {registered.id} is registered twice ({REGISTRY[registered.id].home})")
    REGISTRY[registered.id] = registered
    return registered


#: What a rule function yields for each problem it finds: the problem's whole YAML path, and its message.
Found = tuple[PathT, str]

P = ParamSpec("P")


class RuleCheck(Protocol[P]):
    """A rule function as `rule_check` returns it: called like the function, it returns the `Problem`s the
    function found, each carrying `rule`."""

    rule: Rule
    __name__: str
    __doc__: str | None

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> list[Problem]: ...


def rule_check(
    rule_id: str, title: str, severity: Severity = Severity.REFUSAL, *, model_message: str | None = None
) -> Callable[[Callable[P, Iterable[Found]]], RuleCheck[P]]:
    """Register the decorated function as rule `rule_id`: it checks that one rule and yields `(path, message)`
    for each problem; its docstring (what it checks, why, the source) goes to docs/rules.md. The function returned
    gives the `Problem`s, each made as the function finds it (in the order `Problem.made` counts).

    `model_message`: the function is called by a pydantic model validator (`raise_first`), whose ValueError carries
    this text; the loader finds the rule by it (`rule_of_model_error`)."""

    def register(check: Callable[P, Iterable[Found]]) -> RuleCheck[P]:
        if not (check.__doc__ or "").strip():
            raise ValueError(f"rule {rule_id}'s function {check.__name__} has no docstring")
        registered = _register(
            Rule(
                rule_id,
                title,
                Severity(severity),
                check.__module__,
                doc=inspect.cleandoc(check.__doc__ or ""),
                model_message=model_message,
            )
        )

        @functools.wraps(check)
        def problems(*args: P.args, **kwargs: P.kwargs) -> list[Problem]:
            return [Problem(where, message, registered) for where, message in check(*args, **kwargs)]

        checked = cast(RuleCheck[P], problems)
        checked.rule = registered
        return checked

    return register


def rules_of(entries: Iterable[RuleCheck[...]]) -> list[Rule]:
    """The rules a module's `RULES` lists (its rule functions)."""
    return [entry.rule for entry in entries]


def raise_first(problems: list[Problem]) -> None:
    """In a pydantic model validator: raise the first problem a rule function found as the ValueError pydantic reports
    at the model's path (its rule is found again from the message: `rule_of_model_error`)."""
    if problems:
        raise ValueError(problems[0].message)


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
