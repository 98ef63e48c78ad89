"""`optigate advise` on the example teams and the three a new user onboarded (issue 28): every step it offers has
a predicted effect its own table shows, still validates once applied to the team file, and is worded at the
precision it prints (no "X instead of X", no break-even at 0 %, no sentence twice, no "of 2x the")."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from rich.console import Console

from optigate.advise import advise
from optigate.advise.findings import RECOMMENDED
from optigate.cli import advise_command, main
from optigate.config.reader import ConfigError
from optigate.deployment import load_resolved_team
from tests.fixtures.onboarding_teams import EXAMPLE_TEAMS, ONBOARDING_TEAMS, onboarding_config

TEAMS = EXAMPLE_TEAMS + ONBOARDING_TEAMS


@pytest.fixture(scope="module")
def config(tmp_path_factory) -> Path:
    return onboarding_config(tmp_path_factory.mktemp("onboarding"))


@pytest.fixture(scope="module")
def printed(config) -> dict[str, str]:
    """Each team's advise as printed at 100 columns."""
    texts = {}
    for team in TEAMS:
        recorded = Console(width=100, record=True, file=open("/dev/null", "w"))  # noqa: SIM115
        advise_command.console = recorded
        try:
            assert main(["advise", "--team", team, "--config", str(config)]) == 0
        finally:
            from optigate.cli.output import console

            advise_command.console = console
        texts[team] = recorded.export_text()
    return texts


def _team_file(config: Path, team: str) -> Path:
    return config / "teams" / f"{team}.yaml"


def _loaded(config: Path, team: str, data: dict[str, Any]) -> None:
    """`data` written as the team's file in a copy of the config folder, then read the way every command does."""
    path = _team_file(config, team)
    original = path.read_text()
    try:
        path.write_text(yaml.safe_dump(data, sort_keys=False))
        load_resolved_team(path)
    finally:
        path.write_text(original)


def _merged(serving: dict[str, Any], block: dict[str, Any]) -> dict[str, Any]:
    """The serving block with `block` promoted into it (None removes a key, a container merges)."""
    merged = dict(serving)
    for key, value in block.items():
        if value is None:
            merged.pop(key, None)
        elif key == "container" and isinstance(merged.get(key), dict):
            merged[key] = {**merged[key], **value}
        else:
            merged[key] = value
    return merged


@pytest.mark.parametrize("team", TEAMS)
def test_every_step_offered_has_a_real_effect_and_still_validates_once_applied(config, team):
    path = _team_file(config, team)
    advice = advise(load_resolved_team(path))
    data = yaml.safe_load(path.read_text())
    for found in advice.recommendations:
        shown = [figure for figure in found.effect if figure.improves]
        assert shown, f"{team} step {found.step}: no figure of its table changes as printed"
        if found.status != RECOMMENDED:
            continue  # the team's own gate.candidate, which loads with the team
        pasted = {**data, "gate": {**data["gate"], "candidate": found.candidate}}
        if found.prerequisites:  # said once above the steps: what the gate needs before any candidate
            with pytest.raises(ConfigError, match="needs an evaluation dataset"):
                _loaded(config, team, pasted)
            pasted["gate"]["evaluation"] = {"dataset_s3_uri": "s3://acme-eval/onboarding/"}
        _loaded(config, team, pasted)
        promoted = {**data, "serving": _merged(data["serving"], found.candidate), "gate": dict(data["gate"])}
        promoted["gate"].pop("candidate", None)
        _loaded(config, team, promoted)


def test_the_onboarding_teams_get_the_steps_their_tables_back(config):
    advised = {team: advise(load_resolved_team(_team_file(config, team))) for team in ONBOARDING_TEAMS}
    # The MoE team never set its benchmark lengths: max_model_len is not lowered from the defaults.
    search = advised["search"].findings[0]
    assert search.status != RECOMMENDED and "prompt_tokens and max_new_tokens are unset" in search.why
    assert advised["search"].next.candidate == {"quantization": "fp8"}
    # The 70B FP8 team: its 16,384 tokens hold 96 full-length sequences for 32 at once; nothing to lower.
    assert advised["reasoning"].findings[0].status != RECOMMENDED
    assert advised["reasoning"].next.step == 3
    # Speculation's own row: the per-token time at the gate's required tokens per step.
    row = next(f for f in advised["reasoning"].next.effect if f.key == "speculation_tpot_ms_at_concurrency")
    assert row.after == pytest.approx(row.before / 1.2)  # memory-bound: verifying costs a plain step


def _sentences(text: str) -> list[str]:
    flat = re.sub(r"\s+", " ", text)
    return [part.strip() for part in re.split(r"(?<=[.;])\s|•", flat) if len(part.strip()) > 30]


@pytest.mark.parametrize("team", TEAMS)
def test_the_wording_holds_at_the_precision_printed(printed, team):
    text = re.sub(r"\s+", " ", printed[team])
    number = r"\$?\d[\d,]*(?:\.\d+)?\s?(?:%|ms|GiB|tokens)?"
    same = re.findall(rf"(?<![\d.])({number}) (?:instead of|against) \1(?![\d.])", text)
    assert not same, f"{team}: {same}"
    assert not re.search(r"from 0 ?%", text) and "of 2x the" not in text and "gains -" not in text
    sentences = _sentences(printed[team])
    repeated = sorted({s for s in sentences if sentences.count(s) > 1})
    assert not repeated, f"{team}: {repeated}"
    assert not [line for line in printed[team].splitlines() if len(line) > 100]


def test_the_wording_test_catches_each_slip_the_user_saw():
    """The checks above fail on the phrases the new user reported."""
    slips = [
        "TPOT bound 1.8 ms instead of 1.8 ms",
        "it pays from 0 % acceptance of the 4 draft tokens",
        "max_model_len 4,096 is within 2x of 2x the 1,280-token request",
    ]
    number = r"\$?\d[\d,]*(?:\.\d+)?\s?(?:%|ms|GiB|tokens)?"
    assert re.search(rf"(?<![\d.])({number}) (?:instead of|against) \1(?![\d.])", slips[0])
    assert re.search(r"from 0 ?%", slips[1]) and "of 2x the" in slips[2]
    twice = "the KV cache holds 152 sequences of 1,280 tokens, enough for 16; " * 2
    assert len(_sentences(twice)) == 2 and len(set(_sentences(twice))) == 1
