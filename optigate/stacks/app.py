"""Build the CDK app: one TeamInferenceStack per (team, environment), cdk-nag on every stack."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from aws_cdk import App, Validations
from cdk_nag import AwsSolutionsChecks

from optigate.config.loader import ConfigError, ConfigIssue
from optigate.deployment import ResolvedProject, load_resolved_project
from optigate.promote.lock import default_locks_dir
from optigate.stacks.team_inference_stack import TeamInferenceStack

# CDK feature flags, set here rather than in cdk.json so `cdk synth` and in-process synth (tests,
# `optigate`) produce identical templates.
FEATURE_FLAGS = {
    "@aws-cdk/core:checkSecretUsage": True,
    "@aws-cdk/aws-iam:minimizePolicies": True,
    "@aws-cdk/core:validateSnapshotRemovalPolicy": True,
    "@aws-cdk/aws-s3:serverSideEncryptionBucketKeyDefault": True,
    "@aws-cdk/aws-kms:reduceCrossAccountRegionPolicyScope": True,
}


def build_app(
    config_dir: str | Path = "config",
    *,
    environments: str | None = None,
    outdir: str | None = None,
    nag: bool = True,
    locks_dir: str | Path | None = None,
) -> App:
    """The whole app; raises ConfigError before creating any stack if a config file is wrong.

    Locks (what each environment serves) are read from `locks_dir`, `-c locks=<dir>`, or
    `<config>/locks`; an environment without a lock serves every team's baseline.
    """
    project = load_resolved_project(config_dir)
    app = App(outdir=outdir, context=FEATURE_FLAGS) if outdir else App(context=FEATURE_FLAGS)
    selection = environments if environments is not None else app.node.try_get_context("env")
    locks = locks_dir or app.node.try_get_context("locks") or default_locks_dir(config_dir)
    if str(app.node.try_get_context("pipeline") or "").lower() in ("1", "true", "yes"):
        build_pipeline(app, project, locks)
    else:
        for deployment in project.deployments(selection, locks):
            TeamInferenceStack(app, deployment)
    if nag:
        enable_nag(app)
    return app


def build_pipeline(app: App, project: ResolvedProject, locks_dir: str | Path | None) -> None:
    """`-c pipeline=true`: only the promotion pipeline, whose stages hold every team stack."""
    from optigate.stacks.pipeline_stack import PipelineStack

    pipeline = project.project.environments.pipeline
    if pipeline is None:
        raise ConfigError(
            [
                ConfigIssue(
                    "environments.yaml",
                    None,
                    "pipeline",
                    "-c pipeline=true needs a `pipeline:` block (account, region, source)",
                )
            ]
        )
    deployments = project.deployments(None, locks_dir)
    stages = [
        (environment, [d for d in deployments if d.environment.name == environment.name])
        for environment in project.environments
    ]
    PipelineStack(app, pipeline, stages)


def enable_nag(app: App) -> None:
    """cdk-nag AwsSolutions on every stack: an unacknowledged finding fails the synth."""
    Validations.of(app).add_plugins(AwsSolutionsChecks(app))


def main() -> None:
    """Entry point of `app.py` (what `cdk synth` runs)."""
    config_dir = Path(os.environ.get("OPTIGATE_CONFIG", "config"))
    try:
        app = build_app(config_dir)
    except ConfigError as error:
        print(error, file=sys.stderr)
        sys.exit(1)
    app.synth()
