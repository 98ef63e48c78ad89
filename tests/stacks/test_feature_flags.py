"""The CDK feature flags: cdk.json sets every flag aws-cdk-lib recommends (what `cdk init` would
write for this version, so `cdk synth` reports none unconfigured), and the in-process app (tests,
`optigate rehearse`, an installed wheel) runs with exactly cdk.json's flags
(optigate/stacks/feature_flags.py)."""

from __future__ import annotations

import importlib.util
import json
import tarfile
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import CONFIG

ROOT = Path(__file__).resolve().parents[2]
# Recommended flags deliberately left out of cdk.json, each with its reason. None so far: with all of
# aws-cdk-lib 2.275's recommendations the templates change only by partition literals (`arn:aws:`
# where the region is known) and the pipeline's artifact key alias name (stack-safe form).
LEFT_UNSET: dict[str, str] = {}


def _recommended() -> dict[str, Any]:
    """aws-cdk-lib's recommended-feature-flags.json, from the library the app runs on."""
    spec = importlib.util.find_spec("aws_cdk")
    assert spec is not None and spec.submodule_search_locations
    (tarball,) = Path(next(iter(spec.submodule_search_locations)), "_jsii").glob("aws-cdk-lib@*.jsii.tgz")
    with tarfile.open(tarball) as archive:
        member = archive.extractfile("package/recommended-feature-flags.json")
        assert member is not None
        return json.load(member)


def _disagreements(context_of, flags: dict[str, Any]) -> list[str]:
    return [
        f"{flag}: {context_of(flag)!r} instead of {value!r}"
        for flag, value in flags.items()
        if context_of(flag) != value
    ]


def test_cdk_json_sets_every_recommended_flag_as_the_app_does():
    from optigate.stacks.feature_flags import FEATURE_FLAGS

    context = json.loads((ROOT / "cdk.json").read_text())["context"]
    recommended = _recommended()
    assert len(recommended) > 50
    expected = {flag: value for flag, value in recommended.items() if flag not in LEFT_UNSET}
    assert context == expected
    assert context == FEATURE_FLAGS


@pytest.mark.slow
def test_the_app_runs_with_cdk_json_flags():
    from optigate.stacks.app import build_app

    flags = json.loads((ROOT / "cdk.json").read_text())["context"]
    app = build_app(CONFIG, environments="", nag=False)  # no stacks: the flags are the app's context
    assert _disagreements(app.node.try_get_context, flags) == []


def test_an_app_without_the_flags_is_reported():
    from aws_cdk import App

    flags = json.loads((ROOT / "cdk.json").read_text())["context"]
    found = _disagreements(App().node.try_get_context, flags)
    assert "@aws-cdk/aws-codepipeline:defaultPipelineTypeToV2: None instead of True" in found
