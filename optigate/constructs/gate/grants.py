"""The IAM statements the gate's tasks carry (optigate.constructs.gate.tasks.sdk_task), scoped to the names in
optigate.naming: each built once here for the tasks that share it (a statement is applied once)."""

from __future__ import annotations

from aws_cdk import Aws, Stack
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from optigate import naming
from optigate.constructs.benchmark_fleet import BenchmarkFleet
from optigate.constructs.evaluation_job import EvaluationJob
from optigate.constructs.gate.resources import LiveConfig
from optigate.constructs.gate.tasks import ConstructGrant, Grant
from optigate.deployment.gate import GatePlan

PASSED_TO_SAGEMAKER = {"StringEquals": {"iam:PassedToService": "sagemaker.amazonaws.com"}}


def sagemaker_arn(scope: Construct, resource: str) -> str:
    stack = Stack.of(scope)
    return f"arn:{Aws.PARTITION}:sagemaker:{stack.region}:{stack.account}:{resource}"


def _run_arns(scope: Construct, plan: GatePlan, resource: str, *kinds: naming.RunKind) -> tuple[str, ...]:
    # SageMaker lower-cases names in its ARNs.
    return tuple(sagemaker_arn(scope, f"{resource}/{plan.run_name_pattern(kind).lower()}") for kind in kinds)


def temporary_resources(scope: Construct, plan: GatePlan) -> Grant:
    """The run's candidate and baseline-twin models, endpoint configs and endpoints (and its shadow config): one
    statement for every task that creates, describes or deletes one of them."""
    return Grant(
        (
            "sagemaker:CreateModel",
            "sagemaker:DeleteModel",
            "sagemaker:CreateEndpointConfig",
            "sagemaker:DeleteEndpointConfig",
            "sagemaker:CreateEndpoint",
            "sagemaker:DeleteEndpoint",
            "sagemaker:DescribeEndpoint",
            "sagemaker:AddTags",
        ),
        (
            *_run_arns(scope, plan, "model", "cand"),
            *_run_arns(scope, plan, "endpoint-config", "cand", "twin", *(("shadow",) if plan.shadow else ())),
            *_run_arns(scope, plan, "endpoint", "cand", "twin"),
        ),
        why_wildcard="Temporary candidate and baseline-twin resources are named <team>-<env>-cand-<run> and "
        "<team>-<env>-twin-<run>; the run id is known only at run time.",
    )


def optimization_jobs(scope: Construct, plan: GatePlan) -> Grant:
    return Grant(
        (
            "sagemaker:CreateOptimizationJob",
            "sagemaker:DescribeOptimizationJob",
            "sagemaker:StopOptimizationJob",
            "sagemaker:AddTags",
        ),
        _run_arns(scope, plan, "optimization-job", "opt"),
        why_wildcard="Optimization jobs are named <team>-<env>-opt-<run>; the run id is known only at run time.",
    )


def optimized_models(scope: Construct, plan: GatePlan) -> Grant:
    """The model an EAGLE job registers (OutputConfig.SageMakerModel): the job is created with the caller's
    permissions, so CreateModel on that name (whether SageMaker checks it on the caller is not documented;
    granting it is the fail-safe side); the gate reads it and deletes it on every path."""
    return Grant(
        ("sagemaker:CreateModel", "sagemaker:DescribeModel", "sagemaker:DeleteModel", "sagemaker:AddTags"),
        _run_arns(scope, plan, "model", "optm"),
        why_wildcard="The optimized models EAGLE jobs register are named <team>-<env>-optm-<run>; the run id is "
        "known only at run time.",
    )


def live_endpoint(scope: Construct, plan: GatePlan, live: LiveConfig) -> Grant:
    return Grant(
        ("sagemaker:DescribeEndpoint", "sagemaker:UpdateEndpoint"),
        (
            sagemaker_arn(scope, f"endpoint/{plan.live_endpoint.lower()}"),
            live.arn,
            *_run_arns(scope, plan, "endpoint-config", "shadow"),
        ),
        why_wildcard="The live endpoint moves between its CloudFormation config and this gate's shadow configs, "
        "named <team>-<env>-shadow-<run>.",
    )


def live_config_keys(scope: Construct, live: LiveConfig) -> tuple[Grant, ...]:
    """The shadow config repeats the live config's keys (volume, data capture). SageMaker creates a grant on them
    for the instances, as the caller of CreateEndpoint/UpdateEndpoint (the API reference of CreateEndpointConfig's
    KmsKeyId; kms:CreateGrant in SageMaker's permissions reference)."""
    keys = tuple(live.keys)
    if not keys:
        return ()
    region = Stack.of(scope).region
    return (
        Grant(("kms:DescribeKey",), keys),
        Grant(
            ("kms:CreateGrant",),
            keys,
            conditions={
                "Bool": {"kms:GrantIsForAWSResource": "true"},
                "StringEquals": {"kms:ViaService": f"sagemaker.{region}.amazonaws.com"},
            },
        ),
    )


