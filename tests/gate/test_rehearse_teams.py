"""Rehearsals of particular gates: rejected speculative drafts (chat), and a shadow rollout on the
live endpoint behind an optimization job (research)."""

from __future__ import annotations

from optigate.cli import main
from tests.conftest import CONFIG


def test_speculation_whose_drafts_are_rejected_does_not_pass():
    from optigate.gate.rehearse import FASTER, rehearse, synthesize_team

    template, deployment = synthesize_team("chat", "dev", CONFIG)
    # Faster per token, but one token per chunk: the n-gram drafts are never accepted.
    result = rehearse(template, deployment, "faster", behaviour={**FASTER, "tokens_per_chunk": [1]})
    assert result["execution"]["status"] == "FAILED"
    failed = {c["name"] for c in result["report"]["checks"] if not c["passed"]}
    assert failed == {"tokens_per_chunk_gain"}
    assert "tokens_per_chunk_gain" in result["execution"]["cause"]
    assert [p["ModelApprovalStatus"] for p in result["packages"]] == ["Rejected"]
    assert sum(len(v) for v in result["left"].values()) == 0 and result["messages"]
    assert [(e["status"], e["config"] == e["original_config"]) for e in result["live"].values()] == [("InService", True)]


def test_rehearse_a_shadow_rollout_restores_the_live_endpoint(capsys):
    """research: the candidate goes through an optimization job, then mirrors live traffic as a shadow."""
    code = main(["rehearse", "--team", "research", "--env", "dev", "--config", str(CONFIG), "--candidate", "faster"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "CreateOptimizationJob" in out and "PutShadowOnLiveEndpoint → ResetShadowPolls" in out
    assert "ReadVariantMetrics → ShadowOnLiveEndpoint? → ResetRestorePolls → DescribeLiveForRestore" in out
    assert "pass shadow_traffic" in out and "verdict: APPROVED" in out
    assert "live endpoint research-dev: InService on its original config" in out
