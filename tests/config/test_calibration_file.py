"""config/calibration.yaml as a checked format (#29): `optigate plan --calibrate` writes its format_version; a file
written before versioning is read; another version is refused naming both; every problem names the file, its line
and the YAML path, on one line, and `optigate plan` refuses it with exit 2."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from optigate.cli import main
from optigate.config.loader import ConfigError, load_calibrations
from optigate.config.models import CALIBRATION_FORMAT_VERSION, Calibration
from optigate.plan import calibration
from tests.conftest import CONFIG

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "calibrations"

L4 = Calibration(
    instance_type="ml.g6.2xlarge",
    accelerator="L4",
    weight_precision="fp8",
    engine="vllm",
    bandwidth_efficiency=0.9,
    measured_tpot_ms=34.0,
    bound_tpot_ms=27.02,
    source="gate-report.json",
)


def test_the_writer_writes_the_format_version_and_the_reader_reads_it_back(tmp_path):
    path = tmp_path / "calibration.yaml"
    calibration.write(path, [L4])
    assert yaml.safe_load(path.read_text())["format_version"] == CALIBRATION_FORMAT_VERSION == 1
    assert load_calibrations(path) == (L4,)


def test_a_file_written_before_versioning_is_read_as_the_same_layout():
    versioned = load_calibrations(FIXTURES / "calibration.yaml")
    older = load_calibrations(FIXTURES / "before-versioning.yaml")
    assert "format_version" not in (FIXTURES / "before-versioning.yaml").read_text()
    assert older == versioned and [c.accelerator for c in older] == ["A10G", "L4"]


@pytest.mark.parametrize(
    ("version", "says"),
    [
        ("2", "format_version: this file is format version 2 and this optigate reads version 1 (written by a newer"),
        ("0", "format_version: this file is format version 0 and this optigate reads version 1"),
        ("true", "format_version: expected format version 1 (a whole number), got True"),
        ("'1'", "format_version: expected format version 1 (a whole number), got '1'"),
    ],
)
def test_another_version_is_refused_naming_both_at_its_line(tmp_path, version, says):
    path = tmp_path / "calibration.yaml"
    path.write_text(f"# a comment\nformat_version: {version}\ncalibrations: []\n")
    with pytest.raises(ConfigError) as refused:
        load_calibrations(path)
    (issue,) = refused.value.issues
    assert issue.line == 2 and issue.file.endswith("calibration.yaml") and says in str(issue)


def test_each_problem_names_the_file_line_and_path_on_one_line(tmp_path):
    path = tmp_path / "calibration.yaml"
    text = (FIXTURES / "calibration.yaml").read_text()
    path.write_text(text.replace("bandwidth_efficiency: 0.9", "bandwidth_efficiency: 1.5") + '  ? "a\\nb"\n  : 1\n')
    with pytest.raises(ConfigError) as refused:
        load_calibrations(path)
    issues = {issue.path: issue for issue in refused.value.issues}
    assert (
        issues["calibrations[1].bandwidth_efficiency"].line
        == text.splitlines().index("  bandwidth_efficiency: 0.9") + 1
    )
    odd = next(issue for path, issue in issues.items() if "unknown key" in issue.message)
    assert "\n" not in str(odd) and "a\\nb" in str(odd)  # a line break in a key, shown escaped


def test_plan_refuses_a_broken_calibration_file_with_exit_2_naming_its_line(tmp_path, capsys):
    config = tmp_path / "config"
    shutil.copytree(CONFIG, config, ignore=shutil.ignore_patterns("locks"))
    (config / "calibration.yaml").write_text((FIXTURES / "calibration.yaml").read_text()[:300])  # cut short
    assert main(["plan", str(config / "teams/chat.yaml"), "--json"]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines[-1] == f"{len(lines) - 1} problem(s)" and len(lines) >= 2
    assert all(line.startswith("✗ ") and "config/calibration.yaml:" in line for line in lines[:-1])
