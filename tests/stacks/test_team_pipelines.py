"""Teams promote independently (issue 28): each team's pipeline deploys and gates only that team, so its failure
holds no other team; `-c team=<t>` synthesizes one team alone, and a broken team file fails only what reads it,
in one line naming the file and line; cdk-nag acknowledgements reach the overflow policies CDK splits off."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import CONFIG, resources_of

# Every test here synthesizes a team's pipeline (tens of seconds): the slow tier (tests/tiers.py).
pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
TEAMS = ("chat", "research", "support")


def _stages(assembly: Path, team: str) -> list[dict]:
    template = json.loads((assembly / f"optigate-pipeline-{team}.template.json").read_text())
    (pipeline,) = resources_of(template, "AWS::CodePipeline::Pipeline").values()
    return pipeline["Properties"]["Stages"]


def test_a_teams_pipeline_deploys_and_gates_that_team_alone(assembly):
    """A failed action fails only its own pipeline's execution: no other team's stack or gate is in it."""
    for team in TEAMS:
        acted_on = set()
        for stage in _stages(assembly, team):
            for action in stage["Actions"]:
                provider = action["ActionTypeId"]["Provider"]
                if provider == "CloudFormation":
                    acted_on.add(action["Configuration"]["StackName"])
                elif provider == "StepFunctions":
                    acted_on.add(action["Name"])
        others = [t for t in TEAMS if t != team]
        assert acted_on == {f"optigate-{e}-{team}" for e in ("dev", "staging", "prod")} | {f"Gate-{team}"}
        assert not [name for name in acted_on if any(name.endswith(f"-{o}") for o in others)]


def test_no_pipeline_stack_depends_on_another_teams_or_the_platforms(assembly):
    manifest = json.loads((assembly / "manifest.json").read_text())
    for team in TEAMS:
        dependencies = manifest["artifacts"][f"optigate-pipeline-{team}"].get("dependencies", [])
        others = [f"optigate-pipeline-{o}" for o in TEAMS if o != team] + ["optigate-platform"]
        assert dependencies and not [d for d in dependencies if d.startswith(tuple(others))], dependencies


# --------------------------------------------------------------------------- one team, from the entry point


@pytest.fixture(scope="module")
def broken_research(tmp_path_factory) -> Path:
    config = tmp_path_factory.mktemp("config") / "config"
    shutil.copytree(CONFIG, config, ignore=shutil.ignore_patterns("locks"))
    (config / "teams" / "research.yaml").write_text("team: research\nmodel: [unclosed\n")
    return config


def _synth(config: Path, outdir: Path, context: dict[str, str]) -> subprocess.CompletedProcess:
    """`cdk synth -c ...` as the CDK CLI runs the app (CDK_CONTEXT_JSON, CDK_OUTDIR), without the CLI."""
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "OPTIGATE_CONFIG": str(config),
        "CDK_OUTDIR": str(outdir),
        "CDK_CONTEXT_JSON": json.dumps(context),
    }
    return subprocess.run(
        [sys.executable, "app.py"], cwd=REPO, env=env, capture_output=True, text=True, timeout=900, check=False
    )


@pytest.mark.slow
def test_a_broken_team_file_fails_its_own_synth_in_one_line_at_its_file_and_line(broken_research, tmp_path):
    done = _synth(broken_research, tmp_path / "out", {"pipeline": "true", "team": "research"})
    assert done.returncode == 1
    errors = [line for line in done.stderr.splitlines() if line.strip() and not line.startswith("optigate: ")]
    errors = [line for line in errors if not line.startswith(("b'", "!!"))]  # node's end-of-life banner
    assert len(errors) == 1 and "research.yaml:" in errors[0], done.stderr[-2000:]
    assert not (tmp_path / "out" / "manifest.json").exists()


@pytest.mark.slow
def test_another_team_synthesizes_its_pipeline_beside_a_broken_file(broken_research, tmp_path):
    done = _synth(broken_research, tmp_path / "out", {"pipeline": "true", "team": "chat"})
    assert done.returncode == 0, done.stderr[-3000:]
    templates = sorted(p.name for p in (tmp_path / "out").glob("*.template.json"))
    assert templates == [
        "cross-region-stack-optigate-pipeline-chat_us-west-2.template.json",
        "optigate-pipeline-chat.template.json",
    ]
    # The whole app of that team alone, one environment, too.
    done = _synth(broken_research, tmp_path / "app", {"team": "chat", "env": "dev"})
    assert done.returncode == 0, done.stderr[-3000:]
    assert sorted(p.name for p in (tmp_path / "app").glob("*.template.json")) == ["optigate-dev-chat.template.json"]


@pytest.mark.slow
def test_an_unknown_team_is_refused_with_the_known_ones(tmp_path):
    done = _synth(CONFIG, tmp_path / "out", {"team": "chatt"})
    assert done.returncode == 1 and "did you mean 'chat'?" in done.stderr


# --------------------------------------------------------------------------- overflow policies


def _overflowing_role(reason: str | None):
    """A role whose generated policy outgrows IAM's inline size, so CDK splits it into managed policies."""
    from aws_cdk import App, Stack
    from aws_cdk import aws_iam as iam

    from optigate.constructs import nag
    from optigate.stacks.app import enable_nag

    app = App()
    stack = Stack(app, "Overflow", env={"account": "111111111111", "region": "us-east-1"})
    role = iam.Role(stack, "Role", assumed_by=iam.ServicePrincipal("codebuild.amazonaws.com"))
    for index in range(120):
        role.add_to_policy(
            iam.PolicyStatement(
                actions=[f"sagemaker:DescribeModelPackage{'Group' if index % 2 else ''}"],
                resources=[f"arn:aws:sagemaker:us-east-1:{100000000000 + index}:model-package/group-{index:03d}/*"],
            )
        )
    nag.acknowledge_generated_wildcards(stack, lambda actions: reason)
    enable_nag(app)
    return app


def test_acknowledgements_reach_the_overflow_policies_cdk_generates(tmp_path):
    app = _overflowing_role("Each environment's gate model packages, read by optigate resolve (a test role).")
    assembly = app.synth()
    template = assembly.get_stack_by_name("Overflow").template
    overflow = resources_of(template, "AWS::IAM::ManagedPolicy")
    assert overflow, "the role did not overflow: the test would prove nothing"
    assert all("OverflowPolicy" in logical for logical in overflow)


def test_an_unacknowledged_overflow_policy_still_fails_the_synth():
    """The control: without a reason the same wildcards are findings, on the overflow policies too."""
    app = _overflowing_role(None)
    with pytest.raises(Exception, match="OverflowPolicy"):
        app.synth()
