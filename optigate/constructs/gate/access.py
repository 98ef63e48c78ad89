"""Who may do what around a gate: the state machine's grants (scoped to the names in
optigate.naming), the promotion pipeline's invoker role, and the model package group's policy."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from aws_cdk import Aws, Stack
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from constructs import Construct

from optigate import naming
from optigate.constructs import nag
from optigate.constructs.benchmark_fleet import BenchmarkFleet, generated_policy_reason
from optigate.constructs.evaluation_job import EvaluationJob
from optigate.constructs.gate.spec import GateSpec

if TYPE_CHECKING:
    from optigate.constructs.gate.construct import OptimizationGate


def approval_event_pattern(group: str | dict[str, str]) -> events.EventPattern:
    """SageMaker's event for a package of `group` (a name, or an EventBridge matcher) turning Approved."""
    return events.EventPattern(
        source=["aws.sagemaker"],
        detail_type=["SageMaker Model Package State Change"],
        detail={"ModelApprovalStatus": ["Approved"], "ModelPackageGroupName": [group]},
    )


def _sagemaker_arn(scope: Construct, resource: str) -> str:
    stack = Stack.of(scope)
    return f"arn:{Aws.PARTITION}:sagemaker:{stack.region}:{stack.account}:{resource}"


def other_pipeline_account(scope: Construct, spec: GateSpec) -> str | None:
    """The pipeline's account when it is not the gate's own."""
    if spec.pipeline is None:
        return None
    account = spec.pipeline[0]
    return None if account == Stack.of(scope).account else account


def group_policy(scope: Construct, spec: GateSpec, group_name: str) -> dict[str, Any] | None:
    """The pipeline's tools account resolves locks from this group (`optigate resolve`)."""
    account = other_pipeline_account(scope, spec)
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
                    _sagemaker_arn(scope, f"model-package-group/{group_name}"),
                    _sagemaker_arn(scope, f"model-package/{group_name}/*"),
                ],
            }
        ],
    }


def live_config_keys(request: dict[str, Any]) -> list[str]:
    """The KMS keys an endpoint config request names: its volume key and its data capture key."""
    keys = [request.get("KmsKeyId"), (request.get("DataCaptureConfig") or {}).get("KmsKeyId")]
    return list(dict.fromkeys(key for key in keys if key))


def pipeline_access(gate: OptimizationGate) -> iam.Role:
    """The invoker role the pipeline's Step Functions action assumes, and approvals forwarded to
    the pipeline account's default event bus (which starts the pipeline)."""
    spec = gate.spec
    if spec.pipeline is None:
        raise ValueError(f"the gate of {spec.prefix} has no promotion pipeline")
    account, region = spec.pipeline
    stack = Stack.of(gate)
    pipeline_role = f"arn:{Aws.PARTITION}:iam::{account}:role/{naming.pipeline_role_name()}"
    role = iam.Role(
        gate,
        "Invoker",
        role_name=naming.gate_invoker_role_name(spec.team, spec.environment),
        # Only the pipeline's own role, not every principal of the tools account that may assume roles:
        # a gate creates GPU endpoints and, with a shadow rollout, mirrors live traffic.
        assumed_by=iam.AccountPrincipal(account).with_conditions({"ArnEquals": {"aws:PrincipalArn": pipeline_role}}),
        description=f"The optigate pipeline runs the gate of {spec.prefix}",
    )
    # CodePipeline's Step Functions action describes the state machine before it starts an execution
    # (CDK grants both to the roles it creates for that action; this role is imported there).
    nag.allow(role, ["states:StartExecution", "states:DescribeStateMachine"], [gate.state_machine.state_machine_arn])
    machine = naming.gate_state_machine_name(spec.team, spec.environment)
    nag.allow(
        role,
        ["states:DescribeExecution", "states:StopExecution"],
        [f"arn:{Aws.PARTITION}:states:{stack.region}:{stack.account}:execution:{machine}:*"],
        why_wildcard="Executions of this gate's state machine, started by the pipeline.",
    )
    if other_pipeline_account(gate, spec) is not None or region != stack.region:
        bus = events.EventBus.from_event_bus_arn(
            gate, "PipelineBus", f"arn:{Aws.PARTITION}:events:{region}:{account}:event-bus/default"
        )
        rule = events.Rule(
            gate,
            "ForwardApprovals",
            description=f"optigate: approvals of {gate.group_name} start the promotion pipeline",
            event_pattern=approval_event_pattern(gate.group_name),
        )
        rule.add_target(targets.EventBus(bus))
    return role


