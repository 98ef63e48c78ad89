"""`optigate plan TEAM --calibrate --endpoint NAME`: a live endpoint's KV usage (CloudWatch QueryMetrics over the
container metrics) beside the planner's KV capacity. QueryMetrics is CloudWatch's Prometheus-compatible HTTP API, not
a botocore operation (no Stubber, no moto): the signed transport is replaced by a fake answering PromQL."""

from __future__ import annotations

import json

import pytest

from optigate.bench import server_metrics
from optigate.cli import main
from optigate.cli.plan_live import live_kv_check
from tests.conftest import CONFIG

TEAM = str(CONFIG / "teams" / "chat.yaml")
PLAN = {"max_concurrent_sequences_at_typical_length": 40, "kv_capacity_tokens": 200_000}


def _fake(values: dict[str, float], asked: list[str]):
    def transport(promql: str, at: float):
        asked.append(promql)
        figure, _ = server_metrics.figure_of(promql)
        if figure not in values:
            return {"status": "success", "data": {"resultType": "vector", "result": []}}
        return {"status": "success", "data": {"resultType": "vector", "result": [{"value": [at, str(values[figure])]}]}}

    return transport


def test_a_kv_cache_filling_faster_than_planned_is_said():
    check = live_kv_check(PLAN, {"kv_cache_usage_max": 0.9, "running_max": 20.0})
    assert check["checked"] and check["planned_kv_share_at_that_batch"] == 0.5 and check["ratio"] == 1.8
    assert "faster than planned" in check["verdict"] and check["tokens_per_running_sequence"] == 9000
    assert "agrees" in live_kv_check(PLAN, {"kv_cache_usage_max": 0.55, "running_max": 20.0})["verdict"]


def test_missing_live_figures_cannot_check():
    check = live_kv_check(PLAN, {"kv_cache_usage_max": None, "missing": {"kv_cache_usage_max": "no series"}})
    assert not check["checked"] and "no series" in check["why"]


def test_an_lmi_team_gets_one_line_and_exit_3_without_a_query(monkeypatch, capsys):
    """chat runs LMI, which exports no KV series (djl-serving serves no /metrics): nothing live to read."""
    asked: list[str] = []
    monkeypatch.setattr(server_metrics, "signed_transport", lambda region: _fake({"kv_cache_usage_max": 0.5}, asked))
    assert main(["plan", TEAM, "--calibrate", "--endpoint", "chat-prod", "--region", "us-east-1"]) == 3
    err = capsys.readouterr().err
    assert "chat-prod: lmi 0.36.0 (lmi27) exports no KV-cache series" in err and "--calibrate REPORT" in err
    assert asked == []


@pytest.fixture
def exporting(monkeypatch):
    """The team's container as one that exports vLLM's series (none of optigate's families does: this stands for
    one, SageMaker's vLLM DLC's rows)."""
    from optigate.serving import surfaces

    series = surfaces.server_series(surfaces.Container(surfaces.VLLM_DLC, (0, 11, 0)))
    monkeypatch.setattr(surfaces, "server_series", lambda container: series)


def test_the_cli_reads_the_endpoint_window_and_checks_the_plan(monkeypatch, capsys, exporting):
    asked: list[str] = []
    monkeypatch.setattr(
        server_metrics, "signed_transport", lambda region: _fake({"kv_cache_usage_max": 0.5, "running_max": 4.0}, asked)
    )
    code = main(["plan", TEAM, "--calibrate", "--endpoint", "chat-prod", "--region", "us-east-1", "--json"])
    out = capsys.readouterr().out
    assert code == 0
    check = json.loads(out[out.index("{") :])
    assert check["checked"] and check["live_running_max"] == 4.0
    assert all('"aws.sagemaker.endpoint.name"="chat-prod"' in q and "[3600s]" in q for q in asked)


def test_the_cli_exits_3_when_the_endpoint_publishes_nothing(monkeypatch, capsys, exporting):
    monkeypatch.setattr(server_metrics, "signed_transport", lambda region: _fake({}, []))
    assert main(["plan", TEAM, "--calibrate", "--endpoint", "chat-prod", "--region", "us-east-1"]) == 3
    assert "cannot check the planner" in capsys.readouterr().out


@pytest.mark.parametrize(
    "argv",
    [
        ["--endpoint", "chat-prod"],  # --endpoint without --calibrate
        ["--calibrate"],  # neither reports nor an endpoint
        ["--calibrate", "report.json", "--endpoint", "chat-prod"],  # both
    ],
)
def test_endpoint_and_reports_are_one_or_the_other(argv, capsys):
    assert main(["plan", TEAM, *argv]) == 2
