# Over 400 lines: the pipeline base and its two kinds (a team's, the platform's) share its private helpers.
"""The promotion pipelines: one per team, and the platform's own (`cdk synth -c pipeline=true`).

A team's pipeline (`optigate-pipeline-<team>`): source (CodeStar connection or CodeCommit) → synth (set
up, `optigate check --team <team>`, `optigate resolve --team <team>` every environment,
`cdk synth -c pipeline=true -c team=<team>`, each of which reads only that team's file) → self-mutation and
assets → one stage per environment in environments.yaml order: [manual approval when `requires_approval`] →
deploy the team's stack → its gate as a blocking Step Functions invoke action. The cloud assembly, lock files
included, is built once, so what staging proved is exactly what prod deploys. An Approved package of one of the
team's own gate groups starts the team's pipeline again (EventBridge), which then serves it.

Nothing in a team's pipeline reads, deploys or waits for another team: a failed deploy, gate or
broken file holds only that team (docs/design.md, "Promotion pipelines").

The platform's pipeline (`optigate-platform`) checks every team's file once per push (`optigate check`: validate,
synth with cdk-nag, cfn-lint; optigate's test suite is optigate's own CI, not the config repository's) and
holds what all teams share: the event bus policy accepting approvals forwarded from environment
accounts (one fixed StatementId per bus, so it cannot live in 200 team stacks).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

import jsii
from aws_cdk import Aws, CfnResource, Stack, Stage, pipelines
from aws_cdk import Environment as CdkEnvironment
from aws_cdk import aws_codebuild as codebuild
from aws_cdk import aws_codecommit as codecommit
from aws_cdk import aws_codepipeline as codepipeline
from aws_cdk import aws_codepipeline_actions as actions
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from optigate import naming
from optigate.config.models import Environment, Pipeline
from optigate.constructs import nag
from optigate.constructs.gate import approval_event_pattern
from optigate.deployment import Deployment
from optigate.naming import gate_invoker_role_name, gate_state_machine_name
from optigate.promote.lock import package_group
from optigate.stacks.team_inference_stack import TeamInferenceStack


class EnvironmentStage(Stage):
    """A team's stack in one environment (one account and region)."""

    def __init__(self, scope: Construct, environment: Environment, deployments: Sequence[Deployment]) -> None:
        super().__init__(
            scope, environment.name, env=CdkEnvironment(account=environment.account, region=environment.region)
        )
        self.environment = environment
        self.team_stacks = [TeamInferenceStack(self, deployment) for deployment in deployments]


@jsii.implements(pipelines.ICodePipelineActionFactory)
class GateStep(pipelines.Step):
    """Run one team's gate and wait for it: CodePipeline's Step Functions invoke action fails the
    stage when the execution fails (a rejected candidate, or the gate itself failing).

    The action assumes the gate's invoker role in the environment's account; naming it explicitly
    keeps CDK from adding a cross-account support stack.
    """

    def __init__(self, deployment: Deployment) -> None:
        super().__init__(f"Gate-{deployment.team.team}")
        self.deployment = deployment

    def produce_action(
        self, stage, *, scope: Construct, action_name: str, run_order: int, **_: Any
    ) -> pipelines.CodePipelineActionFactoryResult:
        environment, team = self.deployment.environment, self.deployment.team.team
        partition = Aws.PARTITION
        machine = (
            f"arn:{partition}:states:{environment.region}:{environment.account}"
            f":stateMachine:{gate_state_machine_name(team, environment.name)}"
        )
        role = f"arn:{partition}:iam::{environment.account}:role/{gate_invoker_role_name(team, environment.name)}"
        stage.add_action(
            actions.StepFunctionInvokeAction(
                action_name=action_name,
                run_order=run_order,
                state_machine=sfn.StateMachine.from_state_machine_arn(
                    scope, f"{team}-{environment.name}-Gate", machine
                ),
                role=iam.Role.from_role_arn(scope, f"{team}-{environment.name}-GateInvoker", role, mutable=False),
                state_machine_input=actions.StateMachineInput.literal({"source": "pipeline"}),
                execution_name_prefix=f"pipeline-{team}",
            )
        )
        return pipelines.CodePipelineActionFactoryResult(run_orders_consumed=1)


