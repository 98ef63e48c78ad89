"""The template rules, by ID, and a runner: `findings(stack, *ids)` checks a stack against some rules (all when
none is named). A rule is a module of tests/template_rules/rules with an `ID`, a docstring whose first line
says what it requires, and `check(stack)`; add it to `RULES` and its compliant and non-compliant examples to
tests/template_rules/test_rules.py."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import ModuleType

from tests.template_rules.assembly import Stack
from tests.template_rules.rules import (
    iam_actions_exist,
    inference_component_rollout,
    lambda_calls_permitted,
    optimization_stopping_condition,
    sfn_optimized_parameters_known,
    sfn_optional_reads_guarded,
    sfn_sdk_actions_supported,
    state_machine_calls_permitted,
)


@dataclass(frozen=True)
class Rule:
    id: str
    requires: str  # what a compliant template does, in one line
    check: Callable[[Stack], Sequence[object]]

    @classmethod
    def of(cls, module: ModuleType) -> Rule:
        return cls(module.ID, (module.__doc__ or "").strip().splitlines()[0], module.check)


RULES: tuple[Rule, ...] = tuple(
    Rule.of(module)
    for module in (
        iam_actions_exist,
        state_machine_calls_permitted,
        lambda_calls_permitted,
        sfn_optional_reads_guarded,
        optimization_stopping_condition,
        sfn_sdk_actions_supported,
        sfn_optimized_parameters_known,
        inference_component_rollout,
    )
)
BY_ID = {rule.id: rule for rule in RULES}


def findings(stack: Stack, *ids: str) -> list[object]:
    """What the rules named (all when none is) find in `stack`, rule by rule in the order named."""
    return [finding for rule_id in ids or tuple(BY_ID) for finding in BY_ID[rule_id].check(stack)]
