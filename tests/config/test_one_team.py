"""One team's config read alone (issue 28): another team's broken file does not stop it, and a team is found
by its file's name or, failing that, by the one file declaring it."""

from __future__ import annotations

import shutil

import pytest

from optigate.config.loader import ConfigError, team_file
from optigate.deployment import load_resolved_project
from tests.conftest import CONFIG


@pytest.fixture()
def broken_research(tmp_path):
    config = tmp_path / "config"
    shutil.copytree(CONFIG, config, ignore=shutil.ignore_patterns("locks"))
    (config / "teams" / "research.yaml").write_text("team: research\nmodel: [unclosed\n")
    return config


def test_another_teams_broken_file_fails_the_whole_project_but_not_one_team(broken_research):
    with pytest.raises(ConfigError) as whole:
        load_resolved_project(broken_research)
    assert any("research.yaml" in issue.file for issue in whole.value.issues)

    chat = load_resolved_project(broken_research, teams=["chat"])
    assert list(chat.teams) == ["chat"]
    assert {d.team.team for d in chat.deployments()} == {"chat"}


def test_the_broken_team_itself_is_refused_at_its_line(broken_research):
    with pytest.raises(ConfigError) as error:
        load_resolved_project(broken_research, teams=["research"])
    assert [issue.file for issue in error.value.issues] and all(
        issue.file.endswith("research.yaml") and issue.line for issue in error.value.issues
    )


def test_a_team_is_found_by_its_declaration_when_the_file_is_named_otherwise(broken_research):
    (broken_research / "teams" / "chat.yaml").rename(broken_research / "teams" / "assistant.yaml")
    assert team_file(broken_research, "chat").name == "assistant.yaml"
    assert list(load_resolved_project(broken_research, teams=["chat"]).teams) == ["chat"]


def test_an_unknown_team_says_which_are_known_with_a_did_you_mean(broken_research):
    with pytest.raises(ConfigError) as error:
        load_resolved_project(broken_research, teams=["chatt"])
    message = str(error.value)
    assert "did you mean 'chat'?" in message and "known: chat, research, support" in message


def test_two_files_declaring_one_team_are_named(broken_research):
    shutil.copyfile(broken_research / "teams" / "support.yaml", broken_research / "teams" / "help.yaml")
    (broken_research / "teams" / "support.yaml").rename(broken_research / "teams" / "helpdesk.yaml")
    with pytest.raises(ConfigError, match="defined by 2 files"):
        team_file(broken_research, "support")


@pytest.mark.slow  # two team stacks synthesized: 3 to 5 s of CPU
def test_a_teams_rehearsal_is_not_stopped_by_another_teams_broken_file(broken_research):
    from optigate.rehearse.rehearsal import synthesize_team

    template, deployment = synthesize_team("chat", "dev", broken_research)
    assert deployment.team.team == "chat" and template["Resources"]
    with pytest.raises(ConfigError, match=r"research\.yaml"):
        synthesize_team("research", "dev", broken_research)


def test_a_copied_file_not_renamed_inside_is_nobodys_but_its_declared_teams(broken_research):
    """search.yaml copied from support.yaml still says `team: support`: `-c team=search` must not build support's
    stacks from it, and validating the file alone must not pass while the folder fails."""
    teams = broken_research / "teams"
    (teams / "search.yaml").write_text((teams / "support.yaml").read_text())
    with pytest.raises(ConfigError, match=r"search\.yaml declares team 'support', not 'search'"):
        load_resolved_project(broken_research, teams=["search"])
    with pytest.raises(ConfigError) as error:
        load_resolved_project(broken_research, files=[teams / "search.yaml"])
    assert any("also declared by" in issue.message and "support.yaml" in issue.message for issue in error.value.issues)
    # A file named otherwise than its team, alone in declaring it, is read by name or by file.
    (teams / "search.yaml").unlink()
    (teams / "support.yaml").rename(teams / "helpdesk.yaml")
    assert list(load_resolved_project(broken_research, files=[teams / "helpdesk.yaml"]).teams) == ["support"]
    assert list(load_resolved_project(broken_research, teams=["support"]).teams) == ["support"]
