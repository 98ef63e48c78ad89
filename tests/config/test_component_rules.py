"""Adapter components need an endpoint with one instance type (OG530): instance pools are refused in the live
serving block (tests/config/test_rule_cases.py) and in a gate candidate of a team serving adapters, whose twin
stages the same adapter components."""

from __future__ import annotations

import pytest
import yaml

from optigate.config.loader import ConfigError, load_team
from tests.conftest import CONFIG

SUPPORT = CONFIG / "teams" / "support.yaml"
POOLS = [{"instance_type": "ml.g6e.12xlarge", "priority": 1}, {"instance_type": "ml.g6e.2xlarge", "priority": 2}]


def test_a_candidate_with_pools_is_refused_for_a_team_serving_adapters(tmp_path):
    team = yaml.safe_load(SUPPORT.read_text())
    team["gate"]["candidate"] = {"instance_pools": POOLS}
    path = tmp_path / "support.yaml"
    path.write_text(yaml.safe_dump(team, sort_keys=False))
    with pytest.raises(ConfigError) as raised:
        load_team(path)
    (issue,) = [i for i in raised.value.issues if i.rule == "OG530"]
    assert "gate.candidate.instance_pools" in str(issue) and "single instance type" in issue.message
