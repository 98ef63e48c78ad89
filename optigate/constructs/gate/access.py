"""Who may do what around a gate besides its state machine (whose grants its tasks carry: grants.py): the
promotion pipeline's invoker role, the approvals forwarded to it, and the model package group's policy."""

from __future__ import annotations

from typing import Any

from aws_cdk import Aws, Stack
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from constructs import Construct

from optigate import naming
from optigate.constructs import nag
from optigate.constructs.gate.grants import sagemaker_arn
from optigate.deployment.gate import GatePlan


def approval_event_pattern(group: str | dict[str, str] | list[str]) -> events.EventPattern:
    """SageMaker's event for a package of `group` (a name, several, or an EventBridge matcher) turning Approved."""
    groups = group if isinstance(group, list) else [group]
    return events.EventPattern(
        source=["aws.sagemaker"],
        detail_type=["SageMaker Model Package State Change"],
        detail={"ModelApprovalStatus": ["Approved"], "ModelPackageGroupName": groups},
    )


def other_pipeline_account(scope: Construct, plan: GatePlan) -> str | None:
    """The pipeline's account when it is not the gate's own."""
    if plan.pipeline is None:
        return None
    account = plan.pipeline[0]
    return None if account == Stack.of(scope).account else account


def group_policy(scope: Construct, plan: GatePlan, group_name: str) -> dict[str, Any] | None:
    """The pipeline's tools account resolves locks from this group (`optigate resolve`)."""
    account = other_pipeline_account(scope, plan)
    if account is None:
        return None
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "PipelineResolvesApprovedPackages",
                "Effect": "Allow",
                "Principal": {"AWS": f"arn:{Aws.PARTITION}:iam::{account}:root"},
                "Action": [
                    "sagemaker:DescribeModelPackageGroup",
                    "sagemaker:DescribeModelPackage",
                    "sagemaker:ListModelPackages",
                ],
                "Resource": [
                    sagemaker_arn(scope, f"model-package-group/{group_name}"),
                    sagemaker_arn(scope, f"model-package/{group_name}/*"),
                ],
            }
        ],
    }


def pipeline_access(scope: Construct, plan: GatePlan, state_machine_arn: str, group_name: str) -> iam.Role:
    """The invoker role the pipeline's Step Functions action assumes, and approvals forwarded to
    the pipeline account's default event bus (which starts the pipeline)."""
    if plan.pipeline is None:
        raise ValueError(f"the gate of {plan.prefix} has no promotion pipeline")
    account, region = plan.pipeline
    stack = Stack.of(scope)
    # The team's own pipeline: another team's pipeline cannot start this gate.
    pipeline_role = f"arn:{Aws.PARTITION}:iam::{account}:role/{naming.pipeline_role_name(plan.team)}"
    role = iam.Role(
        scope,
        "Invoker",
        role_name=naming.gate_invoker_role_name(plan.team, plan.environment),
        # Only the pipeline's own role, not every principal of the tools account that may assume roles:
        # a gate creates GPU endpoints and, with a shadow rollout, mirrors live traffic.
        assumed_by=iam.AccountPrincipal(account).with_conditions({"ArnEquals": {"aws:PrincipalArn": pipeline_role}}),
        description=f"The team's optigate pipeline runs the gate of {plan.prefix}",
    )
    # CodePipeline's Step Functions action describes the state machine before it starts an execution
    # (CDK grants both to the roles it creates for that action; this role is imported there).
    nag.allow(role, ["states:StartExecution", "states:DescribeStateMachine"], [state_machine_arn])
    machine = naming.gate_state_machine_name(plan.team, plan.environment)
    nag.allow(
        role,
        ["states:DescribeExecution", "states:StopExecution"],
        [f"arn:{Aws.PARTITION}:states:{stack.region}:{stack.account}:execution:{machine}:*"],
        why_wildcard="Executions of this gate's state machine, started by the pipeline.",
    )
    if other_pipeline_account(scope, plan) is not None or region != stack.region:
        bus = events.EventBus.from_event_bus_arn(
            scope, "PipelineBus", f"arn:{Aws.PARTITION}:events:{region}:{account}:event-bus/default"
        )
        rule = events.Rule(
            scope,
            "ForwardApprovals",
            description=f"optigate: approvals of {group_name} start the promotion pipeline",
            event_pattern=approval_event_pattern(group_name),
        )
        rule.add_target(targets.EventBus(bus))
    return role
