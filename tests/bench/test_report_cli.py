"""`bench compare --label`: the report names both sides by their labels (default: endpoint, then file)."""

from __future__ import annotations

import json

from optigate.cli import main
from tests.fixtures.synthetic_runs import report_side


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


def test_a_single_run_report_says_nothing_of_a_candidate(tmp_path):
    from optigate.bench.compare import compare_results
    from optigate.bench.html_report import write_report

    one, other = report_side(0.0, 10, 8081), report_side(0.3, 20, 8082)
    single = write_report([("chat-dev", one)], tmp_path / "single").read_text()
    assert "Curves: one colour per concurrency level." in single
    assert "candidate" not in single.lower() and "dashed" not in single
    pair = write_report([("a", one), ("b", other)], tmp_path / "pair", compare_results(one, other)).read_text()
    assert "baseline solid, candidate dashed" in pair
