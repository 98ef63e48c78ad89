"""One cost model (issue 37): `summary`, `plan`, `advise` (and `advise --from-report`) and the gate's report price a
token at one basis, the list price of the accelerators that made it (optigate.plan.cost.CostBasis), on every example
team and on three onboarding-like teams (tests/fixtures/cost_teams: an adapter team on one-GPU instances whose
instances follow its copies, a model-backed team of four replicas per 4-GPU instance, an adapter team of two-GPU
copies scaled to zero).

Before: summary printed no cost per token, and the gate priced an adapter team's one measured one-GPU copy at its
whole 4-GPU instance (support: $4.433 -> $2.831 per million beside the planner's $1.057 -> $0.726)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from optigate.cli import main
from optigate.deployment import deploy, load_resolved_project
from optigate.gate import GateInputs, decide, render_json
from tests.fixtures.synthetic_runs import PASS, THRESHOLDS, bench, synthetic_run

FIXTURE_TEAMS = Path(__file__).parents[1] / "fixtures" / "cost_teams"
ENV = "prod"


@pytest.fixture(scope="module")
def config(tmp_path_factory, example_config) -> Path:
    """The example project with the three onboarding-like teams added (a copy: config/ is not written)."""
    folder = tmp_path_factory.mktemp("cost") / "config"
    shutil.copytree(example_config, folder)
    for path in FIXTURE_TEAMS.glob("*.yaml"):
        shutil.copy(path, folder / "teams" / path.name)
    return folder


TEAMS = ("chat", "research", "support", "legal", "ledger", "atlas")


def _json(capsys, *argv: str) -> dict:
    capsys.readouterr()
    main(list(argv))
    return json.loads(capsys.readouterr().out)


@pytest.fixture(scope="module")
def summary(config) -> dict:
    from optigate.cli.summary_command import summary_json
    from optigate.deployment.inventory import inventory

    project = load_resolved_project(config)
    stacks = [inventory(deployment) for deployment in project.deployments(ENV)]
    return {stack["team"]: stack for stack in summary_json(stacks)["stacks"]}


def _report(config: Path, team: str, folder: Path) -> tuple[Path, dict, int]:
    """The gate's report of synthetic runs, decided on the inputs the team's state machine passes (the plan's price,
    instance count and cost basis), and how many replicas its endpoints measured."""
    project = load_resolved_project(config, teams=[team])
    environment = next(e for e in project.environments if e.name == ENV)
    deployment = deploy(project.teams[team], environment)
    plan = deployment.gate
    assert plan is not None and plan.cost_basis is not None
    runs = bench(synthetic_run(4, seed=3))
    inputs = GateInputs(
        team=team,
        environment=ENV,
        change={},
        thresholds=THRESHOLDS,
        baseline_benchmark=runs,
        candidate_benchmark=bench(synthetic_run(4, seed=4)),
        evaluation=PASS,
        price_per_hour_usd=plan.price_per_hour_usd,
        instance_count=plan.instance_count,
        cost_basis=plan.cost_basis.to_json(),
    )
    path = folder / f"{team}-report.json"
    path.write_text(render_json(decide(inputs)))
    # an adapter team's gate measures one base copy; a model-backed one whole instances of replicas
    replicas = plan.cost_basis.accelerators // deployment.resolved.tensor_parallel_degree
    return path, json.loads(path.read_text()), replicas


@pytest.mark.slow
@pytest.mark.parametrize("team", TEAMS)
def test_summary_plan_advise_and_the_gate_report_price_a_token_alike(team, config, summary, capsys, tmp_path):
    cost = summary[team]["cost"]
    planned = _json(capsys, "plan", team, "--config", str(config), "--json")
    advised = _json(capsys, "advise", team, "--config", str(config), "--env", ENV, "--json")

    # the same basis: one replica's share of its instance, by the hour
    basis = planned["cost_basis"]
    assert cost["replica_hourly_usd"] == pytest.approx(basis["hourly_usd"], rel=1e-12)
    assert cost["priced_per_token_at"] == basis["described"]
    # the same figure: the planner's expected $ per million output tokens, in summary, plan and advise's "before"
    expected = planned["expected_cost_per_million_output_tokens"]
    assert expected is not None and cost["per_million_output_tokens"] == pytest.approx(expected, rel=1e-12)
    befores = [
        figure["before"]
        for finding in advised["findings"]
        for figure in finding["effect"]
        if figure["key"] == "expected_cost_per_million_output_tokens"
    ]
    assert befores and all(before == pytest.approx(expected, rel=1e-12) for before in befores)

    # advise's always-on month is what summary prices at minimum capacity (chat in prod: 1 instance, not its 2 at
    # creation)
    if not summary[team]["scaling"] or not summary[team]["scaling"]["scale_to_zero"]:
        (note,) = [n for f in advised["findings"] if f["step"] == 5 for n in f["notes"] if "always-on endpoint" in n]
        always_on = float(note.split("always-on endpoint costs $")[1].split("/month")[0].replace(",", ""))
        shadow = cost["min_usd"] / cost["min_instances"] if len(summary[team]["variants"]) == 2 else 0.0
        assert always_on == pytest.approx(cost["min_usd"] - shadow, abs=0.5)

    # the gate's report: the tokens its endpoints measured, priced at that basis per replica measured
    path, report, replicas = _report(config, team, tmp_path)
    assert replicas == (1 if summary[team]["inference_components"] else planned["replicas"])
    (level,) = report["cost_per_million_output_tokens"]
    for side in ("baseline", "candidate"):
        per_replica = level[f"{side}_output_tokens_per_s"] / replicas
        assert level[side] == pytest.approx(basis["hourly_usd"] / 3600 / per_replica * 1e6, rel=1e-9)

    # advise --from-report shows the report's figures at the same basis, with nothing to reprice
    reread = _json(capsys, "advise", team, "--config", str(config), "--env", ENV, "--from-report", str(path), "--json")
    (shown,) = reread["report"]["levels"]
    assert shown["cost_per_million_output_tokens"] == pytest.approx([level["baseline"], level["candidate"]])
    assert not [note for note in reread["report"]["notes"] if "$/M priced at" in note]


def test_a_report_that_priced_a_copy_at_its_whole_instance_is_repriced_and_said(config, capsys):
    """support-approved.json was written before reports carried their basis: its one-GPU copy at the whole 4-GPU
    ml.g6e.12xlarge. advise --from-report prices it as the planner does (a quarter), and says what the report had."""
    report = Path(__file__).parents[1] / "fixtures" / "gate_reports" / "support-approved.json"
    written = json.loads(report.read_text())["cost_per_million_output_tokens"][0]
    data = _json(capsys, "advise", "support", "--config", str(config), "--from-report", str(report), "--json")
    (level,) = data["report"]["levels"]
    assert level["report_cost_per_million_output_tokens"] == [written["baseline"], written["candidate"]]
    assert level["cost_per_million_output_tokens"] == pytest.approx([written["baseline"] / 4, written["candidate"] / 4])
    (note,) = [note for note in data["report"]["notes"] if "$/M priced at" in note]
    assert "1 of 4 accelerators of ml.g6e.12xlarge, $3.280/h" in note
    assert "whole instances (a report without cost_basis): c16 $4.433 -> $2.831" in note
    # beside the planner's figure for the same step (FP8): the same order, no longer four times it
    assert data["report"]["cost_basis"]["hourly_usd"] == pytest.approx(13.12 / 4)
