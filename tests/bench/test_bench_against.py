"""`optigate bench --against`: two emulated endpoints, round by round, compared after each round with anytime-valid
intervals; --until-decided stops at the first round after which the figures it decides are decided."""

from __future__ import annotations

import json

import pytest

from optigate.cli import main
from optigate.emulator.process import emulator_process

SLOW = {"default": {"ttft_ms": 20, "itl_ms": 12}}
FAST = {"default": {"ttft_ms": 20, "itl_ms": 4}}
#: One level, small rounds: a round is two runs of 16 requests of 8 tokens.
LOAD = ["--concurrency", "4", "--requests", "16", "--max-new-tokens", "8", "--prompt-tokens", "8"]


def _bench(baseline: str, candidate: str, *extra: str) -> int:
    return main(["bench", "--endpoint", "e", "--endpoint-url", baseline, "--against", candidate, *LOAD, *extra])


@pytest.mark.slow
def test_a_clear_change_stops_at_the_first_look_and_says_so(tmp_path, capsys):
    out = tmp_path / "rounds.json"
    with emulator_process(SLOW) as slow, emulator_process(FAST) as fast:
        code = _bench(slow, fast, "--until-decided", "--decide", "itl_ms:p50", "--min-rounds", "5", "--json", str(out))
    data = json.loads(out.read_text())
    assert code == 0, capsys.readouterr().out
    assert data["rounds"] == 5 and data["stopped"] == "every figure it decides is decided"
    p50 = next(d for d in data["deltas"] if d["metric"] == "itl_ms" and d["statistic"] == "p50")
    assert p50["verdict"] == "better" and p50["high_pct"] < -3
    # Each round ran the baseline, then the candidate, on the endpoint each names.
    assert len(data["baseline"]) == len(data["candidate"]) == 5
    assert "round 5: 0 figure(s) undecided" in capsys.readouterr().out.replace("\n", " ")


@pytest.mark.slow
def test_the_same_server_twice_ends_at_its_budget_undecided(tmp_path, capsys):
    out = tmp_path / "rounds.json"
    with emulator_process(SLOW) as first, emulator_process(SLOW) as second:
        code = _bench(first, second, "--until-decided", "--max-rounds", "5", "--min-rounds", "4", "--json", str(out))
    text = capsys.readouterr().out.replace("\n", " ")
    data = json.loads(out.read_text())
    assert code == 3, text  # every figure within ±3 % ("equivalent") takes more than five small rounds
    assert data["rounds"] == 5 and data["stopped"] == "the budget of 5 rounds is spent"
    assert "undecided after 5 round(s) (exit 3)" in text
    # A/A: no figure called better or worse (the calibration's share is in benchmarks/verdict_calibration.py).
    assert not [d for d in data["deltas"] if d["verdict"] in ("better", "worse")]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--until-decided"], "--until-decided applies to two endpoints: add --against"),
        (["--max-minutes", "5"], "--max-minutes applies to two endpoints"),
        (["--against", "http://127.0.0.1:9", "--min-rounds", "6", "--max-rounds", "4"], "expected 1 <= min <= max"),
        (["--against", "http://127.0.0.1:9", "--mode", "open", "--rate", "2"], "--against compares closed-loop"),
    ],
)
def test_usage_errors_exit_2_in_one_line(extra, message, capsys):
    code = main(["bench", "--endpoint", "e", "--endpoint-url", "http://127.0.0.1:9", *extra])
    err = capsys.readouterr().err
    assert code == 2 and message in err.replace("\n", " ")