VARIANT_METRICS = Grant(
    ("cloudwatch:GetMetricData",),
    ("*",),
    why_wildcard="GetMetricData has no resource-level permissions; it reads the mirrored variants' SageMaker metrics.",
)
LIST_MODEL_PACKAGES = Grant(
    ("sagemaker:ListModelPackages",),
    ("*",),
    why_wildcard="ListModelPackages has no resource-level permissions; "
    "the gate lists its own group to find its last proof.",
)


def group_packages(scope: Construct, group_name: str) -> Grant:
    return Grant(
        ("sagemaker:CreateModelPackage", "sagemaker:DescribeModelPackage", "sagemaker:AddTags"),
        (
            sagemaker_arn(scope, f"model-package/{group_name}/*"),
            sagemaker_arn(scope, f"model-package-group/{group_name}"),
        ),
        why_wildcard="Versions of this gate's own model package group.",
    )


def pass_role(role_arn: str) -> Grant:
    return Grant(("iam:PassRole",), (role_arn,), conditions=PASSED_TO_SAGEMAKER)


def use_key(key_arn: str) -> Grant:
    return Grant(("kms:Encrypt", "kms:Decrypt", "kms:GenerateDataKey"), (key_arn,))


def publish(topic_arn: str) -> Grant:
    return Grant(("sns:Publish",), (topic_arn,))


def invoke(function: lambda_.IFunction) -> Grant:
    return Grant(("lambda:InvokeFunction",), (function.function_arn,))


def invoke_with_versions(function: lambda_.IFunction) -> ConstructGrant:
    """CDK's grant_invoke (the function and its versions)."""
    return ConstructGrant(f"invoke {function.node.path}", function.grant_invoke)


def run_fleet(scope: Construct, fleet: BenchmarkFleet) -> tuple[ConstructGrant | Grant, ...]:
    """startExecution.sync of the benchmark fleet's state machine: start, describe and stop its executions, and
    the managed rule Step Functions uses to hear that one ended."""
    stack = Stack.of(scope)
    machine = fleet.state_machine
    executions = f"arn:{Aws.PARTITION}:states:{stack.region}:{stack.account}:execution:{machine.state_machine_name}:*"
    sync_rule = "rule/StepFunctionsGetEventsForStepFunctionsExecutionRule"
    return (
        ConstructGrant(f"start {machine.node.path}", machine.grant_start_execution),
        Grant(
            ("states:DescribeExecution", "states:StopExecution"),
            (executions,),
            why_wildcard="Executions of the benchmark fleet's own state machine (startExecution.sync).",
        ),
        Grant(
            ("events:PutTargets", "events:PutRule", "events:DescribeRule"),
            (f"arn:{Aws.PARTITION}:events:{stack.region}:{stack.account}:{sync_rule}",),
        ),
    )


def run_evaluation(plan: GatePlan, evaluation: EvaluationJob) -> ConstructGrant:
    """createProcessingJob.sync of the run's evaluation job (EvaluationJob.grant_run)."""
    return ConstructGrant(
        f"evaluate {evaluation.node.path}",
        lambda role: evaluation.grant_run(role, job_names=plan.run_name_pattern("eval")),
    )


def run_components(scope: Construct, plan: GatePlan) -> Grant:
    """The run's inference components on its twin and candidate endpoints: created on those endpoints (IAM checks
    CreateInferenceComponent on the endpoint and on the component), described and deleted."""
    components = tuple(
        sagemaker_arn(scope, f"inference-component/{pattern.lower()}")
        for pattern in naming.run_component_patterns(plan.team, plan.environment)
    )
    return Grant(
        (
            "sagemaker:CreateInferenceComponent",
            "sagemaker:DescribeInferenceComponent",
            "sagemaker:DeleteInferenceComponent",
            "sagemaker:AddTags",
        ),
        (*components, *_run_arns(scope, plan, "endpoint", "cand", "twin")),
        why_wildcard="A run's inference components are named <team>-<env>-twcNN-<run> and <team>-<env>-cacNN-<run> "
        "on its <team>-<env>-twin-<run> and -cand-<run> endpoints; the run id is known only at run time.",
    )


def list_components() -> Grant:
    """ListInferenceComponents has no resource scope (the service authorization reference lists only `*`)."""
    return Grant(
        ("sagemaker:ListInferenceComponents",),
        ("*",),
        why_wildcard="ListInferenceComponents supports no resource-level permission; the cleanup lists the run's "
        "components by name to delete what the run created.",
    )
