"""PipelineStack: CDK Pipelines carrying every team's stack dev → staging → prod, each stage gated.

source (CodeStar connection or CodeCommit) → synth (set up, run the tests, `optigate resolve` every
environment, `cdk synth -c pipeline=true`) → self-mutation and assets → one stage per environment
in environments.yaml order: [manual approval when `requires_approval`] → deploy every team stack of
the environment (in parallel: they are independent) → every team's gate as a blocking Step
Functions invoke action. The cloud assembly, lock files included, is built once, so what staging
proved is exactly what prod deploys. An Approved model package in any environment starts the
pipeline again (EventBridge), which then serves it there.
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

PIPELINE_STACK = "optigate-pipeline"


class EnvironmentStage(Stage):
    """Every team's stack in one environment (one account and region)."""

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


def synth_commands(environments: Sequence[Environment]) -> list[str]:
    """What the synth step runs: set up as CI does, run the tests, resolve every lock, synthesize."""
    return [
        "bash scripts/test.sh",
        ". scripts/setup.sh",
        *(f"optigate resolve --env {environment.name}" for environment in environments),
        "cdk synth -c pipeline=true",
    ]


class PipelineStack(Stack):
    """The promotion pipeline in the tools account (see the module docstring)."""

    def __init__(
        self, scope: Construct, pipeline: Pipeline, stages: Sequence[tuple[Environment, Sequence[Deployment]]]
    ) -> None:
        super().__init__(
            scope,
            PIPELINE_STACK,
            env=CdkEnvironment(account=pipeline.account, region=pipeline.region),
            description="optigate: promotion of gated LLM endpoints through the environments",
        )
        environments = [environment for environment, _ in stages]
        source = self._source(pipeline)
        synth = pipelines.CodeBuildStep(
            "Synth",
            input=source,
            commands=synth_commands(environments),
            primary_output_directory="cdk.out",
            # As in optigate/containers/evaluate: the CPU build of torch for fmeval, not a multi-GB CUDA one.
            env={"PIP_EXTRA_INDEX_URL": "https://download.pytorch.org/whl/cpu"},
            role_policy_statements=self._resolve_permissions([d for _, ds in stages for d in ds]),
        )
        # A fixed name: each environment's gate invoker role trusts this role only (optigate.naming).
        self.pipeline_role = iam.Role(
            self,
            "PipelineRole",
            role_name=naming.pipeline_role_name(),
            assumed_by=iam.ServicePrincipal("codepipeline.amazonaws.com"),
            description="optigate: the promotion pipeline (the only principal that may start a gate)",
        )
        self.pipeline = pipelines.CodePipeline(
            self,
            "Pipeline",
            pipeline_name="optigate",
            # V2 explicitly (CDK warns about the V1 default): billed per action-minute rather than per
            # active pipeline and month; a gate's Step Functions action is billed while it waits for
            # the gate, manual approvals are not. Pushes to the branch still start it (no triggers set).
            pipeline_type=codepipeline.PipelineType.V2,
            role=self.pipeline_role,
            synth=synth,
            cross_account_keys=True,  # each environment's account decrypts the artifacts it deploys
            enable_key_rotation=True,
            code_build_defaults=pipelines.CodeBuildOptions(
                build_environment=codebuild.BuildEnvironment(build_image=codebuild.LinuxBuildImage.STANDARD_7_0)
            ),
        )
        self.stages: list[EnvironmentStage] = []
        for environment, deployments in stages:
            stage = EnvironmentStage(self, environment, deployments)
            self.stages.append(stage)
            pre = (
                [
                    pipelines.ManualApprovalStep(
                        f"Promote-to-{environment.name}", comment=f"Promote the proven models to {environment.name}"
                    )
                ]
                if environment.requires_approval
                else []
            )
            post = [GateStep(d) for d in deployments if d.candidate is not None]
            self.pipeline.add_stage(stage, pre=pre, post=post)
        self.pipeline.build_pipeline()
        self._trigger_on_approval(environments)
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

    @staticmethod
    def _resolve_permissions(deployments: Sequence[Deployment]) -> list[iam.PolicyStatement]:
        """`optigate resolve` reads each environment's gate groups (shared with this account by the
        groups' resource policies)."""
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
                    "optigate resolve reads the versions of each environment's gate model package group; "
                    "ListModelPackages has no resource scope."
                )
            return (
                "Generated by CDK Pipelines: objects of the pipeline's "
                "own artifact buckets (per-execution keys), its KMS key, "
                "logs and reports of its own CodeBuild projects, "
                "and the cdk bootstrap roles it assumes to publish and deploy."
            )

        for generated in (self.pipeline, self.pipeline_role):  # CDK writes the named role's policy too
            nag.acknowledge_generated_wildcards(generated, reason_for)
        no_access_logs = (
            "A CDK Pipelines artifact bucket: only the pipeline's "
            "roles reach it, objects are KMS-encrypted and expire with "
            "the pipeline's executions; CloudTrail records access. Access logs would need a log bucket per region."
        )
        nag.acknowledge(self.pipeline.pipeline.artifact_bucket, "AwsSolutions-S1", no_access_logs)
        # Environments in another region get a replication bucket in a support stack CDK names
        # cross-region-stack-<account>:<region> (that is not the cross-account support stack).
        for child in self.node.root.node.children:
            if isinstance(child, Stack) and child.node.id.startswith("cross-region-stack"):
                nag.acknowledge(child, "AwsSolutions-S1", no_access_logs)

    def _trigger_on_approval(self, environments: Sequence[Environment]) -> None:
        """A package Approved by any environment's gate starts the pipeline, which then serves it.
        Environments in other accounts forward the event here (TeamInferenceStack)."""
        rule = events.Rule(
            self,
            "ModelPackageApproved",
            description="optigate: a gate approved a model package; promote it",
            event_pattern=approval_event_pattern({"prefix": "optigate-"}),
        )
        rule.add_target(targets.CodePipeline(self.pipeline.pipeline))
        senders = sorted({e.account for e in environments if e.account != self.account})
        if senders:
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
