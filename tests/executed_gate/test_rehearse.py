"""`optigate rehearse`: the example team's real gate, offline, for a passing and a failing candidate.

Asserted on `rehearse()`'s result; one check of the CLI's text reuses those results (no third run)."""

from __future__ import annotations

import pytest

from optigate.cli import main
from tests.fixtures.once import once


@pytest.fixture(scope="module")
def chat(example_config):
    from optigate.rehearse.rehearsal import synthesize_team

    return synthesize_team("chat", "dev", example_config)


def _rehearsed(request, tmp_path_factory, scenario: str):
    from optigate.rehearse.rehearsal import rehearse

    return once(
        tmp_path_factory, f"rehearse-chat-{scenario}", lambda: rehearse(*request.getfixturevalue("chat"), scenario)
    )


@pytest.fixture(scope="module")
def faster(request, tmp_path_factory):
    return _rehearsed(request, tmp_path_factory, "faster")


@pytest.fixture(scope="module")
def slower(request, tmp_path_factory):
    return _rehearsed(request, tmp_path_factory, "slower")


def _path(result) -> str:
    return " → ".join(result["states"])


def _live(result) -> dict[str, tuple[str, bool]]:
    """Each live endpoint's status, and whether it is on its original config."""
    return {name: (e["status"], e["config"] == e["original_config"]) for name, e in result["live"].items()}


def _left(result) -> int:
    return sum(len(names) for names in result["left"].values())


@pytest.mark.slow
def test_a_faster_candidate_is_approved_and_recorded(faster):
    assert faster["execution"]["status"] == "SUCCEEDED", faster["report"]
    # chat's candidate is an EAGLE head the optimization job trains: its capture counted, the job, the head staged,
    # then the model.
    assert "Init → FindLastProof → ProvenBefore? → CheckTrainingData → CreateOptimizationJob" in _path(faster)
    assert "DescribeOptimizedModel → StageTrainedHead → CreateCandidateModel" in _path(faster)
    # LMI publishes no server series (optigate.serving.surfaces): nothing is read beside the benchmark.
    assert "BenchmarkCandidate → CountRound → MoreRounds? → RoundsDone → Evaluate → DecideVerdict" in _path(faster)
    assert faster["report"]["server_metrics"] is None


@pytest.mark.slow
def test_the_speculative_candidates_acceptance_is_what_the_client_saw_above_break_even(faster):
    """chat's EAGLE head on LMI 0.36.0: the emulators publish exactly LMI's row (no /metrics), so the gate reads
    acceptance from the stream: 2.5 tokens a step of 3 drafts accepted 70 % each, 51 % of the drafts."""
    (check,) = [c for c in faster["report"]["checks"] if c["name"] == "speculative_acceptance"]
    assert check["outcome"] == "pass" and check["threshold"] == 0.4
    assert 0.4 < check["ci_low"] <= check["measured"] <= check["ci_high"]
    assert check["measured"] == pytest.approx(0.51, abs=0.08)
    assert "the client saw" in check["detail"] and "one engine step" in check["detail"]
    assert [p["ModelApprovalStatus"] for p in faster["packages"]] == ["Approved"]
    assert _left(faster) == 0
    assert _live(faster) == {"chat-dev": ("InService", True)}


@pytest.mark.slow
def test_the_rehearsal_benchmarks_one_level_of_at_most_sixteen_streams(faster):
    """chat's levels are 1, 8 and 32: a rehearsal benchmarks 8, so the host's CPU is not what it measures."""
    from optigate.rehearse.gate_run import rehearsal_level

    assert rehearsal_level([1, 8, 32], 16) == 8 and rehearsal_level([32, 64], 16) == 32
    assert rehearsal_level([1, 16, 64], None) == 64
    levels = {c["concurrency"] for c in faster["report"]["checks"] if c.get("concurrency") is not None}
    assert levels == {8}


@pytest.mark.slow
def test_a_slower_candidate_is_rejected_on_its_p99_ttft(slower):
    assert slower["execution"]["status"] == "FAILED" and slower["execution"]["error"] == "CandidateRejected"
    failed = {(c["name"], c.get("concurrency")) for c in slower["report"]["checks"] if not c["passed"]}
    assert ("p99_ttft", 8) in failed
    assert [p["ModelApprovalStatus"] for p in slower["packages"]] == ["Rejected"]
    assert _left(slower) == 0 and len(slower["messages"]) == 1
    assert _live(slower) == {"chat-dev": ("InService", True)}


