"""The rule registry: stable unique IDs, and docs/rules.md rendered from it, current, checked by `optigate schema`."""

from __future__ import annotations

import pytest

from optigate.cli import main
from optigate.config.rule_registry import rule_check
from optigate.config.rules import REGISTRY, Problem, Severity
from optigate.config.rules.rules_reference import RULES_REFERENCE_PATH, render_rules_reference
from optigate.deployment.all_rules import every_rule
from tests.conftest import REPO

RULE_IDS = REPO / "tests" / "config" / "rule_ids.txt"


def test_the_ids_are_the_checked_in_list():
    """A renumbered, removed or added rule shows here: update rule_ids.txt in the same change, on purpose."""
    registered = [f"{found.id} {found.severity}" for found in every_rule()]
    assert registered == RULE_IDS.read_text().split("\n")[:-1]


def _a_rule() -> list[tuple[tuple[str, ...], str]]:
    """A rule function to register under a bad ID."""
    return []


def test_an_id_is_registered_once_and_well_formed():
    every_rule()
    first = next(iter(REGISTRY))
    for bad in (first, "OG1", "XX101", "OG901"):
        try:
            rule_check(bad, "a second rule")(_a_rule)
        except ValueError:
            continue
        raise AssertionError(f"{bad} was registered")
    assert len({found.title for found in every_rule()}) == len(REGISTRY)  # one title, one rule


def test_a_problem_carries_its_rules_id():
    found = every_rule()[0]
    assert Problem(("serving",), "m", found).rule_id == found.id and Problem(("serving",), "m").rule_id is None


def test_the_rules_reference_is_current():
    committed = (REPO / RULES_REFERENCE_PATH).read_text()
    assert committed == render_rules_reference(every_rule()), (
        "run `optigate schema --docs docs` and commit docs/rules.md"
    )
    for found in every_rule():
        severity = "**note**" if found.severity is Severity.NOTE else "refusal"
        assert f"| {found.id} | {severity} | " in committed


@pytest.mark.slow
def test_schema_check_fails_when_the_rules_reference_is_stale(tmp_path, capsys):
    schemas, rules = tmp_path / "schema", tmp_path / "rules.md"
    options = ["--out", str(schemas), "--docs", str(tmp_path)]
    assert main(["schema", *options]) == 0
    assert f"wrote {rules}" in capsys.readouterr().out
    assert main(["schema", "--check", *options]) == 0
    capsys.readouterr()
    rules.write_text(rules.read_text().replace("OG307", "OG399"))
    assert main(["schema", "--check", *options]) == 1
    assert f"{rules} is out of date; run `optigate schema --docs {tmp_path}`" in capsys.readouterr().err
