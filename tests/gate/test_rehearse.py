"""`optigate rehearse`: the example team's real gate, offline, for a passing and a failing candidate."""

from __future__ import annotations

from optigate.cli import main
from tests.conftest import CONFIG


def test_rehearse_prints_the_path_and_the_verdict_for_both_candidates(capsys):
    code = main(["rehearse", "--team", "chat", "--env", "dev", "--config", str(CONFIG), "--candidate", "both"])
    out = capsys.readouterr().out
    assert code == 0, out
    faster, slower = out.split("rehearsing optigate-dev-chat: a slower candidate")
    assert "path: Init → FindLastProof → ProvenBefore? → CandidateFromBaseline → CreateCandidateModel" in faster
    assert "BenchmarkBaseline → BenchmarkCandidate → Evaluate → DecideVerdict" in faster
    assert "verdict: APPROVED" in faster and "model package: Approved; SageMaker resources left: 0" in faster
    assert "verdict: CandidateRejected" in slower and "FAIL p99_ttft @c32" in slower
    assert "model package: Rejected; SageMaker resources left: 0; notifications: 1" in slower
    assert faster.count("live endpoint chat-dev: InService on its original config") == 1
    assert slower.count("live endpoint chat-dev: InService on its original config") == 1


def test_rehearse_refuses_a_team_without_a_candidate(capsys):
    assert main(["rehearse", "--team", "support", "--config", str(CONFIG)]) == 2
    assert "no gate.candidate" in capsys.readouterr().err
