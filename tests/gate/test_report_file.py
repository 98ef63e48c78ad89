"""The gate report read back (issue 29): `read_gate_report` says file, JSON path, expected and found; `advise
--from-report` and `plan --calibrate` refuse a broken report in one line with exit 2 and read a real one."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest

from optigate.cli import main
from optigate.gate.report_file import FORMAT_VERSION, GateReportError, parse_gate_report, read_gate_report
from tests.fixtures.gate_report_mutants import CONFIG, originals

REPO = Path(__file__).resolve().parents[2]


def _report(source: str = "research-rejected") -> dict:
    return json.loads(originals()[source])


def _refusal(data: dict | bytes) -> str:
    content = data if isinstance(data, bytes) else json.dumps(data).encode()
    with pytest.raises(GateReportError) as caught:
        parse_gate_report(content, "report.json")
    return str(caught.value)


def test_the_committed_reports_are_read_an_older_one_too():
    versions = {}
    for source, content in originals().items():
        data = parse_gate_report(content, source)
        assert data["team"] == source.partition("-")[0] and data["outcome"].lower() == source.partition("-")[2]
        versions[source] = data.get("format_version")
    # research-approved was written before reports carried format_version (see gate_reports/README.md).
    assert versions == {source: None if source == "research-approved" else FORMAT_VERSION for source in versions}


def test_a_wrong_value_is_named_by_file_path_expected_and_found():
    data = _report()
    data["levels"][0]["candidate"]["p50_tpot_ms"] = "fast"
    assert _refusal(data) == 'report.json: levels[0].candidate.p50_tpot_ms: expected a number, found "fast"'
    data = _report()
    data["levels"][0]["baseline"]["p99_itl_ms"] = -3.0
    assert _refusal(data) == "report.json: levels[0].baseline.p99_itl_ms: expected a number ≥ 0, found -3.0"
    data = _report()
    del data["outcome"]
    assert _refusal(data) == (
        "report.json: outcome: expected the gate's outcome (APPROVED, REJECTED or INCONCLUSIVE), "
        "found nothing (the key is missing)"
    )
    data = _report()
    data["outcome"] = "MAYBE"
    assert _refusal(data).startswith("report.json: outcome: expected one of 'APPROVED', 'REJECTED' or")


def test_nan_and_infinity_are_refused_anywhere_even_where_no_reader_looks():
    data = _report()
    data["deltas"][0]["delta"] = math.nan
    assert _refusal(data) == "report.json: deltas[0].delta: expected a finite number or null, found NaN"
    text = json.dumps(_report()).replace('"window_minutes": 120', '"window_minutes": Infinity')
    assert _refusal(text.encode()) == (
        "report.json: shadow.window_minutes: expected a finite number or null, found Infinity"
    )


def test_an_outcome_its_checks_do_not_give_is_refused():
    """A hand-edited verdict: REJECTED turned APPROVED without its failed check passing."""
    data = _report("research-rejected")
    data["outcome"], data["approved"] = "APPROVED", True
    expected = 'report.json: outcome: expected REJECTED, the outcome its 9 checks give, found "APPROVED"'
    assert _refusal(data) == expected
    data = _report("research-approved")
    data["approved"] = False
    assert _refusal(data) == "report.json: approved: expected true (the outcome is APPROVED), found false"


def test_the_format_version_older_newer_and_wrong():
    data = _report()
    del data["format_version"]  # written before versioning, same layout: read
    assert parse_gate_report(json.dumps(data), "report.json")["outcome"] == "REJECTED"
    data["format_version"] = FORMAT_VERSION + 1
    assert _refusal(data) == (
        f"report.json: format_version: expected format version {FORMAT_VERSION}, found format version "
        f"{FORMAT_VERSION + 1}, written by a newer optigate (this one reads version {FORMAT_VERSION})"
    )
    data["format_version"] = True
    assert _refusal(data) == f"report.json: format_version: expected format version {FORMAT_VERSION}, found true"


def test_a_file_cut_short_or_not_utf8():
    content = originals()["research-rejected"]
    assert _refusal(content[:200]) == (
        "report.json: expected JSON (a gate report), found unterminated string starting at (line 8 column 3: "
        "cut short or edited?)"
    )
    assert "undecodable bytes" in _refusal(b"\xff" + content)
    assert (
        _refusal(b"[1, 2]")
        == "report.json: expected an object with `outcome` and `checks` (the gate's report), found [1, 2]"
    )


def test_the_schema_in_docs_is_current():
    from optigate.gate.report_file import REPORT_SCHEMA_NAME, render_report_schema

    committed = (REPO / "docs" / REPORT_SCHEMA_NAME).read_text()
    assert committed == render_report_schema(), "run `optigate schema --docs docs` and commit docs/"


# --------------------------------------------------------------------------- the two commands


@pytest.fixture
def config(tmp_path) -> Path:
    copied = tmp_path / "config"
    shutil.copytree(CONFIG, copied, ignore=shutil.ignore_patterns("schema"))
    return copied


def _broken(tmp_path: Path) -> Path:
    data = _report()
    data["levels"][0]["baseline"] = []
    path = tmp_path / "broken.json"
    path.write_text(json.dumps(data))
    return path


def test_advise_and_plan_refuse_a_broken_report_in_one_line_with_exit_2(config, tmp_path, capsys):
    broken = _broken(tmp_path)
    expected = (
        f"✗ {broken}: levels[0].baseline: expected an object, found []; give the report.json the gate wrote "
        "(or one `optigate rehearse --report FILE` writes offline)"
    )
    assert main(["advise", "research", "--config", str(config), "--from-report", str(broken)]) == 2
    assert capsys.readouterr().err.strip() == expected
    assert main(["plan", str(config / "teams" / "research.yaml"), "--calibrate", str(broken)]) == 2
    assert capsys.readouterr().err.strip() == expected
    assert not (config / "calibration.yaml").exists()  # nothing calibrated from it


def test_advise_reads_the_real_reports(config, tmp_path, capsys):
    for source, code, step_line in (
        ("research-approved", 0, "step 2 paid off"),
        ("research-rejected", 1, "step 2 did not pay off"),
        ("research-inconclusive", 3, "step 2 cannot tell (a person decides)"),
    ):
        path = tmp_path / f"{source}.json"
        path.write_bytes(originals()[source])
        assert main(["advise", "research", "--config", str(config), "--from-report", str(path)]) == code
        out = capsys.readouterr().out
        assert f"last gate run ({path}): {step_line}" in out
        assert "c16: TPOT" in out  # the level's figures


def test_plan_calibrate_says_why_a_rehearsed_report_cannot_calibrate(config, tmp_path, capsys):
    """A rehearsal measures one level (16 here), not concurrency 1: calibration refuses with the reason."""
    path = tmp_path / "support.json"
    path.write_bytes(originals()["support-approved"])
    assert main(["plan", str(config / "teams" / "support.yaml"), "--calibrate", str(path)]) == 2
    assert capsys.readouterr().err.strip() == f"✗ {path}: no TPOT measured at concurrency 1; give the gate a level of 1"


def test_plan_calibrates_from_a_report_that_measured_concurrency_one(config, tmp_path, capsys):
    """The same report with a figure at concurrency 1 (as the deployed gate measures) calibrates, read back."""
    data = _report("support-approved")
    decode = data["prediction_vs_measurement"]["decode_tpot_ms_batch1"]
    plan = data["prediction_vs_measurement"]["plan"]
    overheads = (plan["step_overhead_ms"] or 0) + (plan["allreduce_ms_per_step"] or 0)
    decode["measured"] = decode["predicted"] / 0.5 + overheads  # half the datasheet bandwidth
    path = tmp_path / "support.json"
    path.write_text(json.dumps(data))
    assert main(["plan", str(config / "teams" / "support.yaml"), "--calibrate", str(path)]) in (0, 1)
    assert "bandwidth efficiency 0.500" in capsys.readouterr().out
    assert "bandwidth_efficiency: 0.5" in (config / "calibration.yaml").read_text()


def test_read_gate_report_names_a_missing_file(tmp_path, capsys):
    with pytest.raises(FileNotFoundError):
        read_gate_report(tmp_path / "none.json")
    code = main(["advise", "research", "--config", str(CONFIG), "--from-report", str(tmp_path / "none.json")])
    assert code == 2
    assert capsys.readouterr().err.strip() == f"✗ {tmp_path / 'none.json'}: no such file; give the gate's report.json"


def test_the_fail_closed_report_of_an_unreadable_input_is_read_back_and_advise_says_inconclusive(tmp_path, capsys):
    """The verdict the decision writes when a shard or merged result failed its schema is itself a valid report."""
    from optigate.gate.decision.verdict import unreadable_verdict
    from optigate.gate.report import render_json

    problem = 's3://b/benchmarks/run/shard-0.json: runs[0].samples.ttft_ms[0]: expected a number, found "fast"'
    verdict = unreadable_verdict("research", "dev", [problem], {"quantization": "fp8"})
    report = tmp_path / "report.json"
    report.write_text(render_json(verdict))
    data = read_gate_report(report)
    assert data["outcome"] == "INCONCLUSIVE" and data["approved"] is False
    assert [check["name"] for check in data["checks"]] == ["inputs"] and problem in data["reasons"][0]
    config = tmp_path / "config"
    shutil.copytree(CONFIG, config)
    code = main(["advise", "research", "--config", str(config), "--from-report", str(report)])
    out = " ".join(capsys.readouterr().out.split())
    assert code == 3 and "INCONCLUSIVE" in out and "failed its schema" in out, out  # 3: inconclusive
