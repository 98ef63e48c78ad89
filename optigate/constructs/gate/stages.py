# Over 400 lines: the stages around the proof share the run's temporary resources and the cleanup every path ends in.
"""The gate's stages around the proof: the run's temporary endpoints (the candidate's and the baseline's
twin) and the wait for them, the benchmark of each level, the decision, and the cleanup that every path
ends in."""

from __future__ import annotations

from typing import Any

from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from optigate import naming
from optigate.constructs.benchmark_fleet import BenchmarkFleet
from optigate.constructs.gate import adapter_steps, benchmark_workload, candidate, component_stages, cross_check, grants
from optigate.constructs.gate.resources import LiveConfig
from optigate.constructs.gate.tasks import CleanupPath, Ending, PollStates, SdkTask, poll_loop, run_name, sdk_task
from optigate.deployment.gate import GatePlan
from optigate.deployment.observability import gate_metrics_config
from optigate.lambdas.events import BenchmarkRounds, DecideEvent, FromState


# Over 80 lines: every cleanup (job, endpoints, configs, models) chained so each runs whatever failed before it.
def cleanup_and_end(
    scope: Construct,
    plan: GatePlan,
    topic_arn: str,
    key_arn: str,
    *,
    cross_check_jobs: lambda_.IFunction | None = None,
) -> Ending:
    """Stop the run's optimization job unless its last describe saw it finish, delete what the run created (each
    step catches its own error: a resource never created is fine to miss), then notify and end: Succeed (APPROVED),
    or Fail with the failure, the rejection (CandidateRejected) or an inconclusive verdict (`Inconclusive`:
    the model package waits in PendingManualApproval, so the pipeline's action fails and a person decides). A
    failure before anything is created (Ending.nothing_created) is notified and ends without the deletes."""
    # The twin runs CloudFormation's model: its endpoint and config go, the model stays.
    deletes: list[tuple[str, str, str, naming.RunKind]] = [
        ("Endpoint", "deleteEndpoint", "EndpointName", "cand"),
        ("TwinEndpoint", "deleteEndpoint", "EndpointName", "twin"),
        ("Config", "deleteEndpointConfig", "EndpointConfigName", "cand"),
        ("TwinConfig", "deleteEndpointConfig", "EndpointConfigName", "twin"),
        ("Model", "deleteModel", "ModelName", "cand"),
    ]
    if plan.shadow:
        deletes.insert(4, ("ShadowConfig", "deleteEndpointConfig", "EndpointConfigName", "shadow"))
    if plan.trained_head is not None:  # the model the EAGLE job registered (OutputConfig.SageMakerModel)
        deletes.append(("OptimizedModel", "deleteModel", "ModelName", "optm"))
    temporary, optimized = grants.temporary_resources(scope, plan), grants.optimized_models(scope, plan)
    states = [
        sdk_task(
            scope,
            f"Delete{kind}",
            f"aws-sdk:sagemaker:{action}",
            {f"{parameter}.$": run_name(plan, name)},
            grants=[optimized if name == "optm" else temporary],
            result_path=sfn.JsonPath.DISCARD,
        )
        for kind, action, parameter, name in deletes
    ]
    if plan.optimization_configs:
        # An optimization job still running when the run ends (its Describe kept failing, or its Create's answer
        # was lost) would run on for hours on the job's instance: stop it first. A finished or never-created
        # job's stop fails, which is caught like a delete's.
        stop_job = sdk_task(
            scope,
            "CleanupStopOptimizationJob",
            "aws-sdk:sagemaker:stopOptimizationJob",
            {"OptimizationJobName.$": run_name(plan, "opt")},
            grants=[grants.optimization_jobs(scope, plan)],
            result_path=sfn.JsonPath.DISCARD,
        )
        states.insert(0, stop_job)
    # The topic is encrypted with the gate's key.
    publish = [grants.publish(topic_arn), grants.use_key(key_arn)]
    notify_failure = sdk_task(
        scope,
        "NotifyFailure",
        "sns:publish",
        {
            "TopicArn": topic_arn,
            "Subject": f"optigate gate {plan.prefix}: FAILED",
            "Message.$": "States.JsonToString($.failure)",
        },
        grants=publish,
        result_path=sfn.JsonPath.DISCARD,
    )
    notify = sdk_task(
        scope,
        "Notify",
        "sns:publish",
        {
            "TopicArn": topic_arn,
            "Subject": f"optigate gate {plan.prefix}: verdict",
            "Message.$": "$.decision.summary",
        },
        grants=publish,
        result_path=sfn.JsonPath.DISCARD,
    )
    failed = sfn.Fail(scope, "GateFailed", error="GateFailed", cause_path="States.JsonToString($.failure)")
    rejected = sfn.Fail(scope, "CandidateRejected", error="CandidateRejected", cause_path="$.decision.summary")
    inconclusive = sfn.Fail(scope, "VerdictInconclusive", error="Inconclusive", cause_path="$.decision.summary")
    approved = sfn.Succeed(scope, "CandidateApproved", output_path="$.decision")
    verdict = (
        sfn.Choice(scope, "Verdict")
        .when(sfn.Condition.boolean_equals("$.decision.approved", True), approved)
        .when(sfn.Condition.string_equals("$.decision.outcome", "INCONCLUSIVE"), inconclusive)
        .otherwise(rejected)
    )
    # A notification that cannot be sent must not change the outcome.
    notify_failure.add_catch(failed, errors=["States.ALL"], result_path="$.notify_error")
    notify.add_catch(verdict, errors=["States.ALL"], result_path="$.notify_error")
    after_cleanup = (
        sfn.Choice(scope, "FailedBeforeVerdict?")
        .when(sfn.Condition.is_present("$.failure"), notify_failure.next(failed))
        .otherwise(notify.next(verdict))
    )
    for state, following in zip(states, [*states[1:], after_cleanup], strict=True):
        state.next(following)
        state.add_catch(following, errors=["States.ALL"], result_path="$.cleanup_error")
    # The optimization job is stopped unless its last describe saw it finish (candidate.unless_finished).
    deleted = candidate.unless_finished(scope, states[0], states[1]) if plan.optimization_configs else states[0]
    # An adapter team's components go before their endpoints (optigate.constructs.gate.component_stages).
    first: sfn.IChainable = (
        component_stages.delete_run_components(scope, plan, then=deleted) if plan.components is not None else deleted
    )
    nothing_created = notify_failure
    # The managed benchmark's jobs stop first, before their endpoints go (cross_check.stop_all).
    if plan.cross_check is None:
        return Ending(first, nothing_created)
    if cross_check_jobs is None:
        raise ValueError(f"the gate of {plan.prefix} has a cross-check but no function to stop its jobs")
    return Ending(cross_check.stop_all(scope, plan, cross_check_jobs, first), nothing_created)


