"""Test modules do not import each other: what several tests share is a fixture (a conftest.py), a data
builder (tests/fixtures), a template rule (tests/template_rules) or the tiers' plugin (tests/tiers.py: a property
test's size in each tier). tests/conftest.py's path constants are the one exception."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent
ALLOWED = {"tests.conftest"}
SHARED = ("tests.fixtures", "tests.template_rules", "tests.tiers")  # helpers, not test modules


def _imported_modules(path: Path) -> set[str]:
    """Every module an `import x` or `from x import y` in the file names (relative imports resolved)."""
    package = ".".join(path.relative_to(TESTS.parent).with_suffix("").parts[:-1])
    modules = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            modules |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                modules.add(f"{base}.{node.module}" if node.module else base)
            elif node.module:
                modules.add(node.module)
    return modules


def _shared(module: str) -> bool:
    """A module of a helper package (its own tests excluded), or tests/conftest.py."""
    in_helper = any(module == package or module.startswith(f"{package}.") for package in SHARED)
    return module in ALLOWED or (in_helper and not module.rpartition(".")[2].startswith("test_"))


def test_no_test_module_imports_another():
    offenders = {}
    for path in sorted(TESTS.rglob("*.py")):
        imported = sorted(m for m in _imported_modules(path) if m.split(".")[0] == "tests" and not _shared(m))
        if imported:
            offenders[str(path.relative_to(TESTS.parent))] = imported
    assert offenders == {}
