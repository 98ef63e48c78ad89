"""The base inference component's caching and placement, decided from the team file (optigate.deployment.
component_settings): caching on when copies are added by scaling, unless the team says otherwise; placement only
when named."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from optigate.config.loader import load_team
from optigate.deployment.component_settings import BaseComponentSettings, ComponentPlacement, base_component_settings
from tests.conftest import CONFIG

SUPPORT = CONFIG / "teams" / "support.yaml"
ZONES = {"enforcement_mode": "PERMISSIVE", "max_imbalance": 2}


def _settings(tmp_path: Path, **changes: Any) -> BaseComponentSettings:
    """support.yaml with its inference_components and serving.autoscaling replaced by `changes` (None removes)."""
    team = yaml.safe_load(SUPPORT.read_text())
    for key, value in changes.items():
        block = team["serving"] if key == "autoscaling" else team
        if value is None:
            block.pop(key, None)
        else:
            block[key] = value
    path = tmp_path / "support.yaml"
    path.write_text(yaml.safe_dump(team, sort_keys=False))
    return base_component_settings(load_team(path))


def test_the_example_caches_and_spreads_over_zones(tmp_path):
    assert _settings(tmp_path) == BaseComponentSettings(True, ComponentPlacement("SPREAD", "PERMISSIVE", 1))


@pytest.mark.parametrize(
    ("autoscaling", "cached"),
    [
        ({"min_capacity": 0, "max_capacity": 4, "scale_to_zero": True}, True),  # scale from zero
        ({"min_capacity": 1, "max_capacity": 3}, True),  # scale-out adds copies
        ({"min_capacity": 2, "max_capacity": 2}, None),  # a fixed copy count: SageMaker's default
        (None, None),  # no autoscaling at all
    ],
    ids=["scale-to-zero", "scale-out", "fixed", "none"],
)
def test_unset_caching_follows_whether_copies_are_added(tmp_path, autoscaling, cached):
    settings = _settings(tmp_path, inference_components=None, autoscaling=autoscaling)
    assert settings == BaseComponentSettings(enable_caching=cached, placement=None)


def test_the_teams_own_choice_wins(tmp_path):
    chosen = {"data_cache_config": {"enable_caching": False}}
    assert _settings(tmp_path, inference_components=chosen).enable_caching is False


def test_binpack_with_the_zone_balance_is_passed_on(tmp_path):
    chosen = {"scheduling_config": {"placement_strategy": "BINPACK", "availability_zone_balance": ZONES}}
    assert _settings(tmp_path, inference_components=chosen).placement == ComponentPlacement("BINPACK", "PERMISSIVE", 2)
