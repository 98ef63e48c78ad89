"""Where the gate's candidate comes from: the baseline's prefix, or an optimization job (polled until done, run on
the candidate's image) whose output is completed with what it does not write (a draft model's folder, a trained
EAGLE head) by a small staging function."""

from __future__ import annotations

from aws_cdk import Aws, Duration
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from optigate.config.models import split_s3_uri
from optigate.constructs import nag
from optigate.constructs.assets import PACKAGE, stage
from optigate.constructs.common import allow_source_decrypt, function_role
from optigate.constructs.gate import grants
from optigate.constructs.gate.resources import GateResources
from optigate.constructs.gate.tasks import CleanupPath, PollStates, SdkTask, poll_loop, run_name, sdk_task
from optigate.deployment.gate import GatePlan
from optigate.deployment.optimization import (
    OPTIMIZATION_MAX_PENDING_SECONDS,
    OPTIMIZATION_MAX_RUNTIME_SECONDS,
    TRAINED_HEAD_DIR,
)
from optigate.lambdas import handler_source
from optigate.lambdas.events import Copy, FromState, StageEvent, TrainedHead


class Stager:
    """The gate's staging function (optigate/lambdas/stage_candidate), created on first use, and its role:
    callers grant the role what it reads and writes. `function` is None while nobody used it."""

    def __init__(self, scope: Construct, plan: GatePlan, bucket: s3.IBucket, key: kms.IKey) -> None:
        self._scope, self._plan, self._bucket, self._key = scope, plan, bucket, key
        self.function: lambda_.Function | None = None

    def get(self) -> tuple[lambda_.Function, iam.IRole]:
        if self.function is None:
            self.function = self._new()
        if self.function.role is None:
            raise ValueError(f"{self._plan.prefix}: the staging function has no role")
        return self.function, self.function.role

    def _new(self) -> lambda_.Function:
        role, log_group = function_role(self._scope, "Stage")
        nag.allow(
            role,
            ["s3:PutObject", "s3:AbortMultipartUpload"],  # objects over 5 GB are copied in parts
            [self._bucket.arn_for_objects("optimized/*")],
            why_wildcard="The candidates' prefixes, optimized/<run>/; the run id is known only at run time.",
        )
        nag.allow(role, ["kms:Encrypt", "kms:GenerateDataKey", "kms:Decrypt"], [self._key.key_arn])
        # The handler reads an adapter team's mix from CloudWatch (its adapter_mix event); metrics are read-only.
        nag.allow(
            role,
            ["cloudwatch:GetMetricData"],
            ["*"],
            why_wildcard="GetMetricData supports no resource-level permission; the function reads a live endpoint's "
            "per-component Invocations.",
        )
        return lambda_.Function(
            self._scope,
            "StageCandidateFunction",
            runtime=lambda_.Runtime.PYTHON_3_14,
            architecture=lambda_.Architecture.ARM_64,
            handler="handler.handler",
            code=lambda_.Code.from_asset(
                str(
                    stage(
                        "stage_candidate",
                        {
                            "handler.py": handler_source("stage_candidate"),
                            # The adapter check's reader (standard library only), beside the handler.
                            # (handler.ADAPTER_ARCHIVE_FILE, where the handler looks for it)
                            "adapter_archive.py": PACKAGE / "deployment" / "adapter_archive.py",
                            # The CloudWatch mix's reading (standard library only).
                            "adapter_mix.py": PACKAGE / "deployment" / "adapter_mix.py",
                            # Its event, StageEvent (standard library only).
                            "events.py": PACKAGE / "lambdas" / "events.py",
                        },
                    )
                )
            ),
            timeout=Duration.minutes(15),
            memory_size=256,
            role=role,
            log_group=log_group,
            description=f"optigate gate of {self._plan.prefix}: stage the candidate's files the optimization job "
            "does not write",
        )


#: Where the run keeps the optimization job's last DescribeOptimizationJob status, and the ones it ends in.
JOB_STATUS = "$.optimization.OptimizationJobStatus"
FINISHED_JOB = ("COMPLETED", "FAILED", "STOPPED")


