"""Rehearsals of particular gates: rejected speculative drafts (chat), and a shadow rollout on the
live endpoint behind an optimization job (research)."""

from __future__ import annotations

import json

import pytest

from optigate.rehearse.gate_run import BUCKET
from optigate.rehearse.sagemaker.jobs import EAGLE_HEAD_CHANNEL, TRAINED_HEAD_LAYOUTS

# Every test here rehearses a team's gate (tens of seconds each): the slow tier (tests/tiers.py).
pytestmark = pytest.mark.slow


def _path(result) -> str:
    return " → ".join(result["states"])


def test_speculation_whose_drafts_are_rejected_does_not_pass_on_what_the_client_saw(example_config):
    from optigate.rehearse.rehearsal import EXPECTATIONS, rehearse, synthesize_team

    template, deployment = synthesize_team("chat", "dev", example_config)
    # Faster per step, but the drafts of the EAGLE head the job trained are rarely accepted (4 %); LMI publishes no
    # server series, so the client's chunks (one engine step each) are the only witness.
    result = rehearse(template, deployment, "drafts-rejected")
    # The head was trained (from the seeded capture) and staged before the candidate was measured.
    states = result["states"]
    assert (
        states.index("CreateOptimizationJob") < states.index("StageTrainedHead") < states.index("CreateCandidateModel")
    )
    assert "ReadServerMetrics" not in states and result["report"]["server_metrics"] is None
    assert result["execution"]["status"] == "FAILED"
    failed = {c["name"]: c for c in result["report"]["checks"] if not c["passed"]}
    assert set(failed) == {"tokens_per_chunk_gain", "speculative_acceptance"}
    acceptance = failed["speculative_acceptance"]
    assert acceptance["measured"] < 0.1 and acceptance["ci_high"] < acceptance["threshold"] == 0.4
    assert "the client saw" in acceptance["detail"]
    assert EXPECTATIONS["drafts-rejected"].met("REJECTED", result["report"]["checks"])
    assert "tokens_per_chunk_gain" in result["execution"]["cause"]
    assert [p["ModelApprovalStatus"] for p in result["packages"]] == ["Rejected"]
    assert sum(len(v) for v in result["left"].values()) == 0 and result["messages"]
    assert [(e["status"], e["config"] == e["original_config"]) for e in result["live"].values()] == [
        ("InService", True)
    ]


def test_rehearse_a_shadow_rollout_restores_the_live_endpoint(example_config):
    """research: the candidate goes through an optimization job, then mirrors live traffic as a shadow. Its job only
    quantizes (its EAGLE-3 head is the baseline's, staged into the job's output), and the SageMaker SDK points such
    a model at the job's output (_generate_optimized_core_model): the SDK's layout, so one rehearsal covers both
    (a second would measure the same flow again, and each measured rehearsal is a chance for a busy host's noise)."""
    from optigate.rehearse.rehearsal import rehearse, synthesize_team

    result = rehearse(*synthesize_team("research", "dev", example_config), "faster", trained_head_layout="sdk")
    assert result["execution"]["status"] == "SUCCEEDED", result["report"]
    path = _path(result)
    assert "CreateOptimizationJob" in path and "PutShadowOnLiveEndpoint → ResetShadowPolls" in path
    assert "ReadVariantMetrics → ShadowOnLiveEndpoint? → ResetRestorePolls → DescribeLiveForRestore" in path
    assert {c["name"]: c["passed"] for c in result["report"]["checks"]}["shadow_traffic"] is True
    live = result["live"]["research-dev"]
    assert live["status"] == "InService" and live["config"] == live["original_config"]
    assert [p["ModelApprovalStatus"] for p in result["packages"]] == ["Approved"]
    (package,) = result["package_details"]
    (container,) = package["InferenceSpecification"]["Containers"]
    prefix = container["ModelDataSource"]["S3DataSource"]["S3Uri"].removeprefix(f"s3://{BUCKET}/")
    assert prefix.startswith("optimized/") and f"{prefix}eagle3/config.json" in result["candidate_files"]


# --------------------------------------------------------------------------- the trained head's layouts
# Where an EAGLE-training job leaves the base weights and the head is undocumented: chat's gate must reach APPROVED on
# the emulated layout and on the SageMaker Python SDK's (optigate.rehearse.sagemaker.jobs.TRAINED_HEAD_LAYOUTS);
# research's (a quantizing job) is rehearsed in the SDK's layout above.


@pytest.mark.parametrize("layout", TRAINED_HEAD_LAYOUTS)
def test_chat_approves_a_trained_head_in_either_layout(example_config, layout):
    """chat's job only trains a head (no quantization): in the SDK's layout the registered model keeps the base
    weights at the team's own prefix and the head in channel `draft_model`; the gate copies both into one prefix of
    the job's output, which the approved package (what a promotion deploys with CloudFormation) names."""
    from optigate.rehearse.rehearsal import rehearse, synthesize_team

    result = rehearse(*synthesize_team("chat", "dev", example_config), "faster", trained_head_layout=layout)
    assert result["execution"]["status"] == "SUCCEEDED", (result["execution"].get("cause"), result["report"])
    assert [p["ModelApprovalStatus"] for p in result["packages"]] == ["Approved"]
    (package,) = result["package_details"]
    (container,) = package["InferenceSpecification"]["Containers"]
    assert "AdditionalModelDataSources" not in container  # one prefix: CloudFormation can deploy it
    prefix = container["ModelDataSource"]["S3DataSource"]["S3Uri"]
    run = prefix.removeprefix(f"s3://{BUCKET}/").split("/")[:2]
    assert run[0] == "optimized"
    speculative = json.loads(container["Environment"]["OPTION_SPECULATIVE_CONFIG"])
    files = set(result["candidate_files"])
    if layout == "sdk":
        # The baseline's files (seeded: config.json) were copied beside the head under the candidate's prefix.
        assert prefix == f"s3://{BUCKET}/optimized/{run[1]}/model/"
        assert speculative["model"] == "/opt/ml/model/speculative_head"
        assert {
            f"optimized/{run[1]}/model/config.json",
            f"optimized/{run[1]}/model/speculative_head/config.json",
        } <= files
    else:
        assert prefix == f"s3://{BUCKET}/optimized/{run[1]}/"
        assert speculative["model"] == f"/opt/ml/model/{EAGLE_HEAD_CHANNEL}"
        assert f"optimized/{run[1]}/{EAGLE_HEAD_CHANNEL}/config.json" in files
    assert speculative["method"] == "eagle3" and "OPTION_SPECULATIVE_DRAFT_MODEL" not in container["Environment"]
    assert sum(len(v) for v in result["left"].values()) == 0
