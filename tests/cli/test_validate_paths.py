"""`optigate validate` gives one verdict whatever path names a team (issue 28): the config folder, the folder of team
files, or the team's file; a team file is checked with the environments of the project it lives in, and a file
outside a project is checked alone with one line saying so."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from optigate.cli import main
from tests.conftest import CONFIG

EXAMPLE_TEAMS = sorted(path.stem for path in (CONFIG / "teams").glob("*.yaml"))

# (name, edit of a team's file text); each breaks the team it is applied to.
BREAKAGES = {
    "unknown key": lambda text: text.replace("serving:", "servin:\n  typo: 1\nserving:", 1),
    "not YAML": lambda text: text + "\nmodel: [unclosed\n",
    "renamed: no environment captures for it": lambda text: text.replace("team: ", "team: x", 1),
}


def _project(tmp_path: Path) -> Path:
    config = tmp_path / "config"
    shutil.copytree(CONFIG, config, ignore=shutil.ignore_patterns("locks", "schema"))
    return config


def _verdicts(config: Path, team: str, capsys, *paths: str) -> dict[str, tuple[int, set[str]]]:
    """Exit code and the problem lines of validating each of `paths` (under the project's folder)."""
    results = {}
    for name in paths:
        path = config / name.format(team=team)
        code = main(["validate", str(path)])
        problems = {line for line in capsys.readouterr().err.splitlines() if line.startswith("✗")}
        results[name] = (code, problems)
    return results


@pytest.mark.parametrize("team", EXAMPLE_TEAMS)
def test_an_example_team_passes_by_every_path(team, tmp_path, capsys):
    verdicts = _verdicts(_project(tmp_path), team, capsys, ".", "teams", "teams/{team}.yaml")
    assert {name: code for name, (code, _) in verdicts.items()} == dict.fromkeys(verdicts, 0)


@pytest.mark.parametrize("breakage", sorted(BREAKAGES))
@pytest.mark.parametrize("team", EXAMPLE_TEAMS)
def test_a_broken_team_fails_by_every_path_with_the_same_problems(team, breakage, tmp_path, capsys):
    config = _project(tmp_path)
    file = config / "teams" / f"{team}.yaml"
    file.write_text(BREAKAGES[breakage](file.read_text()))
    verdicts = _verdicts(config, team, capsys, ".", "teams/{team}.yaml")
    codes = {name: code for name, (code, _) in verdicts.items()}
    problems = {name: lines for name, (_, lines) in verdicts.items()}
    if breakage.startswith("renamed") and team != "chat":
        # Only chat's gate reads the environments' capture; renamed, another team is still valid (the environments
        # name a team with no file only when every file parsed, and their lists do not name the others).
        assert codes == dict.fromkeys(verdicts, codes["."])
        return
    assert codes == dict.fromkeys(verdicts, 1), problems
    assert problems["teams/{team}.yaml"] and problems["teams/{team}.yaml"] <= problems["."], problems


def test_a_team_file_that_passes_alone_fails_with_its_environments(tmp_path, capsys):
    """The new user's report: a copy of chat as `search` passed `validate teams/search.yaml` and failed `validate`,
    because only environments.yaml says prod captures nothing chat's EAGLE head could be trained from."""
    config = _project(tmp_path)
    search = config / "teams" / "search.yaml"
    search.write_text((config / "teams" / "chat.yaml").read_text().replace("team: chat", "team: search", 1))
    assert main(["validate", str(search)]) == 1
    error = capsys.readouterr().err
    assert "team 'search' trains its EAGLE head from data capture" in error and "environments.yaml" in error

    assert main(["validate", str(config / "teams")]) == 1, "the folder of team files: the project's verdict"
    folder = capsys.readouterr().err
    assert {line for line in error.splitlines() if line.startswith("✗")} <= set(folder.splitlines())

    loose = tmp_path / "search.yaml"  # the same file outside any project: checked alone, and said so
    shutil.copyfile(search, loose)
    assert main(["validate", str(loose)]) == 0
    notes = [line for line in capsys.readouterr().out.splitlines() if "checked alone" in line]
    assert len(notes) == 1 and "no environments.yaml found" in notes[0]


def test_a_folder_without_team_files_is_a_usage_error(tmp_path, capsys):
    assert main(["validate", str(tmp_path)]) == 2
    assert "no environments.yaml and no team files" in capsys.readouterr().err
