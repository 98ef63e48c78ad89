"""The example config files, the generated schema, `optigate validate`, and refusal before synth."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
import yaml

from optigate.cli import main
from optigate.config.loader import ConfigError, load_project
from optigate.config.schema import render_schemas, stale_schemas
from tests.conftest import CONFIG, REPO


def test_example_project_loads_three_teams_and_three_environments():
    project = load_project(CONFIG)
    assert sorted(project.teams) == ["chat", "research", "support"]
    assert [e.name for e in project.environments.environments] == ["dev", "staging", "prod"]
    assert [e.requires_approval for e in project.environments.environments] == [False, False, True]


def test_generated_schema_is_in_sync_with_the_models():
    """config/schema/ is optigate's generated output (what editors validate team files with), not a team's config."""
    assert stale_schemas(REPO / "config" / "schema") == [], "run `optigate schema` and commit config/schema/"


def test_schema_accepts_the_examples_and_rejects_an_unknown_key():
    schema = json.loads(render_schemas()["team.schema.json"])
    for path in (CONFIG / "teams").glob("*.yaml"):
        jsonschema.validate(yaml.safe_load(path.read_text()), schema)
    bad = yaml.safe_load((CONFIG / "teams" / "chat.yaml").read_text())
    bad["serving"]["max_model_length"] = 4096
    with pytest.raises(jsonschema.ValidationError, match="max_model_length"):
        jsonschema.validate(bad, schema)


def test_validate_cli_passes_on_the_examples(capsys):
    assert main(["validate", str(CONFIG)]) == 0
    assert "4 config file(s) valid" in capsys.readouterr().out


def _broken_copy(tmp_path: Path) -> Path:
    config = tmp_path / "config"
    shutil.copytree(CONFIG, config)
    chat = config / "teams" / "chat.yaml"
    chat.write_text(chat.read_text().replace("ml.g6.2xlarge", "ml.g5.2xlarge"))
    support = config / "teams" / "support.yaml"
    support.write_text(support.read_text().replace("triage-v3.tar.gz", "triage-v3.zip"))
    return config


def test_validate_cli_reports_every_broken_file_with_its_line(tmp_path, capsys):
    config = _broken_copy(tmp_path)
    assert main(["validate", str(config)]) == 1
    err = capsys.readouterr().err
    assert "chat.yaml:" in err and "serving.quantization [OG307]: FP8 W8A8 needs compute capability >= 8.9" in err
    assert "support.yaml:" in err and "adapters[0].s3_uri [OG214]: " in err
    assert "2 problem(s)" in err


def test_environment_overrides_for_an_unknown_team_are_refused(tmp_path):
    config = tmp_path / "config"
    shutil.copytree(CONFIG, config)
    environments = config / "environments.yaml"
    environments.write_text(environments.read_text().replace("      chat:\n", "      chatt:\n"))
    with pytest.raises(
        ConfigError,
        match=(
            r"environments\.yaml:\d+ environments\[2\]\.teams\.chatt: "
            r"no team file defines team 'chatt'; did you mean 'chat'\?"
        ),
    ):
        load_project(config)


@pytest.mark.slow
def test_app_refuses_an_invalid_config_and_synthesizes_nothing(tmp_path):
    config = _broken_copy(tmp_path)
    outdir = tmp_path / "cdk.out"
    result = subprocess.run(
        [sys.executable, str(REPO / "app.py")],
        cwd=REPO,
        env={**os.environ, "OPTIGATE_CONFIG": str(config), "CDK_OUTDIR": str(outdir)},
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert result.returncode == 1
    assert "serving.quantization: FP8 W8A8" in result.stderr
    assert not outdir.exists() or not any(outdir.glob("*.template.json"))


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        (
            "    connection_arn:",
            "    codecommit: true\n    connection_arn:",
            r"pipeline\.source: .*set either connection_arn \(a CodeStar connection\) or codecommit: true",
        ),
        ("    repository: acme/optigate-config\n", "", r"pipeline\.source: .*source\.repository is required"),
        ('  account: "000011112222"', '  account: "0000"', r"environments\.yaml:\d+ pipeline\.account"),
    ],
)
def test_the_pipeline_block_is_validated_with_its_line(tmp_path, old, new, message):
    config = tmp_path / "config"
    shutil.copytree(CONFIG, config)
    environments = config / "environments.yaml"
    assert old in environments.read_text()
    environments.write_text(environments.read_text().replace(old, new))
    with pytest.raises(ConfigError, match=message):
        load_project(config)


def test_team_and_environment_names_that_would_share_an_endpoint_are_refused(tmp_path):
    """`chat` in `dev-prod` and `chat-dev` in `prod` both make `chat-dev-prod`: two teams on one endpoint."""
    from optigate.deployment import load_resolved_project

    config = tmp_path / "config"
    shutil.copytree(CONFIG, config, ignore=shutil.ignore_patterns("locks"))
    environments = (config / "environments.yaml").read_text()
    (config / "environments.yaml").write_text(environments.replace("name: staging", "name: dev-prod", 1))
    chat = (config / "teams" / "chat.yaml").read_text()
    # chat-dev trains its EAGLE head from an S3 prefix: no environment captures chat-dev's traffic for it.
    chat_dev = chat.replace("team: chat", "team: chat-dev", 1).replace(
        "train_from: data_capture", "train_from: s3://acme-traffic/chat/"
    )
    (config / "teams" / "chat-dev.yaml").write_text(chat_dev)
    with pytest.raises(ConfigError) as caught:
        load_resolved_project(config)
    (issue,) = caught.value.issues
    assert issue.file.endswith("chat-dev.yaml") and issue.path == "team"
    assert issue.message.startswith(
        "team 'chat' in environment 'dev-prod' and team 'chat-dev' in environment 'prod' would share"
    )
    assert "endpoint" in issue.message and issue.message.endswith("rename one of the teams")
    # Without the ambiguous environment the same teams load.
    (config / "environments.yaml").write_text(environments)
    assert set(load_resolved_project(config).teams) >= {"chat", "chat-dev"}