# Over 80 lines: every way a candidate's files arrive (a job, a trained head, a package) chained in one place.
def candidate_source(
    scope: Construct, plan: GatePlan, resources: GateResources, stager: Stager, cleanup: CleanupPath
) -> tuple[sfn.IChainable, sfn.INextable]:
    """Where the candidate's files come from: an optimization job (polled until done, run on the candidate's
    image), then the baseline's files the job does not write (staged into the job's output), or the
    baseline's prefix. The image is always the candidate's (GatePlan.candidate_container): the job's
    optional RecommendedInferenceImage is never read. Returns the first state and the one after which
    `$.candidate.model_uri` holds every file the candidate reads."""
    if not plan.optimization_configs:
        from_baseline = sfn.Pass(
            scope,
            "CandidateFromBaseline",
            result=sfn.Result.from_object({"model_uri": plan.baseline_model_uri}),
            result_path="$.candidate",
        )
        return from_baseline, from_baseline
    jobs = grants.optimization_jobs(scope, plan)
    create_job = cleanup.guarded(
        sdk_task(
            scope,
            "CreateOptimizationJob",
            "aws-sdk:sagemaker:createOptimizationJob",
            {
                "OptimizationJobName.$": run_name(plan, "opt"),
                "RoleArn": resources.model_role_arn,
                "ModelSource": {"S3": {"S3Uri": plan.baseline_model_uri}},
                "DeploymentInstanceType": plan.instance_type,
                "OptimizationConfigs": plan.optimization_job_configs(resources.training_data_uri),
                "OutputConfig": {
                    "S3OutputLocation.$": f"States.Format('s3://{resources.bucket.bucket_name}/optimized/{{}}/', "
                    "$.run.id)",
                    "KmsKeyId": resources.key.key_arn,
                    # Where the trained head lands is not documented: the registered model says (DescribeModel).
                    **(
                        {"SageMakerModel": {"ModelName.$": run_name(plan, "optm")}}
                        if plan.trained_head is not None
                        else {}
                    ),
                },
                # The keys the SageMaker SDK's optimize() sends (aws/sagemaker-python-sdk a248126,
                # sagemaker-serve/src/sagemaker/serve/model_builder_utils.py): no reference documents
                # MaxPendingTimeInSeconds for an optimization job; the poll loop below bounds time pending.
                "StoppingCondition": {"MaxRuntimeInSeconds": OPTIMIZATION_MAX_RUNTIME_SECONDS},
            },
            grants=[
                jobs,
                grants.pass_role(resources.model_role_arn),
                grants.use_key(resources.key.key_arn),
                # The EAGLE job registers its output as a model, with the caller's permissions.
                *([grants.optimized_models(scope, plan)] if plan.trained_head is not None else []),
            ],
            result_path=sfn.JsonPath.DISCARD,
        )
    )
    stop_job = sdk_task(
        scope,
        "StopOptimizationJob",
        "aws-sdk:sagemaker:stopOptimizationJob",
        {"OptimizationJobName.$": run_name(plan, "opt")},
        grants=[jobs],
        result_path=sfn.JsonPath.DISCARD,
    )
    # The stop failed: say so (the job may still be running) and clean up; never leave `$.failure`
    # unset on the way to the cleanup, whose notification would then read a verdict that is not there.
    stop_failed = cleanup.fail_with(
        "OptimizationNotStopped",
        "OptimizationTimedOut",
        cause_path="States.Format('the optimization job timed out and could not be stopped (it may still be "
        "running; stop it by hand): {}', $.stop_error.Error)",
    )
    stop_job.add_catch(stop_failed, errors=["States.ALL"], result_path="$.stop_error")
    stop_job.next(
        cleanup.fail_with(
            "OptimizationTimedOut",
            "OptimizationTimedOut",
            f"the optimization job did not finish within {plan.benchmark.optimization_max_polls} polls of "
            f"{plan.benchmark.optimization_poll_seconds} s ({OPTIMIZATION_MAX_RUNTIME_SECONDS} s running, its own "
            "bound, and "
            f"{OPTIMIZATION_MAX_PENDING_SECONDS} s waiting for capacity, the gate's)",
        )
    )
    from_job = sfn.Pass(
        scope,
        "CandidateFromOptimization",
        parameters={"model_uri.$": "$.optimization.OutputConfig.S3OutputLocation"},
        result_path="$.candidate",
    )
    staged = stage_candidate_files(scope, plan, resources.bucket, stager, cleanup)
    ready: sfn.INextable = from_job if staged is None else staged
    if staged is not None:
        from_job.next(staged)
    completed: sfn.IChainable = from_job
    if plan.trained_head is not None:
        describe, head = stage_trained_head(scope, plan, resources.bucket, stager, cleanup)
        describe.next(head)
        completed, ready = describe, head
    status = JOB_STATUS
    job_done = poll_loop(
        scope,
        PollStates(
            reset="ResetPolls",
            wait="WaitForOptimization",
            count="CountOptimizationPoll",
            choice="OptimizationDone?",
        ),
        describe=cleanup.guarded(
            sdk_task(
                scope,
                "DescribeOptimizationJob",
                "aws-sdk:sagemaker:describeOptimizationJob",
                {"OptimizationJobName.$": run_name(plan, "opt")},
                grants=[jobs],
                result_path="$.optimization",
            )
        ),
        until=[
            (sfn.Condition.string_equals(status, "COMPLETED"), completed),
            (
                sfn.Condition.or_(
                    sfn.Condition.string_equals(status, "FAILED"), sfn.Condition.string_equals(status, "STOPPED")
                ),
                cleanup.fail_with_reason(
                    "OptimizationFailed",
                    "OptimizationFailed",
                    "optimization job",
                    "$.optimization.OptimizationJobStatus",
                    "$.optimization.FailureReason",
                ),
            ),
        ],
        timed_out=stop_job,
        poll_seconds=plan.benchmark.optimization_poll_seconds,
        max_polls=plan.benchmark.optimization_max_polls,
    )
    return sfn.Chain.start(create_job).next(job_done.entry), ready


