"""SageMaker's managed benchmark as a cross-check beside the gate's own (gate.benchmark.cross_check: sagemaker).

After optigate's benchmark of every level (never at the same time: the two must not load the endpoints
together), for each level the baseline's twin then the candidate: CreateAIBenchmarkJob with the level's
AIWorkloadConfig (a CloudFormation resource of the team stack, one per level: a workload config holds one
concurrency), poll DescribeAIBenchmarkJob until Completed, Failed or Stopped (botocore's AIBenchmarkJobStatus),
stop it when the polls run out. The calls go through a small function (optigate.constructs.gate.benchmark_jobs:
Step Functions' AWS SDK integration does not list these operations, and an unsupported one would fail the deploy of
the whole stack). Each side's outcome lands at `$.xc_<side>_c<level>`:
`{"status": "Completed", "output": <S3OutputLocation>}` or `{"status", "reason"}`; the decision Lambda reads the
output and puts both engines side by side in the report (optigate.gate.cross_check).

Fail closed: a job that cannot be created, fails, is stopped or times out makes its cross-check "unavailable" with
the reason; nothing here can fail the gate or decide it (every error is caught inside the cross-check, which then
leads on to the evaluation), and the verdict is optigate's. Every path through the cleanup stops the run's jobs
(a stop of a finished or never-created job fails, and that failure is caught).

What SageMaker's documentation says the job needs: "A SageMaker AI endpoint in InService status hosting an LLM
that supports the OpenAI-compatible chat completions API", an S3 bucket for the output and "An IAM execution role
that grants SageMaker AI access to your endpoint and output bucket"
(https://docs.aws.amazon.com/sagemaker/latest/dg/generative-ai-inference-recommendations-benchmark.html).
The gate's endpoints are InService when the gate benchmarks them; the config rules refuse containers without the
chat completions API and models without a tokenizer AIPerf can download (optigate.config.rules)."""

from __future__ import annotations

from typing import Any

from aws_cdk import Aws, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sagemaker as sagemaker
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from optigate import naming
from optigate.constructs import nag
from optigate.constructs.gate.benchmark_jobs import job_task
from optigate.constructs.gate.tasks import PollStates, poll_loop, run_name
from optigate.deployment.cross_check import CrossCheckLevel
from optigate.deployment.gate import GatePlan

SIDES: tuple[tuple[str, naming.RunKind, str], ...] = (
    ("baseline", "twin", "Baseline"),
    ("candidate", "cand", "Candidate"),
)
#: Where a run's managed jobs write (the gate's results bucket): `crosscheck/<run>/<side>-c<level>/`.
OUTPUT_PREFIX = "crosscheck"
#: The job's log group. No page names it (the API reference only returns `OutputConfig.CloudWatchLogs`); SageMaker
#: jobs log to /aws/sagemaker/<Kind>Jobs, so this is that convention, unverified until a real run.
LOG_GROUP = "/aws/sagemaker/AIBenchmarkJobs"


def result_path(side: str, concurrency: int) -> str:
    return f"$.xc_{side}_c{concurrency}"


def job_name(plan: GatePlan, side: str, concurrency: int) -> str:
    """The job's name as a Step Functions expression formatting the run id into it."""
    return f"States.Format('{plan.cross_check_job_template(side, concurrency)}', $.run.id)"


def _output_location(bucket_name: str, side: str, concurrency: int) -> str:
    template = f"s3://{bucket_name}/{OUTPUT_PREFIX}/{{}}/{side}-c{concurrency}/"
    return f"States.Format('{template}', $.run.id)"


def workload_configs(scope: Construct, plan: GatePlan) -> list[sagemaker.CfnAIWorkloadConfig]:
    """One AWS::SageMaker::AIWorkloadConfig per benchmarked level, named with its workload's hash (every property
    is create-only, so a changed workload is a new resource with a new name)."""
    return [
        sagemaker.CfnAIWorkloadConfig(
            scope,
            f"Workload{level.concurrency}",
            ai_workload_config_name=level.config_name,
            ai_workload_configs=sagemaker.CfnAIWorkloadConfig.AIWorkloadConfigsProperty(
                workload_spec=sagemaker.CfnAIWorkloadConfig.WorkloadSpecProperty(inline=level.workload)
            ),
        )
        for level in plan.cross_check_levels()
    ]