def temporary_endpoint(
    scope: Construct,
    plan: GatePlan,
    cleanup: CleanupPath,
    kind: naming.RunKind,
    label: str,
    model: dict[str, str],
    model_role_arn: str | None = None,
) -> tuple[SdkTask, SdkTask]:
    """A run's endpoint config and endpoint named `<prefix>-<kind>-<run>`, serving `model` (a `ModelName`
    or `ModelName.$` entry) on the candidate's instance type and count; both guarded by the cleanup. An adapter
    team's endpoints serve no model but inference components (optigate.constructs.gate.component_stages), which run as
    `model_role_arn` (the endpoint config's ExecutionRoleArn)."""
    side = plan.side(kind)
    download, startup = side.startup_timeouts
    ami = side.ami_version
    temporary = grants.temporary_resources(scope, plan)
    serves_components = plan.components is not None
    if serves_components and model_role_arn is None:
        raise ValueError(f"the gate of {plan.prefix} serves inference components: its endpoints need the model role")
    role = {"ExecutionRoleArn": model_role_arn} if serves_components else {}
    config = cleanup.guarded(
        sdk_task(
            scope,
            f"Create{label}Config",
            # The SDK integration: the optimized one refuses MetricsConfig, the variant's timeouts and AMI version
            # and the components' ExecutionRoleArn (optigate/rehearse/data/sfn_optimized_sagemaker.json).
            "aws-sdk:sagemaker:createEndpointConfig",
            {
                "EndpointConfigName.$": run_name(plan, kind),
                "ProductionVariants": [
                    {
                        "VariantName": "AllTraffic",
                        **({} if serves_components else model),
                        "InstanceType": plan.instance_type,
                        "InitialInstanceCount": plan.instance_count,
                        "ModelDataDownloadTimeoutInSeconds": download,
                        "ContainerStartupHealthCheckTimeoutInSeconds": startup,
                        **({"InferenceAmiVersion": ami} if ami else {}),
                    }
                ],
                **role,
                # Inference components: the config isolates every model container (EnableNetworkIsolation), as the
                # candidate model itself is isolated on a model-backed endpoint.
                **({"EnableNetworkIsolation": True} if serves_components else {}),
                # The server's own metrics over the benchmark, where its container publishes any (none on LMI:
                # optigate.serving.surfaces); optigate.bench.server_metrics reads them.
                **({"MetricsConfig": gate_metrics_config()} if plan.server_series else {}),
            },
            grants=[temporary, *([grants.pass_role(model_role_arn)] if model_role_arn and serves_components else [])],
            result_path=sfn.JsonPath.DISCARD,
        )
    )
    endpoint = cleanup.guarded(
        sdk_task(
            scope,
            f"Create{label}Endpoint",
            "sagemaker:createEndpoint",
            {"EndpointName.$": run_name(plan, kind), "EndpointConfigName.$": run_name(plan, kind)},
            grants=[temporary],
            result_path=sfn.JsonPath.DISCARD,
        )
    )
    return config, endpoint


