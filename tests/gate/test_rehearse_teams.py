"""Rehearsals of particular gates: rejected speculative drafts (chat), and a shadow rollout on the
live endpoint behind an optimization job (research)."""

from __future__ import annotations


def _path(result) -> str:
    return " → ".join(result["states"])


def test_speculation_whose_drafts_are_rejected_does_not_pass(example_config):
    from optigate.rehearse.rehearsal import FASTER, rehearse, synthesize_team

    template, deployment = synthesize_team("chat", "dev", example_config)
    # Faster per token, but one token per chunk: the drafts of the EAGLE head the job trained are never accepted.
    result = rehearse(template, deployment, "faster", behaviour={**FASTER, "tokens_per_chunk": [1]})
    # The head was trained (from the seeded capture) and staged before the candidate was measured.
    states = result["states"]
    assert (
        states.index("CreateOptimizationJob") < states.index("StageTrainedHead") < states.index("CreateCandidateModel")
    )
    assert result["execution"]["status"] == "FAILED"
    failed = {c["name"] for c in result["report"]["checks"] if not c["passed"]}
    assert failed == {"tokens_per_chunk_gain"}
    assert "tokens_per_chunk_gain" in result["execution"]["cause"]
    assert [p["ModelApprovalStatus"] for p in result["packages"]] == ["Rejected"]
    assert sum(len(v) for v in result["left"].values()) == 0 and result["messages"]
    assert [(e["status"], e["config"] == e["original_config"]) for e in result["live"].values()] == [
        ("InService", True)
    ]


def test_rehearse_a_shadow_rollout_restores_the_live_endpoint(example_config):
    """research: the candidate goes through an optimization job, then mirrors live traffic as a shadow."""
    from optigate.rehearse.rehearsal import rehearse, synthesize_team

    result = rehearse(*synthesize_team("research", "dev", example_config), "faster")
    assert result["execution"]["status"] == "SUCCEEDED", result["report"]
    path = _path(result)
    assert "CreateOptimizationJob" in path and "PutShadowOnLiveEndpoint → ResetShadowPolls" in path
    assert "ReadVariantMetrics → ShadowOnLiveEndpoint? → ResetRestorePolls → DescribeLiveForRestore" in path
    assert {c["name"]: c["passed"] for c in result["report"]["checks"]}["shadow_traffic"] is True
    live = result["live"]["research-dev"]
    assert live["status"] == "InService" and live["config"] == live["original_config"]
