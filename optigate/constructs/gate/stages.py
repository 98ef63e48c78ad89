"""The gate's stages before and after the proof: where the candidate comes from (an optimization
job, polled), the baseline's twin endpoint, the benchmark of each level, the decision, and the
cleanup that every path ends in."""

from __future__ import annotations

from typing import TYPE_CHECKING

from aws_cdk import Aws, Duration
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_stepfunctions as sfn

from optigate import naming
from optigate.config.models import split_s3_uri
from optigate.constructs import nag
from optigate.constructs.assets import stage
from optigate.constructs.benchmark_fleet import BenchmarkFleet
from optigate.constructs.common import function_role
from optigate.constructs.gate import cross_check
from optigate.constructs.gate.spec import (
    OPTIMIZATION_MAX_PENDING_SECONDS,
    OPTIMIZATION_MAX_RUNTIME_SECONDS,
    TRAINED_HEAD_DIR,
)
from optigate.constructs.gate.tasks import CleanupPath, PollStates, poll_loop, run_name, sdk_task
from optigate.lambdas import handler_source

if TYPE_CHECKING:
    from optigate.constructs.gate.construct import OptimizationGate


def cleanup_and_end(gate: OptimizationGate) -> sfn.IChainable:
    """Delete what the run created (each delete catches its own error: a resource never created
    is fine to miss), then notify and end: Succeed (APPROVED), or Fail with the failure, the
    rejection (CandidateRejected) or an inconclusive verdict (`Inconclusive`: the model package waits
    in PendingManualApproval, so the pipeline's action fails and a person decides)."""
    spec = gate.spec
    # The twin runs CloudFormation's model: its endpoint and config go, the model stays.
    deletes: list[tuple[str, str, str, naming.RunKind]] = [
        ("Endpoint", "deleteEndpoint", "EndpointName", "cand"),
        ("TwinEndpoint", "deleteEndpoint", "EndpointName", "twin"),
        ("Config", "deleteEndpointConfig", "EndpointConfigName", "cand"),
        ("TwinConfig", "deleteEndpointConfig", "EndpointConfigName", "twin"),
        ("Model", "deleteModel", "ModelName", "cand"),
    ]
    if spec.shadow:
        deletes.insert(4, ("ShadowConfig", "deleteEndpointConfig", "EndpointConfigName", "shadow"))
    if spec.trained_head is not None:  # the model the EAGLE job registered (OutputConfig.SageMakerModel)
        deletes.append(("OptimizedModel", "deleteModel", "ModelName", "optm"))
    states = [
        sdk_task(
            gate,
            f"Delete{kind}",
            f"aws-sdk:sagemaker:{action}",
            {f"{parameter}.$": run_name(gate.spec, name)},
            result_path=sfn.JsonPath.DISCARD,
        )
        for kind, action, parameter, name in deletes
    ]
    notify_failure = sdk_task(
        gate,
        "NotifyFailure",
        "sns:publish",
        {
            "TopicArn": gate.topic.topic_arn,
            "Subject": f"optigate gate {spec.prefix}: FAILED",
            "Message.$": "States.JsonToString($.failure)",
        },
        result_path=sfn.JsonPath.DISCARD,
    )
    notify = sdk_task(
        gate,
        "Notify",
        "sns:publish",
        {
            "TopicArn": gate.topic.topic_arn,
            "Subject": f"optigate gate {spec.prefix}: verdict",
            "Message.$": "$.decision.summary",
        },
        result_path=sfn.JsonPath.DISCARD,
    )
    failed = sfn.Fail(gate, "GateFailed", error="GateFailed", cause_path="States.JsonToString($.failure)")
    rejected = sfn.Fail(gate, "CandidateRejected", error="CandidateRejected", cause_path="$.decision.summary")
    inconclusive = sfn.Fail(gate, "VerdictInconclusive", error="Inconclusive", cause_path="$.decision.summary")
    approved = sfn.Succeed(gate, "CandidateApproved", output_path="$.decision")
    verdict = (
        sfn.Choice(gate, "Verdict")
        .when(sfn.Condition.boolean_equals("$.decision.approved", True), approved)
        .when(sfn.Condition.string_equals("$.decision.outcome", "INCONCLUSIVE"), inconclusive)
        .otherwise(rejected)
    )
    # A notification that cannot be sent must not change the outcome.
    notify_failure.add_catch(failed, errors=["States.ALL"], result_path="$.notify_error")
    notify.add_catch(verdict, errors=["States.ALL"], result_path="$.notify_error")
    after_cleanup = (
        sfn.Choice(gate, "FailedBeforeVerdict?")
        .when(sfn.Condition.is_present("$.failure"), notify_failure.next(failed))
        .otherwise(notify.next(verdict))
    )
    for state, following in zip(states, [*states[1:], after_cleanup], strict=True):
        state.next(following)
        state.add_catch(following, errors=["States.ALL"], result_path="$.cleanup_error")
    # The managed benchmark's jobs stop first, before their endpoints go (cross_check.stop_all).
    return cross_check.stop_all(gate, states[0]) if spec.cross_check else states[0]