def job_role(scope: Construct, plan: GatePlan, bucket: s3.IBucket, key: kms.IKey) -> iam.Role:
    """What the managed job runs as: invoke the run's two temporary endpoints (never the live one), write its
    output prefix in the gate's bucket (encrypted with the gate's key), and write its logs."""
    stack = Stack.of(scope)
    role = iam.Role(
        scope,
        "CrossCheckRole",
        assumed_by=iam.ServicePrincipal("sagemaker.amazonaws.com"),
        description=f"SageMaker's managed benchmark of the gate of {plan.prefix} (the cross-check)",
    )
    endpoints = [
        f"arn:{Aws.PARTITION}:sagemaker:{stack.region}:{stack.account}:endpoint/{pattern.lower()}"
        for pattern in naming.invocable_endpoints(plan.team, plan.environment)
    ]
    nag.allow(
        role,
        ["sagemaker:InvokeEndpoint", "sagemaker:InvokeEndpointWithResponseStream", "sagemaker:DescribeEndpoint"],
        endpoints,
        why_wildcard="The run's candidate and baseline-twin endpoints, <team>-<env>-cand-<run> and "
        "<team>-<env>-twin-<run>; the run id is known only at run time.",
    )
    nag.allow(
        role,
        ["s3:PutObject"],
        [bucket.arn_for_objects(f"{OUTPUT_PREFIX}/*")],
        why_wildcard="The managed jobs' outputs, crosscheck/<run>/<side>-c<level>/; the run id is known only at run "
        "time.",
    )
    # Decrypt too: a multipart upload to an SSE-KMS bucket reads the data key back (S3 user guide, "Multipart
    # upload and permissions": kms:Decrypt and kms:GenerateDataKey).
    nag.allow(role, ["kms:Decrypt", "kms:Encrypt", "kms:GenerateDataKey"], [key.key_arn])
    nag.allow(
        role,
        ["logs:CreateLogGroup", "logs:CreateLogStream", "logs:PutLogEvents"],
        [f"arn:{Aws.PARTITION}:logs:{stack.region}:{stack.account}:log-group:{LOG_GROUP}:*"],
        why_wildcard="The managed benchmark jobs' log group and its streams (one per job).",
    )
    return role


def _unavailable(scope: Construct, name: str, path: str, reason: dict[str, Any]) -> sfn.Pass:
    return sfn.Pass(scope, name, parameters=reason, result_path=path)


# Over 80 lines: one managed job's states (create, poll, read, fail) chained in the order they run.
def _one_job(
    scope: Construct,
    plan: GatePlan,
    role: iam.IRole,
    jobs: lambda_.IFunction,
    bucket_name: str,
    level: CrossCheckLevel,
    side: str,
    kind: naming.RunKind,
    label: str,
) -> tuple[sfn.IChainable, list[sfn.INextable]]:
    """One side's managed job at one level: its first state and the states that end it (to chain on)."""
    check = plan.cross_check
    if check is None:
        raise ValueError(f"the gate of {plan.prefix} has no cross-check")
    c = level.concurrency
    prefix = f"CrossCheck{label}C{c}"
    path = result_path(side, c)
    ends: list[sfn.INextable] = []

    def end(state: sfn.Pass) -> sfn.Pass:
        ends.append(state)
        return state

    not_started = end(
        _unavailable(
            scope,
            f"{prefix}NotStarted",
            path,
            {"status": "NotStarted", "reason.$": "States.Format('CreateAIBenchmarkJob: {}', $.xc_error.Cause)"},
        )
    )
    create = job_task(
        scope,
        f"{prefix}Create",
        jobs,
        "CreateAIBenchmarkJob",
        {
            "AIBenchmarkJobName.$": job_name(plan, side, c),
            "BenchmarkTarget": {"Endpoint": {"Identifier.$": run_name(plan, kind)}},
            "OutputConfig": {"S3OutputLocation.$": _output_location(bucket_name, side, c)},
            "AIWorkloadConfigIdentifier": level.config_name,
            "RoleArn": role.role_arn,
        },
    )
    create.add_catch(not_started, errors=["States.ALL"], result_path="$.xc_error")
    completed = end(
        sfn.Pass(
            scope,
            f"{prefix}Completed",
            parameters={"status": "Completed", "output.$": "$.xc_job.output"},
            result_path=path,
        )
    )
    status = "$.xc_job.status"
    explained = end(_unavailable(scope, f"{prefix}Ended", path, {"status.$": status, "reason.$": "$.xc_job.reason"}))
    unexplained = end(_unavailable(scope, f"{prefix}EndedWithoutReason", path, {"status.$": status}))
    ended = (
        sfn.Choice(scope, f"{prefix}Reason?")
        .when(sfn.Condition.is_not_null("$.xc_job.reason"), explained)
        .otherwise(unexplained)
    )
    timed_out = end(
        _unavailable(
            scope,
            f"{prefix}TimedOut",
            path,
            {
                "status": "TimedOut",
                "reason": f"the managed job did not finish within {check.max_polls} polls of {check.poll_seconds} s; "
                "the gate stopped it",
            },
        )
    )
    not_stopped = end(
        _unavailable(
            scope,
            f"{prefix}NotStopped",
            path,
            {
                "status": "TimedOut",
                "reason.$": "States.Format('the managed job did not finish and could not be stopped (stop it by "
                "hand): {}', $.xc_error.Cause)",
            },
        )
    )
    stop = job_task(
        scope, f"{prefix}Stop", jobs, "StopAIBenchmarkJob", {"AIBenchmarkJobName.$": job_name(plan, side, c)}
    )
    stop.add_catch(not_stopped, errors=["States.ALL"], result_path="$.xc_error")
    stop.next(timed_out)
    # A Describe that keeps failing: stop the job (it must not load the endpoint beside the next one), then say so.
    lost = end(
        _unavailable(
            scope,
            f"{prefix}Lost",
            path,
            {"status": "Unknown", "reason.$": "States.Format('DescribeAIBenchmarkJob: {}', $.xc_error.Cause)"},
        )
    )
    stop_lost = job_task(
        scope, f"{prefix}StopLost", jobs, "StopAIBenchmarkJob", {"AIBenchmarkJobName.$": job_name(plan, side, c)}
    )
    stop_lost.add_catch(lost, errors=["States.ALL"], result_path="$.xc_stop_error")
    stop_lost.next(lost)
    describe = job_task(
        scope,
        f"{prefix}Describe",
        jobs,
        "DescribeAIBenchmarkJob",
        {"AIBenchmarkJobName.$": job_name(plan, side, c)},
        result_path="$.xc_job",
    )
    describe.add_catch(stop_lost, errors=["States.ALL"], result_path="$.xc_error")
    loop = poll_loop(
        scope,
        PollStates(reset=f"{prefix}ResetPolls", wait=f"{prefix}Wait", count=f"{prefix}Count", choice=f"{prefix}Done?"),
        describe=describe,
        until=[
            (sfn.Condition.string_equals(status, "Completed"), completed),
            (
                sfn.Condition.or_(
                    sfn.Condition.string_equals(status, "Failed"), sfn.Condition.string_equals(status, "Stopped")
                ),
                ended,
            ),
        ],
        timed_out=stop,
        poll_seconds=check.poll_seconds,
        max_polls=check.max_polls,
        counter="$.xc_polls",
    )
    create.next(loop.entry)
    return create, ends


