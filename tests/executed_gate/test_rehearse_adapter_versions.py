"""`optigate rehearse` proving a new adapter version from the CLI (issue 37), on the adapter team `legal`
(tests/fixtures/adapter_team/legal.yaml: its candidate is redline's v2): the archive from a local folder
(`--adapter redline=PATH`) or generated to match the candidate, a degraded redline rejected by redline's own quality
check, and a missing archive refused in one line naming the object, without a cleanup of what was never created."""

from __future__ import annotations

import json

import pytest

from optigate.cli import main
from tests.fixtures.adapter_archives import adapter_config, lora_tensors, safetensors
from tests.fixtures.adapter_teams import REDLINE_V2, legal_config


@pytest.fixture(scope="module")
def config(example_config, tmp_path_factory):
    return legal_config(tmp_path_factory.mktemp("legal"), example_config)


def _argv(config, *extra: str) -> list[str]:
    return ["rehearse", "--team", "legal", "--config", str(config), *extra]


def _progress(out: str) -> list[str]:
    return [line for line in out.splitlines() if line.startswith("  ") and line.endswith(" s")]


@pytest.mark.slow
def test_a_new_version_from_a_folder_is_approved_and_its_reports_written(config, tmp_path, capsys):
    folder = tmp_path / "redline-v2"  # as PEFT's save_pretrained writes it, trained on SageMaker
    folder.mkdir()
    mistral = lora_tensors(16, hidden=4096, intermediate=14336, kv=1024, first_layer=30)
    (folder / "adapter_config.json").write_text(json.dumps(adapter_config(base_model_name_or_path="/opt/ml/model")))
    (folder / "adapter_model.safetensors").write_bytes(safetensors(mistral))
    report = tmp_path / "legal.json"
    code = main(_argv(config, "--candidate", "faster", "--adapter", f"redline={folder}", "--report", str(report)))
    out = capsys.readouterr().out
    assert f"  new version of adapter redline: {REDLINE_V2}: packed from folder {folder} (" in out
    verdict = {0: "APPROVED", 3: "INCONCLUSIVE"}.get(code, "REJECTED")  # a busy host may leave it undecided
    data = json.loads(report.read_text())
    assert data["outcome"] == verdict, out
    # The gate checked the archive it was given: its rank, and its base by its architecture (a local path).
    assert data["adapter_check"]["redline"]["rank"] == 16
    assert data["adapter_check"]["redline"]["base_model_check"] == "unknown"
    # The HTML the gate wrote beside its JSON, the plots embedded.
    page = report.with_suffix(".html").read_text()
    assert page.startswith("<!doctype html>") and "data:image/png;base64," in page and "redline" in page
    assert f"  gate report: {report} and {report.with_suffix('.html')}" in out
    # Only what happened: no state but the one the run ends in (a Fail state, when not approved) has an error, and
    # the cleanup found everything it deleted.
    assert not [line for line in _progress(out)[:-1] if " error " in line or "cleanup:" in line], out


@pytest.mark.slow
def test_a_degraded_redline_is_rejected_by_redlines_quality_check(config, capsys):
    code = main(_argv(config, "--candidate", "adapter-quality"))
    out = capsys.readouterr().out
    assert "generated (rank 16, base mistralai/Mistral-7B-Instruct-v0.3" in out
    assert "a faster candidate whose adapter redline loses quality" in out
    assert "  FAIL quality[redline]: quality evaluation failed" in out
    assert "FAIL quality[review]" not in out
    assert (
        "verdict: REJECTED (CandidateRejected: REJECTED legal/dev: 1 of " in out and "fail (quality[redline]))" in out
    )
    assert code == 0, out
    assert "expected" not in out.splitlines()[-1]
    assert out.splitlines()[-1].startswith("rehearsal passed: adapter-quality REJECTED, as the gate must decide")


@pytest.mark.slow
def test_a_missing_archive_fails_in_one_line_naming_the_object(config, capsys):
    code = main(_argv(config, "--candidate", "faster", "--missing-adapter", "redline"))
    out = capsys.readouterr().out
    assert code == 0, out  # the gate refused the archive it was not given: what this rehearsal was for
    # The gate refused it before anything was created: no cleanup, so no error line of a delete.
    assert [line.split()[:2] for line in _progress(out) if " error " in line] == [
        ["CheckAdapterArchives", "error"],
        ["GateFailed", "error"],
    ], out
    assert "Delete" not in out and "stackTrace" not in out and "Traceback" not in out
    (verdict,) = [line for line in out.splitlines() if line.startswith("  verdict: ")]
    assert verdict.startswith(
        f"  verdict: REJECTED (GateFailed: AdapterRefused: archive-missing: redline ({REDLINE_V2}): no bucket "
        "acme-ml-adapters-us-east-1), as expected"
    ), verdict
    assert out.splitlines()[-1].startswith("rehearsal passed: faster REJECTED, as the gate must decide"), out


def test_adapter_options_are_refused_before_anything_runs(config, tmp_path, capsys):
    assert main(_argv(config, "--adapter", "redline")) == 2
    assert "give NAME=PATH" in capsys.readouterr().err
    assert main(_argv(config, "--adapter", f"redline={tmp_path / 'none.tar.gz'}")) == 2
    assert "no such file or folder" in capsys.readouterr().err
    archive = tmp_path / "review.tar.gz"
    archive.write_bytes(b"")
    assert main(_argv(config, "--adapter", f"review={archive}")) == 2
    said = capsys.readouterr()
    assert "review: team legal's candidate brings no new version of it; it changes: redline" in said.err
    assert "rehearsing" not in said.out
