"""`optigate rehearse --report FILE`: the gate's report.json, as its decision wrote it, for `advise --from-report`
and `plan --calibrate` offline (issue 29), and its report.html beside it (issue 37). One rehearsal (support's faster
candidate, the cheapest gate)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from optigate.cli import main
from optigate.cli.rehearse_command import html_path, report_path
from optigate.gate.report_file import FORMAT_VERSION, read_gate_report


@pytest.mark.slow
def test_a_rehearsal_writes_a_report_both_readers_accept(example_config, tmp_path, capsys):
    config = tmp_path / "config"
    shutil.copytree(example_config, config, ignore=shutil.ignore_patterns("schema"))
    report = tmp_path / "support.json"
    argv = ["rehearse", "--team", "support", "--config", str(config), "--candidate", "faster", "--report", str(report)]
    code = main(argv)
    out = capsys.readouterr().out
    # The HTML the gate wrote beside its JSON (issue 37: only the JSON was written), the plots in it.
    page = report.with_suffix(".html")
    assert f"  gate report: {report} and {page}" in out
    assert page.read_text().startswith("<!doctype html>") and "data:image/png;base64," in page.read_text()
    data = read_gate_report(report)
    assert data["format_version"] == FORMAT_VERSION and data["team"] == "support"
    verdict = {0: "APPROVED", 3: "INCONCLUSIVE"}.get(code, "REJECTED")  # a busy host may leave it undecided
    assert data["outcome"] == verdict, out

    advised = main(["advise", "support", "--config", str(config), "--from-report", str(report)])
    said = capsys.readouterr()
    assert advised == {"APPROVED": 0, "REJECTED": 1, "INCONCLUSIVE": 3}[verdict], said.err
    assert f"last gate run ({report}): step 2" in said.out  # support's candidate quantizes to FP8
    # Read, then refused by calibration for what it lacks: a rehearsal measures one level, not concurrency 1.
    assert main(["plan", str(config / "teams" / "support.yaml"), "--calibrate", str(report)]) == 2
    refusal = f"✗ {report}: no TPOT measured at concurrency 1; give the gate a level of 1"
    assert capsys.readouterr().err.strip() == refusal


def test_with_several_candidates_each_report_is_named_after_its_candidate():
    assert report_path(Path("out/report.json"), "faster", 1) == Path("out/report.json")
    assert report_path(Path("out/report.json"), "slower", 2) == Path("out/report.slower.json")
    assert report_path(Path("out/report"), "faster", 2) == Path("out/report.faster.json")
    # The HTML beside each: the JSON's name with .html (never the JSON's own name).
    assert html_path(Path("out/report.slower.json")) == Path("out/report.slower.html")
    assert html_path(Path("out/report")) == Path("out/report.html")
    assert html_path(Path("out/report.html")) == Path("out/report.html.html")


def test_a_report_in_a_missing_folder_is_refused_before_rehearsing(example_config, tmp_path, capsys):
    missing = tmp_path / "no" / "report.json"
    argv = ["rehearse", "--team", "support", "--config", str(example_config), "--report", str(missing)]
    assert main(argv) == 2
    said = capsys.readouterr()
    assert said.err.strip() == f"✗ --report {missing}: no folder {missing.parent}; create it or name another"
    assert "rehearsing" not in said.out
