"""The gate's shadow stage: mirror live traffic to the candidate on the live endpoint, read the
per-variant metrics, and return the live endpoint to its CloudFormation config on every path."""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from optigate.constructs.gate import grants
from optigate.constructs.gate.resources import LiveConfig
from optigate.constructs.gate.tasks import CleanupPath, Grant, PollStates, SdkTask, poll_loop, run_name, sdk_task
from optigate.deployment.gate import GatePlan, ShadowPlan

#: Both updates of the live endpoint keep the instance count autoscaling gave its production variant
#: (and its weight): without it SageMaker applies the config's InitialInstanceCount, and a gate run during
#: a scale-out would shrink the live endpoint to it. The new shadow variant takes its config's values.
RETAIN_SCALED_COUNT = {"RetainAllVariantProperties": True}


def _shadow_of(plan: GatePlan) -> ShadowPlan:
    if plan.shadow is None:
        raise ValueError(f"the gate of {plan.prefix} has no shadow stage")
    return plan.shadow


def _live_grants(scope: Construct, plan: GatePlan, live: LiveConfig) -> list[Grant]:
    """Moving the live endpoint between configs: its describe and update, and a grant on the config's keys."""
    return [grants.live_endpoint(scope, plan, live), *grants.live_config_keys(scope, live)]


def _describe_live(scope: Construct, plan: GatePlan, live: LiveConfig, name: str) -> SdkTask:
    return sdk_task(
        scope,
        name,
        "aws-sdk:sagemaker:describeEndpoint",
        {"EndpointName": plan.live_endpoint},
        grants=[grants.live_endpoint(scope, plan, live)],
        result_path="$.live",
    )


def _live_on(status: str, config: str | None = None, *, config_path: str | None = None) -> sfn.Condition:
    """The live endpoint is `status`, on `config` (or the config named at `config_path`)."""
    on_status = sfn.Condition.string_equals("$.live.EndpointStatus", status)
    # EndpointConfigName is optional in DescribeEndpoint's output: tested for presence first, as comparing
    # an absent path is a States.Runtime error that no Catch handles.
    has_config = sfn.Condition.is_present("$.live.EndpointConfigName")
    if config_path is not None:
        return sfn.Condition.and_(
            on_status, has_config, sfn.Condition.string_equals_json_path("$.live.EndpointConfigName", config_path)
        )
    if config is not None:
        return sfn.Condition.and_(
            on_status, has_config, sfn.Condition.string_equals("$.live.EndpointConfigName", config)
        )
    return on_status


