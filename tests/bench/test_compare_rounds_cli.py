"""`optigate bench compare --rounds`: result files paired in order as rounds, judged with anytime-valid intervals
(optigate.bench.sequential), so comparing again after each added round is allowed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from optigate.cli import main
from tests.fixtures.simulated_blocks import Shape, simulated_block

TEMPLATE = Path(__file__).resolve().parents[1] / "fixtures" / "bench_results" / "baseline.json"
LEVEL = 8


def _files(folder: Path, side: str, shape: Shape, rounds: int, seed: int) -> str:
    """`rounds` result files of one side, as `optigate bench --json` writes them (one simulated run each)."""
    template = json.loads(TEMPLATE.read_text())
    paths = []
    for index in range(rounds):
        block = simulated_block(LEVEL, 32, shape, tokens=64, seed=[seed, index])
        block.outcomes = list(zip(block.ttft_ms, block.tpot_ms, strict=True))  # what goodput reads, per request
        run = block.to_result(include_samples=True)
        path = folder / f"{side}-{index}.json"
        path.write_text(json.dumps({**template, "runs": [run]}))
        paths.append(str(path))
    return ",".join(paths)


@pytest.fixture
def faster_candidate(tmp_path):
    """Six rounds: a candidate decoding 30 % faster than its baseline."""
    return _files(tmp_path, "baseline", Shape(), 6, 1), _files(tmp_path, "candidate", Shape(itl_ms=10.5), 6, 2)


def test_a_faster_candidate_is_better_round_by_round(faster_candidate, tmp_path, capsys):
    baseline, candidate = faster_candidate
    out = tmp_path / "rounds.json"
    code = main(["bench", "compare", baseline, candidate, "--rounds", "--decide", "itl_ms", "--json", str(out)])
    payload = json.loads(out.read_text())
    assert code == 0 == payload["exit_code"] and payload["rounds"] == 6
    itl = [d for d in payload["deltas"] if d["metric"] == "itl_ms"]
    assert {d["verdict"] for d in itl} == {"better"} and all(d["high_pct"] < 0 for d in itl)
    assert "anytime-valid intervals" in capsys.readouterr().out


def test_the_other_way_round_it_is_worse(faster_candidate):
    baseline, candidate = faster_candidate
    assert main(["bench", "compare", candidate, baseline, "--rounds"]) == 1


def test_before_the_fourth_round_a_decision_cannot_be_told(tmp_path, capsys):
    baseline = _files(tmp_path, "baseline", Shape(), 3, 1)
    candidate = _files(tmp_path, "candidate", Shape(itl_ms=10.5), 3, 2)
    assert main(["bench", "compare", baseline, candidate, "--rounds", "--decide", "itl_ms"]) == 3
    out = capsys.readouterr().out
    assert "cannot bound yet" in out and "add a round" in out


@pytest.mark.parametrize(
    ("extra", "said"),
    [([], "give as many of each (got 2 baseline and 3 candidate)"), (["--report", "out"], "leave out --report")],
)
def test_what_rounds_cannot_take_is_refused_in_one_line(tmp_path, capsys, extra, said):
    baseline = _files(tmp_path, "baseline", Shape(), 2 if not extra else 3, 1)
    candidate = _files(tmp_path, "candidate", Shape(), 3, 2)
    assert main(["bench", "compare", baseline, candidate, "--rounds", *extra]) == 2
    assert said in capsys.readouterr().err


def test_with_an_slo_the_goodput_share_is_compared_round_by_round(faster_candidate, tmp_path):
    # A 13 ms budget on each request's time per output token: the baseline (about 15 ms) rarely meets it, the
    # candidate (about 10.5 ms) nearly always.
    baseline, candidate = faster_candidate
    out = tmp_path / "rounds.json"
    code = main(["bench", "compare", baseline, candidate, "--rounds", "--slo", "p99_itl_ms=13", "--json", str(out)])
    (goodput,) = [d for d in json.loads(out.read_text())["deltas"] if d["metric"] == "goodput_share"]
    assert code == 0 and goodput["verdict"] == "better" and goodput["low_pct"] > 3, goodput
    assert goodput["statistic"] == "share" and goodput["lower_is_better"] is False
