"""A team is named the same way on every command that reads one (issue 28): `plan`, `advise` and `rehearse` take
its name or its file, as TEAM or `--team`; an instance type is written `ml.…` on the command line as in the config."""

from __future__ import annotations

import json
import shutil

import pytest

from optigate.cli import build_parser, main
from optigate.cli.errors import UsageError
from optigate.cli.team_argument import chosen_team
from optigate.config.instance_names import instance_type_problem
from tests.conftest import CONFIG

CHAT_FILE = str(CONFIG / "teams" / "chat.yaml")
FORMS = {
    "TEAM name": ["chat", "--config", str(CONFIG)],
    "--team name": ["--team", "chat", "--config", str(CONFIG)],
    "TEAM file": [CHAT_FILE],
    "--team file": ["--team", CHAT_FILE],
}


def _json_of(capsys, argv: list[str]) -> dict:
    code = main(argv)
    out, err = capsys.readouterr()
    assert code in (0, 1), err
    return json.loads(out)


@pytest.mark.parametrize("command", ["plan", "advise"])
def test_a_name_and_a_file_as_team_or_option_give_one_answer(command, capsys):
    answers = {form: _json_of(capsys, [command, *argv, "--json"]) for form, argv in FORMS.items()}
    first = next(iter(answers.values()))
    assert first and all(answer == first for answer in answers.values()), list(answers)


@pytest.mark.parametrize("form", sorted(FORMS))
def test_rehearse_reads_every_form_as_the_same_team(form):
    args = build_parser().parse_args(["rehearse", *FORMS[form]])
    chosen = chosen_team(args, "rehearse", needs_project=True)
    assert chosen is not None and (chosen.name, chosen.file.resolve(), chosen.config.resolve()) == (
        "chat",
        (CONFIG / "teams" / "chat.yaml").resolve(),
        CONFIG.resolve(),
    )


@pytest.mark.parametrize("command", ["plan", "advise", "rehearse"])
def test_an_unknown_team_is_one_line_with_a_did_you_mean(command, capsys):
    assert main([command, "--team", "chatt", "--config", str(CONFIG)]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert "--team chatt: no file in" in line and "did you mean 'chat'?" in line


def test_two_different_teams_at_once_are_refused(capsys):
    assert main(["plan", "chat", "--team", "support", "--config", str(CONFIG)]) == 2
    assert "TEAM chat and --team support name two teams; give one of them" in capsys.readouterr().err


@pytest.mark.parametrize("command", ["advise", "rehearse"])
def test_a_file_outside_a_config_folder_is_refused_where_the_environments_are_needed(command, tmp_path, capsys):
    loose = tmp_path / "chat.yaml"
    shutil.copyfile(CHAT_FILE, loose)
    assert main([command, str(loose)]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert "needs the team's environments" in line and "--team NAME --config FOLDER" in line


def test_another_teams_broken_file_does_not_stop_advise(tmp_path, capsys):
    config = tmp_path / "config"
    shutil.copytree(CONFIG, config, ignore=shutil.ignore_patterns("locks"))
    (config / "teams" / "research.yaml").write_text("team: research\nmodel: [unclosed\n")
    assert _json_of(capsys, ["advise", "chat", "--config", str(config), "--json"])["team"] == "chat"


@pytest.mark.parametrize(
    "argv",
    [
        ["plan", "--model", "llama-3.1-8b", "--instance", "g5.2xlarge"],
        ["plan", "--model", "llama-3.1-8b", "--compare", "--instance", "ml.g6.2xlarge,g5.2xlarge"],
        ["bench", "--find-capacity", "--instance-type", "g5.2xlarge", "--endpoint", "any"],
    ],
)
def test_an_instance_type_without_ml_is_refused_on_the_command_line_as_in_the_config(argv, capsys):
    assert main(argv) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert instance_type_problem("g5.2xlarge") in line  # the config's words (tests/config/test_messages.py)
    assert "did you mean 'ml.g5.2xlarge'?" in line


def test_the_ml_form_is_accepted(capsys):
    assert main(["plan", "--model", "llama-3.1-8b", "--instance", "ml.g6.2xlarge", "--json"]) in (0, 1)
    assert json.loads(capsys.readouterr().out)["instance_type"] == "ml.g6.2xlarge"


def test_chosen_team_is_none_without_a_team_and_plan_says_what_to_give(capsys):
    args = build_parser().parse_args(["plan"])
    assert chosen_team(args, "plan", needs_project=False) is None
    assert main(["plan"]) == 2
    assert "give a team (its name or file" in capsys.readouterr().err
    with pytest.raises(UsageError):
        chosen_team(build_parser().parse_args(["advise", "no/such/file.yaml"]), "advise", needs_project=True)


def test_plan_refuses_a_team_file_as_validate_does(tmp_path, capsys):
    """A copy of chat as `search`: its environments capture nothing its EAGLE head could be trained from, so validate
    refuses it, and plan does too; outside a config folder both check the file alone."""
    config = tmp_path / "config"
    shutil.copytree(CONFIG, config, ignore=shutil.ignore_patterns("locks"))
    search = config / "teams" / "search.yaml"
    search.write_text((config / "teams" / "chat.yaml").read_text().replace("team: chat", "team: search", 1))
    verdicts = {}
    for command in ("validate", "plan"):
        verdicts[command] = main([command, str(search)])
        assert "team 'search' trains its EAGLE head from data capture" in capsys.readouterr().err
    assert verdicts == {"validate": 1, "plan": 2}  # validate's verdict "invalid"; plan refuses its input
    loose = tmp_path / "search.yaml"
    shutil.copyfile(search, loose)
    assert main(["validate", str(loose)]) == 0 and main(["plan", str(loose), "--json"]) == 0
