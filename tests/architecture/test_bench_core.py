"""The benchmark client's core (optigate/bench/core) ships whole in the benchmark Lambda, beside the Lambda runtime's
standard library and botocore/boto3 and nothing else: each of its modules imports only those and the core itself, at
any depth (function-level imports and `if TYPE_CHECKING:` blocks included). An import inside `try:` whose
`except` catches ImportError is optional (uvloop where installed) and may name anything."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

from optigate.constructs.assets import BENCH_CORE, PACKAGE, _lambda_files

#: What the Lambda runtime has besides the standard library.
RUNTIME = {"__future__", "boto3", "botocore"}


def _module_name(path: Path, root: Path) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _optional(tree: ast.AST) -> set[int]:
    """The import statements inside a `try:` that falls back on ImportError."""
    optional = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Try) and any(
            handler.type is not None and any(n in ast.unparse(handler.type) for n in ("ImportError", "ModuleNotFound"))
            for handler in node.handlers
        ):
            optional |= {id(child) for statement in node.body for child in ast.walk(statement)}
    return optional


def outside_imports(folder: Path, root: Path = PACKAGE.parent) -> dict[str, set[str]]:
    """Each module of `folder` (a package under `root`) with what it imports from outside the standard library, the
    Lambda runtime's SDK and `folder`'s own package."""
    own = _module_name(folder / "__init__.py", root)
    found: dict[str, set[str]] = {}
    for path in sorted(folder.rglob("*.py")):
        module = _module_name(path, root)
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        tree = ast.parse(path.read_text(), str(path))
        optional = _optional(tree)
        names = set()
        for node in ast.walk(tree):
            if id(node) in optional:
                continue
            if isinstance(node, ast.Import):
                names |= {alias.name for alias in node.names}
            elif isinstance(node, ast.ImportFrom):
                base = package.split(".")[: len(package.split(".")) - node.level + 1] if node.level else []
                source = ".".join([*base, *([node.module] if node.module else [])])
                names |= {f"{source}.{alias.name}" for alias in node.names}
        outside = {
            name
            for name in names
            if name.split(".")[0] not in sys.stdlib_module_names | RUNTIME
            and not (name == own or name.startswith(own + "."))
        }
        if outside:
            found[module] = outside
    return found


def test_the_core_imports_the_standard_library_botocore_and_itself_alone():
    assert outside_imports(BENCH_CORE) == {}


def test_the_packages_around_the_core_import_nothing():
    """optigate/__init__.py and optigate/bench/__init__.py ship beside the core (its parent packages)."""
    for path in (PACKAGE / "__init__.py", PACKAGE / "bench" / "__init__.py"):
        tree = ast.parse(path.read_text())
        assert not [node for node in ast.walk(tree) if isinstance(node, ast.Import | ast.ImportFrom)], path


def test_the_lambda_ships_the_core_whole_and_nothing_else_of_optigate():
    shipped = {name for name in _lambda_files("benchmark") if name.startswith("optigate/")}
    core = {f"optigate/{path.relative_to(PACKAGE).as_posix()}" for path in BENCH_CORE.rglob("*.py")}
    assert "optigate/bench/core/runner.py" in core
    assert shipped == core | {"optigate/__init__.py", "optigate/bench/__init__.py"}


def test_the_check_finds_an_import_from_outside(tmp_path: Path):
    core = tmp_path / "pkg" / "bench" / "core"
    core.mkdir(parents=True)
    (core / "__init__.py").write_text("")
    (core / "load.py").write_text("import asyncio\nfrom botocore.auth import SigV4Auth\nfrom . import client\n")
    (core / "client.py").write_text(
        "from pkg.bench.core.load import x\n"
        "try:\n    import uvloop\nexcept ImportError:\n    uvloop = None\n"
        "def f():\n    import numpy\n    from pkg.bench import compare\n    from .. import plots\n"
        "    from pkg.emulator.sagemaker_runtime import start\n"
    )
    (core / "stats.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import pandas\n"
        "try:\n    import scipy\nexcept ValueError:\n    pass\n"
    )
    assert outside_imports(core, tmp_path) == {
        "pkg.bench.core.client": {
            "numpy",
            "pkg.bench.compare",
            "pkg.bench.plots",
            "pkg.emulator.sagemaker_runtime.start",
        },
        "pkg.bench.core.stats": {"pandas", "scipy"},
    }
