"""LMI's engine mode per container version, as djl-serving's config recommender sets it."""

from __future__ import annotations

import pytest

from optigate.config.loader import load_team
from optigate.deployment.serving import resolve_serving
from optigate.plan.catalog import get_instance
from optigate.serving import images
from optigate.serving.engine_mode import (
    ASYNC,
    ROLLING_BATCH,
    container_mode,
    engine_mode,
    recommended_mode,
)
from tests.fixtures.config_files import minimal_team

ASYNC_ENV = {
    "OPTION_ROLLING_BATCH": "disable",
    "OPTION_ASYNC_MODE": "true",
    "OPTION_ENTRYPOINT": "djl_python.lmi_vllm.vllm_async_service",
}

#: Every version the installed SDK's tables pin, with the mode and the variables djl-serving's recommender leaves
#: for it: async from 0.35.0 (LMI v17) on for vLLM, the rolling-batch handler before and on the other engines.
EXPECTED = {
    ("lmi", "0.38.0"): (ASYNC, ASYNC_ENV),
    ("lmi", "0.36.0"): (ASYNC, ASYNC_ENV),
    ("lmi", "0.35.0"): (ASYNC, ASYNC_ENV),
    ("lmi", "0.34.0"): (ROLLING_BATCH, {"OPTION_ROLLING_BATCH": "vllm"}),
    ("lmi", "0.33.0"): (ROLLING_BATCH, {"OPTION_ROLLING_BATCH": "vllm"}),
    ("lmi", "0.32.0"): (ROLLING_BATCH, {"OPTION_ROLLING_BATCH": "vllm"}),
    ("lmi", "0.31.0"): (ROLLING_BATCH, {"OPTION_ROLLING_BATCH": "vllm"}),
    ("lmi", "0.30.0"): (ROLLING_BATCH, {"OPTION_ROLLING_BATCH": "vllm"}),
    ("lmi", "0.29.0"): (ROLLING_BATCH, {"OPTION_ROLLING_BATCH": "vllm"}),
    ("lmi", "0.28.0"): (ROLLING_BATCH, {"OPTION_ROLLING_BATCH": "vllm"}),
}


def _pinned():
    return [(family, version) for family in images.SDK_FRAMEWORK for version in images.known_versions(family)]


def test_every_lmi_version_the_sdk_pins_has_its_expected_mode_listed():
    """A new LMI version in the SDK's tables must be looked up in djl-serving and listed here."""
    assert {key for key in _pinned() if key[0] == "lmi"} == set(EXPECTED)


@pytest.mark.parametrize(("family", "version"), _pinned())
def test_each_pinned_version_renders_its_recommenders_mode(family, version):
    mode = engine_mode(family, version)
    if family == "lmi":
        name, environment = EXPECTED[(family, version)]
    else:  # TensorRT-LLM and Neuron as the SDK pins them: the rolling batch optigate names
        name = ROLLING_BATCH
        environment = {"OPTION_ROLLING_BATCH": {"lmi-trtllm": "trtllm", "lmi-neuronx": "auto"}[family]}
    assert (mode.name, dict(mode.environment)) == (name, environment)
    # what the container makes of the rendered variables is the mode optigate says it runs
    assert recommended_mode(family, version, mode.environment) == name


#: The instance every team of these tests runs on.
G6 = get_instance("ml.g6.2xlarge")


def _team(tmp_path, container: str):
    return load_team(minimal_team(tmp_path, "llama-3.1-8b", "ml.g6.2xlarge", f"container: {container}\n"))


def test_the_newest_lmi_renders_async_mode_not_the_deprecated_rolling_batch(tmp_path):
    resolved = resolve_serving(team := _team(tmp_path, "{family: lmi}"), team.serving, instance=G6)
    assert resolved.image_version == images.newest_version("lmi")
    assert resolved.engine_mode.name == ASYNC
    assert any(note.startswith("engine mode: async (") for note in resolved.notes)  # `optigate summary` says it
    assert {key: resolved.environment[key] for key in ASYNC_ENV} == ASYNC_ENV


def test_a_team_pinned_before_lmi_v17_keeps_the_rolling_batch(tmp_path):
    resolved = resolve_serving(team := _team(tmp_path, "{family: lmi, version: 0.34.0}"), team.serving, instance=G6)
    assert resolved.engine_mode.name == ROLLING_BATCH
    assert resolved.environment["OPTION_ROLLING_BATCH"] == "vllm"
    assert "OPTION_ASYNC_MODE" not in resolved.environment and "OPTION_ENTRYPOINT" not in resolved.environment


@pytest.mark.parametrize(
    ("version", "environment", "mode"),
    [
        ("0.38.0", {}, ASYNC),  # `auto`: async from LMI v17 on
        ("0.35.0", {"OPTION_ROLLING_BATCH": "auto"}, ASYNC),
        ("0.38.0", {"OPTION_ROLLING_BATCH": "vllm"}, ROLLING_BATCH),  # an explicit backend turns async off
        ("0.34.0", {}, ROLLING_BATCH),  # `auto` was the vLLM rolling batch before v17
        ("0.34.0", ASYNC_ENV, ASYNC),  # async by hand, as djl-serving's 0.34 tests set it
        ("0.34.0", {"OPTION_ROLLING_BATCH": "disable", "OPTION_ASYNC_MODE": "true"}, ROLLING_BATCH),  # no entry point
    ],
)
def test_the_recommender_port_for_containers_optigate_did_not_render(version, environment, mode):
    assert recommended_mode("lmi", version, environment) == mode


def test_a_live_package_rendered_by_an_earlier_optigate_is_talked_to_in_its_own_mode():
    image = "763104351884.dkr.ecr.us-east-1.amazonaws.com/djl-inference:0.38.0-lmi29.0.0-cu130"
    assert container_mode(image, {"OPTION_ROLLING_BATCH": "vllm"}) == ROLLING_BATCH
    assert container_mode(image, ASYNC_ENV) == ASYNC
    trtllm = "763104351884.dkr.ecr.us-east-1.amazonaws.com/djl-inference:0.33.0-tensorrtllm0.21.0-cu128"
    assert container_mode(trtllm, {"OPTION_ROLLING_BATCH": "trtllm"}) == ROLLING_BATCH


@pytest.mark.parametrize("variable", ["OPTION_ROLLING_BATCH", "OPTION_ASYNC_MODE", "OPTION_ENTRYPOINT"])
def test_serving_environment_cannot_switch_the_engine_mode_behind_the_benchmarks_back(variable):
    """The benchmark talks to the rendered mode; a team's own OPTION_ASYNC_MODE=false would make it misread it."""
    from optigate.config.models import Serving
    from optigate.config.rules.serving_rules import check_serving

    serving = Serving(instance_type="ml.g6.2xlarge", environment={variable: "false"})
    problems = check_serving(serving, ("serving",), has_adapters=False, artifact_uri="s3://acme-models/m/")
    assert [(p.rule_id, p.path) for p in problems] == [("OG212", ("serving", "environment", variable))]
