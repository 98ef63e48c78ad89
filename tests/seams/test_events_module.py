"""optigate.lambdas.events ships in every Lambda function's code: it imports the standard library alone (no
pydantic, no CDK, nothing else of optigate), at any depth."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

from optigate.lambdas import events


def test_the_events_import_the_standard_library_alone():
    tree = ast.parse(Path(events.__file__).read_text())
    names = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    names |= {node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and not node.level}
    assert not [node for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.level]
    assert {name.split(".")[0] for name in names} - sys.stdlib_module_names == set()


def test_every_event_has_its_schema_in_docs(repo_root):
    for name, render in events.event_schemas().items():
        assert (repo_root / "docs" / name).read_text() == render(), f"run `optigate schema --docs docs` ({name})"