# Over 80 lines: the shadow rollout's states (release, update, wait, restore on failure) in the order they run.
def mirror_live_traffic(
    scope: Construct, plan: GatePlan, live: LiveConfig, cleanup: CleanupPath, then: sfn.IChainable
) -> sfn.IChainable:
    """Release the temporary endpoints (candidate and baseline twin), put the candidate as shadow on the
    live endpoint, mirror traffic for the window, read per-variant CloudWatch metrics, then `then` (the restore)."""
    shadow = _shadow_of(plan)
    download, startup = plan.candidate.startup_timeouts
    candidate, shadow_config = run_name(plan, "cand"), run_name(plan, "shadow")
    temporary = grants.temporary_resources(scope, plan)
    release = cleanup.guarded(
        sdk_task(
            scope,
            "ReleaseCandidateEndpoint",
            "aws-sdk:sagemaker:deleteEndpoint",
            {"EndpointName.$": candidate},
            grants=[temporary],
            result_path=sfn.JsonPath.DISCARD,
        )
    )
    release_twin = cleanup.guarded(
        sdk_task(
            scope,
            "ReleaseTwinEndpoint",
            "aws-sdk:sagemaker:deleteEndpoint",
            {"EndpointName.$": run_name(plan, "twin")},
            grants=[temporary],
            result_path=sfn.JsonPath.DISCARD,
        )
    )
    check_live = cleanup.guarded(_describe_live(scope, plan, live, "DescribeLiveEndpoint"))
    create_config = cleanup.guarded(
        sdk_task(
            scope,
            "CreateShadowConfig",
            # The SDK integration: the optimized one refuses ShadowProductionVariants and what the live config
            # carries beyond its four parameters (optigate/rehearse/data/sfn_optimized_sagemaker.json).
            "aws-sdk:sagemaker:createEndpointConfig",
            {
                **live.request,
                "EndpointConfigName.$": shadow_config,
                "ShadowProductionVariants": [
                    {
                        "VariantName": shadow.variant_name,
                        "ModelName.$": candidate,
                        "InstanceType": plan.instance_type,
                        "InitialInstanceCount": 1,
                        "InitialVariantWeight": shadow.variant_weight,
                        "ModelDataDownloadTimeoutInSeconds": download,
                        "ContainerStartupHealthCheckTimeoutInSeconds": startup,
                        **({"InferenceAmiVersion": plan.candidate.ami_version} if plan.candidate.ami_version else {}),
                    }
                ],
            },
            grants=[temporary],
            result_path=sfn.JsonPath.DISCARD,
        )
    )
    # Marked before the update: an update whose response is lost must still be undone.
    mark = sfn.Pass(
        scope, "ShadowApplied", parameters={"applied": True, "config.$": shadow_config}, result_path="$.shadow"
    )
    apply = cleanup.guarded(
        sdk_task(
            scope,
            "PutShadowOnLiveEndpoint",
            "aws-sdk:sagemaker:updateEndpoint",  # the SDK integration passes RetainAllVariantProperties on
            {"EndpointName": plan.live_endpoint, "EndpointConfigName.$": "$.shadow.config", **RETAIN_SCALED_COUNT},
            grants=_live_grants(scope, plan, live),
            result_path=sfn.JsonPath.DISCARD,
        )
    )
    started = sfn.Pass(scope, "MirrorWindowStarts", parameters={"at.$": "$$.State.EnteredTime"}, result_path="$.mirror")
    window = sfn.Wait(scope, "MirrorLiveTraffic", time=sfn.WaitTime.duration(Duration.minutes(shadow.window_minutes)))
    metrics = cleanup.guarded(
        sdk_task(
            scope,
            "ReadVariantMetrics",
            "aws-sdk:cloudwatch:getMetricData",
            {
                "StartTime.$": "$.mirror.at",
                "EndTime.$": "$$.State.EnteredTime",
                "ScanBy": "TimestampAscending",
                "MetricDataQueries": [
                    {
                        "Id": f"{side}_{key}",
                        "ReturnData": True,
                        "MetricStat": {
                            "Metric": {
                                "Namespace": "AWS/SageMaker",
                                "MetricName": metric,
                                "Dimensions": [
                                    {"Name": "EndpointName", "Value": plan.live_endpoint},
                                    {"Name": "VariantName", "Value": variant},
                                ],
                            },
                            "Period": shadow.window_seconds,
                            "Stat": "p99" if key == "latency" else "Sum",
                        },
                    }
                    for side, variant in (("production", live.production_variant), ("shadow", shadow.variant_name))
                    for key, metric in (
                        ("invocations", "Invocations"),
                        ("errors", "Invocation5XXErrors"),
                        ("latency", "ModelLatency"),
                    )
                ],
            },
            # The whole answer, not a ResultSelector: MetricDataResults is optional in GetMetricData's output
            # (selecting it when absent is a States.Runtime error no Catch handles); the decision reads it.
            grants=[grants.VARIANT_METRICS],
            result_path="$.shadow_metrics",
        )
    )
    in_service = poll_loop(
        scope,
        PollStates(reset="ResetShadowPolls", wait="WaitForShadow", count="CountShadowPoll", choice="ShadowInService?"),
        describe=cleanup.guarded(_describe_live(scope, plan, live, "DescribeShadowedEndpoint")),
        until=[
            (_live_on("InService", config_path="$.shadow.config"), started),
            (
                _live_on("InService"),
                cleanup.fail_with(
                    "ShadowRolledBack",
                    "ShadowRolledBack",
                    "SageMaker rolled the live endpoint back from the shadow config (see the endpoint's FailureReason)",
                ),
            ),
            (
                _live_on("Failed"),
                cleanup.fail_with(
                    "ShadowFailed", "ShadowFailed", "the live endpoint failed while taking the shadow config"
                ),
            ),
        ],
        timed_out=cleanup.fail_with(
            "ShadowTimedOut",
            "ShadowTimedOut",
            f"the shadow config was not InService within {plan.benchmark.max_polls} polls of "
            f"{plan.benchmark.poll_seconds} s",
        ),
        poll_seconds=plan.benchmark.poll_seconds,
        max_polls=plan.benchmark.max_polls,
    )
    at_rest = (
        sfn.Choice(scope, "LiveEndpointAtRest?")
        .when(_live_on("InService", live.name), create_config)
        .otherwise(
            cleanup.fail_with(
                "LiveEndpointBusy",
                "LiveEndpointBusy",
                "the live endpoint is not InService on the config CloudFormation created (a deployment in progress?); "
                "the gate does not touch it",
            )
        )
    )
    started.next(window).next(metrics).next(then)
    create_config.next(mark).next(apply).next(in_service.entry)
    return sfn.Chain.start(release).next(release_twin).next(check_live).next(at_rest)


