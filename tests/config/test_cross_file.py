"""Rules across files: environments.yaml's overrides against the teams they apply to, and regions against
botocore's endpoint tables (each file alone is valid in every case below)."""

from __future__ import annotations

from pathlib import Path

import pytest

from optigate.cli import main
from optigate.config.loader import ConfigError, load_environments, load_project
from tests.conftest import edited_config


def _messages(config: Path) -> list[str]:
    with pytest.raises(ConfigError) as error:
        load_project(config)
    return [str(issue) for issue in error.value.issues]


def test_an_environment_cap_below_a_teams_minimum_is_refused_where_it_is_set(tmp_path):
    """dev caps autoscaling at 1; a team's minimum of 2 would synthesize MinCapacity 2, MaxCapacity 1."""
    config = edited_config(tmp_path, "teams/chat.yaml", "    min_capacity: 1\n", "    min_capacity: 2\n")
    (message,) = _messages(config)
    assert "environments.yaml:8 environments[0].overrides.autoscaling_max_capacity: " in message
    assert "1 is below team 'chat's serving.autoscaling.min_capacity (2) in dev" in message


def test_a_team_override_is_reported_at_the_teams_own_entry(tmp_path):
    config = edited_config(tmp_path, "environments.yaml", "        instance_count: 2\n", "        instance_count: 9\n")
    (message,) = _messages(config)
    assert "environments[2].teams.chat.instance_count: 9 instances exceed team 'chat's autoscaling maximum (4)" in (
        message
    )


def test_an_override_for_a_team_without_autoscaling_has_no_effect_and_says_so(tmp_path):
    config = edited_config(
        tmp_path,
        "environments.yaml",
        "        instance_count: 2\n",
        "        instance_count: 2\n      research:\n        autoscaling_max_capacity: 3\n",
    )
    (message,) = _messages(config)
    assert "environments[2].teams.research.autoscaling_max_capacity: has no effect" in message


def test_a_region_typo_is_refused_by_validate_not_at_synth(tmp_path, capsys):
    config = edited_config(tmp_path, "environments.yaml", "region: us-east-1\n", "region: us-esat-1\n")
    with pytest.raises(ConfigError, match=r"environments\.yaml:6 environments\[0\]\.region: SageMaker has no "):
        load_environments(config / "environments.yaml")
    assert main(["validate", str(config)]) == 1  # validate's verdict: the config is not valid
    err = capsys.readouterr().err
    assert "did you mean 'us-east-1'?" in err and "Traceback" not in err


def test_the_cross_file_rules_run_beside_a_broken_team_file(tmp_path):
    """All problems at once: a broken file does not hide the others' cross-file problems."""
    config = edited_config(tmp_path, "teams/chat.yaml", "    min_capacity: 1\n", "    min_capacity: 2\n")
    support = config / "teams" / "support.yaml"
    support.write_text(support.read_text().replace("triage-v3.tar.gz", "triage-v3.zip"))
    messages = _messages(config)
    assert any("support.yaml" in m and "adapters[0].s3_uri" in m for m in messages)
    assert any("min_capacity (2) in dev" in m for m in messages)


#: support's base component bakes each rolling batch an hour: its own 4 copies take 4 batches (4 h, within the API's
#: 8-hour limit).
HOUR_BAKE = ("teams/support.yaml", "strategy: canary", "strategy: canary\n  canary: {wait_minutes: 60}")


def _hour_bake(tmp_path: Path) -> Path:
    return edited_config(tmp_path, *HOUR_BAKE)


def test_an_environment_maximum_that_adds_rolling_batches_past_the_time_limit_is_refused_where_it_is_set(tmp_path):
    """OG521 passes on the team file's 4 copies; dev's 8 make 8 batches of an hour, which never finish in 28800 s."""
    _hour_bake(tmp_path)
    config = edited_config(tmp_path, "environments.yaml", "autoscaling_max_capacity: 1", "autoscaling_max_capacity: 8")
    with pytest.raises(ConfigError) as error:
        load_project(config)
    (issue,) = error.value.issues
    assert issue.rule == "OG613"
    message = str(issue)
    assert "environments.yaml:8 environments[0].overrides.autoscaling_max_capacity: 8 copies of team 'support's " in (
        message
    )
    assert "8 batches of 10% each baking 60 min (28800 s)" in message and "lower it to at most 7" in message


def test_a_teams_own_maximum_past_the_time_limit_is_reported_at_its_entry_and_seven_copies_fit(tmp_path):
    _hour_bake(tmp_path)
    config = edited_config(
        tmp_path,
        "environments.yaml",
        "        instance_count: 2\n",
        "        instance_count: 2\n      support:\n        autoscaling_max_capacity: 9\n",
    )
    (message,) = _messages(config)
    assert "environments[2].teams.support.autoscaling_max_capacity: 9 copies of team 'support's base component in " in (
        message
    )
    config = edited_config(tmp_path, "environments.yaml", "autoscaling_max_capacity: 9", "autoscaling_max_capacity: 7")
    load_project(config)


def test_an_environment_that_suspends_autoscaling_rolls_one_copy_and_is_not_refused(tmp_path):
    _hour_bake(tmp_path)
    edited_config(tmp_path, "environments.yaml", "autoscaling_max_capacity: 1", "autoscaling_max_capacity: 8")
    config = edited_config(
        tmp_path,
        "environments.yaml",
        "    teams:\n      # chat",
        "    teams:\n      support:\n        suspend_autoscaling: true\n      # chat",
    )
    load_project(config)


def test_a_team_file_past_the_time_limit_is_reported_once_by_its_own_rule(tmp_path):
    """10 copies baking 48 min break OG521 in the team file; dev's larger maximum adds no second finding."""
    config = edited_config(
        tmp_path, "teams/support.yaml", "strategy: canary", "strategy: canary\n  canary: {wait_minutes: 48}"
    )
    config = edited_config(tmp_path, "teams/support.yaml", "    max_capacity: 4\n", "    max_capacity: 10\n")
    config = edited_config(tmp_path, "environments.yaml", "autoscaling_max_capacity: 1", "autoscaling_max_capacity: 12")
    with pytest.raises(ConfigError) as error:
        load_project(config)
    assert [issue.rule for issue in error.value.issues if issue.rule in ("OG521", "OG613")] == ["OG521"]


def test_validate_reports_it_and_summary_says_it_instead_of_failing(tmp_path, capsys):
    """Before OG613 `optigate summary` stopped on an unexpected ValueError from the rollout's resolution."""
    _hour_bake(tmp_path)
    config = edited_config(tmp_path, "environments.yaml", "autoscaling_max_capacity: 1", "autoscaling_max_capacity: 8")
    assert main(["validate", str(config)]) == 1
    err = capsys.readouterr().err
    assert "environments.yaml:8 environments[0].overrides.autoscaling_max_capacity [OG613]: 8 copies" in err
    assert main(["summary", "--config", str(config)]) == 2
    err = capsys.readouterr().err
    assert "environments.yaml:8 environments[0].overrides.autoscaling_max_capacity: 8 copies" in err
    assert "unexpected" not in err and "Traceback" not in err
