"""The package's shape: no import circle (imports under `if TYPE_CHECKING:` and inside functions included), and no
module over 400 lines without a one-line reason at its top, no function over 80 lines without one on the line above
it (above its decorators)."""

from __future__ import annotations

import ast
import graphlib
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "optigate"
MAX_LINES = 400
SIZE_REASON = "# Over 400 lines:"
MAX_FUNCTION_LINES = 80
FUNCTION_REASON = "# Over 80 lines:"


def _modules(package: Path = PACKAGE) -> dict[str, Path]:
    modules = {}
    for path in sorted(package.rglob("*.py")):
        parts = list(path.relative_to(package.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        modules[".".join(parts)] = path
    return modules


def _owner(name: str, modules: dict[str, Path]) -> str | None:
    """The module of ours that `name` (a module, or a name in a module) lives in."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def import_graph(package: Path = PACKAGE) -> dict[str, set[str]]:
    """Each module of the package and the modules of the package it imports, wherever the import stands."""
    modules = _modules(package)
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        is_package = path.name == "__init__.py"
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:  # relative: from the module's package, up level-1 more
                    anchor = name if is_package else name.rpartition(".")[0]
                    for _ in range(node.level - 1):
                        anchor = anchor.rpartition(".")[0]
                    base = f"{anchor}.{base}" if base else anchor
                targets = [f"{base}.{alias.name}" for alias in node.names]
            else:
                continue
            for target in targets:
                owner = _owner(target, modules) if target.startswith(f"{package.name}.") else None
                if owner is not None and owner != name:
                    graph[name].add(owner)
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    try:
        graphlib.TopologicalSorter(graph).prepare()
    except graphlib.CycleError as error:
        return list(error.args[1])
    return None


def test_no_import_circle() -> None:
    cycle = find_cycle(import_graph())
    assert cycle is None, f"import circle: {' -> '.join(cycle or [])}"


def test_the_circle_check_finds_a_type_only_circle(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "sub" / "__init__.py").write_text("")
    (package / "sub" / "a.py").write_text("from pkg.sub import b\n")
    (package / "sub" / "b.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .a import x\n")
    (package / "c.py").write_text("def f():\n    from pkg.sub.a import y\n")
    graph = import_graph(package)
    assert (
        graph["pkg.sub.a"] == {"pkg.sub.b"} and graph["pkg.sub.b"] == {"pkg.sub.a"} and graph["pkg.c"] == {"pkg.sub.a"}
    )
    assert set(find_cycle(graph) or []) == {"pkg.sub.a", "pkg.sub.b"}
    (package / "sub" / "b.py").write_text("")
    assert find_cycle(import_graph(package)) is None


def _long_modules_without_reason(package: Path = PACKAGE) -> list[str]:
    problems = []
    for path in _modules(package).values():
        lines = path.read_text().splitlines()
        if len(lines) > MAX_LINES and not (lines and lines[0].startswith(SIZE_REASON) and len(lines[0]) > 40):
            problems.append(f"{path.relative_to(package.parent)}: {len(lines)} lines")
    return problems


def test_no_long_module_without_a_reason() -> None:
    problems = _long_modules_without_reason()
    assert not problems, f"split these, or say why at their first line ({SIZE_REASON} <reason>): {problems}"


@pytest.mark.parametrize(
    ("first_line", "refused"),
    [
        ("", True),
        ("# Over 400 lines: ok", True),
        ("# Over 400 lines: one table of every LMI option, by version", False),
    ],
)
def test_a_long_module_needs_a_real_reason(first_line: str, refused: bool, tmp_path: Path) -> None:
    package = tmp_path / "optigate"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "short.py").write_text("x = 1\n" * MAX_LINES)
    (package / "long.py").write_text(first_line + "\n" + "x = 1\n" * MAX_LINES)
    assert _long_modules_without_reason(package) == (["optigate/long.py: 401 lines"] if refused else [])


def _long_functions_without_reason(package: Path = PACKAGE) -> list[str]:
    problems = []
    for path in _modules(package).values():
        text = path.read_text()
        lines = text.splitlines()
        for node in ast.walk(ast.parse(text, str(path))):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            length = (node.end_lineno or node.lineno) - node.lineno + 1
            top = min([node.lineno, *(decorator.lineno for decorator in node.decorator_list)])
            above = lines[top - 2].strip() if top >= 2 else ""
            if length > MAX_FUNCTION_LINES and not (above.startswith(FUNCTION_REASON) and len(above) > 40):
                problems.append(f"{path.relative_to(package.parent)}:{node.lineno} {node.name}: {length} lines")
    return problems


def test_no_long_function_without_a_reason() -> None:
    problems = _long_functions_without_reason()
    assert not problems, f"split these, or say why on the line above ({FUNCTION_REASON} <reason>): {problems}"


@pytest.mark.parametrize(
    ("line_above", "refused"),
    [
        ("", True),
        ("# Over 80 lines: ok", True),
        ("# Over 80 lines: one state machine, read top to bottom", False),
    ],
)
def test_a_long_function_needs_a_real_reason(line_above: str, refused: bool, tmp_path: Path) -> None:
    package = tmp_path / "optigate"
    package.mkdir()
    (package / "__init__.py").write_text("")
    line = "    x = 1\n"
    body = line * MAX_FUNCTION_LINES
    short = "def short():\n" + line * (MAX_FUNCTION_LINES - 1)  # 80 lines with its def
    long = f"{line_above}\n@staticmethod\ndef long():\n{body}"  # 81: the reason stands above the decorator
    (package / "mod.py").write_text(f"{short}\n\n{long}")
    expected = [f"optigate/mod.py:{MAX_FUNCTION_LINES + 5} long: 81 lines"]
    assert _long_functions_without_reason(package) == (expected if refused else [])
