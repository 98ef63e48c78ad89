"""Build the CDK app: one TeamInferenceStack per (team, environment), or the promotion pipelines (one per
team and the platform's); cdk-nag on every stack."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from aws_cdk import App, Stack, Validations
from cdk_nag import AwsSolutionsChecks

from optigate.config.loader import ConfigError, ConfigIssue
from optigate.deployment import Deployment, ResolvedProject, load_resolved_project
from optigate.promote.lock import default_locks_dir
from optigate.stacks.feature_flags import FEATURE_FLAGS
from optigate.stacks.team_inference_stack import TeamInferenceStack


def build_app(
    config_dir: str | Path = "config",
    *,
    environments: str | None = None,
    teams: str | None = None,
    outdir: str | None = None,
    nag: bool = True,
    locks_dir: str | Path | None = None,
    progress: Callable[[str], None] | None = None,
) -> App:
    """The whole app; raises ConfigError before creating any stack if a config file is wrong.

    Locks (what each environment serves) are read from `locks_dir`, `-c locks=<dir>`, or
    `<config>/locks`; an environment without a lock serves every team's baseline. `teams` (or
    `-c team=a,b`): only those teams' files are read and only their stacks or pipelines built, so
    another team's broken file does not stop them. `-c pipeline=true`: the platform's pipeline and one
    pipeline per team (only the selected teams' with `-c team`); `-c pipeline=platform`: the
    platform's alone. `progress` is told what is about to be built, once the configuration is read.
    """
    app = App(outdir=outdir, context=FEATURE_FLAGS) if outdir else App(context=FEATURE_FLAGS)
    selected = selected_teams(teams if teams is not None else app.node.try_get_context("team"))
    mode = str(app.node.try_get_context("pipeline") or "").lower()
    if mode == "platform":
        project = load_resolved_project(config_dir, teams=[])
    else:
        project = load_resolved_project(config_dir, teams=selected)
    selection = environments if environments is not None else app.node.try_get_context("env")
    locks = locks_dir or app.node.try_get_context("locks") or default_locks_dir(config_dir)
    if mode == "platform":
        if progress:
            progress("the platform's pipeline")
        build_pipelines(app, project, locks, platform=True, teams=False)
    elif mode in ("1", "true", "yes"):
        if progress:
            what = f"{len(project.teams)} team pipelines"
            progress(what if selected else f"the platform's pipeline and {what}")
        build_pipelines(app, project, locks, platform=selected is None, teams=True)
    else:
        deployments = project.deployments(selection, locks)
        if progress:
            progress(f"{len(deployments)} stacks for {_environment_names(deployments)}")
        for deployment in deployments:
            TeamInferenceStack(app, deployment)
    if nag:
        enable_nag(app)
    return app


def selected_teams(value: object) -> list[str] | None:
    """`-c team=chat` or `-c team=chat,research` as a list; None (every team) when unset."""
    if value is None or value == "":
        return None
    names = [name.strip() for name in str(value).split(",") if name.strip()]
    if not names:
        raise ConfigError([ConfigIssue("-c team", None, "", "name at least one team, e.g. -c team=chat")])
    return names


def build_pipelines(
    app: App,
    project: ResolvedProject,
    locks_dir: str | Path | None,
    *,
    platform: bool = True,
    teams: bool = True,
) -> None:
    """`-c pipeline=true`: the platform's pipeline and one pipeline per team of `project`, each of whose
    stages holds only that team's stack (optigate.stacks.pipeline_stack)."""
    from optigate.stacks.pipeline_stack import PlatformStack, TeamPipelineStack

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
    if platform:
        PlatformStack(app, pipeline, project.environments)
    if not teams:
        return
    deployments = project.deployments(None, locks_dir)
    for team in project.teams:
        stages = [
            (environment, [d for d in deployments if d.team.team == team and d.environment.name == environment.name])
            for environment in project.environments
        ]
        team_file = (
            f"config/teams/{Path(project.project.team_files[team]).name}"  # in the repository, as synth reads it
        )
        TeamPipelineStack(app, pipeline, team, stages, team_file=team_file)


def enable_nag(app: App) -> None:
    """cdk-nag AwsSolutions on every stack: an unacknowledged finding fails the synth."""
    Validations.of(app).add_plugins(AwsSolutionsChecks(app))


def _environment_names(deployments: Sequence[Deployment]) -> str:
    return ", ".join(dict.fromkeys(d.environment.name for d in deployments)) or "no environment"


def _stack_count(app: App) -> int:
    """The app's stacks, the pipeline stages' team stacks included (without walking every construct)."""
    count = 0
    for child in app.node.children:
        if isinstance(child, Stack):
            count += 1 + sum(len(stage.team_stacks) for stage in getattr(child, "stages", []))
    return count


def main() -> None:
    """Entry point of `app.py` (what `cdk synth` runs). The progress lines go to stderr: the CDK
    CLI shows the app's stderr as it comes and keeps stdout for the templates it prints."""
    config_dir = Path(os.environ.get("OPTIGATE_CONFIG", "config"))
    started = time.perf_counter()

    def say(what: str) -> None:
        print(f"optigate: synthesizing {what}…", file=sys.stderr, flush=True)

    try:
        app = build_app(config_dir, progress=say)
    except ConfigError as error:
        print(error, file=sys.stderr)
        sys.exit(1)
    app.synth()
    elapsed = time.perf_counter() - started
    print(f"optigate: synthesized {_stack_count(app)} stacks in {elapsed:.1f} s", file=sys.stderr, flush=True)