def unless_finished(scope: Construct, stop: sfn.IChainable, then: sfn.IChainable) -> sfn.Choice:
    """The cleanup's `stop` of the optimization job, skipped for `then` when the job's last describe saw it finish
    (the stop would fail on it in every run that got that far); a job never described (a Create whose answer was
    lost) or still running is stopped."""
    finished = sfn.Condition.and_(
        sfn.Condition.is_present(JOB_STATUS),
        sfn.Condition.or_(*(sfn.Condition.string_equals(JOB_STATUS, status) for status in FINISHED_JOB)),
    )
    return sfn.Choice(scope, "OptimizationJobLeftRunning?").when(finished, then).otherwise(stop)


def stage_trained_head(
    scope: Construct, plan: GatePlan, bucket: s3.IBucket, stager: Stager, cleanup: CleanupPath
) -> tuple[SdkTask, SdkTask]:
    """After an EAGLE-training job: DescribeModel of the model it registered (OutputConfig.SageMakerModel, named
    `<prefix>-optm-<run>`), then the staging function finds the head it says, keeps or copies it under the
    candidate's prefix, reads vLLM's method from the head, and returns `$.candidate`: the prefix and the
    environment with OPTION_SPECULATIVE_CONFIG, which the candidate model and the model package both use
    (GatePlan.candidate_container). Reads the job's output, optimized/<run>/, and the baseline's own prefix (the
    SageMaker SDK's layout keeps the base weights there: they are copied beside the head), and writes only under
    optimized/: a registered model that puts the weights or the head elsewhere fails the run before any endpoint
    exists (the layout is undocumented; see optigate/lambdas/stage_candidate)."""
    head = plan.trained_head
    if head is None:
        raise ValueError(f"{plan.prefix}: no trained head to stage")
    function, role = stager.get()
    nag.allow(
        role,
        ["s3:GetObject"],
        [bucket.arn_for_objects("optimized/*")],
        why_wildcard="The optimization jobs' outputs, optimized/<run>/, where the trained head is read from.",
    )
    nag.allow(role, ["s3:ListBucket"], [bucket.bucket_arn], conditions={"StringLike": {"s3:prefix": ["optimized/*"]}})
    baseline_bucket, baseline_key = split_s3_uri(plan.baseline_model_uri.rstrip("/") + "/")
    nag.allow(
        role,
        ["s3:GetObject"],
        [f"arn:{Aws.PARTITION}:s3:::{baseline_bucket}/{baseline_key}*"],
        why_wildcard="The baseline's own prefix: a job that only trained a head leaves the base weights there.",
    )
    nag.allow(
        role,
        ["s3:ListBucket"],
        [f"arn:{Aws.PARTITION}:s3:::{baseline_bucket}"],
        conditions={"StringLike": {"s3:prefix": [f"{baseline_key}*"]}},
    )
    allow_source_decrypt(role, [plan.baseline_model_key_arn] if plan.baseline_model_key_arn else [])
    describe = cleanup.guarded(
        sdk_task(
            scope,
            "DescribeOptimizedModel",
            "aws-sdk:sagemaker:describeModel",
            {"ModelName.$": run_name(plan, "optm")},
            grants=[grants.optimized_models(scope, plan)],
            result_path="$.optimized_model",
        )
    )
    stage_head = cleanup.guarded(
        sdk_task(
            scope,
            "StageTrainedHead",
            "lambda:invoke",
            {
                "FunctionName": function.function_arn,
                "Payload": StageEvent(
                    trained_head=TrainedHead(
                        model=FromState("$.optimized_model"),
                        output=FromState("$.optimization.OutputConfig.S3OutputLocation"),
                        baseline=plan.baseline_model_uri,
                        environment=plan.container_environment,
                        num_speculative_tokens=head.num_speculative_tokens,
                        head_dir=TRAINED_HEAD_DIR,
                    )
                ).to_payload(),
            },
            grants=[grants.invoke(function)],
            result_path="$.candidate",
            result_selector={
                "model_uri.$": "$.Payload.model_uri",
                "environment.$": "$.Payload.environment",
                "head.$": "$.Payload.head",
                "method.$": "$.Payload.method",
            },
        )
    )
    return describe, stage_head