def candidate_model(scope: Construct, plan: GatePlan, cleanup: CleanupPath, model_role_arn: str) -> SdkTask:
    """The run's candidate model (GatePlan.candidate_container), running as the live model's role."""
    return cleanup.guarded(
        sdk_task(
            scope,
            "CreateCandidateModel",
            # The SDK integration: the optimized one refuses the container's ModelDataSource
            # (optigate/rehearse/data/sfn_optimized_sagemaker.json).
            "aws-sdk:sagemaker:createModel",
            {
                "ModelName.$": run_name(plan, "cand"),
                "ExecutionRoleArn": model_role_arn,
                "EnableNetworkIsolation": True,
                "PrimaryContainer": plan.candidate_container(),
            },
            grants=[grants.temporary_resources(scope, plan), grants.pass_role(model_role_arn)],
            result_path=sfn.JsonPath.DISCARD,
        )
    )


def baseline_twin(
    scope: Construct, plan: GatePlan, cleanup: CleanupPath, baseline_model_name: str, model_role_arn: str
) -> tuple[SdkTask, SdkTask]:
    """The baseline's twin: an endpoint config and endpoint running the live endpoint's model
    (CloudFormation's) on the candidate's instance type and count, which no production traffic
    reaches. The benchmark and the evaluation load it instead of the live endpoint."""
    return temporary_endpoint(scope, plan, cleanup, "twin", "Twin", {"ModelName": baseline_model_name}, model_role_arn)


#: Each temporary endpoint's wait: its label and its poll loop's states. The candidate's names predate the
#: twin's and are kept, so that templates (and running executions' histories) keep their state names.
ENDPOINT_WAITS: dict[str, tuple[str, PollStates]] = {
    "twin": ("Twin", PollStates("ResetTwinPolls", "WaitForTwin", "CountTwinPoll", "TwinInService?")),
    "cand": (
        "Candidate",
        PollStates("ResetEndpointPolls", "WaitForEndpoint", "CountEndpointPoll", "CandidateInService?"),
    ),
}


