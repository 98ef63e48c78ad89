"""Rules are listed, not registered by import: each module that declares rules lists them in its `RULES`, all_rules
collects those lists (and imports nothing only for a side effect), and a rule checked by a function of its own
carries the function's docstring to docs/rules.md."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

from optigate.config.rule_registry import rules_of
from optigate.config.rules import REGISTRY, Rule
from optigate.deployment import all_rules
from optigate.deployment.all_rules import RULE_MODULES, every_rule
from tests.conftest import REPO


def _entries() -> list[object]:
    return [entry for module in (*RULE_MODULES, all_rules) for entry in module.RULES]


def test_every_rule_is_a_function_with_its_rule_and_a_docstring():
    """Issue 38: one function per rule, its docstring in docs/rules.md; a model validator's rule too (it calls it)."""
    functions = _entries()
    assert len(functions) == len(every_rule())
    for function in functions:
        assert inspect.isfunction(function), f"{function!r} is not a function"
        found = function.rule  # type: ignore[attr-defined]
        assert isinstance(found, Rule) and REGISTRY[found.id] is found
        assert (function.__doc__ or "").strip(), f"{found.id}: {function.__name__} has no docstring"
        assert found.doc == inspect.cleandoc(function.__doc__ or ""), f"{found.id}: docs/rules.md lacks its docstring"
        assert found.home == function.__module__


def test_every_declared_rule_is_listed_by_its_module():
    """The collected lists are the registry: no rule is declared outside a module's RULES, none listed twice, and each
    is listed by its home."""
    listed = every_rule()
    assert len({found.id for found in listed}) == len(listed)
    assert {found.id: found for found in listed} == REGISTRY
    for module in (*RULE_MODULES, all_rules):
        assert {found.home for found in rules_of(module.RULES)} == {module.__name__}
        assert [found.id for found in rules_of(module.RULES)] == sorted(found.id for found in rules_of(module.RULES))


def _declares_rules(path: Path) -> bool:
    """Whether a module decorates a function with `rule_check(...)`."""
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "rule_check":
            return True
    return False


def test_every_module_that_declares_rules_is_collected():
    """A module is collected by name, in RULE_MODULES, never found because something imported it."""
    declaring = {
        ".".join(path.relative_to(REPO).with_suffix("").parts)
        for path in (REPO / "optigate").rglob("*.py")
        if _declares_rules(path)
    }
    collected = {module.__name__ for module in RULE_MODULES} | {all_rules.__name__}
    assert declaring - {"optigate.config.rule_registry"} == collected


def test_all_rules_imports_nothing_only_for_a_side_effect():
    """Every name all_rules imports is used in it (no `noqa: F401` import that registers rules as it loads)."""
    source = Path(all_rules.__file__).read_text()
    tree = ast.parse(source)
    imported = {
        (alias.asname or alias.name).split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.Import | ast.ImportFrom) and getattr(node, "module", None) != "__future__"
        for alias in node.names
    }
    used = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}
    assert imported <= used, f"imported only for a side effect: {sorted(imported - used)}"
    assert "noqa: F401" not in source
