"""`optigate bench`, `optigate bench compare` and the report, against emulator processes."""

from __future__ import annotations

import json

import pytest

from optigate.bench.harness import emulator_process
from optigate.cli import main

BASELINE = {"default": {"ttft_ms": 60, "itl_ms": 6, "itl_ms_per_active_stream": 0.5}}
CANDIDATE = {"default": {"ttft_ms": 40, "itl_ms": 4, "tokens_per_chunk": [1, 2]}}
RUN_KEYS = {
    "concurrency",
    "requests",
    "ttft_ms",
    "itl_ms",
    "tpot_ms",
    "e2e_ms",
    "output_tokens_per_s",
    "requests_per_s",
    "achieved_concurrency",
    "tokens_per_chunk",
    "errors",
}


def _bench(url: str, out, *extra: str) -> dict:
    code = main(
        [
            "bench",
            "--endpoint",
            "chat-dev",
            "--endpoint-url",
            url,
            "--concurrency",
            "1,4",
            "--requests",
            "12",
            "--max-new-tokens",
            "10",
            "--prompt-tokens",
            "16",
            "--json",
            str(out),
            *extra,
        ]
    )
    assert code == 0
    return json.loads(out.read_text())


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    folder = tmp_path_factory.mktemp("bench")
    with emulator_process(BASELINE) as baseline_url, emulator_process(CANDIDATE) as candidate_url:
        baseline = _bench(baseline_url, folder / "baseline.json", "--report", str(folder / "report"))
        candidate = _bench(candidate_url, folder / "candidate.json")
    return folder, baseline, candidate


def test_bench_json_follows_the_contract(results):
    _, baseline, _ = results
    assert [run["concurrency"] for run in baseline["runs"]] == [1, 4]
    for run in baseline["runs"]:
        assert run.keys() >= RUN_KEYS
        assert set(run["ttft_ms"]) == {"p50", "p90", "p95", "p99", "mean", "max"}
        assert run["requests"] == 12 and run["errors"] == {}
    assert baseline["runs"][1]["achieved_concurrency"] > 3.5


def test_bench_report_has_the_four_plots_and_a_page(results):
    import matplotlib.image

    folder, _, _ = results
    report = folder / "report"
    for name in ("ttft_cdf.png", "itl_cdf.png", "throughput_vs_concurrency.png", "latency_vs_throughput.png"):
        pixels = matplotlib.image.imread(report / name)
        assert pixels.shape[0] > 300 and pixels.shape[1] > 500
        assert pixels.std() > 0.05  # something was drawn
    page = (report / "index.html").read_text()
    assert "<table>" in page and "ttft_cdf.png" in page and "chat-dev" in page


def test_compare_finds_the_faster_candidate_with_intervals(results, capsys, tmp_path):
    folder, _, _ = results
    assert (
        main(
            [
                "bench",
                "compare",
                str(folder / "baseline.json"),
                str(folder / "candidate.json"),
                "--json",
                str(tmp_path / "d.json"),
                "--report",
                str(tmp_path / "r"),
            ]
        )
        == 0
    )
    deltas = json.loads((tmp_path / "d.json").read_text())["deltas"]
    ttft_p50 = [d for d in deltas if d["metric"] == "ttft_ms" and d["statistic"] == "p50"]
    assert ttft_p50 and all(d["verdict"] == "better" and d["high"] < 0 for d in ttft_p50)
    throughput = [d for d in deltas if d["metric"] == "output_tokens_per_s"]
    assert all(d["delta"] > 0 for d in throughput)
    assert (tmp_path / "r" / "index.html").read_text().count("better") > 3


def test_a_run_compared_with_itself_is_not_distinguishable(results, tmp_path):
    folder, _, _ = results
    main(
        [
            "bench",
            "compare",
            str(folder / "baseline.json"),
            str(folder / "baseline.json"),
            "--json",
            str(tmp_path / "same.json"),
        ]
    )
    deltas = json.loads((tmp_path / "same.json").read_text())["deltas"]
    assert deltas and all(d["verdict"] == "not distinguishable" for d in deltas)