def endpoint_ready(
    scope: Construct, plan: GatePlan, cleanup: CleanupPath, kind: naming.RunKind, then: sfn.IChainable
) -> sfn.Pass:
    """Poll the run's `kind` endpoint until InService (then `then`); Failed or timed out fails the run."""
    name, states = ENDPOINT_WAITS[kind]
    loop = poll_loop(
        scope,
        states,
        describe=cleanup.guarded(
            sdk_task(
                scope,
                f"Describe{name}Endpoint",
                "aws-sdk:sagemaker:describeEndpoint",
                {"EndpointName.$": run_name(plan, kind)},
                grants=[grants.temporary_resources(scope, plan)],
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
            f"the {name.lower()} endpoint was not InService within {plan.benchmark.max_polls} polls of "
            f"{plan.benchmark.poll_seconds} s",
        ),
        poll_seconds=plan.benchmark.poll_seconds,
        max_polls=plan.benchmark.max_polls,
    )
    return loop.entry


#: Where each run's report (and its looks) goes in the gate's bucket: `<prefix>/<run id>/`.
REPORTS_PREFIX = "reports"
#: Where the state keeps the rounds: {"done", "started", "judged"?: the last look's {stop, reason, why}, "ended"?}.
ROUNDS_PATH = "$.rounds"


# Over 80 lines: one round's Map of levels, and the loop around it (count, look, go on or stop) read as one.
def benchmark_rounds(
    scope: Construct,
    plan: GatePlan,
    fleet: BenchmarkFleet,
    cleanup: CleanupPath,
    decider: lambda_.IFunction,
    bucket_name: str,
    capture_uri: str | None = None,
) -> sfn.Chain:
    """The benchmark in rounds: each round runs every configured level in turn, at each a block of the baseline's
    twin then one of the candidate (A B), so drift over the benchmark reaches both sides alike. The two never share
    the machine, and the live endpoint receives no benchmark load. A round's runs are
    `<run>-baseline-c<level>-b<round>` and `<run>-candidate-c<level>-b<round>`; both sides send the same workload
    (gate.benchmark_workload).

    A fixed-size benchmark (no max_rounds) runs `blocks` rounds. A benchmark in rounds counts each round and, from
    min_rounds on, asks the decision whether to stop (JudgeRound, optigate.gate.decision.looks); it goes on while
    the answer is no and fewer than max_rounds ran (a bound of its own, whatever the answer). Every round's failure
    goes to the cleanup, as every other state's."""
    run_fleet = grants.run_fleet(scope, fleet)

    def run(name: str, endpoint: dict[str, str], run: str, result: str, engine_mode: str) -> SdkTask:
        side = "twin" if run == "baseline" else "cand"
        spread: dict[str, object] = {}
        if plan.components is not None and plan.components.mix is None:
            spread = {"inference_components.$": f"$.mix.{side}"}  # read from CloudWatch (candidate.read_adapter_mix)
        elif plan.components is not None:
            spread = {"inference_components": component_stages.benchmark_components(plan, side, "$.run_id")}
        return sdk_task(
            scope,
            name,
            "states:startExecution.sync:2",
            {
                "StateMachineArn": fleet.state_machine.state_machine_arn,
                "Input": {
                    **endpoint,
                    "engine_mode": engine_mode,  # each side's container, as resolved: the stream the workers read
                    "run_id.$": f"States.Format('{{}}-{run}-c{{}}-b{{}}', $.run_id, $.per_shard, $.block)",
                    "concurrency_per_shard.$": "$.per_shard",
                    "requests_per_shard.$": "$.requests",
                    "prompt_tokens": plan.benchmark.prompt_tokens,
                    "max_new_tokens": plan.benchmark.max_new_tokens,
                    **benchmark_workload.fleet_input(plan, capture_uri),
                    **spread,
                },
            },
            grants=run_fleet,
            result_path=result,
            result_selector={"key.$": "$.Output.key"},
        )

    levels = sfn.Pass(
        scope, "BenchmarkLevels", result=sfn.Result.from_array(plan.benchmark.items), result_path="$.levels"
    )
    start = sfn.Pass(
        scope, "StartRounds", parameters={"done": 0, "started.$": "$$.State.EnteredTime"}, result_path=ROUNDS_PATH
    )
    per_level = sfn.Map(
        scope,
        "BenchmarkEachLevel",
        items_path="$.levels",
        max_concurrency=1,
        item_selector={
            "per_shard.$": "$$.Map.Item.Value.per_shard",
            "requests.$": "$$.Map.Item.Value.requests",
            "block.$": f"{ROUNDS_PATH}.done",
            "run_id.$": "$.run.id",
            "twin.$": run_name(plan, "twin"),
            "candidate.$": run_name(plan, "cand"),
            **({"mix.$": "$.mix"} if plan.components is not None and plan.components.mix is None else {}),
            **benchmark_workload.map_items(plan),
        },
        # Each run's result is where the fleet writes it (naming.benchmark_result_key).
        result_path=sfn.JsonPath.DISCARD,
    )
    per_level.item_processor(
        sfn.Chain.start(
            run("BenchmarkBaseline", {"endpoint_name.$": "$.twin"}, "baseline", "$.baseline", plan.twin.engine_mode)
        ).next(
            run(
                "BenchmarkCandidate",
                {"endpoint_name.$": "$.candidate"},
                "candidate",
                "$.candidate_result",
                plan.candidate.engine_mode,
            )
        )
    )
    per_level.add_catch(cleanup.entry, errors=["States.ALL"], result_path="$.failure")
    count = sfn.Pass(
        scope,
        "CountRound",
        parameters={"done.$": f"States.MathAdd({ROUNDS_PATH}.done, 1)", "started.$": f"{ROUNDS_PATH}.started"},
        result_path=ROUNDS_PATH,
    )
    done = sfn.Pass(
        scope, "RoundsDone", parameters={"at.$": "$$.State.EnteredTime"}, result_path=f"{ROUNDS_PATH}.ended"
    )
    first_look, budget = plan.benchmark.rounds
    finished = sfn.Condition.number_greater_than_equals(f"{ROUNDS_PATH}.done", budget)
    if plan.benchmark.max_rounds is None:  # a fixed size: `blocks` rounds, judged once, after the last
        more = sfn.Choice(scope, "MoreRounds?").when(finished, done).otherwise(per_level)
        per_level.next(count).next(more)
        return _chain(levels, start, per_level, done)
    judge = cleanup.guarded(
        sdk_task(
            scope,
            "JudgeRound",
            "lambda:invoke",
            {"FunctionName": decider.function_arn, "Payload": decide_event(plan, bucket_name, None, look=True)},
            grants=[grants.invoke_with_versions(decider)],
            result_path=f"{ROUNDS_PATH}.judged",
            result_selector={"stop.$": "$.Payload.stop", "reason.$": "$.Payload.reason", "why.$": "$.Payload.why"},
        )
    )
    stops = sfn.Condition.boolean_equals(f"{ROUNDS_PATH}.judged.stop", True)
    more = sfn.Choice(scope, "MoreRounds?").when(sfn.Condition.or_(stops, finished), done).otherwise(per_level)
    before_first_look = sfn.Condition.number_less_than(f"{ROUNDS_PATH}.done", first_look)
    look = sfn.Choice(scope, "Look?").when(before_first_look, per_level).otherwise(judge)
    per_level.next(count).next(look)
    judge.next(more)
    return _chain(levels, start, per_level, done)


def _chain(levels: sfn.Pass, start: sfn.Pass, per_level: sfn.Map, done: sfn.Pass) -> sfn.Chain:
    """From the levels to the rounds' end: the loop's states are wired; what follows `done` is the caller's."""
    levels.next(start).next(per_level)
    return sfn.Chain.custom(levels, [done], done)


def decide_event(plan: GatePlan, bucket_name: str, live: LiveConfig | None, *, look: bool = False) -> dict[str, Any]:
    """The decision's Payload: after the evaluation (and the shadow) the verdict; `look`: after a round, whether to
    stop the rounds (no evaluation, shadow, server metrics or cross-check yet: the benchmark's checks alone)."""
    first_look, budget = plan.benchmark.rounds
    in_rounds = plan.benchmark.max_rounds is not None
    rounds = BenchmarkRounds(
        run_id=FromState("$.run.id"),
        per_shard=list(plan.benchmark.levels),
        done=FromState(f"{ROUNDS_PATH}.done"),
        started=FromState(f"{ROUNDS_PATH}.started"),
        ended=None if look else FromState(f"{ROUNDS_PATH}.ended.at"),
        min_rounds=first_look,
        max_rounds=budget,
        max_minutes=plan.benchmark.max_minutes,
        # The last look's answer, which a time budget may have given (a fixed size has none: the verdict says why).
        reason=FromState(f"{ROUNDS_PATH}.judged.reason") if in_rounds and not look else None,
        why=FromState(f"{ROUNDS_PATH}.judged.why") if in_rounds and not look else None,
    )
    shadow_metrics = (
        {
            "window_minutes": plan.shadow.window_minutes,
            "sampling_percentage": plan.shadow.sampling_percentage,
            "production_variant": live.production_variant,
            "shadow_variant": plan.shadow.variant_name,
            "metric_data.$": "$.shadow_metrics",
        }
        if plan.shadow and live is not None and not look
        else None
    )
    event = DecideEvent(
        team=plan.team,
        environment=plan.environment,
        change=plan.change,
        thresholds=plan.thresholds.to_dict(),
        price_per_hour_usd=plan.price_per_hour_usd,
        instance_count=plan.instance_count,
        cost_basis=plan.cost_basis.to_json() if plan.cost_basis is not None else None,
        prediction=plan.prediction,
        bucket=bucket_name,
        rounds=rounds,
        look=look,
        evaluation_key=None
        if look
        else FromState(f"States.Format('evaluations/{{}}/verdict.json', {run_name(plan, 'eval')})"),
        report_prefix=FromState(f"States.Format('{REPORTS_PREFIX}/{{}}/', $.run.id)"),
        # Each side's container metrics over the benchmark (constructs.gate.server_metrics), where read.
        server_metrics=FromState("$.server_metrics") if plan.server_series and not look else None,
        # A speculative candidate: what its acceptance is read from and must reach (speculation_proof).
        speculation=plan.speculation.event() if plan.speculation is not None else None,
        shadow=shadow_metrics,
        cross_check=None if look else cross_check.decide_input(plan),
        workload=None if look else benchmark_workload.decide_input(plan),
        adapter_check=None if look else adapter_steps.decide_input(plan),
    )
    return event.to_payload()


def decide(
    scope: Construct, plan: GatePlan, decider: lambda_.IFunction, bucket_name: str, live: LiveConfig | None
) -> SdkTask:
    """The decision Lambda over the benchmark and evaluation results (and the shadow's metrics)."""
    return sdk_task(
        scope,
        "DecideVerdict",
        "lambda:invoke",
        {
            "FunctionName": decider.function_arn,
            "Payload": decide_event(plan, bucket_name, live),
        },
        grants=[grants.invoke_with_versions(decider)],
        result_path="$.decision",
        result_selector={
            "approved.$": "$.Payload.approved",
            "outcome.$": "$.Payload.outcome",
            "summary.$": "$.Payload.summary",
            "report_key.$": "$.Payload.report_key",
        },
    )