@pytest.mark.slow
def test_the_cli_prints_the_path_and_the_verdict_for_both_candidates(
    chat, faster, slower, example_config, monkeypatch, capsys
):
    from optigate.rehearse import rehearsal

    results = {"faster": faster, "slower": slower}
    monkeypatch.setattr(rehearsal, "synthesize_team", lambda team, environment, config: chat)
    monkeypatch.setattr(rehearsal, "rehearsal_kinds", lambda team: ("faster", "slower"))  # not drafts-rejected
    monkeypatch.setattr(rehearsal, "rehearse", lambda template, deployment, candidate, **_: results[candidate])
    argv = ["rehearse", "--team", "chat", "--env", "dev", "--config", str(example_config), "--candidate", "both"]
    code = main([*argv, "-v"])
    out = capsys.readouterr().out
    assert code == 0, out
    faster_out, slower_out = out.split("rehearsing optigate-dev-chat: a slower candidate")
    assert "path: Init → FindLastProof → ProvenBefore? → CheckTrainingData → CreateOptimizationJob" in faster_out
    assert "DescribeOptimizedModel → StageTrainedHead → CreateCandidateModel" in faster_out
    assert "BenchmarkCandidate → CountRound → MoreRounds? → RoundsDone → Evaluate → DecideVerdict" in faster_out
    assert "verdict: APPROVED, as expected" in faster_out and "pass p99_ttft @c8" in faster_out
    assert "model package: Approved; SageMaker resources left: 0" in faster_out
    assert "verdict: REJECTED (CandidateRejected: " in slower_out
    # Each check the slower side failed, as its report has it: which one depends on the host (a busy one raises the
    # TTFT budget by what it added to the twin, and the slower side then fails on its throughput instead).
    checks = slower["report"]["checks"]
    failed = [check for check in checks if (check.get("outcome") or ("pass" if check["passed"] else "fail")) == "fail"]
    assert failed, slower["report"]["checks"]
    for check in failed:
        assert f"FAIL {check['name']} @c{check['concurrency']}" in slower_out or (
            not check.get("concurrency") and f"FAIL {check['name']}:" in slower_out
        ), (check, slower_out)
    assert "model package: Rejected; SageMaker resources left: 0; notifications: 1" in slower_out
    assert faster_out.count("live endpoint chat-dev: InService on its original config") == 1
    assert slower_out.count("live endpoint chat-dev: InService on its original config") == 1
    assert out.splitlines()[-1].startswith("rehearsal passed: faster APPROVED, slower REJECTED, as the gate must")

    # Without -v: one line per state as it is left (loops folded), no path, only the checks that did not pass.
    def replayed(template, deployment, candidate, on_history, **_):
        on_history(results[candidate]["history"], True)
        return results[candidate]

    monkeypatch.setattr(rehearsal, "rehearse", replayed)
    assert main(argv) == 0
    out = capsys.readouterr().out
    faster_out = out.split("rehearsing optigate-dev-chat: a slower candidate")[0]
    progress = [line for line in faster_out.splitlines() if line.startswith("  ") and line.endswith(" s")]
    named = [line.split()[0] for line in progress if not line.startswith("  again:")]
    assert len(named) == len(set(named)) == len(set(faster["states"]))  # each state once
    again = [line for line in progress if line.startswith("  again:")]
    assert any(
        "BenchmarkBaseline ×2, BenchmarkCandidate ×2, BenchmarkEachLevel ×2, CountRound ×2, MoreRounds? ×2" in line
        for line in again
    ), again
    assert len(progress) < len(faster["states"])
    assert "path:" not in out and "pass p99_ttft" not in out and "FAIL p99_ttft @c8" in out
    # The cause in one line without -v: the verdict's summary.
    assert "verdict: REJECTED (CandidateRejected: REJECTED chat/dev" in out and "checks fail (" in out
    assert out.splitlines()[-1].startswith("rehearsal passed: faster APPROVED, slower REJECTED")


@pytest.mark.slow
def test_the_cli_exits_1_for_a_wrong_verdict_and_3_for_an_inconclusive_one(
    chat, faster, slower, example_config, monkeypatch, capsys
):
    """The exit code says whether the rehearsal showed the gate working: 0 as expected, 1 a verdict the
    wrong way round, 3 the gate could not tell (an inconclusive verdict is never a pass)."""
    from optigate.rehearse import rehearsal

    inconclusive = {**faster, "execution": {**faster["execution"], "status": "FAILED", "error": "Inconclusive"}}
    # Rejected, but on quality alone: the right verdict for a reason that is not the rehearsal's.
    quality = [{**c, "passed": c["name"] != "quality", "outcome": "fail" if c["name"] == "quality" else "pass"}
               for c in slower["report"]["checks"]]  # fmt: skip
    on_quality = {**slower, "report": {**slower["report"], "checks": quality}}
    monkeypatch.setattr(rehearsal, "synthesize_team", lambda team, environment, config: chat)
    monkeypatch.setattr(rehearsal, "rehearsal_kinds", lambda team: ("faster", "slower"))
    argv = ["rehearse", "--team", "chat", "--env", "dev", "--config", str(example_config), "--candidate"]
    cases = [({"faster": inconclusive, "slower": slower}, 3), ({"faster": slower, "slower": slower}, 1)]
    cases.append(({"faster": slower, "slower": inconclusive}, 1))  # a wrong verdict outweighs an inconclusive one
    cases.append(({"faster": faster, "slower": on_quality}, 1))
    for results, expected in cases:
        monkeypatch.setattr(rehearsal, "rehearse", lambda template, deployment, candidate, r=results, **_: r[candidate])
        assert main([*argv, "both"]) == expected
    last_lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("rehearsal ")]
    assert last_lines[0].startswith("rehearsal INCONCLUSIVE: the faster candidate INCONCLUSIVE, expected APPROVED")
    assert "(exit 3, after " in last_lines[0]
    assert last_lines[1].startswith("rehearsal FAILED: the faster candidate REJECTED, expected APPROVED (exit 1")
    assert last_lines[2].startswith("rehearsal FAILED: the faster candidate REJECTED, expected APPROVED; ")
    assert "the slower candidate INCONCLUSIVE, expected REJECTED on capacity or goodput or p99_itl" in last_lines[2]
    assert last_lines[3].startswith("rehearsal FAILED: the slower candidate REJECTED for another reason, expected ")


def test_rehearse_refuses_a_team_without_a_candidate(example_config, tmp_path, capsys):
    import shutil

    import yaml

    config = tmp_path / "config"
    shutil.copytree(example_config, config)
    path = config / "teams" / "support.yaml"
    team = yaml.safe_load(path.read_text())
    team["gate"] = {"benchmark": {"concurrency": [1, 16]}}  # no candidate (nor a mix or dataset, which need one)
    path.write_text(yaml.safe_dump(team, sort_keys=False))
    assert main(["rehearse", "--team", "support", "--config", str(config)]) == 2
    assert "no gate.candidate" in capsys.readouterr().err