#: What the synth steps install (scripts/setup.sh): optigate with its `check` extra and the CDK CLI, no test kit.
SETUP_MODE = "pipeline"


def team_synth_commands(team: str, environments: Sequence[Environment]) -> list[str]:
    """What a team pipeline's synth step runs: set up, check the team's own file (`optigate check --team`: validate,
    synth with cdk-nag, cfn-lint; another team's file is not read), resolve the team's lock in every environment,
    synthesize its own pipeline (only its team file is read). optigate's test suite runs in optigate's own CI, never
    on the config repository."""
    return [
        ". scripts/setup.sh",
        f"optigate check --team {team}",
        *(f"optigate resolve --env {environment.name} --team {team}" for environment in environments),
        f"cdk synth -c pipeline=true -c team={team}",
    ]


def platform_synth_commands() -> list[str]:
    """What the platform pipeline's synth step runs: set up, check every team file and what spans them
    (`optigate check`), then synthesize its own stack only."""
    return [". scripts/setup.sh", "optigate check", "cdk synth -c pipeline=platform"]


class _PromotionPipeline(Stack):
    """What both kinds of pipeline share: the source, a named role, a V2 CDK pipeline with as few
    generated roles and projects as CDK Pipelines allows, and the acknowledged generated policies."""

    def __init__(
        self,
        scope: Construct,
        stack_name: str,
        pipeline: Pipeline,
        *,
        role_name: str,
        description: str,
        commands: list[str],
        synth_permissions: list[iam.PolicyStatement],
    ) -> None:
        super().__init__(
            scope,
            stack_name,
            env=CdkEnvironment(account=pipeline.account, region=pipeline.region),
            description=description,
        )
        source = self._source(pipeline)
        # A fixed name: the gate invoker roles trust this role only (optigate.naming). Only CodePipeline
        # assumes it: it may assume the environments' deploy roles and the team's gate invoker roles.
        self.pipeline_role = iam.Role(
            self,
            "PipelineRole",
            role_name=role_name,
            assumed_by=iam.ServicePrincipal("codepipeline.amazonaws.com"),
            description=f"optigate: {description}",
        )
        # The synth step runs code and packages fetched at build time (setup.sh installs from PyPI): its own
        # role, with no way to the deploy roles or the gates (as CDK Pipelines keeps it by default).
        synth_role = iam.Role(
            self,
            "SynthRole",
            assumed_by=iam.ServicePrincipal("codebuild.amazonaws.com"),
            description=f"optigate: the synth step of {stack_name} (reads the gate groups, deploys nothing)",
        )
        synth = pipelines.CodeBuildStep(
            "Synth",
            input=source,
            commands=commands,
            primary_output_directory="cdk.out",
            # setup.sh installs what the commands run (optigate, cfn-lint, the CDK CLI), not the test kit.
            env={"OPTIGATE_SETUP": SETUP_MODE},
            role=synth_role,
        )
        for statement in synth_permissions:
            synth_role.add_to_policy(statement)
        self.synth_role = synth_role
        self.pipeline = pipelines.CodePipeline(
            self,
            "Pipeline",
            pipeline_name=stack_name,
            # V2 explicitly (CDK warns about the V1 default): billed per action-minute rather than per
            # active pipeline and month; a gate's Step Functions action is billed while it waits for
            # the gate, manual approvals are not. Pushes to the branch still start it (no triggers set).
            pipeline_type=codepipeline.PipelineType.V2,
            role=self.pipeline_role,
            synth=synth,
            cross_account_keys=True,  # each environment's account decrypts the artifacts it deploys
            enable_key_rotation=True,
            # Per pipeline: a support stack shared by 200 pipelines would be redeployed by each one's
            # self-mutation with only its own grants (docs/design.md).
            reuse_cross_region_support_stacks=False,
            # The actions CDK would give a role each (source, build, approval) run as the pipeline role,
            # and one project publishes every file asset: fewer roles and projects per pipeline (IAM's
            # roles per account, CodeBuild's projects per region; benchmarks/scale.py).
            use_pipeline_role_for_actions=True,
            publish_assets_in_parallel=False,
            code_build_defaults=pipelines.CodeBuildOptions(
                build_environment=codebuild.BuildEnvironment(build_image=codebuild.LinuxBuildImage.STANDARD_7_0)
            ),
        )
        self.stages: list[EnvironmentStage] = []

    def _finish(self) -> None:
        self.pipeline.build_pipeline()
        self._acknowledge_generated()
        self._role_arns_as_sub()

    def _source(self, pipeline: Pipeline) -> pipelines.CodePipelineSource:
        """Pushes to the branch start the pipeline (the connection's trigger, or CodeCommit's event rule)."""
        source = pipeline.source
        if source.repository is None:  # PipelineSource's validator requires it
            raise ValueError("pipeline.source.repository is required")
        if source.codecommit:
            repository = codecommit.Repository.from_repository_name(self, "Repository", source.repository)
            return pipelines.CodePipelineSource.code_commit(repository, source.branch)
        if source.connection_arn is None:  # PipelineSource's validator requires one of the two
            raise ValueError("pipeline.source.connection_arn is required without codecommit")
        return pipelines.CodePipelineSource.connection(
            source.repository, source.branch, connection_arn=source.connection_arn
        )

    def _role_arns_as_sub(self) -> None:
        """CDK Pipelines writes the deploy actions' RoleArn as Fn::Join with an empty delimiter, which
        cfn-lint (E3703) refuses; the same ARN as Fn::Sub is equivalent and lint-clean."""
        pipeline = cast(codepipeline.CfnPipeline, self.pipeline.pipeline.node.default_child)
        for s_index, stage in enumerate(self.resolve(pipeline.stages)):
            for a_index, action in enumerate(stage["actions"]):
                arn = action.get("configuration", {}).get("RoleArn")
                if (
                    isinstance(arn, dict)
                    and "Fn::Join" in arn
                    and arn["Fn::Join"][0] == ""
                    and all(isinstance(p, str) or set(p) == {"Ref"} for p in arn["Fn::Join"][1])
                ):
                    text = "".join(p if isinstance(p, str) else "${" + p["Ref"] + "}" for p in arn["Fn::Join"][1])
                    pipeline.add_property_override(
                        f"Stages.{s_index}.Actions.{a_index}.Configuration.RoleArn", {"Fn::Sub": text}
                    )

    def _acknowledge_generated(self) -> None:
        """CDK Pipelines writes its roles' policies itself; acknowledge their wildcards one finding
        at a time, each with the reason, so anything unexpected still fails the synth."""

        def reason_for(actions: list[str]) -> str:
            if any(a.startswith("sagemaker:") for a in actions):
                return (
                    "optigate resolve reads the versions of the team's gate model package groups; "
                    "ListModelPackages has no resource scope."
                )
            return (
                "Generated by CDK Pipelines: objects of the pipeline's "
                "own artifact buckets (per-execution keys), its KMS key, "
                "logs and reports of its own CodeBuild projects, "
                "and the cdk bootstrap roles it assumes to publish and deploy."
            )

        for generated in (self.pipeline, self.pipeline_role, self.synth_role):  # CDK writes these roles' policies too
            nag.acknowledge_generated_wildcards(generated, reason_for)
        no_access_logs = (
            "A CDK Pipelines artifact bucket: only the pipeline's "
            "roles reach it, objects are KMS-encrypted and expire with "
            "the pipeline's executions; CloudTrail records access. Access logs would need a log bucket per region."
        )
        nag.acknowledge(self.pipeline.pipeline.artifact_bucket, "AwsSolutions-S1", no_access_logs)
        # Environments in another region get a replication bucket in a support stack of this pipeline's
        # own (`<stack>-support-<region>`, as reuse_cross_region_support_stacks=False makes it).
        for child in self.node.root.node.children:
            if isinstance(child, Stack) and child.stack_name.startswith(f"{self.stack_name}-support-"):
                nag.acknowledge(child, "AwsSolutions-S1", no_access_logs)


