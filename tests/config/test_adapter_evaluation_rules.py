"""OG440 and OG441 on their own (rules=False, so no other rule hides them): every adapter of a gate with a candidate is
judged on a dataset, its own or the gate's."""

from __future__ import annotations

from typing import Any

import yaml

from optigate.config.loader import load_team
from optigate.config.rules.adapter_evaluation_rules import adapter_evaluation_problems
from tests.conftest import CONFIG

ADAPTER = {"name": "triage", "s3_uri": "s3://acme-models/adapters/triage.tar.gz"}

OWN = {"evaluation": {"dataset_s3_uri": "s3://acme-eval/triage/"}}
CANDIDATE = {"candidate": {"max_batch_size": 16}}


def _team_file(tmp_path, gate: dict[str, Any], adapters: list[dict[str, Any]]):
    """The example support team with this gate and these adapters."""
    team = yaml.safe_load((CONFIG / "teams" / "support.yaml").read_text())
    team.update(gate=gate, adapters=adapters)
    path = tmp_path / "team.yaml"
    path.write_text(yaml.safe_dump(team, sort_keys=False))
    return path


def _problems(tmp_path, gate: dict[str, Any], adapters: list[dict[str, Any]]) -> list[tuple[str, tuple, str]]:
    team = load_team(_team_file(tmp_path, gate, adapters), rules=False)
    return [(p.rule_id, p.path, p.message) for p in adapter_evaluation_problems(team)]


def test_an_adapter_without_a_dataset_of_its_own_or_the_gates_is_refused_by_name(tmp_path):
    reply = {**ADAPTER, "name": "reply"}
    ((rule_id, path, message),) = _problems(tmp_path, CANDIDATE, [{**ADAPTER, **OWN}, reply])
    assert (rule_id, path) == ("OG440", ("adapters", 1))
    assert message.startswith("adapter reply has no evaluation dataset: the gate judges each adapter's quality")
    assert "adapters[1].evaluation.dataset_s3_uri or gate.evaluation.dataset_s3_uri" in message


def test_the_gates_dataset_or_the_adapters_own_is_enough(tmp_path):
    assert _problems(tmp_path, CANDIDATE, [{**ADAPTER, **OWN}]) == []
    gate_dataset = {**CANDIDATE, "evaluation": {"dataset_s3_uri": "s3://acme-eval/support/"}}
    assert _problems(tmp_path, gate_dataset, [ADAPTER, {**ADAPTER, "name": "reply"}]) == []


def test_an_adapters_dataset_without_a_gate_candidate_says_why(tmp_path):
    ((rule_id, path, message),) = _problems(tmp_path, {}, [{**ADAPTER, **OWN}])
    assert (rule_id, path) == ("OG441", ("adapters", 0, "evaluation"))
    assert "read only by the gate, and this team's gate has no candidate" in message
