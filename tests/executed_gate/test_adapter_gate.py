"""The gate of a team that serves LoRA adapters through inference components (the example `support`), executed in
moto's Step Functions with the emulated SageMaker: twin and candidate endpoints without a model, a base component and
every adapter's component on each, the benchmark, the evaluation and the cleanup of every component on every path."""

from __future__ import annotations

import pytest

from optigate.rehearse.scenario import Outcome
from tests.fixtures.once import once

#: support's adapters (config/teams/support.yaml), in component order after the base.
ADAPTERS = ("triage", "summarise", "reply")


@pytest.fixture(scope="module")
def support(example_config):
    from optigate.rehearse.rehearsal import synthesize_team

    return synthesize_team("support", "dev", example_config)


def _created_components(result) -> dict[str, list[str]]:
    """The components each benchmarked endpoint served when the benchmark reached it, by side."""
    out: dict[str, list[str]] = {}
    for run in result["benchmarked"]:
        side = "twin" if run["baseline"] else "cand"
        out.setdefault(side, run.get("components", []))
    return out


def _nothing_left_and_live_untouched(result) -> None:
    assert {kind: names for kind, names in result["left"].items() if names} == {}
    assert result["owned_missing"] == []
    assert result["live_components"] == result["live_components_before"]
    assert len(result["live_components"]) == 1 + len(ADAPTERS)
    assert [(e["status"], e["config"] == e["original_config"]) for e in result["live"].values()] == [
        ("InService", True)
    ]


def test_the_plan_stages_every_adapter_on_both_sides(support):
    _, deployment = support
    plan = deployment.gate
    assert plan is not None and plan.components is not None
    assert plan.components.labels == ("base", *ADAPTERS)
    # Weights from gate.benchmark.adapter_mix {base: 1, triage: 4, summarise: 2, reply: 3}, normalised.
    assert dict(plan.components.mix or ()) == pytest.approx(
        {"base": 0.1, "triage": 0.4, "summarise": 0.2, "reply": 0.3}
    )
    assert [a.artifact_uri == a.candidate_artifact_uri for a in plan.components.adapters] == [True] * 3
    assert plan.components.compute.accelerators == 1


@pytest.fixture(scope="module")
def summarise_degraded(request, tmp_path_factory):
    """One run shared by the tests that read different things of it (once a run, tests.fixtures.once): a faster
    candidate whose summarise adapter loses quality (rejected on that adapter's check), with every component staged,
    benchmarked and removed."""
    from optigate.rehearse.rehearsal import rehearse

    def run():
        return rehearse(*request.getfixturevalue("support"), "faster", adapter_quality={"summarise": "fail"})

    return once(tmp_path_factory, "adapter_gate-summarise_degraded", run)


@pytest.mark.slow
def test_a_base_candidate_is_staged_beside_a_twin_and_everything_goes_afterwards(summarise_degraded):
    """Both endpoints served the base and all three adapters when benchmarked, the twin on the live model, and every
    component, endpoint and config of the run is gone afterwards."""
    result = summarise_degraded
    assert result["execution"]["status"] == "FAILED"
    path = result["states"]
    assert path.index("CreateTwinBaseComponent") < path.index("CreateTwinAdapter01Component")
    assert path.index("BaseComponentsInService?") < path.index("CreateTwinAdapter01Component")
    assert path.index("ComponentsInService?") < path.index("BenchmarkLevels")
    assert path.index("DeleteTwinAdapter01Component") < path.index("DeleteTwinBaseComponent")
    assert path.index("RunComponentsLeft?") < path.index("DeleteEndpoint")
    created = _created_components(result)
    assert sorted(created) == ["cand", "twin"]
    for side, letters in (("twin", "twc"), ("cand", "cac")):
        assert [name.split("-")[-2] for name in created[side]] == [f"{letters}{i:02d}" for i in range(4)]
    twin = next(run for run in result["benchmarked"] if run["baseline"])
    assert len(set(twin["models"])) == 1 and set(twin["models"]) <= set(result["live_models"]["support-dev"])
    assert [p["ModelApprovalStatus"] for p in result["packages"]] == ["Rejected"]
    _nothing_left_and_live_untouched(result)


