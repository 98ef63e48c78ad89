"""Shared fixtures. CDK synth costs seconds per app, so the example app is synthesized once."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.fixtures import PROJECT, PROJECT_CONFIG
from tests.fixtures.once import folder_of_run, once

#: `--fast`, the `slow` and `fuzz` markers' tiers and the 3-second limit.
pytest_plugins = ["tests.tiers"]

# Constants for modules that need a path at import time; tests take the fixtures below.
REPO = Path(__file__).resolve().parents[1]
#: The config folder every test reads: the suite's own project (tests/fixtures/project), never the repository's
#: config/ (the user's: a platform adds its teams there, and `optigate check` checks it).
CONFIG = PROJECT_CONFIG

#: The repository's config/ is the user's project: a platform adds its teams there and checks it with `optigate check`
#: (its pipeline runs that, not this suite), so no test may read it; config/schema/ is optigate's generated output.
USER_CONFIG = REPO / "config"
_GENERATED = USER_CONFIG / "schema"
_user_config_reads: list[str] = []


def _watch_user_config(event: str, args: tuple) -> None:
    """An audit hook: note every file opened or folder listed in the user's config/ by this process."""
    if event not in ("open", "os.listdir", "os.scandir") or not args or not isinstance(args[0], (str, bytes, Path)):
        return
    name = os.fsdecode(args[0])
    if os.sep not in name:  # a bare name may be relative to a folder's descriptor (shutil.rmtree), not to the cwd
        return
    path = os.path.abspath(name)
    inside = path == str(USER_CONFIG) or path.startswith(f"{USER_CONFIG}{os.sep}")
    if inside and not path.startswith(f"{_GENERATED}{os.sep}") and path != str(_GENERATED):
        _user_config_reads.append(path)


sys.addaudithook(_watch_user_config)


@pytest.fixture(autouse=True)
def _reads_no_user_config():
    """Fails a test that read the repository's config/ in this process (a subprocess is not watched): tests read the
    suite's own project, tests/fixtures/project (the `example_config` fixture, `CONFIG`)."""
    before = len(_user_config_reads)
    yield
    read = sorted(set(_user_config_reads[before:]))
    if read:
        shown = ", ".join(os.path.relpath(path, REPO) for path in read[:3])
        pytest.fail(f"read the user's config/ ({shown}): read tests/fixtures/project/config (CONFIG) instead")


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
    """The example teams' config folder: the suite's own copy (tests/fixtures/project/config), not config/."""
    return CONFIG


@pytest.fixture(scope="session")
def example_project() -> Path:
    """The folder holding the example teams' `config/`: a working directory where `config` (the CLI's default)
    is the suite's own copy."""
    return PROJECT


@dataclass
class Synthesized:
    outdir: Path
    templates: dict[str, dict]  # stack name -> template
    error: str | None  # the synth's exception, as text


@pytest.fixture(scope="session")
def example_app(tmp_path_factory) -> Synthesized:
    """Every example team (of the suite's project) in every environment, synthesized once a run (tests.fixtures.once)
    with cdk-nag AwsSolutions active."""
    return once(tmp_path_factory, "example_app", lambda: _synthesize_example_app(tmp_path_factory))


def _synthesize_example_app(tmp_path_factory) -> Synthesized:
    from optigate.stacks.app import build_app

    outdir = folder_of_run(tmp_path_factory, "cdk.out")
    app = build_app(CONFIG, environments="", outdir=str(outdir))
    error = None
    try:
        app.synth()
    except Exception as exc:  # cdk-nag findings surface as a failed synth; the tests report them
        error = f"{type(exc).__name__}: {exc}"  # as text: the other workers read it unpickled
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