def cross_check_states(
    scope: Construct, plan: GatePlan, role: iam.IRole, jobs: lambda_.IFunction, bucket_name: str, then: sfn.IChainable
) -> sfn.IChainable:
    """Every level's managed jobs, one after the other (baseline twin, then candidate), then `then`."""
    first: sfn.IChainable | None = None
    previous_ends: list[sfn.INextable] = []
    for level in plan.cross_check_levels():
        for side, kind, label in SIDES:
            start, ends = _one_job(scope, plan, role, jobs, bucket_name, level, side, kind, label)
            if first is None:
                first = start
            for state in previous_ends:
                state.next(start)
            previous_ends = ends
    if first is None:
        return then
    for state in previous_ends:
        state.next(then)
    return first


def stop_all(scope: Construct, plan: GatePlan, jobs: lambda_.IFunction, then: sfn.IChainable) -> sfn.IChainable:
    """The cleanup's first steps: stop every managed job of the run (a job that finished or never started makes
    its stop fail, which is caught), then `then`."""
    stops: list[sfn.CustomState] = [
        job_task(
            scope,
            f"CleanupStopCrossCheck{label}C{level.concurrency}",
            jobs,
            "StopAIBenchmarkJob",
            {"AIBenchmarkJobName.$": job_name(plan, side, level.concurrency)},
        )
        for level in plan.cross_check_levels()
        for side, _, label in SIDES
    ]
    if not stops:
        return then
    for state, following in zip(stops, [*stops[1:], then], strict=True):
        state.next(following)
        state.add_catch(following, errors=["States.ALL"], result_path="$.cleanup_error")
    return stops[0]


def decide_input(plan: GatePlan) -> dict[str, Any] | None:
    """The decision's `cross_check` (optigate.lambdas.events.DecideEvent): the tolerance and each job's outcome."""
    if plan.cross_check is None:
        return None
    jobs = [
        {
            "concurrency": level.concurrency,
            "side": side,
            "job.$": job_name(plan, side, level.concurrency),
            "result.$": result_path(side, level.concurrency),
        }
        for level in plan.cross_check_levels()
        for side, _, _ in SIDES
    ]
    return {"tolerance": plan.cross_check.tolerance, "jobs": jobs}