@pytest.mark.slow
def test_an_adapter_component_that_fails_to_start_fails_the_gate_with_its_name_and_cleans_up(support):
    from optigate.rehearse.rehearsal import rehearse

    def outcome(request):
        base = request.get("Specification", {}).get("BaseInferenceComponentName")
        failing = (
            base is not None
            and "-cac" in request["InferenceComponentName"]
            and request["InferenceComponentName"].split("-")[-2] == "cac03"
        )
        return (
            Outcome("Failed", after=1, failure_reason="adapter weights do not match the base")
            if failing
            else Outcome("InService", after=0)
        )

    result = rehearse(*support, "faster", scenario_overrides={"inference_component": outcome})
    assert result["execution"]["status"] == "FAILED"
    assert result["execution"]["error"] == "GateFailed"
    assert "ComponentsFailed" in result["execution"]["cause"] and "cac03" in result["execution"]["cause"]
    assert "BenchmarkLevels" not in result["states"]
    assert result["packages"] == []
    _nothing_left_and_live_untouched(result)


@pytest.mark.slow
def test_one_adapter_that_loses_quality_rejects_a_faster_candidate_and_the_report_names_it(summarise_degraded):
    result = summarise_degraded
    assert result["execution"]["status"] == "FAILED"
    report = result["report"]
    assert report["outcome"] == "REJECTED", report["summary"]
    # One quality check per component (the base and each adapter), each on its own records: summarise's fails.
    quality = {c["adapter"]: c["outcome"] for c in report["checks"] if c["name"] == "quality"}
    assert quality == {"base": "pass", "triage": "pass", "summarise": "fail", "reply": "pass"}
    assert "quality[summarise]" in report["summary"]
    assert [p["ModelApprovalStatus"] for p in result["packages"]] == ["Rejected"]
    _nothing_left_and_live_untouched(result)


# --------------------------------------------------------------------------- the mix CloudWatch recorded


def _support_without_mix(example_config, tmp_path):
    import shutil

    import yaml

    from optigate.rehearse.rehearsal import synthesize_team

    config = tmp_path / "config"
    shutil.copytree(example_config, config)
    path = config / "teams" / "support.yaml"
    team = yaml.safe_load(path.read_text())
    del team["gate"]["benchmark"]["adapter_mix"]
    path.write_text(yaml.safe_dump(team, sort_keys=False))
    return synthesize_team("support", "dev", config)


@pytest.mark.slow
def test_without_a_mix_the_gate_spreads_the_benchmark_as_the_live_components_were_invoked(example_config, tmp_path):
    from optigate.rehearse.rehearsal import rehearse

    support = _support_without_mix(example_config, tmp_path)
    assert support[1].gate.components.mix is None
    # A week on the live endpoint: summarise nine times as often as the base, triage and reply not at all.
    traffic = {"support-dev-base": {"Invocations": 100}, "support-dev-summarise": {"Invocations": 900}}
    # The candidate's speed is beside the point here: the faster one (its blocks take a third of the slower's).
    result = rehearse(*support, "faster", scenario_overrides={"component_traffic": traffic})
    states = result["states"]
    assert states.index("ReadAdapterMix") < states.index("CreateOptimizationJob")
    requests = {
        name: sides["candidate"]["requests"]
        for level in result["report"]["levels"]
        for name, sides in (level.get("adapters") or {}).items()
    }
    assert set(requests) == {"base", "summarise"}, requests
    assert requests["summarise"] > 5 * requests["base"]
    _nothing_left_and_live_untouched(result)


@pytest.mark.slow
def test_without_a_mix_or_any_history_the_gate_refuses_before_anything_is_created(example_config, tmp_path):
    from optigate.rehearse.rehearsal import rehearse

    result = rehearse(
        *_support_without_mix(example_config, tmp_path), "faster", scenario_overrides={"component_traffic": {}}
    )
    assert result["execution"]["status"] == "FAILED"
    assert "NoInvocationHistory" in result["execution"]["cause"]
    assert not {"CreateOptimizationJob", "CreateCandidateModel", "CreateTwinConfig"} & set(result["states"])
    assert result["packages"] == []
    _nothing_left_and_live_untouched(result)


@pytest.mark.slow
def test_an_adapter_the_evaluation_cannot_judge_leaves_the_verdict_to_a_person(support):
    """reply's records cannot resolve its quality: the gate is INCONCLUSIVE, the package waits for a person, and
    nothing is promoted (an inconclusive verdict never passes)."""
    from optigate.rehearse.rehearsal import rehearse

    result = rehearse(*support, "faster", adapter_quality={"reply": "unresolved"})
    assert result["execution"]["status"] == "FAILED" and result["execution"]["error"] == "Inconclusive"
    assert result["report"]["outcome"] == "INCONCLUSIVE", result["report"]["summary"]
    quality = {c["adapter"]: c["outcome"] for c in result["report"]["checks"] if c["name"] == "quality"}
    assert quality == {"base": "pass", "triage": "pass", "summarise": "pass", "reply": "inconclusive"}
    assert [p["ModelApprovalStatus"] for p in result["packages"]] == ["PendingManualApproval"]
    _nothing_left_and_live_untouched(result)
