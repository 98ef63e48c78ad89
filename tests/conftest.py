"""Shared fixtures. CDK synth costs seconds per app, so the example app is synthesized once."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

# Constants for modules that need a path at import time; tests take the fixtures below.
REPO = Path(__file__).resolve().parents[1]
CONFIG = REPO / "config"

# Keep botocore and friends away from any real account, whatever the machine has configured.
os.environ.setdefault("AWS_ACCESS_KEY_ID", "testing")
os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "testing")
os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")


@pytest.fixture(scope="session")
def repo_root() -> Path:
    """The repository's root folder."""
    return REPO


@pytest.fixture(scope="session")
def example_config() -> Path:
    """The example project's config folder (the one the README's commands use)."""
    return CONFIG


@dataclass
class Synthesized:
    outdir: Path
    templates: dict[str, dict]  # stack name -> template
    error: Exception | None


@pytest.fixture(scope="session")
def example_app(tmp_path_factory) -> Synthesized:
    """Every example team in every environment, synthesized once with cdk-nag AwsSolutions active."""
    from optigate.stacks.app import build_app

    outdir = tmp_path_factory.mktemp("cdk.out")
    app = build_app(CONFIG, environments="", outdir=str(outdir))
    error = None
    try:
        app.synth()
    except Exception as exc:  # cdk-nag findings surface as a failed synth; the tests report them
        error = exc
    templates = {}
    for path in sorted(outdir.glob("*.template.json")):
        templates[path.name.removesuffix(".template.json")] = json.loads(path.read_text())
    return Synthesized(outdir, templates, error)


def edited_config(tmp_path: Path, file: str, old: str, new: str) -> Path:
    """A copy of the example config (without locks) in `tmp_path`, with the first `old` in `file` made
    `new`; fails if `old` is not there (an edit that does nothing would test nothing)."""
    import shutil

    config = tmp_path / "config"
    if not config.exists():
        shutil.copytree(CONFIG, config, ignore=shutil.ignore_patterns("locks"))
    path = config / file
    text = path.read_text()
    assert old in text, f"{file} has no {old!r}"
    path.write_text(text.replace(old, new, 1))
    return config


def resources_of(template: dict, resource_type: str) -> dict[str, dict]:
    return {
        logical_id: resource
        for logical_id, resource in template.get("Resources", {}).items()
        if resource["Type"] == resource_type
    }


def statelint(path: Path) -> subprocess.CompletedProcess:
    """statelint on a definition file (the module, or its console script where it has no __main__)."""
    result = subprocess.run([sys.executable, "-m", "statelint", str(path)], capture_output=True, text=True)
    if "No module named statelint.__main__" in result.stderr:
        command = [str(Path(sys.executable).with_name("statelint")), str(path)]
        result = subprocess.run(command, capture_output=True, text=True)
    return result
