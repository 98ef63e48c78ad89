"""Bootstrap code exists once: optigate.stats. No other module of optigate draws resamples from
numpy's random generators, computes interval percentiles or defines a bootstrap, and the three
callers (bench compare, the gate's decision, the evaluation comparison) import optigate.stats."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import optigate

PACKAGE = Path(optigate.__file__).resolve().parent
HOME = PACKAGE / "stats.py"
CALLERS = {
    "bench compare": [PACKAGE / "bench" / "compare.py", PACKAGE / "bench" / "throughput.py"],
    "gate decision": sorted((PACKAGE / "gate" / "decision").glob("*.py")),
    "evaluation compare": [PACKAGE / "evaluate" / "quality_verdict.py"],
}
#: Names only numpy resampling or interval code uses (stdlib `random` has no `integers`).
RESAMPLING_CALLS = {"default_rng", "integers", "nanpercentile", "bootstrap"}
RESAMPLING_WORDS = ("bootstrap", "resample", "replicate")


def _modules() -> list[Path]:
    return sorted(path for path in PACKAGE.rglob("*.py") if path != HOME)


def _offences(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    # `np.random.Generator` names the type (an annotation); drawing from numpy.random is what is forbidden.
    annotations = {
        id(node.value) for node in ast.walk(tree) if isinstance(node, ast.Attribute) and node.attr == "Generator"
    }
    found = []
    for node in ast.walk(tree):
        where = f"{path.relative_to(PACKAGE.parent)}:{getattr(node, 'lineno', '?')}"
        if (
            isinstance(node, ast.Attribute)
            and node.attr == "random"
            and id(node) not in annotations
            and isinstance(node.value, ast.Name)
            and node.value.id in ("np", "numpy")
        ):
            found.append(f"{where}: numpy.random")
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("numpy.random"):
            found.append(f"{where}: from {node.module} import")
        elif isinstance(node, ast.Import) and any(alias.name.startswith("numpy.random") for alias in node.names):
            found.append(f"{where}: import numpy.random")
        elif isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
            owner = func.value.id if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) else ""
            # `st.integers()` is a hypothesis strategy (the config fuzzer's), not a numpy draw.
            if name in RESAMPLING_CALLS and owner not in ("stats", "st"):
                found.append(f"{where}: calls {name}()")
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(
            word in node.name.lower() for word in RESAMPLING_WORDS
        ):
            found.append(f"{where}: defines {node.name}()")
    return found


def _imports_stats(path: Path) -> bool:
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            named = {alias.name for alias in node.names}
            if node.module == "optigate.stats" or (node.module == "optigate" and "stats" in named):
                return True
        if isinstance(node, ast.Import) and any(alias.name == "optigate.stats" for alias in node.names):
            return True
    return False


@pytest.mark.slow
def test_no_module_but_stats_resamples():
    offences = [offence for path in _modules() for offence in _offences(path)]
    assert offences == []


def test_the_walk_sees_resampling_where_it_is():
    """The check above would catch the code it forbids: stats.py itself is full of it."""
    assert any("numpy.random" in o for o in _offences(HOME)) or any("default_rng" in o for o in _offences(HOME))
    assert any("integers" in o for o in _offences(HOME)) and any("defines bootstrap_mean" in o for o in _offences(HOME))


def test_the_three_callers_use_stats():
    for caller, paths in CALLERS.items():
        assert paths and all(path.exists() for path in paths), caller
        assert any(_imports_stats(path) for path in paths), f"{caller} does not import optigate.stats"
        assert not any(_offences(path) for path in paths), caller
