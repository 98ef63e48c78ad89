"""Goodput as a compared metric (optigate.bench.compare with an SLO, `bench compare --slo`): higher is better, in
the same Holm family, inconclusive without per-request outcomes, and absent when no SLO is passed."""

from __future__ import annotations

import json

import pytest

from optigate.bench.compare import GOODPUT, METRICS, compare_blocks, compare_levels
from optigate.bench.core.metrics import RunSamples
from optigate.bench.goodput import Slo
from optigate.bench.throughput import THROUGHPUT
from optigate.cli import main
from tests.fixtures.simulated_blocks import Shape, simulated_side

SLO = Slo(p99_ttft_ms=200.0)  # TTFT ~150 ms (log sigma 0.2): about 8 % of requests miss it


def side(shape: Shape, seed: int, levels=(1, 16, 64)) -> dict[int, list[RunSamples]]:
    blocks = simulated_side(shape, levels=levels, seed=seed)
    for runs in blocks.values():
        for run in runs:
            run.outcomes = list(zip(run.ttft_ms, run.tpot_ms, strict=True))
    return blocks


@pytest.mark.slow
def test_no_slo_no_goodput_delta():
    deltas = compare_levels(side(Shape(), 1), side(Shape(), 2))
    assert {d.metric for d in deltas} == {*METRICS, THROUGHPUT}


@pytest.mark.slow
def test_a_slower_first_token_loses_goodput():
    deltas = compare_levels(side(Shape(), 1), side(Shape(ttft_ms=180.0), 2), slo=SLO)
    goodput = [d for d in deltas if d.metric == GOODPUT]
    assert [d.concurrency for d in goodput] == [1, 16, 64]
    assert all(not d.lower_is_better and d.statistic == "share" for d in goodput)
    assert all(d.candidate < d.baseline for d in goodput)
    # ~92 % of requests met the SLO before, ~75 % after: worse wherever a level has the requests to show it.
    assert [d.verdict for d in goodput if d.concurrency == 64] == ["worse"]
    assert all(d.verdict in ("worse", "inconclusive") for d in goodput)


@pytest.mark.slow
def test_a_faster_first_token_gains_goodput():
    [goodput] = [
        d
        for d in compare_blocks(*(side(s, n, levels=(64,))[64] for s, n in ((Shape(), 1), (Shape(120.0), 2))), slo=SLO)
        if d.metric == GOODPUT
    ]
    assert goodput.verdict == "better" and goodput.relative > 0


@pytest.mark.slow
def test_aa_labels_no_goodput_change():
    labelled = 0
    for pair in range(4):
        deltas = compare_levels(side(Shape(), 100 + pair), side(Shape(), 200 + pair), slo=SLO, seed=pair)
        labelled += sum(d.verdict in ("better", "worse") for d in deltas if d.metric == GOODPUT)
    assert labelled == 0


@pytest.mark.slow
def test_without_outcomes_goodput_is_inconclusive_never_a_pass():
    candidate = side(Shape(ttft_ms=180.0), 2)
    for runs in candidate.values():
        for run in runs:
            run.outcomes = []  # a result written before outcomes were recorded
    goodput = [d for d in compare_levels(side(Shape(), 1), candidate, slo=SLO) if d.metric == GOODPUT]
    assert {d.verdict for d in goodput} == {"inconclusive"}
    assert all("candidate recorded no per-request outcomes" in d.note for d in goodput)


def _result_file(path, blocks: dict[int, list[RunSamples]], block: int) -> str:
    load = {"prompt_tokens": 16, "max_new_tokens": 256, "schema": "messages", "mode": "closed", "rate": None}
    data = {"load": load, "runs": [runs[block].to_result() for _, runs in sorted(blocks.items())]}
    path.write_text(json.dumps(data))
    return str(path)


@pytest.mark.slow
def test_bench_compare_slo(tmp_path):
    base, cand = side(Shape(), 1, levels=(64,)), side(Shape(ttft_ms=180.0), 2, levels=(64,))
    files = [
        ",".join(_result_file(tmp_path / f"{name}{b}.json", blocks, b) for b in range(3))
        for name, blocks in (("base", base), ("cand", cand))
    ]
    out = tmp_path / "deltas.json"
    code = main(["bench", "compare", *files, "--slo", "p99_ttft_ms=200", "--json", str(out)])
    goodput = [d for d in json.loads(out.read_text())["deltas"] if d["metric"] == GOODPUT]
    assert code == 1 and [d["verdict"] for d in goodput] == ["worse"]
    assert main(["bench", "compare", *files, "--slo", "ttft=3"]) == 2
    assert main(["bench", "compare", *files, "--json", str(out)]) == 1
    assert GOODPUT not in {d["metric"] for d in json.loads(out.read_text())["deltas"]}
