"""`bench compare --label`: the report names both sides by their labels (default: endpoint, then file)."""

from __future__ import annotations

import json

import pytest

from optigate.cli import main
from tests.fixtures.synthetic_runs import report_side


@pytest.mark.slow
def test_compare_cli_names_the_sides_by_label(tmp_path):
    sides = report_side(0.0, 10, 8081), report_side(0.3, 20, 8082)
    for name, data in zip(("base", "cand"), sides, strict=True):
        (tmp_path / f"{name}.json").write_text(json.dumps(data))
    argv = ["bench", "compare", str(tmp_path / "base.json"), str(tmp_path / "cand.json"), "--report"]
    main([*argv, str(tmp_path / "named"), "--label", "fp16 live", "fp8 candidate"])
    page = (tmp_path / "named" / "index.html").read_text()
    assert "<h1>optigate bench compare: fp8 candidate vs fp16 live</h1>" in page
    assert "<dt>baseline: fp16 live</dt>" in page and "<dt>candidate: fp8 candidate</dt>" in page
    main([*argv, str(tmp_path / "default")])  # both record endpoint chat-dev: told apart by file name
    page = (tmp_path / "default" / "index.html").read_text()
    assert "<dt>baseline: chat-dev (base.json)</dt>" in page and "127.0.0.1:8081</dt>" not in page


def test_compare_names_the_sides_by_label_in_the_terminal_too(tmp_path, capsys):
    sides = report_side(0.0, 10, 8081), report_side(0.3, 20, 8082)
    for name, data in zip(("base", "cand"), sides, strict=True):
        (tmp_path / f"{name}.json").write_text(json.dumps(data))
    argv = ["bench", "compare", str(tmp_path / "base.json"), str(tmp_path / "cand.json")]
    main([*argv, "--label", "fp16-live", "fp8-cand"])
    out = capsys.readouterr().out
    assert "fp8-cand (candidate) vs fp16-live (baseline)" in out
    header = next(line for line in out.splitlines() if " metric " in f" {line} ")
    assert "fp16-live" in header and "fp8-cand" in header and "baseline" not in header
    assert "error rate fp16-live 0.0%, fp8-cand 0.0%" in out
    main(argv)  # without --label the columns keep the sides' roles
    out = capsys.readouterr().out
    header = next(line for line in out.splitlines() if " metric " in f" {line} ")
    assert "baseline" in header and "candidate" in header and "fp16-live" not in out


@pytest.mark.slow
def test_a_single_run_report_says_nothing_of_a_candidate(tmp_path):
    from optigate.bench.compare import compare_results
    from optigate.bench.html_report import write_report

    one, other = report_side(0.0, 10, 8081), report_side(0.3, 20, 8082)
    single = write_report([("chat-dev", one)], tmp_path / "single").read_text()
    assert "Curves: one colour per concurrency level." in single
    assert "candidate" not in single.lower() and "dashed" not in single
    pair = write_report([("a", one), ("b", other)], tmp_path / "pair", compare_results(one, other)).read_text()
    assert "baseline solid, candidate dashed" in pair


@pytest.mark.slow
def test_a_compare_report_states_the_slo_it_judged_goodput_against(tmp_path):
    """`bench compare --slo`: the page says the budgets beside the workload, and goodput is a headline row."""
    sides = report_side(0.0, 10, 8081), report_side(0.3, 20, 8082)
    for name, data in zip(("base", "cand"), sides, strict=True):
        (tmp_path / f"{name}.json").write_text(json.dumps(data))
    argv = ["bench", "compare", str(tmp_path / "base.json"), str(tmp_path / "cand.json"), "--report"]
    main([*argv, str(tmp_path / "slo"), "--slo", "p99_ttft_ms=800,p99_itl_ms=60"])
    page = (tmp_path / "slo" / "index.html").read_text()
    assert "<dt>SLO</dt><dd>p99 TTFT ≤ 800 ms, p99 ITL ≤ 60 ms, judged per request: goodput is the share" in page
    assert "<td>goodput (share within the SLO)</td>" in page
    main([*argv, str(tmp_path / "none")])  # without --slo: no SLO said, no goodput judged
    page = (tmp_path / "none" / "index.html").read_text()
    assert "<dt>SLO</dt>" not in page and "goodput" not in page


@pytest.mark.slow
def test_at_one_level_baseline_and_candidate_have_their_own_colours(tmp_path):
    """A replay (or one --concurrency) has one level: its two curves are told apart by colour, not only a dash."""
    from optigate.bench import plots
    from optigate.bench.compare import compare_results
    from optigate.bench.html_report import write_report

    one, other = report_side(0.0, 10, 8081, (16,)), report_side(0.3, 20, 8082, (16,))
    figures = plots.figures([("baseline: a", one), ("candidate: b", other)])
    [axis] = figures["ttft_cdf.png"].axes
    lines = {line.get_gid(): line for line in axis.get_lines() if line.get_gid()}
    base, cand = lines["side0:c16"], lines["side1:c16"]
    assert base.get_color() != cand.get_color()
    assert (base.get_linestyle(), cand.get_linestyle()) == ("-", "--")
    legend = {
        text.get_text(): handle
        for legend in figures["ttft_cdf.png"].legends
        for text, handle in zip(legend.get_texts(), legend.legend_handles, strict=True)
    }
    assert (
        legend["baseline: a"].get_color() == base.get_color() and legend["candidate: b"].get_color() == cand.get_color()
    )
    [axis] = figures["throughput_vs_concurrency.png"].axes
    points = [line.get_color() for line in axis.get_lines() if line.get_marker() == "o"]
    assert len(set(map(str, points))) == 2  # one interval bar per side, each in its side's colour
    pair = write_report([("a", one), ("b", other)], tmp_path / "pair", compare_results(one, other)).read_text()
    assert "Curves: one level, so one colour per side as well: baseline solid, candidate dashed" in pair
    # Several levels: a level's curves still share its colour, the sides told apart by line style.
    several = plots.figures([("a", report_side(0.0, 10, 8081)), ("b", report_side(0.3, 20, 8082))])["ttft_cdf.png"]
    lines = {line.get_gid(): line for line in several.axes[0].get_lines() if line.get_gid()}
    assert lines["side0:c1"].get_color() == lines["side1:c1"].get_color()
