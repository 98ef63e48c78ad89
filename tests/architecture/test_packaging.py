"""optigate as users install it: a wheel, outside any checkout, synthesizes a config folder.

Nothing in the package may read files above itself (Lambda handlers, Dockerfiles and requirements
ship as package data). The wheel is built offline from this checkout and installed into a folder
of its own; the synth runs from a copy of the sample config in an empty directory, with the wheel's
optigate shadowing the checkout's editable install (asserted). The wheel ships the offline rehearsal
(optigate.rehearse, its packages in the `rehearse` extra) and nothing of the test suite.
"""

from __future__ import annotations

import ast
import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.conftest import CONFIG

# Builds the wheel and synthesizes from it outside the checkout (a minute): the slow tier (tests/tiers.py).
pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]

SYNTH = """
import json, sys
from pathlib import Path
sys.modules["tests"] = None  # no `tests` package at all (the checkout's is not on the path here anyway)
import optigate
import optigate.rehearse.rehearsal  # the rehearsal imports from the wheel alone
from optigate.stacks.app import build_app

app = build_app("config", outdir="cdk.out")
app.synth()
templates = sorted(p.name for p in Path("cdk.out").glob("*.template.json"))
print(json.dumps({"package": optigate.__file__, "templates": templates}))
"""


def _source_copy(target: Path) -> Path:
    """The checkout's files as git sees them (tracked, and new ones not ignored): setuptools reuses a checkout's
    build/ folder, whose leftovers from an older tree (a module since removed) would otherwise ship."""
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
        cwd=REPO,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    for name in filter(None, listed.split("\0")):
        if name.startswith("config/"):  # the user's project: not the package's source (and not the tests' to read)
            continue
        source = REPO / name
        if source.is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)
    return target


def test_an_installed_wheel_synthesizes_a_config_outside_the_checkout(tmp_path):
    wheels, site, work = tmp_path / "wheels", tmp_path / "site", tmp_path / "work"
    source = _source_copy(tmp_path / "source")
    build = [
        sys.executable,
        "-m",
        "pip",
        "wheel",
        "--quiet",
        "--no-deps",
        "--no-build-isolation",
        "-w",
        str(wheels),
        str(source),
    ]
    subprocess.run(build, check=True, capture_output=True, timeout=900)
    (wheel,) = wheels.glob("optigate-*.whl")
    install = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(site), str(wheel)]
    subprocess.run(install, check=True, capture_output=True, timeout=900)
    assert (site / "optigate" / "containers" / "gate-decide" / "Dockerfile").exists()
    assert (site / "optigate" / "lambdas" / "benchmark" / "handler.py").exists()
    _assert_ships_the_rehearsal_and_no_test_kit(wheel, site)

    work.mkdir()
    shutil.copytree(CONFIG, work / "config", ignore=shutil.ignore_patterns("locks"))
    environment = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path),
        "PYTHONPATH": str(site),
        "AWS_EC2_METADATA_DISABLED": "true",
    }
    result = subprocess.run(
        [sys.executable, "-c", SYNTH], cwd=work, env=environment, capture_output=True, text=True, timeout=900
    )
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert Path(report["package"]).is_relative_to(site)  # the wheel's optigate, not the checkout's
    assert len(report["templates"]) == 9
    assets = json.loads((work / "cdk.out" / "optigate-dev-chat.assets.json").read_text())
    assert len(assets["dockerImages"]) == 2 and assets["files"]  # image contexts and Lambda code staged


def _imported_roots(path: Path) -> set[str]:
    """The top-level package of every absolute import in a module, at any depth."""
    roots = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            roots |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            roots.add(node.module.split(".")[0])
    return roots


def _assert_ships_the_rehearsal_and_no_test_kit(wheel: Path, site: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    assert not any(name.startswith(("optigate/testing/", "tests/")) for name in names)
    assert {"optigate/rehearse/__init__.py", "optigate/rehearse/rehearsal.py", "optigate/rehearse/harness.py"} <= set(
        names
    )
    assert {"optigate/rehearse/sagemaker/emulator.py", "optigate/rehearse/gate_run.py"} <= set(names)
    rehearse = sorted((site / "optigate" / "rehearse").rglob("*.py"))
    assert len(rehearse) > 10
    assert [path.name for path in rehearse if "tests" in _imported_roots(path)] == []
    metadata = next(name for name in names if name.endswith(".dist-info/METADATA"))
    lines = zipfile.ZipFile(wheel).read(metadata).decode().splitlines()
    assert "Provides-Extra: rehearse" in lines
    assert any(line.startswith("Requires-Dist: moto[all]") and 'extra == "rehearse"' in line for line in lines)