def stage_candidate_files(
    scope: Construct, plan: GatePlan, bucket: s3.IBucket, stager: Stager, cleanup: CleanupPath
) -> SdkTask | None:
    """Copy what the optimized candidate reads but the job does not write (GatePlan.staged_paths: an EAGLE-3
    head, a draft model) from the baseline's prefix into the job's output, `optimized/<run>/<path>`, with a
    small Lambda function (optigate/lambdas/stage_candidate) that may read only those folders and write only
    under optimized/. None when there is nothing to stage. The candidate prefix is then self-contained: one
    ModelDataSource, which CloudFormation deploys unchanged after a promotion (it has no
    AdditionalModelDataSources)."""
    paths = plan.staged_paths()
    if not paths:
        return None
    source = plan.baseline_model_uri.rstrip("/") + "/"
    source_bucket, source_key = split_s3_uri(source)
    function, role = stager.get()
    nag.allow(
        role,
        ["s3:GetObject"],
        [f"arn:{Aws.PARTITION}:s3:::{source_bucket}/{source_key}{path}*" for path in paths],
        why_wildcard="The baseline's folders the candidate reads and the optimization job does not write.",
    )
    nag.allow(
        role,
        ["s3:ListBucket"],
        [f"arn:{Aws.PARTITION}:s3:::{source_bucket}"],
        conditions={"StringLike": {"s3:prefix": [f"{source_key}{path}*" for path in paths]}},
    )
    # CopyObject (and UploadPartCopy) decrypts the source; the target is the gate's bucket, whose key Stager grants.
    allow_source_decrypt(role, [plan.baseline_model_key_arn] if plan.baseline_model_key_arn else [])
    target = f"s3://{bucket.bucket_name}/optimized/{{}}/"
    return cleanup.guarded(
        sdk_task(
            scope,
            "StageCandidateFiles",
            "lambda:invoke",
            {
                "FunctionName": function.function_arn,
                "Payload": StageEvent(
                    copies=[
                        Copy(source=f"{source}{path}", target=FromState(f"States.Format('{target}{path}', $.run.id)"))
                        for path in paths
                    ]
                ).to_payload(),
            },
            grants=[grants.invoke(function)],
            result_path=sfn.JsonPath.DISCARD,
        )
    )
