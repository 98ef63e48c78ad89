"""A new adapter version as the gate's candidate (gate.candidate.adapters), executed: the archive is checked before
anything is created, the candidate's component serves the new version beside the twin's current one, an approval
records it in the model package, the lock carries it and the next synth deploys it."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from optigate.promote.lock import Lock, ServedPackage, parse_adapters, write_lock
from optigate.promote.resolve import deployable_container
from tests.conftest import resources_of
from tests.fixtures.adapter_archives import adapter, adapter_config

# Every test here executes a gate (tens of seconds each): the slow tier (tests/tiers.py).
pytestmark = pytest.mark.slow

REGION = "us-east-1"
REPLY_V2 = f"s3://acme-ml-adapters-{REGION}/support/reply-v2.tar.gz"
REPLY_V3 = "s3://acme-ml-adapters-{region}/support/reply-v3.tar.gz"


def _support_with_new_reply(example_config: Path, tmp_path: Path) -> Path:
    """The example config, support's candidate being reply's v3 alone (no serving change, no optimization job)."""
    config = tmp_path / "config"
    shutil.copytree(example_config, config)
    path = config / "teams" / "support.yaml"
    team = yaml.safe_load(path.read_text())
    team["gate"]["candidate"] = {"adapters": {"reply": REPLY_V3}}
    # Judged on its own latency (OG455): budgets well above the emulated p99s, so the verdict is the proof's.
    team["gate"]["benchmark"].update(p99_ttft_ms_budget=3000, p99_itl_ms_budget=200)
    path.write_text(yaml.safe_dump(team, sort_keys=False))
    return config


def _rehearse(config: Path, archive: bytes, candidate: str = "faster"):
    from optigate.rehearse.rehearsal import rehearse, synthesize_team

    template, deployment = synthesize_team("support", "dev", config)
    return rehearse(template, deployment, candidate, seed_objects={REPLY_V3.format(region=REGION): archive})


def _component(result, side: str, index: int) -> str:
    names = {
        n
        for run in result["benchmarked"]
        for n in run.get("components", [])
        if n.split("-")[-2] == f"{side}c{index:02d}"
    }
    (name,) = names
    return name


def test_a_new_adapter_version_is_proven_beside_the_current_one_and_the_lock_deploys_it(example_config, tmp_path):
    config = _support_with_new_reply(example_config, tmp_path)
    # Trained on SageMaker: the base recorded as the training job's channel, its tensors shaped for Qwen2.5-7B.
    trained = adapter(adapter_config(base_model_name_or_path="/opt/ml/input/data/model"))
    result = _rehearse(config, trained)
    assert result["execution"]["status"] == "SUCCEEDED", (result["execution"].get("cause"), result["report"])
    states = result["states"]
    assert states.index("CheckAdapterArchives") < states.index("CreateCandidateModel")
    # The base could not be compared by its id: the report says so, and what was compared instead.
    reply = result["report"]["adapter_check"]["reply"]
    assert reply["base_model_check"] == "unknown" and "is not a Hugging Face id" in reply["base_model_why"]
    assert reply["architecture_checked"] == ["adapter_model.safetensors"]
    assert "CreateOptimizationJob" not in states  # an adapter alone: the candidate serves the baseline's weights
    # reply is the third adapter: component 03 on each side; the twin serves v2, the candidate v3.
    served = {name: uri for run in result["benchmarked"] for name, uri in run.get("artifacts", {}).items()}
    assert served[_component(result, "tw", 3)] == REPLY_V2
    assert served[_component(result, "ca", 3)] == REPLY_V3.format(region=REGION)
    (package,) = result["package_details"]
    assert package["ModelApprovalStatus"] == "Approved"
    assert parse_adapters(package["CustomerMetadataProperties"]) == {"reply": REPLY_V3.format(region=REGION)}
    # The promotion: the lock names the package, and the next synth deploys reply's v3 and the others as before.
    container, source = deployable_container(package)
    lock = Lock(
        environment="dev",
        resolved_at="2026-12-01T00:00:00+00:00",
        teams={
            "support": ServedPackage(
                model_package_arn=package["ModelPackageArn"],
                image=container["Image"],
                model_data_uri=source,
                environment=container.get("Environment") or {},
                fingerprint=package["CustomerMetadataProperties"]["fingerprint"],
                adapters=parse_adapters(package["CustomerMetadataProperties"]),
            )
        },
    )
    locks = tmp_path / "locks"
    locks.mkdir()
    write_lock(lock, locks)
    from optigate.rehearse.rehearsal import synthesize_team

    template, _ = synthesize_team("support", "dev", config, locks_dir=locks)
    artifacts = {
        props["InferenceComponentName"]: props["Specification"].get("Container", {}).get("ArtifactUrl")
        for props in (r["Properties"] for r in resources_of(template, "AWS::SageMaker::InferenceComponent").values())
    }
    assert artifacts["support-dev-reply"] == REPLY_V3.format(region=REGION)
    assert artifacts["support-dev-triage"].endswith("triage-v3.tar.gz")


def test_an_archive_vllm_cannot_serve_is_refused_before_anything_is_created(example_config, tmp_path):
    config = _support_with_new_reply(example_config, tmp_path)
    result = _rehearse(config, adapter(adapter_config(r=64)))  # support's max_lora_rank is 32
    assert result["execution"]["status"] == "FAILED"
    assert "AdapterRefused" in result["execution"]["cause"] and "reply" in result["execution"]["cause"]
    states = result["states"]
    assert "CheckAdapterArchives" in states
    assert not {"CreateOptimizationJob", "CreateCandidateModel", "CreateCandidateConfig"} & set(states)
    assert result["packages"] == []
    assert {kind: names for kind, names in result["left"].items() if names} == {}
    assert result["live_components"] == result["live_components_before"]
