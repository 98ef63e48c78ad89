"""The gate's modules import each other one way: no circle between the modules of optigate.constructs.gate or
optigate.deployment, counting imports under `if TYPE_CHECKING:` too (a type-only circle is still a circle:
each module needs the other to be read)."""

from __future__ import annotations

import ast
from pathlib import Path

import optigate

PACKAGE = Path(optigate.__file__).resolve().parent
CHECKED = ("constructs/gate", "deployment")


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_module(name: str) -> bool:
    relative = Path(*name.split(".")[1:])
    return (PACKAGE / relative).with_suffix(".py").exists() or (PACKAGE / relative / "__init__.py").exists()


def module_imports(path: Path) -> set[str]:
    """Every optigate module `path` imports, type-only ones included; `from a.b import c` is `a.b.c` when c is a
    module (the package's __init__ is then only passed through), else `a.b`."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names if alias.name.startswith("optigate")}
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("optigate") and not node.level:
            module = node.module or ""
            for alias in node.names:
                found.add(f"{module}.{alias.name}" if _is_module(f"{module}.{alias.name}") else module)
    return found


def import_graph(folders: tuple[str, ...]) -> dict[str, set[str]]:
    paths = [path for folder in folders for path in sorted((PACKAGE / folder).glob("*.py"))]
    modules = {_module_name(path): path for path in paths}
    return {name: module_imports(path) & set(modules) - {name} for name, path in modules.items()}


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    found, state, stack = [], {}, []

    def visit(node: str) -> None:
        state[node] = "open"
        stack.append(node)
        for following in sorted(graph.get(node, ())):
            if state.get(following) == "open":
                found.append([*stack[stack.index(following) :], following])
            elif following not in state:
                visit(following)
        stack.pop()
        state[node] = "done"

    for node in sorted(graph):
        if node not in state:
            visit(node)
    return found


def test_no_import_circle_in_the_gate_modules():
    graph = import_graph(CHECKED)
    assert "optigate.constructs.gate.construct" in graph["optigate.constructs.gate"]
    assert "optigate.constructs.gate.tasks" in graph["optigate.constructs.gate.stages"]
    assert circles(graph) == []


def test_a_type_only_import_back_is_a_circle(tmp_path):
    """What the gate's helpers once did (`if TYPE_CHECKING: from ...construct import OptimizationGate`)."""
    helper = tmp_path / "helper.py"
    helper.write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from optigate.constructs.gate.construct import OptimizationGate\n"
    )
    graph = import_graph(CHECKED)
    graph["optigate.constructs.gate.stages"] |= module_imports(helper)
    assert circles(graph) != []
