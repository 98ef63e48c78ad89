"""`optigate check`: what a platform's pipelines run on its config repository (issue 37), team by team: each file
validated, each team's stacks synthesized with cdk-nag, cfn-lint over the templates. A team passes or fails on its own
file: another team's broken file fails only that team's check. One line per failure naming the file; exit 0 pass,
1 a check failed, 2 a usage or input error."""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path

import pytest
import yaml

from optigate.cli import main
from tests.conftest import CONFIG

LEGAL = Path(__file__).resolve().parents[1] / "fixtures" / "fourth_team" / "legal.yaml"


def _project(tmp_path: Path, *, dev_only: bool = False) -> Path:
    """The suite's project with a fourth team (legal) added, as a platform onboards one; `dev_only`: one
    environment, so each team synthesizes one stack."""
    config = tmp_path / "config"
    shutil.copytree(CONFIG, config)
    shutil.copy(LEGAL, config / "teams" / "legal.yaml")
    if dev_only:
        path = config / "environments.yaml"
        environments = yaml.safe_load(path.read_text())
        environments["environments"] = environments["environments"][:1]
        path.write_text(yaml.safe_dump(environments, sort_keys=False))
    return config


def _check(capsys, *argv: str) -> tuple[int, list[str], list[str]]:
    code = main(["check", *argv])
    out, err = capsys.readouterr()
    return code, out.splitlines(), [line for line in err.splitlines() if line.strip()]


@pytest.mark.slow
def test_a_broken_file_fails_its_own_teams_check_and_no_other(tmp_path, capsys):
    config = _project(tmp_path, dev_only=True)
    (config / "teams" / "research.yaml").write_text("team: research\nmodel: [unclosed\n")
    code, out, err = _check(capsys, "--config", str(config), "--team", "legal,research", "--out", str(tmp_path / "out"))
    assert code == 1
    assert "✓ legal (" in "\n".join(out) and "1 stack(s) synthesized with cdk-nag, cfn-lint without errors" in out[-2]
    assert out[-1].startswith("✗ research (") and out[-1].endswith("problem(s)")
    *problems, verdict = err
    assert problems and all(line.startswith("✗ ") and "research.yaml:" in line for line in problems), err
    assert verdict.startswith("✗ optigate check failed: research (") and verdict.endswith("research.yaml)"), verdict
    # The templates it linted, kept with --out: the team's stack in every environment (here one).
    assert sorted(p.name for p in (tmp_path / "out" / "legal").glob("*.template.json")) == [
        "optigate-dev-legal.template.json"
    ]
    # legal's own pipeline checks legal alone: research's broken file does not fail it.
    assert _check(capsys, "--config", str(config), "--team", "legal")[0] == 0


def test_environments_yaml_is_every_teams_file_and_its_problem_is_shown_once(tmp_path, capsys):
    """An environment's settings for a team no file defines: every team reads environments.yaml, so every team's check
    fails on it (and nothing is synthesized), and the line is printed once."""
    config = _project(tmp_path, dev_only=True)
    path = config / "environments.yaml"
    environments = yaml.safe_load(path.read_text())
    dev = environments["environments"][0]
    dev["teams"]["chatt"] = copy.deepcopy(dev["teams"]["chat"])  # a typo's copy beside the real entry
    path.write_text(yaml.safe_dump(environments, sort_keys=False))
    code, out, err = _check(capsys, "--config", str(config))
    assert code == 1
    assert [line.split(" (")[0] for line in out if line.startswith(("✓", "✗"))] == [
        "✗ chat",
        "✗ legal",
        "✗ research",
        "✗ support",
    ]
    *problems, verdict = err
    assert len(problems) == 1 and "environments.yaml:" in problems[0], err
    assert "teams.chatt [OG608]: no team file defines team 'chatt'; did you mean 'chat'?" in problems[0]
    assert verdict.startswith("✗ optigate check failed: ") and "environments.yaml" in verdict


