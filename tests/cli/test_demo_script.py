"""scripts/demo.sh rehearses the gate of every example team that has one, adapter teams included (issue 26), with
arguments `optigate rehearse` takes (the demo itself takes minutes: it is run by hand, not here).

The demo runs on the repository's config/ (the user's project, which may hold other teams by now); this test reads
the example teams as the suite keeps them (tests/fixtures/project), never config/."""

from __future__ import annotations

import shlex

from optigate.cli import build_parser
from optigate.cli.team_argument import chosen_team
from optigate.config.loader import load_team
from tests.conftest import CONFIG, REPO


def _rehearsals() -> list[list[str]]:
    lines = (REPO / "scripts" / "demo.sh").read_text().splitlines()
    return [shlex.split(line)[1:] for line in lines if line.startswith("optigate rehearse ")]


def test_the_demo_rehearses_every_example_gate_and_an_adapter_teams():
    parser = build_parser()
    rehearsed = set()
    for argv in _rehearsals():
        args = parser.parse_args([*argv, "--config", str(CONFIG)])
        chosen = chosen_team(args, "rehearse", needs_project=True)
        assert chosen is not None, argv
        rehearsed.add(chosen.name)
    teams = [load_team(path) for path in sorted((CONFIG / "teams").glob("*.yaml"))]
    gated = {team.team for team in teams if team.gate.candidate}
    assert rehearsed == gated
    assert any(team.adapters for team in teams if team.team in rehearsed)