def restore_live(scope: Construct, plan: GatePlan, live: LiveConfig, then: sfn.IChainable) -> sfn.Choice:
    """Return the live endpoint to the config CloudFormation created, waiting out an update in
    flight; bounded. Restored or not (the reason in `$.failure`), the way on is `then`."""
    _shadow_of(plan)
    restored = sfn.Pass(
        scope, "LiveEndpointRestored", result=sfn.Result.from_boolean(True), result_path="$.shadow.restored"
    ).next(then)
    failed = sfn.Pass(
        scope,
        "LiveEndpointNotRestored",
        parameters={
            "Error": "LiveEndpointNotRestored",
            "Cause": f"the live endpoint {plan.live_endpoint} could not be returned to its CloudFormation config "
            f"{live.name}; restore it: aws sagemaker update-endpoint "
            f"--endpoint-name {plan.live_endpoint} --endpoint-config-name {live.name}",
        },
        result_path="$.failure",
    ).next(then)
    describe = _describe_live(scope, plan, live, "DescribeLiveForRestore")
    describe.add_catch(failed, errors=["States.ALL"], result_path="$.restore_error")
    update = sdk_task(
        scope,
        "RestoreLiveEndpoint",
        "aws-sdk:sagemaker:updateEndpoint",
        {"EndpointName": plan.live_endpoint, "EndpointConfigName": live.name, **RETAIN_SCALED_COUNT},
        grants=_live_grants(scope, plan, live),
        result_path=sfn.JsonPath.DISCARD,
    )
    update.add_catch(failed, errors=["States.ALL"], result_path="$.restore_error")
    # An update in flight is waited out; an endpoint at rest on another config is updated.
    on_original = poll_loop(
        scope,
        PollStates(
            reset="ResetRestorePolls",
            wait="WaitForRestore",
            count="CountRestorePoll",
            choice="LiveEndpointOnOriginalConfig?",
        ),
        describe=describe,
        until=[(_live_on("InService", live.name), restored)],
        timed_out=failed,
        then=[(sfn.Condition.or_(_live_on("InService"), _live_on("Failed")), update)],
        poll_seconds=plan.benchmark.poll_seconds,
        max_polls=plan.benchmark.max_polls,
        counter="$.restore_polls",
        describe_first=True,
    )
    update.next(on_original.wait)
    return (
        sfn.Choice(scope, "ShadowOnLiveEndpoint?")
        .when(
            sfn.Condition.and_(
                sfn.Condition.is_present("$.shadow.applied"), sfn.Condition.is_not_present("$.shadow.restored")
            ),
            on_original.entry,
        )
        .otherwise(then)
    )
