"""`optigate rehearse`: the example team's real gate, offline, for a passing and a failing candidate."""

from __future__ import annotations

from optigate.cli import main
from tests.conftest import CONFIG


def test_rehearse_prints_the_path_and_the_verdict_for_both_candidates(capsys):
    code = main(["rehearse", "--team", "chat", "--env", "dev", "--config", str(CONFIG), "--candidate", "both"])
    out = capsys.readouterr().out
    assert code == 0, out
    faster, slower = out.split("rehearsing optigate-dev-chat: a slower candidate")
    assert "path: Init → CandidateFromBaseline → CreateCandidateModel" in faster
    assert "BenchmarkBaseline → BenchmarkCandidate → Evaluate → DecideVerdict" in faster
    assert "verdict: APPROVED" in faster and "model package: Approved; SageMaker resources left: 0" in faster
    assert "verdict: CandidateRejected" in slower and "FAIL p99_ttft @c32" in slower
    assert "model package: Rejected; SageMaker resources left: 0; notifications: 1" in slower
    assert faster.count("live endpoint chat-dev: InService on its original config") == 1
    assert slower.count("live endpoint chat-dev: InService on its original config") == 1


def test_rehearse_refuses_a_team_without_a_candidate(capsys):
    assert main(["rehearse", "--team", "support", "--config", str(CONFIG)]) == 2
    assert "no gate.candidate" in capsys.readouterr().err


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