class TeamPipelineStack(_PromotionPipeline):
    """One team's promotion pipeline in the tools account (see the module docstring)."""

    def __init__(
        self,
        scope: Construct,
        pipeline: Pipeline,
        team: str,
        stages: Sequence[tuple[Environment, Sequence[Deployment]]],
        *,
        team_file: str | None = None,
    ) -> None:
        environments = [environment for environment, _ in stages]
        deployments = [d for _, ds in stages for d in ds]
        strangers = sorted({d.team.team for d in deployments} - {team})
        if strangers:
            raise ValueError(f"the pipeline of {team} was given the stacks of {', '.join(strangers)}")
        super().__init__(
            scope,
            naming.pipeline_stack_name(team),
            pipeline,
            role_name=naming.pipeline_role_name(team),
            description=f"promotion of {team}'s gated LLM endpoint through the environments",
            commands=team_synth_commands(team, environments),
            synth_permissions=self._resolve_permissions(deployments),
        )
        self.team = team
        for environment, team_deployments in stages:
            stage = EnvironmentStage(self, environment, team_deployments)
            self.stages.append(stage)
            pre = (
                [
                    pipelines.ManualApprovalStep(
                        f"Promote-to-{environment.name}", comment=f"Promote {team}'s proven model to {environment.name}"
                    )
                ]
                if environment.requires_approval
                else []
            )
            post = [GateStep(d) for d in team_deployments if d.candidate is not None]
            self.pipeline.add_stage(stage, pre=pre, post=post)
        self._finish()
        self._trigger_on_approval(deployments)
        if team_file is not None:
            self._start_on_own_changes(pipeline, team_file)

    def _start_on_own_changes(self, pipeline: Pipeline, team_file: str) -> None:
        """A push starts this pipeline only when it changes what the team's synth reads: its own file, the
        environments, the locks or optigate itself, not another team's file (200 pipelines started by every
        push would queue past CodeBuild's concurrent builds and fail other teams' builds). A CodeConnections
        source only: CodeCommit's source has no file path filter, so it keeps starting on every push."""
        if pipeline.source.codecommit:
            return
        (source_action,) = self.pipeline.pipeline.stages[0].actions
        self.pipeline.pipeline.add_trigger(
            provider_type=codepipeline.ProviderType.CODE_STAR_SOURCE_CONNECTION,
            git_configuration=codepipeline.GitConfiguration(
                source_action=source_action,
                push_filter=[
                    codepipeline.GitPushFilter(
                        branches_includes=[pipeline.source.branch],
                        # CodePipeline takes at most 8 file path patterns per filter.
                        file_paths_includes=[
                            team_file,
                            "config/environments.yaml",
                            "config/locks/**",
                            "optigate/**",
                            "scripts/**",
                            "app.py",
                            "pyproject.toml",
                            "*.json",
                        ],
                    )
                ],
            ),
        )

    @staticmethod
    def _resolve_permissions(deployments: Sequence[Deployment]) -> list[iam.PolicyStatement]:
        """`optigate resolve --team` reads the team's gate group in each environment (shared with this
        account by the group's resource policy): two ARNs per environment, whatever the number of teams."""
        readable = []
        for deployment in deployments:
            if deployment.candidate is None:
                continue
            environment, group = (
                deployment.environment,
                package_group(deployment.team.team, deployment.environment.name),
            )
            base = f"arn:{Aws.PARTITION}:sagemaker:{environment.region}:{environment.account}"
            readable += [f"{base}:model-package-group/{group}", f"{base}:model-package/{group}/*"]
        statements = [iam.PolicyStatement(actions=["sagemaker:ListModelPackages"], resources=["*"])]
        if readable:
            statements.append(
                iam.PolicyStatement(
                    actions=["sagemaker:DescribeModelPackage", "sagemaker:DescribeModelPackageGroup"],
                    resources=readable,
                )
            )
        return statements

    def _trigger_on_approval(self, deployments: Sequence[Deployment]) -> None:
        """A package Approved by one of this team's gates starts this team's pipeline, which then serves
        it; another team's approval does not. Environments in other accounts forward the event here
        (TeamInferenceStack), where the platform's event bus policy accepts it."""
        groups = sorted({package_group(d.team.team, d.environment.name) for d in deployments if d.candidate})
        if not groups:
            return
        rule = events.Rule(
            self,
            "ModelPackageApproved",
            # Named as its pipeline (within the role name's 64 characters, so EventBridge's 64 too): the platform's
            # trigger role accepts rules by this prefix only.
            rule_name=self.stack_name,
            description=f"optigate: a gate of {self.team} approved a model package; promote it",
            event_pattern=approval_event_pattern(groups),
        )
        # The platform's trigger role, allowed to start any team pipeline: one role, not one per team.
        trigger = iam.Role.from_role_name(self, "TriggerRole", naming.PIPELINE_TRIGGER_ROLE, mutable=False)
        rule.add_target(targets.CodePipeline(self.pipeline.pipeline, event_role=trigger))


