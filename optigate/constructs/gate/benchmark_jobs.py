"""The function that creates, polls and stops the cross-check's managed benchmark jobs (optigate/lambdas/
ai_benchmark_jobs), and the Task states that call it.

Why a function and not `aws-sdk:sagemaker:createAIBenchmarkJob`: the Step Functions developer guide lists the
services its AWS SDK integration supports, not their operations, says recently released ones may be missing, and
names no SDK version (https://docs.aws.amazon.com/step-functions/latest/dg/supported-services-awssdk.html; its
change log: "API action support is released quarterly"). An action it does not support makes CloudFormation
reject the state machine at deploy, rolling back the whole team stack for an optional stage. The function runs the
boto3 and botocore its asset bundles (optigate.constructs.assets.bundled_sdk), checked at synth to know the
operations. tests/template_rules (SFN-SdkActionSupported) keeps every other aws-sdk call on the checked list."""

from __future__ import annotations

from typing import Any

from aws_cdk import Duration
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from optigate import naming
from optigate.constructs.assets import PACKAGE, bundled_sdk, stage
from optigate.constructs.common import function_role
from optigate.constructs.gate import grants
from optigate.constructs.gate.tasks import Grant, SdkTask, sdk_task
from optigate.deployment.gate import GatePlan
from optigate.lambdas import handler_source
from optigate.lambdas.ai_benchmark_jobs.handler import OPERATIONS
from optigate.lambdas.events import BenchmarkJobEvent

HANDLER = "ai_benchmark_jobs"


def jobs_grant(scope: Construct, plan: GatePlan) -> Grant:
    """Create, describe and stop the run's managed jobs, and only those."""
    pattern = naming.cross_check_job_pattern(plan.team, plan.environment).lower()
    return Grant(
        tuple(f"sagemaker:{operation}" for operation in OPERATIONS),
        (grants.sagemaker_arn(scope, f"ai-benchmark-job/{pattern}"),),
        why_wildcard="The managed benchmark jobs are named <team>-<env>-xc-<run>-<side><level>; the run id is known "
        "only at run time.",
    )


def jobs_function(scope: Construct, plan: GatePlan, job_role: iam.IRole) -> lambda_.Function:
    """The function, its role allowed the run's jobs, the level's workload configs a job reads, and passing the
    job's role to SageMaker (a job's Create passes its RoleArn)."""
    role, log_group = function_role(scope, "CrossCheckJobs")
    for grant in (
        jobs_grant(scope, plan),
        Grant(
            ("sagemaker:DescribeAIWorkloadConfig",),
            tuple(
                grants.sagemaker_arn(scope, f"ai-workload-config/{level.config_name}")
                for level in plan.cross_check_levels()
            ),
        ),
        grants.pass_role(job_role.role_arn),
    ):
        grant.apply(role)
    files = {
        "handler.py": handler_source(HANDLER),
        "events.py": PACKAGE / "lambdas" / "events.py",  # its event, BenchmarkJobEvent (standard library only)
        **bundled_sdk({"sagemaker": OPERATIONS}),
    }
    return lambda_.Function(
        scope,
        "CrossCheckJobsFunction",
        runtime=lambda_.Runtime.PYTHON_3_14,
        architecture=lambda_.Architecture.ARM_64,
        handler="handler.handler",
        code=lambda_.Code.from_asset(str(stage(HANDLER, files))),
        timeout=Duration.minutes(1),
        memory_size=256,
        role=role,
        log_group=log_group,
        description=f"optigate gate of {plan.prefix}: run SageMaker's managed benchmark jobs (the cross-check)",
    )


def job_task(
    scope: Construct,
    name: str,
    function: lambda_.IFunction,
    operation: str,
    request: dict[str, Any],
    *,
    result_path: str | None = sfn.JsonPath.DISCARD,
) -> SdkTask:
    """A Task invoking the function for one `operation` of OPERATIONS with its `request` (Describe's answer, the
    handler's {status, output, reason}, lands at `result_path`)."""
    if operation not in OPERATIONS:
        raise ValueError(f"{operation} is not one of {OPERATIONS}")
    return sdk_task(
        scope,
        name,
        "lambda:invoke",
        {
            "FunctionName": function.function_arn,
            "Payload": BenchmarkJobEvent(operation=operation, request=request).to_payload(),
        },
        grants=[grants.invoke(function)],
        result_path=result_path,
        result_selector={"status.$": "$.Payload.status", "output.$": "$.Payload.output", "reason.$": "$.Payload.reason"}
        if operation == "DescribeAIBenchmarkJob"
        else None,
    )
