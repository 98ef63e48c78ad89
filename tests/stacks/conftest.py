"""Fixtures of the stack tests: the promotion pipeline's cloud assembly, synthesized once a run
(the pipeline tests, the IAM checks and the optional-read checks all read it), and the template-rule view of it and
of the example app."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import CONFIG
from tests.fixtures.once import folder_of_run, once
from tests.template_rules.assembly import Stack, load_stacks


def synth_pipeline(config_dir: Path, outdir: Path) -> None:
    """The pipeline app of `config_dir` into `outdir`, with cdk-nag (raises on an unacknowledged finding,
    in the pipeline stack or any stage)."""
    from aws_cdk import App

    from optigate.deployment import load_resolved_project
    from optigate.promote.lock import default_locks_dir
    from optigate.stacks.app import FEATURE_FLAGS, build_pipelines, enable_nag

    app = App(outdir=str(outdir), context=FEATURE_FLAGS)
    build_pipelines(app, load_resolved_project(config_dir), default_locks_dir(config_dir))
    enable_nag(app)
    app.synth()


@pytest.fixture(scope="session")
def pipeline_synth() -> Callable[[Path, Path], None]:
    """`pipeline_synth(config_dir, outdir)`: synthesize the pipeline app of another config."""
    return synth_pipeline


@pytest.fixture(scope="session")
def assembly(tmp_path_factory) -> Path:
    """The example config's pipeline assembly, synthesized once a run (tests.fixtures.once)."""

    def synthesize() -> Path:
        outdir = folder_of_run(tmp_path_factory, "pipeline.out")
        synth_pipeline(CONFIG, outdir)
        return outdir

    return once(tmp_path_factory, "pipeline_assembly", synthesize)


@pytest.fixture(scope="session")
def stage_templates(assembly) -> dict[str, dict]:
    """Stack name -> template, for every stack of every environment stage."""
    out = {}
    for manifest in assembly.glob("assembly-*/manifest.json"):
        for name, artifact in json.loads(manifest.read_text())["artifacts"].items():
            if artifact["type"] == "aws:cloudformation:stack":
                path = manifest.parent / f"{name}.template.json"
                out[artifact["properties"]["stackName"]] = json.loads(path.read_text())
    return out


@pytest.fixture(scope="session")
def app_stacks(example_app) -> list[Stack]:
    """The example app's stacks, as the template rules read them."""
    return load_stacks(example_app.outdir)


@pytest.fixture(scope="session")
def pipeline_stacks(assembly) -> list[Stack]:
    """Every stack of the pipeline's assembly (the pipeline and each stage), as the template rules read them."""
    return load_stacks(assembly)