class PlatformStack(_PromotionPipeline):
    """The platform's pipeline: `optigate check` of every team on every push, and what every team shares."""

    def __init__(self, scope: Construct, pipeline: Pipeline, environments: Sequence[Environment]) -> None:
        super().__init__(
            scope,
            naming.PLATFORM_STACK,
            pipeline,
            role_name=naming.PLATFORM_ROLE,
            description="the platform's shared resources and the check of every team's config",
            commands=platform_synth_commands(),
            synth_permissions=[],
        )
        self._finish()
        self._accept_approvals(environments)
        self._trigger_role()

    def _trigger_role(self) -> None:
        """The role EventBridge assumes to start a team's pipeline on one of its gates' approvals (each
        team pipeline's rule names it): one statement for every team pipeline, by the naming prefix."""
        role = iam.Role(
            self,
            "TriggerRole",
            role_name=naming.PIPELINE_TRIGGER_ROLE,
            # Only this account's team pipeline rules (each named as its pipeline) may pass it: EventBridge's
            # confused-deputy guidance (aws:SourceAccount, aws:SourceArn).
            assumed_by=iam.ServicePrincipal(
                "events.amazonaws.com",
                conditions={
                    "StringEquals": {"aws:SourceAccount": self.account},
                    "ArnLike": {
                        "aws:SourceArn": f"arn:{Aws.PARTITION}:events:{self.region}:{self.account}"
                        f":rule/{naming.PIPELINE_PREFIX}*"
                    },
                },
            ),
            description="optigate: an approval in a team's gate starts that team's pipeline",
        )
        nag.allow(
            role,
            ["codepipeline:StartPipelineExecution"],
            [f"arn:{Aws.PARTITION}:codepipeline:{self.region}:{self.account}:{naming.PIPELINE_PREFIX}*"],
            why_wildcard="Every team's promotion pipeline (optigate-pipeline-<team>), which one approval rule "
            "per team starts; the rule, not this role, chooses the pipeline.",
        )

    def _accept_approvals(self, environments: Sequence[Environment]) -> None:
        """Environments in other accounts forward their gates' approvals to this account's default bus,
        where each team's pipeline rule picks its own."""
        senders = sorted({e.account for e in environments if e.account != self.account})
        if not senders:
            return
        # The raw resource: CfnEventBusPolicy warns about its deprecated `principal` prop even
        # unset, and the L2 EventBusPolicy cannot render an account principal in this CDK version.
        CfnResource(
            self,
            "AcceptApprovalsFromEnvironments",
            type="AWS::Events::EventBusPolicy",
            properties={
                "EventBusName": "default",
                "StatementId": "optigate-environments",
                "Statement": {
                    "Effect": "Allow",
                    "Principal": {"AWS": [f"arn:{Aws.PARTITION}:iam::{account}:root" for account in senders]},
                    "Action": "events:PutEvents",
                    "Resource": f"arn:{Aws.PARTITION}:events:{self.region}:{self.account}:event-bus/default",
                },
            },
        )