def candidate_source(gate: OptimizationGate, cleanup: CleanupPath) -> tuple[sfn.IChainable, sfn.INextable]:
    """Where the candidate's files come from: an optimization job (polled until done, run on the candidate's
    image), then the baseline's files the job does not write (staged into the job's output), or the
    baseline's prefix. The image is always the candidate's (GateSpec.candidate_container): the job's
    optional RecommendedInferenceImage is never read. Returns the first state and the one after which
    `$.candidate.model_uri` holds every file the candidate reads."""
    spec = gate.spec
    if not spec.optimization_configs:
        from_baseline = sfn.Pass(
            gate,
            "CandidateFromBaseline",
            result=sfn.Result.from_object({"model_uri": spec.baseline_model_uri}),
            result_path="$.candidate",
        )
        return from_baseline, from_baseline
    create_job = cleanup.guarded(
        sdk_task(
            gate,
            "CreateOptimizationJob",
            "aws-sdk:sagemaker:createOptimizationJob",
            {
                "OptimizationJobName.$": run_name(gate.spec, "opt"),
                "RoleArn": spec.model_role_arn,
                "ModelSource": {"S3": {"S3Uri": spec.baseline_model_uri}},
                "DeploymentInstanceType": spec.instance_type,
                "OptimizationConfigs": spec.optimization_job_configs(),
                "OutputConfig": {
                    "S3OutputLocation.$": f"States.Format('s3://{gate.bucket.bucket_name}/optimized/{{}}/', $.run.id)",
                    "KmsKeyId": gate.key.key_arn,
                    # Where the trained head lands is not documented: the registered model says (DescribeModel).
                    **(
                        {"SageMakerModel": {"ModelName.$": run_name(gate.spec, "optm")}}
                        if spec.trained_head is not None
                        else {}
                    ),
                },
                "StoppingCondition": {
                    "MaxRuntimeInSeconds": OPTIMIZATION_MAX_RUNTIME_SECONDS,
                    "MaxPendingTimeInSeconds": OPTIMIZATION_MAX_PENDING_SECONDS,
                },
            },
            result_path=sfn.JsonPath.DISCARD,
        )
    )
    stop_job = sdk_task(
        gate,
        "StopOptimizationJob",
        "aws-sdk:sagemaker:stopOptimizationJob",
        {"OptimizationJobName.$": run_name(gate.spec, "opt")},
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
            f"the optimization job did not finish within {spec.optimization_max_polls} polls of "
            f"{spec.optimization_poll_seconds} s (its own bounds: {OPTIMIZATION_MAX_PENDING_SECONDS} s pending, "
            f"{OPTIMIZATION_MAX_RUNTIME_SECONDS} s running)",
        )
    )
    from_job = sfn.Pass(
        gate,
        "CandidateFromOptimization",
        parameters={"model_uri.$": "$.optimization.OutputConfig.S3OutputLocation"},
        result_path="$.candidate",
    )
    staged = stage_candidate_files(gate, cleanup)
    ready: sfn.INextable = from_job if staged is None else staged
    if staged is not None:
        from_job.next(staged)
    completed: sfn.IChainable = from_job
    if spec.trained_head is not None:
        describe, head = stage_trained_head(gate, cleanup)
        describe.next(head)
        completed, ready = describe, head
    status = "$.optimization.OptimizationJobStatus"
    job_done = poll_loop(
        gate,
        PollStates(
            reset="ResetPolls",
            wait="WaitForOptimization",
            count="CountOptimizationPoll",
            choice="OptimizationDone?",
        ),
        describe=cleanup.guarded(
            sdk_task(
                gate,
                "DescribeOptimizationJob",
                "aws-sdk:sagemaker:describeOptimizationJob",
                {"OptimizationJobName.$": run_name(gate.spec, "opt")},
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
        poll_seconds=spec.optimization_poll_seconds,
        max_polls=spec.optimization_max_polls,
    )
    return sfn.Chain.start(create_job).next(job_done.entry), ready


def _stager(gate: OptimizationGate) -> tuple[lambda_.Function, iam.IRole]:
    """The gate's staging function (optigate/lambdas/stage_candidate), created once, and its role: callers grant
    the role what it reads and writes."""
    if gate.stager is None:
        gate.stager = _new_stager(gate)
    if gate.stager.role is None:
        raise ValueError(f"{gate.spec.prefix}: the staging function has no role")
    return gate.stager, gate.stager.role


def _new_stager(gate: OptimizationGate) -> lambda_.Function:
    spec = gate.spec
    role, log_group = function_role(gate, "Stage")
    nag.allow(
        role,
        ["s3:PutObject"],
        [gate.bucket.arn_for_objects("optimized/*")],
        why_wildcard="The candidates' prefixes, optimized/<run>/; the run id is known only at run time.",
    )
    nag.allow(role, ["kms:Encrypt", "kms:GenerateDataKey", "kms:Decrypt"], [gate.key.key_arn])
    return lambda_.Function(
        gate,
        "StageCandidateFunction",
        runtime=lambda_.Runtime.PYTHON_3_14,
        architecture=lambda_.Architecture.ARM_64,
        handler="handler.handler",
        code=lambda_.Code.from_asset(str(stage("stage_candidate", {"handler.py": handler_source("stage_candidate")}))),
        timeout=Duration.minutes(15),
        memory_size=256,
        role=role,
        log_group=log_group,
        description=f"optigate gate of {spec.prefix}: stage the candidate's files the optimization job does not write",
    )


def stage_trained_head(gate: OptimizationGate, cleanup: CleanupPath) -> tuple[sfn.CustomState, sfn.CustomState]:
    """After an EAGLE-training job: DescribeModel of the model it registered (OutputConfig.SageMakerModel, named
    `<prefix>-optm-<run>`), then the staging function finds the head it says, keeps or copies it under the
    candidate's prefix, reads vLLM's method from the head, and returns `$.candidate`: the prefix and the
    environment with OPTION_SPECULATIVE_CONFIG, which the candidate model and the model package both use
    (GateSpec.candidate_container). Reads and writes only the job's output, optimized/<run>/: a registered
    model that puts the weights or the head elsewhere fails the run before any endpoint exists (the layout is
    undocumented; see optigate/lambdas/stage_candidate)."""
    spec = gate.spec
    head = spec.trained_head
    if head is None:
        raise ValueError(f"{spec.prefix}: no trained head to stage")
    function, role = _stager(gate)
    nag.allow(
        role,
        ["s3:GetObject"],
        [gate.bucket.arn_for_objects("optimized/*")],
        why_wildcard="The optimization jobs' outputs, optimized/<run>/, where the trained head is read from.",
    )
    nag.allow(
        role, ["s3:ListBucket"], [gate.bucket.bucket_arn], conditions={"StringLike": {"s3:prefix": ["optimized/*"]}}
    )
    describe = cleanup.guarded(
        sdk_task(
            gate,
            "DescribeOptimizedModel",
            "aws-sdk:sagemaker:describeModel",
            {"ModelName.$": run_name(spec, "optm")},
            result_path="$.optimized_model",
        )
    )
    stage_head = cleanup.guarded(
        sdk_task(
            gate,
            "StageTrainedHead",
            "lambda:invoke",
            {
                "FunctionName": function.function_arn,
                "Payload": {
                    "trained_head": {
                        "model.$": "$.optimized_model",
                        "output.$": "$.optimization.OutputConfig.S3OutputLocation",
                        "environment": spec.container_environment,
                        "num_speculative_tokens": head.num_speculative_tokens,
                        "head_dir": TRAINED_HEAD_DIR,
                    }
                },
            },
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


def stage_candidate_files(gate: OptimizationGate, cleanup: CleanupPath) -> sfn.CustomState | None:
    """Copy what the optimized candidate reads but the job does not write (GateSpec.staged_paths: an EAGLE-3
    head, a draft model) from the baseline's prefix into the job's output, `optimized/<run>/<path>`, with a
    small Lambda function (optigate/lambdas/stage_candidate) that may read only those folders and write only
    under optimized/. None when there is nothing to stage. The candidate prefix is then self-contained: one
    ModelDataSource, which CloudFormation deploys unchanged after a promotion (it has no
    AdditionalModelDataSources)."""
    spec = gate.spec
    paths = spec.staged_paths()
    if not paths:
        return None
    source = spec.baseline_model_uri.rstrip("/") + "/"
    source_bucket, source_key = split_s3_uri(source)
    function, role = _stager(gate)
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
    target = f"s3://{gate.bucket.bucket_name}/optimized/{{}}/"
    return cleanup.guarded(
        sdk_task(
            gate,
            "StageCandidateFiles",
            "lambda:invoke",
            {
                "FunctionName": function.function_arn,
                "Payload": {
                    "copies": [
                        {"source": f"{source}{path}", "target.$": f"States.Format('{target}{path}', $.run.id)"}
                        for path in paths
                    ]
                },
            },
            result_path=sfn.JsonPath.DISCARD,
        )
    )


def temporary_endpoint(
    gate: OptimizationGate, cleanup: CleanupPath, kind: naming.RunKind, label: str, model: dict[str, str]
) -> tuple[sfn.CustomState, sfn.CustomState]:
    """A run's endpoint config and endpoint named `<prefix>-<kind>-<run>`, serving `model` (a `ModelName`
    or `ModelName.$` entry) on the candidate's instance type and count; both guarded by the cleanup."""
    spec = gate.spec
    download, startup = spec.startup_timeouts
    ami = spec.candidate_ami_version if kind == "cand" else spec.baseline_ami_version
    config = cleanup.guarded(
        sdk_task(
            gate,
            f"Create{label}Config",
            "sagemaker:createEndpointConfig",
            {
                "EndpointConfigName.$": run_name(spec, kind),
                "ProductionVariants": [
                    {
                        "VariantName": "AllTraffic",
                        **model,
                        "InstanceType": spec.instance_type,
                        "InitialInstanceCount": spec.instance_count,
                        "ModelDataDownloadTimeoutInSeconds": download,
                        "ContainerStartupHealthCheckTimeoutInSeconds": startup,
                        **({"InferenceAmiVersion": ami} if ami else {}),
                    }
                ],
            },
            result_path=sfn.JsonPath.DISCARD,
        )
    )
    endpoint = cleanup.guarded(
        sdk_task(
            gate,
            f"Create{label}Endpoint",
            "sagemaker:createEndpoint",
            {"EndpointName.$": run_name(spec, kind), "EndpointConfigName.$": run_name(spec, kind)},
            result_path=sfn.JsonPath.DISCARD,
        )
    )
    return config, endpoint


def baseline_twin(gate: OptimizationGate, cleanup: CleanupPath) -> tuple[sfn.CustomState, sfn.CustomState]:
    """The baseline's twin: an endpoint config and endpoint running the live endpoint's model
    (CloudFormation's) on the candidate's instance type and count, which no production traffic
    reaches. The benchmark and the evaluation load it instead of the live endpoint."""
    return temporary_endpoint(gate, cleanup, "twin", "Twin", {"ModelName": gate.spec.baseline_model_name})


def endpoint_ready(
    gate: OptimizationGate, cleanup: CleanupPath, kind: naming.RunKind, then: sfn.IChainable
) -> sfn.Pass:
    """Poll the run's `kind` endpoint until InService (then `then`); Failed or timed out fails the run."""
    spec = gate.spec
    name = {"twin": "Twin", "cand": "Candidate"}[kind]
    loop = poll_loop(
        gate,
        PollStates(
            reset=f"Reset{name}Polls", wait=f"WaitFor{name}", count=f"Count{name}Poll", choice=f"{name}InService?"
        ),
        describe=cleanup.guarded(
            sdk_task(
                gate,
                f"Describe{name}Endpoint",
                "aws-sdk:sagemaker:describeEndpoint",
                {"EndpointName.$": run_name(spec, kind)},
                result_path="$.endpoint",
            )
        ),
        until=[
            (sfn.Condition.string_equals("$.endpoint.EndpointStatus", "InService"), then),
            (
                sfn.Condition.string_equals("$.endpoint.EndpointStatus", "Failed"),
                cleanup.fail_with_reason(
                    f"{name}EndpointFailed",
                    f"{name}EndpointFailed",
                    f"{name.lower()} endpoint",
                    "$.endpoint.EndpointStatus",
                    "$.endpoint.FailureReason",
                ),
            ),
        ],
        timed_out=cleanup.fail_with(
            f"{name}EndpointTimedOut",
            f"{name}EndpointTimedOut",
            f"the {name.lower()} endpoint was not InService within {spec.max_polls} polls of {spec.poll_seconds} s",
        ),
        poll_seconds=spec.poll_seconds,
        max_polls=spec.max_polls,
    )
    return loop.entry


def benchmark_levels(gate: OptimizationGate, fleet: BenchmarkFleet, cleanup: CleanupPath) -> sfn.Chain:
    """Each configured level in turn, in interleaved blocks: the baseline's twin then the candidate,
    `spec.blocks` times (A B A B ...), so drift over the benchmark reaches both sides alike. The two
    never share the machine, and the live endpoint receives no benchmark load. Each (level, block)
    is one Map item, in order; its runs are `<run>-baseline-c<level>-b<block>` and
    `<run>-candidate-c<level>-b<block>`."""
    spec = gate.spec

    def run(name: str, endpoint: dict[str, str], run: str, result: str) -> sfn.CustomState:
        return sdk_task(
            gate,
            name,
            "states:startExecution.sync:2",
            {
                "StateMachineArn": fleet.state_machine.state_machine_arn,
                "Input": {
                    **endpoint,
                    "run_id.$": f"States.Format('{{}}-{run}-c{{}}-b{{}}', $.run_id, $.per_shard, $.block)",
                    "concurrency_per_shard.$": "$.per_shard",
                    "requests_per_shard.$": "$.requests",
                    "prompt_tokens": spec.prompt_tokens,
                    "max_new_tokens": spec.max_new_tokens,
                },
            },
            result_path=result,
            result_selector={"key.$": "$.Output.key"},
        )

    items = [
        {"per_shard": c, "block": block, "requests": max(32, spec.requests_per_slot * c)}
        for c in spec.levels
        for block in range(spec.blocks)
    ]
    levels = sfn.Pass(gate, "BenchmarkLevels", result=sfn.Result.from_array(items), result_path="$.levels")
    per_level = sfn.Map(
        gate,
        "BenchmarkEachLevel",
        items_path="$.levels",
        max_concurrency=1,
        item_selector={
            "per_shard.$": "$$.Map.Item.Value.per_shard",
            "requests.$": "$$.Map.Item.Value.requests",
            "block.$": "$$.Map.Item.Value.block",
            "run_id.$": "$.run.id",
            "twin.$": run_name(gate.spec, "twin"),
            "candidate.$": run_name(gate.spec, "cand"),
        },
        result_path="$.benchmark",
    )
    per_level.item_processor(
        sfn.Chain.start(run("BenchmarkBaseline", {"endpoint_name.$": "$.twin"}, "baseline", "$.baseline")).next(
            run("BenchmarkCandidate", {"endpoint_name.$": "$.candidate"}, "candidate", "$.candidate_result")
        )
    )
    per_level.add_catch(cleanup.entry, errors=["States.ALL"], result_path="$.failure")
    return sfn.Chain.start(levels).next(per_level)


def decide(gate: OptimizationGate) -> sfn.CustomState:
    """The decision Lambda over the benchmark and evaluation results (and the shadow's metrics)."""
    spec = gate.spec
    shadow_metrics = (
        {
            "shadow": {
                "window_minutes": spec.shadow.window_minutes,
                "sampling_percentage": spec.shadow.sampling_percentage,
                "production_variant": spec.shadow.production_variant,
                "shadow_variant": spec.shadow.variant_name,
                "metric_data.$": "$.shadow_metrics",
            }
        }
        if spec.shadow
        else {}
    )
    return sdk_task(
        gate,
        "DecideVerdict",
        "lambda:invoke",
        {
            "FunctionName": gate.decider.function_arn,
            "Payload": {
                "team": spec.team,
                "environment": spec.environment,
                "change": spec.change,
                "thresholds": spec.thresholds,
                "price_per_hour_usd": spec.price_per_hour_usd,
                "instance_count": spec.instance_count,
                "prediction": spec.prediction,
                "bucket": gate.bucket.bucket_name,
                "baseline_keys.$": "$.benchmark[*].baseline.key",
                "candidate_keys.$": "$.benchmark[*].candidate_result.key",
                "evaluation_key.$": f"States.Format('evaluations/{{}}/verdict.json', {run_name(gate.spec, 'eval')})",
                "report_prefix.$": "States.Format('reports/{}/', $.run.id)",
                **shadow_metrics,
                **cross_check.decide_payload(gate),
            },
        },
        result_path="$.decision",
        result_selector={
            "approved.$": "$.Payload.approved",
            "outcome.$": "$.Payload.outcome",
            "summary.$": "$.Payload.summary",
            "report_key.$": "$.Payload.report_key",
        },
    )