def grant_gate(gate: OptimizationGate, fleet: BenchmarkFleet, evaluation: EvaluationJob) -> None:
    """What the gate's state machine may do: its own per-run resources, its group, its fleet and evaluation."""
    spec = gate.spec
    role = gate.state_machine.role
    stack = Stack.of(gate)

    def arns(resource: str, *kinds: naming.RunKind) -> list[str]:
        # SageMaker lower-cases names in its ARNs.
        return [_sagemaker_arn(gate, f"{resource}/{spec.run_name_pattern(kind).lower()}") for kind in kinds]

    nag.allow(
        role,
        [
            "sagemaker:CreateModel",
            "sagemaker:DeleteModel",
            "sagemaker:CreateEndpointConfig",
            "sagemaker:DeleteEndpointConfig",
            "sagemaker:CreateEndpoint",
            "sagemaker:DeleteEndpoint",
            "sagemaker:DescribeEndpoint",
            "sagemaker:AddTags",
        ],
        [
            *arns("model", "cand"),
            *arns("endpoint-config", "cand", "twin", *(("shadow",) if spec.shadow else ())),
            *arns("endpoint", "cand", "twin"),
        ],
        why_wildcard="Temporary candidate and baseline-twin resources are named <team>-<env>-cand-<run> and "
        "<team>-<env>-twin-<run>; the run id is known only at run time.",
    )
    if spec.optimization_configs:
        nag.allow(
            role,
            [
                "sagemaker:CreateOptimizationJob",
                "sagemaker:DescribeOptimizationJob",
                "sagemaker:StopOptimizationJob",
                "sagemaker:AddTags",
            ],
            arns("optimization-job", "opt"),
            why_wildcard="Optimization jobs are named <team>-<env>-opt-<run>; the run id is known only at run time.",
        )
    if spec.trained_head is not None:
        # The EAGLE job registers its output as a model (OutputConfig.SageMakerModel): the job is created with the
        # caller's permissions, so CreateModel on that name (whether SageMaker checks it on the caller is not
        # documented; granting it is the fail-safe side); the gate reads it and deletes it on every path.
        nag.allow(
            role,
            ["sagemaker:CreateModel", "sagemaker:DescribeModel", "sagemaker:DeleteModel", "sagemaker:AddTags"],
            arns("model", "optm"),
            why_wildcard="The optimized models EAGLE jobs register are named <team>-<env>-optm-<run>; the run id is "
            "known only at run time.",
        )
    if spec.shadow:
        live = _sagemaker_arn(gate, f"endpoint/{spec.live_endpoint.lower()}")
        nag.allow(
            role,
            ["sagemaker:DescribeEndpoint", "sagemaker:UpdateEndpoint"],
            [live, spec.shadow.live_config_arn, *arns("endpoint-config", "shadow")],
            why_wildcard="The live endpoint moves between its CloudFormation config and this gate's shadow configs, "
            "named <team>-<env>-shadow-<run>.",
        )
        keys = live_config_keys(spec.shadow.live_config_request)
        if keys:
            # The shadow config repeats the live config's keys (volume, data capture). SageMaker creates a
            # grant on them for the instances, as the caller of CreateEndpoint/UpdateEndpoint (the API
            # reference of CreateEndpointConfig's KmsKeyId; kms:CreateGrant in SageMaker's permissions reference).
            nag.allow(role, ["kms:DescribeKey"], keys)
            nag.allow(
                role,
                ["kms:CreateGrant"],
                keys,
                conditions={
                    "Bool": {"kms:GrantIsForAWSResource": "true"},
                    "StringEquals": {"kms:ViaService": f"sagemaker.{stack.region}.amazonaws.com"},
                },
            )
        nag.allow(
            role,
            ["cloudwatch:GetMetricData"],
            ["*"],
            why_wildcard="GetMetricData has no resource-level permissions; "
            "it reads the mirrored variants' SageMaker metrics.",
        )
    nag.allow(
        role,
        ["sagemaker:ListModelPackages"],
        ["*"],
        why_wildcard="ListModelPackages has no resource-level permissions; "
        "the gate lists its own group to find its last proof.",
    )
    nag.allow(
        role,
        ["sagemaker:CreateModelPackage", "sagemaker:DescribeModelPackage", "sagemaker:AddTags"],
        [
            _sagemaker_arn(gate, f"model-package/{gate.group_name}/*"),
            _sagemaker_arn(gate, f"model-package-group/{gate.group_name}"),
        ],
        why_wildcard="Versions of this gate's own model package group.",
    )
    nag.allow(
        role,
        ["iam:PassRole"],
        [spec.model_role_arn],
        conditions={"StringEquals": {"iam:PassedToService": "sagemaker.amazonaws.com"}},
    )
    gate.decider.grant_invoke(role)
    fleet.state_machine.grant_start_execution(role)
    fleet_machine = fleet.state_machine.state_machine_name
    fleet_executions = f"arn:{Aws.PARTITION}:states:{stack.region}:{stack.account}:execution:{fleet_machine}:*"
    nag.allow(
        role,
        ["states:DescribeExecution", "states:StopExecution"],
        [fleet_executions],
        why_wildcard="Executions of the benchmark fleet's own state machine (startExecution.sync).",
    )
    sync_rule = "rule/StepFunctionsGetEventsForStepFunctionsExecutionRule"
    nag.allow(
        role,
        ["events:PutTargets", "events:PutRule", "events:DescribeRule"],
        [f"arn:{Aws.PARTITION}:events:{stack.region}:{stack.account}:{sync_rule}"],
    )
    evaluation.grant_run(role, job_names=spec.run_name_pattern("eval"))
    nag.allow(role, ["sns:Publish"], [gate.topic.topic_arn])
    nag.allow(role, ["kms:Encrypt", "kms:Decrypt", "kms:GenerateDataKey"], [gate.key.key_arn])
    nag.acknowledge_generated_wildcards(gate.state_machine, generated_policy_reason)