@pytest.mark.slow
def test_without_team_what_spans_the_files_fails_the_team_it_names(tmp_path, capsys):
    """Two teams on one endpoint name (`chat` in `dev-prod`, `chat-dev` in `prod`): only the whole project shows it,
    so `optigate check` fails chat-dev there, while chat passes; each team's own check alone would not see it."""
    config = tmp_path / "config"
    shutil.copytree(CONFIG, config)
    for name in ("research", "support"):
        (config / "teams" / f"{name}.yaml").unlink()
    path = config / "environments.yaml"
    environments = yaml.safe_load(path.read_text())
    environments["environments"] = environments["environments"][1:]
    environments["environments"][0]["name"] = "dev-prod"
    path.write_text(yaml.safe_dump(environments, sort_keys=False))
    chat = (config / "teams" / "chat.yaml").read_text()
    chat_dev = chat.replace("team: chat", "team: chat-dev", 1).replace(
        "train_from: data_capture", "train_from: s3://acme-traffic/chat/"
    )
    (config / "teams" / "chat-dev.yaml").write_text(chat_dev)
    code, out, err = _check(capsys, "--config", str(config))
    assert code == 1
    assert [line.split(" (")[0] for line in out if line.startswith(("✓", "✗"))] == ["✗ chat-dev", "✓ chat"]
    *problems, verdict = err
    assert len(problems) == 1 and "chat-dev.yaml:1 team [" in problems[0] and "would share" in problems[0], err
    assert verdict.startswith("✗ optigate check failed: chat-dev (")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--team", "chatt"], "--team chatt: no file in"),
        (["--config", "nowhere"], "nowhere: no environments.yaml in it"),
    ],
)
def test_usage_and_input_errors_exit_2_in_one_line(capsys, argv, message):
    code, _, err = _check(capsys, *(argv if "--config" in argv else [*argv, "--config", str(CONFIG)]))
    assert code == 2 and len(err) == 1 and message in err[0], err
    if "chatt" in argv:
        assert "did you mean 'chat'?" in err[0]


def test_without_cfn_lint_it_names_the_extra(capsys, monkeypatch):
    from optigate.stacks import team_check

    monkeypatch.setattr(team_check, "cfn_lint_missing", lambda: True)
    code, out, err = _check(capsys, "--config", str(CONFIG))
    assert (code, out) == (2, []) and err == [
        "✗ optigate check needs cfn-lint (the check extra): pip install 'optigate[check]'"
    ]


def test_a_cdk_nag_violation_is_one_line_with_its_rule_and_construct(tmp_path):
    """What a synth cdk-nag fails leaves in CDK's validation report, read back one line per violation."""
    from aws_cdk import App, Stack
    from aws_cdk import aws_s3 as s3

    from optigate.stacks.app import enable_nag
    from optigate.stacks.team_check import nag_findings

    app = App(outdir=str(tmp_path))
    s3.Bucket(Stack(app, "S", env={"account": "111111111111", "region": "us-east-1"}), "B")
    enable_nag(app)
    with pytest.raises(Exception, match="ValidationFailed"):
        app.synth()
    findings = nag_findings(tmp_path)
    assert (
        "cdk-nag AwsSolutions-S10 at S/B/Resource: The S3 Bucket or bucket policy does not require requests to use "
        "SSL." in findings
    )
    assert all(line.startswith("cdk-nag AwsSolutions-") and "\n" not in line for line in findings)


def test_a_cfn_lint_error_is_one_line_with_its_stack_and_path(tmp_path):
    from optigate.stacks.team_check import Template, lint

    path = tmp_path / "s.template.json"
    path.write_text(json.dumps({"Resources": {"B": {"Type": "AWS::S3::Bucket", "Properties": {"BucketNam": "x"}}}}))
    (line,) = lint(Template("optigate-dev-legal", path, "us-east-1"))
    assert (
        line.startswith("cfn-lint E3002 in optigate-dev-legal at Resources/B/Properties/BucketNam: ")
        and "\n" not in line
    )
