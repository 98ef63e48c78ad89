"""A team acknowledges a note by ID with a reason, as cdk-nag's suppressions: the note is no longer printed and
`optigate validate` counts it; acknowledging a refusal, an unknown ID, or without a reason is itself refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from optigate.cli import main
from tests.conftest import edited_config

REASON = "the EAGLE training job pulled its image with the model role in dev on 2026-11-20 (ticket OPS-812)"
NOTE = "[OG424]"


def _acknowledge(tmp_path, monkeypatch, rule_id: str, reason: str):
    entry = f"acknowledge:\n  - id: {rule_id}\n    reason: {reason}\nrollout:\n"
    edited_config(tmp_path, "teams/chat.yaml", "rollout:\n", entry)
    monkeypatch.chdir(tmp_path)


def test_the_example_prints_the_note_with_its_id(example_project, monkeypatch, capsys):
    monkeypatch.chdir(example_project)
    assert main(["validate", "config"]) == 0
    out = capsys.readouterr().out
    line = Path("config/teams/chat.yaml").read_text().splitlines().index("      method: eagle") + 1
    assert f"note config/teams/chat.yaml:{line} gate.candidate.speculative_decoding.method {NOTE}: undocumented:" in out
    assert "acknowledged" not in out


def test_an_acknowledged_note_is_counted_not_printed(tmp_path, monkeypatch, capsys):
    _acknowledge(tmp_path, monkeypatch, "OG424", REASON)
    assert main(["validate", "config"]) == 0
    out = capsys.readouterr().out
    assert NOTE not in out
    assert "config/teams/chat.yaml: 1 note(s) acknowledged\n" in out
    assert "✓ 4 config file(s) valid" in out


@pytest.mark.parametrize(
    ("rule_id", "reason", "where", "expected"),
    [
        ("OG307", REASON, "acknowledge[0].id [OG702]", "OG307 is a refusal (fp8 on a GPU with FP8 tensor cores"),
        ("OG999", REASON, "acknowledge[0].id [OG701]", "no rule has the ID 'OG999'"),
        ("OG424", "tested", "acknowledge[0].reason [OG703]", "say why the team accepts OG424 in at least 40"),
    ],
    ids=["a-refusal", "an-unknown-id", "a-short-reason"],
)
def test_a_wrong_acknowledgement_is_refused_at_its_line(
    tmp_path, monkeypatch, capsys, rule_id, reason, where, expected
):
    _acknowledge(tmp_path, monkeypatch, rule_id, reason)
    line = (tmp_path / "config/teams/chat.yaml").read_text().splitlines().index("acknowledge:") + 2
    line += where.endswith("[OG703]")  # the reason is the entry's second line
    assert main(["validate", "config"]) == 1
    err = capsys.readouterr().err
    assert f"✗ config/teams/chat.yaml:{line} {where}: {expected}" in err


def test_a_note_is_acknowledged_only_in_its_own_team(tmp_path, monkeypatch, capsys):
    """support.yaml acknowledging OG424 does not silence chat.yaml's OG424."""
    edited_config(
        tmp_path, "teams/support.yaml", "rollout:\n", f"acknowledge:\n  - id: OG424\n    reason: {REASON}\nrollout:\n"
    )
    monkeypatch.chdir(tmp_path)
    assert main(["validate", "config"]) == 0
    out = capsys.readouterr().out
    assert NOTE in out and "config/teams/support.yaml: 1 note(s) acknowledged" not in out
