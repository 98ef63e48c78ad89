"""OptimizationGate: a Standard state machine that optimizes a model and proves it faster and
equally good before anything reaches users, failing closed.

optimize (when configured) → stage the candidate on a temporary endpoint → benchmark baseline and
candidate (BenchmarkFleet) → evaluate both (EvaluationJob) → decide (Lambda over optigate.gate) →
record the verdict as an Approved or Rejected model package → clean up → notify → Succeed or Fail.
Every task retries throttling and catches every error into the cleanup, so no temporary endpoint,
config or model outlives an execution, and what CloudFormation owns is never touched.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aws_cdk import Aws, Duration, RemovalPolicy, Stack
from aws_cdk import aws_ecr_assets as ecr_assets
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sagemaker as sagemaker
from aws_cdk import aws_sns as sns
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from optigate.constructs import nag
from optigate.constructs.benchmark_fleet import BenchmarkFleet, generated_policy_reason
from optigate.constructs.evaluation_job import EvaluationJob
from optigate.promote.lock import gate_prefix, package_group

REPO = Path(__file__).resolve().parents[2]
THROTTLING = ["SageMaker.ThrottlingException", "ThrottlingException", "Lambda.TooManyRequestsException", "SNS.ThrottledException"]


def gate_state_machine_name(team: str, environment: str) -> str:
    return f"optigate-{gate_prefix(team, environment)}-gate"


def gate_invoker_role_name(team: str, environment: str) -> str:
    """The role the promotion pipeline assumes to run this gate (a fixed name: it is in another account)."""
    return f"optigate-{gate_prefix(team, environment)}-gate-invoker"


def approval_event_pattern(group: str | dict[str, str]) -> events.EventPattern:
    """SageMaker's event for a package of `group` (a name, or an EventBridge matcher) turning Approved."""
    return events.EventPattern(
        source=["aws.sagemaker"], detail_type=["SageMaker Model Package State Change"],
        detail={"ModelApprovalStatus": ["Approved"], "ModelPackageGroupName": [group]},
    )


@dataclass(frozen=True)
class ShadowStage:
    """Mirror live traffic to the candidate: a shadow variant on the live endpoint for a window.

    The gate puts a temporary endpoint config (the live production variants, unchanged, plus the
    candidate as shadow) on the live endpoint and afterwards returns the endpoint to the config
    CloudFormation created, on every path. A shadow's responses are discarded and it cannot be
    invoked directly, so the benchmark and the evaluation run on a temporary endpoint first.

    :param live_config_name: the endpoint config CloudFormation created for the live endpoint.
    :param live_config_arn: its ARN (SageMaker lower-cases names in ARNs; CloudFormation's Ref has it right).
    :param live_config_request: that config as a CreateEndpointConfig request without name and
        shadow (TunedEndpoint.config_request()). A shadow CloudFormation runs is replaced for the window.
    :param sampling_percentage: share of live requests mirrored, 1-100.
    :param window_minutes: how long traffic is mirrored before the metrics are read.
    """

    live_config_name: str
    live_config_arn: str
    live_config_request: dict[str, Any]
    sampling_percentage: int
    window_minutes: int
    variant_name: str = "GateCandidate"


@dataclass(frozen=True)
class GateSpec:
    """What one team's gate proves, resolved from its config at synth time."""

    team: str
    environment: str
    live_endpoint: str
    model_role_arn: str
    instance_type: str
    baseline_model_uri: str
    candidate_image: str
    candidate_environment: dict[str, str]
    change: dict[str, Any]
    thresholds: dict[str, Any]
    optimization_configs: list[dict[str, Any]] | None = None
    # Streams per fleet worker at each benchmarked level, run one level after the other; each
    # worker sends `requests_per_slot` requests per stream (at least 32) at each level.
    levels: tuple[int, ...] = (16,)
    requests_per_slot: int = 4
    prompt_tokens: int = 1024
    max_new_tokens: int = 256
    price_per_hour_usd: float | None = None
    prediction: dict[str, Any] = field(default_factory=dict)
    startup_timeouts: tuple[int, int] = (1200, 1200)
    shadow: ShadowStage | None = None
    # The promotion pipeline's (account, region): it may run this gate, read its model packages,
    # and hears of every approval.
    pipeline: tuple[str, str] | None = None
    poll_seconds: int = 60
    max_polls: int = 90

    @property
    def prefix(self) -> str:
        return gate_prefix(self.team, self.environment)

    @property
    def fingerprint(self) -> str:
        """What makes a proof: the candidate (its source, image, environment, optimization), where
        and how it is measured, and the thresholds. Not what is live: once the candidate is
        promoted the live endpoint serves it, and an unchanged candidate must pass as a no-op
        rather than be compared with itself."""
        proof = {
            "team": self.team, "environment": self.environment, "instance_type": self.instance_type,
            "source": self.baseline_model_uri, "image": self.candidate_image, "container_environment": self.candidate_environment,
            "change": self.change, "optimization": self.optimization_configs, "thresholds": self.thresholds,
            "benchmark": [list(self.levels), self.requests_per_slot, self.prompt_tokens, self.max_new_tokens],
            "shadow": [self.shadow.sampling_percentage, self.shadow.window_minutes] if self.shadow else None,
        }
        return hashlib.sha256(json.dumps(proof, sort_keys=True, default=str).encode()).hexdigest()[:32]


def _task(scope: Construct, name: str, resource: str, parameters: dict[str, Any], *, result_path: str | None = None, result_selector: dict[str, Any] | None = None) -> sfn.CustomState:
    state: dict[str, Any] = {
        "Type": "Task",
        "Resource": f"arn:{Aws.PARTITION}:states:::{resource}",
        "Parameters": parameters,
        "ResultPath": result_path,
        "Retry": [{"ErrorEquals": THROTTLING, "IntervalSeconds": 2, "MaxAttempts": 5, "BackoffRate": 1.5}],
    }
    if result_selector:
        state["ResultSelector"] = result_selector
    return sfn.CustomState(scope, name, state_json=state)


class OptimizationGate(Construct):
    """The gate of one team in one environment (see the module docstring).

    :param spec: what to prove and the thresholds, from the team's config.
    :param fleet: the BenchmarkFleet that loads baseline and candidate.
    :param evaluation: the EvaluationJob comparing their answers.
    :param bucket: where reports and optimized artifacts go (the fleet's and evaluation's bucket).
    :param encryption_key: encrypts artifacts, reports and the notification topic.
    :param model_package_group: @default a new group named after team and environment
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        spec: GateSpec,
        fleet: BenchmarkFleet,
        evaluation: EvaluationJob,
        bucket: s3.IBucket,
        encryption_key: kms.IKey,
        model_package_group: str | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        self.spec = spec
        self.bucket = bucket
        self.key = encryption_key
        self.group_name = model_package_group or package_group(spec.team, spec.environment)
        self.group = sagemaker.CfnModelPackageGroup(
            self, "Group", model_package_group_name=self.group_name, model_package_group_description=f"optigate: proven candidates of {spec.team} in {spec.environment}",
            model_package_group_policy=self._group_policy(),
        )
        self.topic = sns.Topic(self, "Notifications", master_key=encryption_key, display_name=f"optigate gate {spec.prefix}", enforce_ssl=True)
        self.decider = self._decider()
        self.state_machine = self._state_machine(fleet, evaluation)
        self._grant(fleet, evaluation)
        self.invoker = self._pipeline_access() if spec.pipeline else None

    # ------------------------------------------------------------------ the promotion pipeline

    def _other_pipeline_account(self) -> str | None:
        if self.spec.pipeline is None:
            return None
        account = self.spec.pipeline[0]
        return None if account == Stack.of(self).account else account

    def _group_policy(self) -> dict[str, Any] | None:
        """The pipeline's tools account resolves locks from this group (`optigate resolve`)."""
        account = self._other_pipeline_account()
        if account is None:
            return None
        stack = Stack.of(self)
        base = f"arn:{Aws.PARTITION}:sagemaker:{stack.region}:{stack.account}"
        return {
            "Version": "2012-10-17",
            "Statement": [{
                "Sid": "PipelineResolvesApprovedPackages",
                "Effect": "Allow",
                "Principal": {"AWS": f"arn:{Aws.PARTITION}:iam::{account}:root"},
                "Action": ["sagemaker:DescribeModelPackageGroup", "sagemaker:DescribeModelPackage", "sagemaker:ListModelPackages"],
                "Resource": [f"{base}:model-package-group/{self.group_name}", f"{base}:model-package/{self.group_name}/*"],
            }],
        }

    def _pipeline_access(self) -> iam.Role:
        """The invoker role the pipeline's Step Functions action assumes, and approvals forwarded to
        the pipeline account's default event bus (which starts the pipeline)."""
        assert self.spec.pipeline is not None
        account, region = self.spec.pipeline
        stack = Stack.of(self)
        role = iam.Role(
            self, "Invoker", role_name=gate_invoker_role_name(self.spec.team, self.spec.environment),
            assumed_by=iam.AccountPrincipal(account), description=f"The optigate pipeline runs the gate of {self.spec.prefix}",
        )
        nag.allow(role, ["states:StartExecution"], [self.state_machine.state_machine_arn])
        nag.allow(role, ["states:DescribeExecution", "states:StopExecution"], [
            f"arn:{Aws.PARTITION}:states:{stack.region}:{stack.account}:execution:{gate_state_machine_name(self.spec.team, self.spec.environment)}:*"
        ], why_wildcard="Executions of this gate's state machine, started by the pipeline.")
        if self._other_pipeline_account() is not None or region != stack.region:
            bus = events.EventBus.from_event_bus_arn(self, "PipelineBus", f"arn:{Aws.PARTITION}:events:{region}:{account}:event-bus/default")
            rule = events.Rule(self, "ForwardApprovals", description=f"optigate: approvals of {self.group_name} start the promotion pipeline", event_pattern=approval_event_pattern(self.group_name))
            rule.add_target(targets.EventBus(bus))
        return role

    # ------------------------------------------------------------------ the decision Lambda

    def _decider(self) -> lambda_.Function:
        log_group = logs.LogGroup(self, "DecideLogs", retention=logs.RetentionDays.ONE_MONTH, removal_policy=RemovalPolicy.DESTROY)
        role = iam.Role(self, "DecideRole", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"))
        nag.allow(role, ["logs:CreateLogStream", "logs:PutLogEvents"], [log_group.log_group_arn], why_wildcard="The function's own log group and its streams.")
        nag.allow(role, ["s3:GetObject", "s3:PutObject"], [self.bucket.arn_for_objects("*")], why_wildcard="Reads benchmark and evaluation results and writes reports in the gate's own results bucket.")
        nag.allow(role, ["kms:Decrypt", "kms:Encrypt", "kms:GenerateDataKey"], [self.key.key_arn])
        nag.allow(role, ["cloudwatch:PutMetricData"], ["*"], conditions={"StringEquals": {"cloudwatch:namespace": "optigate/gate"}}, why_wildcard="PutMetricData has no resource scope; the condition limits it to the optigate/gate namespace.")
        # A container image: numpy and matplotlib (see containers/gate-decide/Dockerfile). x86_64 like
        # the evaluation image, so a build machine without arm64 emulation can build both.
        return lambda_.DockerImageFunction(
            self,
            "Decide",
            architecture=lambda_.Architecture.X86_64,
            code=lambda_.DockerImageCode.from_image_asset(str(REPO), file="containers/gate-decide/Dockerfile", platform=ecr_assets.Platform.LINUX_AMD64),
            timeout=Duration.minutes(5),
            memory_size=1024,
            role=role,
            log_group=log_group,
            description=f"optigate gate decision for {self.spec.prefix}",
        )

    # ------------------------------------------------------------------ names

    def _name(self, kind: str) -> str:
        """A per-execution resource name (SageMaker names: 63 characters at most)."""
        return f"States.Format('{self.spec.prefix[:30]}-{kind}-{{}}', $.run.id)"

    # ------------------------------------------------------------------ definition

    def _state_machine(self, fleet: BenchmarkFleet, evaluation: EvaluationJob) -> sfn.StateMachine:
        spec = self.spec

        init = sfn.Pass(self, "Init", parameters={"id.$": "States.ArrayGetItem(States.StringSplit(States.UUID(), '-'), 0)"}, result_path="$.run")
        reset_polls = sfn.Pass(self, "ResetPolls", result=sfn.Result.from_object({"count": 0}), result_path="$.polls")

        # ---- cleanup (reached from every path) and the end
        cleanup_states = []
        deletes = [("Endpoint", "deleteEndpoint", "EndpointName", "cand"), ("Config", "deleteEndpointConfig", "EndpointConfigName", "cand"), ("Model", "deleteModel", "ModelName", "cand")]
        if spec.shadow:
            deletes.insert(2, ("ShadowConfig", "deleteEndpointConfig", "EndpointConfigName", "shadow"))
        for kind, action, parameter, name in deletes:
            state = _task(self, f"Delete{kind}", f"aws-sdk:sagemaker:{action}", {f"{parameter}.$": self._name(name)}, result_path=sfn.JsonPath.DISCARD)
            cleanup_states.append(state)
        notify_failure = _task(
            self, "NotifyFailure", "sns:publish",
            {"TopicArn": self.topic.topic_arn, "Subject": f"optigate gate {spec.prefix}: FAILED", "Message.$": "States.JsonToString($.failure)"},
            result_path=sfn.JsonPath.DISCARD,
        )
        notify = _task(
            self, "Notify", "sns:publish",
            {"TopicArn": self.topic.topic_arn, "Subject": f"optigate gate {spec.prefix}: verdict", "Message.$": "$.decision.summary"},
            result_path=sfn.JsonPath.DISCARD,
        )
        failed = sfn.Fail(self, "GateFailed", error="GateFailed", cause_path="States.JsonToString($.failure)")
        rejected = sfn.Fail(self, "CandidateRejected", error="CandidateRejected", cause_path="$.decision.summary")
        approved = sfn.Succeed(self, "CandidateApproved", output_path="$.decision")
        verdict = sfn.Choice(self, "Verdict").when(sfn.Condition.boolean_equals("$.decision.approved", True), approved).otherwise(rejected)
        # A notification that cannot be sent must not change the outcome.
        notify_failure.add_catch(failed, errors=["States.ALL"], result_path="$.notify_error")
        notify.add_catch(verdict, errors=["States.ALL"], result_path="$.notify_error")
        after_cleanup = (
            sfn.Choice(self, "FailedBeforeVerdict?")
            .when(sfn.Condition.is_present("$.failure"), notify_failure.next(failed))
            .otherwise(notify.next(verdict))
        )
        cleanup = sfn.Chain.start(cleanup_states[0])
        for state in cleanup_states[1:]:
            cleanup = cleanup.next(state)
        cleanup = cleanup.next(after_cleanup)
        # A resource that was never created is fine to miss: each delete catches its own error.
        for index, state in enumerate(cleanup_states):
            following = cleanup_states[index + 1] if index + 1 < len(cleanup_states) else after_cleanup
            state.add_catch(following, errors=["States.ALL"], result_path="$.cleanup_error")
        # With a shadow, every path first returns the live endpoint to its CloudFormation config.
        restore: sfn.Choice | None = None
        cleanup_entry: sfn.IChainable = cleanup_states[0]
        if spec.shadow:
            restore = self._restore_live(cleanup_states[0])
            cleanup_entry = sfn.Pass(self, "Cleanup", result=sfn.Result.from_boolean(True), result_path="$.cleaning").next(restore)

        def fail_with(name: str, error: str, cause: str) -> sfn.Pass:
            return sfn.Pass(self, name, parameters={"Error": error, "Cause": cause}, result_path="$.failure").next(cleanup_entry)

        def guarded(state: sfn.CustomState) -> sfn.CustomState:
            state.add_catch(cleanup_entry, errors=["States.ALL"], result_path="$.failure")
            return state

        # ---- optimize
        if spec.optimization_configs:
            create_job = guarded(_task(self, "CreateOptimizationJob", "aws-sdk:sagemaker:createOptimizationJob", {
                "OptimizationJobName.$": self._name("opt"),
                "RoleArn": spec.model_role_arn,
                "ModelSource": {"S3": {"S3Uri": spec.baseline_model_uri}},
                "DeploymentInstanceType": spec.instance_type,
                "OptimizationConfigs": spec.optimization_configs,
                "OutputConfig": {"S3OutputLocation.$": f"States.Format('s3://{self.bucket.bucket_name}/optimized/{{}}/', $.run.id)", "KmsKeyId": self.key.key_arn},
                "StoppingCondition": {"MaxRuntimeInSeconds": 36000},
            }, result_path=sfn.JsonPath.DISCARD))
            wait_job = sfn.Wait(self, "WaitForOptimization", time=sfn.WaitTime.duration(Duration.seconds(spec.poll_seconds)))
            describe_job = guarded(_task(self, "DescribeOptimizationJob", "aws-sdk:sagemaker:describeOptimizationJob", {"OptimizationJobName.$": self._name("opt")}, result_path="$.optimization"))
            count_job = sfn.Pass(self, "CountOptimizationPoll", parameters={"count.$": "States.MathAdd($.polls.count, 1)"}, result_path="$.polls")
            stop_job = _task(self, "StopOptimizationJob", "aws-sdk:sagemaker:stopOptimizationJob", {"OptimizationJobName.$": self._name("opt")}, result_path=sfn.JsonPath.DISCARD)
            stop_job.add_catch(cleanup_entry, errors=["States.ALL"], result_path="$.stop_error")
            timed_out = fail_with("OptimizationTimedOut", "OptimizationTimedOut", f"the optimization job did not finish within {spec.max_polls} polls of {spec.poll_seconds} s")
            stop_job.next(timed_out)
            from_job = sfn.Pass(self, "CandidateFromOptimization", parameters={
                "image.$": "$.optimization.OptimizationOutput.RecommendedInferenceImage",
                "model_uri.$": "$.optimization.OutputConfig.S3OutputLocation",
            }, result_path="$.candidate")
            job_done = (
                sfn.Choice(self, "OptimizationDone?")
                .when(sfn.Condition.string_equals("$.optimization.OptimizationJobStatus", "COMPLETED"), from_job)
                .when(sfn.Condition.or_(sfn.Condition.string_equals("$.optimization.OptimizationJobStatus", "FAILED"), sfn.Condition.string_equals("$.optimization.OptimizationJobStatus", "STOPPED")),
                      sfn.Pass(self, "OptimizationFailed", parameters={"Error": "OptimizationFailed", "Cause.$": "States.Format('optimization job {}: {}', $.optimization.OptimizationJobStatus, $.optimization.FailureReason)"}, result_path="$.failure").next(cleanup_entry))
                .when(sfn.Condition.number_greater_than_equals("$.polls.count", spec.max_polls), stop_job)
                .otherwise(wait_job)
            )
            wait_job.next(describe_job).next(count_job).next(job_done)
            start_candidate = sfn.Chain.start(create_job).next(reset_polls).next(wait_job)
            candidate_ready: sfn.INextable = from_job
        else:
            from_baseline = sfn.Pass(self, "CandidateFromBaseline", result=sfn.Result.from_object({"image": spec.candidate_image, "model_uri": spec.baseline_model_uri}), result_path="$.candidate")
            start_candidate = sfn.Chain.start(from_baseline)
            candidate_ready = from_baseline

        # ---- stage on a temporary endpoint
        download, startup = spec.startup_timeouts
        create_model = guarded(_task(self, "CreateCandidateModel", "sagemaker:createModel", {
            "ModelName.$": self._name("cand"),
            "ExecutionRoleArn": spec.model_role_arn,
            "EnableNetworkIsolation": True,
            "PrimaryContainer": {
                "Image.$": "$.candidate.image",
                "Environment": spec.candidate_environment,
                "ModelDataSource": {"S3DataSource": {"S3Uri.$": "$.candidate.model_uri", "S3DataType": "S3Prefix", "CompressionType": "None"}},
            },
        }, result_path=sfn.JsonPath.DISCARD))
        create_config = guarded(_task(self, "CreateCandidateConfig", "sagemaker:createEndpointConfig", {
            "EndpointConfigName.$": self._name("cand"),
            "ProductionVariants": [{
                "VariantName": "AllTraffic", "ModelName.$": self._name("cand"), "InstanceType": spec.instance_type, "InitialInstanceCount": 1,
                "ModelDataDownloadTimeoutInSeconds": download, "ContainerStartupHealthCheckTimeoutInSeconds": startup,
            }],
        }, result_path=sfn.JsonPath.DISCARD))
        create_endpoint = guarded(_task(self, "CreateCandidateEndpoint", "sagemaker:createEndpoint", {"EndpointName.$": self._name("cand"), "EndpointConfigName.$": self._name("cand")}, result_path=sfn.JsonPath.DISCARD))
        reset_endpoint_polls = sfn.Pass(self, "ResetEndpointPolls", result=sfn.Result.from_object({"count": 0}), result_path="$.polls")
        wait_endpoint = sfn.Wait(self, "WaitForEndpoint", time=sfn.WaitTime.duration(Duration.seconds(spec.poll_seconds)))
        describe_endpoint = guarded(_task(self, "DescribeCandidateEndpoint", "aws-sdk:sagemaker:describeEndpoint", {"EndpointName.$": self._name("cand")}, result_path="$.endpoint"))
        count_endpoint = sfn.Pass(self, "CountEndpointPoll", parameters={"count.$": "States.MathAdd($.polls.count, 1)"}, result_path="$.polls")

        # ---- benchmark, evaluate, decide, record
        def benchmark(name: str, endpoint: dict[str, str], run: str, result: str) -> sfn.CustomState:
            return _task(self, name, "states:startExecution.sync:2", {
                "StateMachineArn": fleet.state_machine.state_machine_arn,
                "Input": {
                    **endpoint,
                    "run_id.$": f"States.Format('{{}}-{run}-c{{}}', $.run_id, $.per_shard)",
                    "concurrency_per_shard.$": "$.per_shard",
                    "requests_per_shard.$": "$.requests",
                    "prompt_tokens": spec.prompt_tokens,
                    "max_new_tokens": spec.max_new_tokens,
                },
            }, result_path=result, result_selector={"key.$": "$.Output.key"})

        # One level after the other, baseline then candidate: the two never share the machine.
        items = [{"per_shard": c, "requests": max(32, spec.requests_per_slot * c)} for c in spec.levels]
        levels = sfn.Pass(self, "BenchmarkLevels", result=sfn.Result.from_array(items), result_path="$.levels")
        per_level = sfn.Map(
            self,
            "BenchmarkEachLevel",
            items_path="$.levels",
            max_concurrency=1,
            item_selector={"per_shard.$": "$$.Map.Item.Value.per_shard", "requests.$": "$$.Map.Item.Value.requests", "run_id.$": "$.run.id", "candidate.$": self._name("cand")},
            result_path="$.benchmark",
        )
        per_level.item_processor(
            sfn.Chain.start(benchmark("BenchmarkBaseline", {"endpoint_name": spec.live_endpoint}, "baseline", "$.baseline"))
            .next(benchmark("BenchmarkCandidate", {"endpoint_name.$": "$.candidate"}, "candidate", "$.candidate_result"))
        )
        per_level.add_catch(cleanup_entry, errors=["States.ALL"], result_path="$.failure")
        bench_baseline = levels
        evaluate = guarded(evaluation.task(self, "Evaluate", job_name=self._name("eval"), baseline=spec.live_endpoint, candidate=self._name("cand"), result_path=sfn.JsonPath.DISCARD))
        decide = guarded(_task(self, "DecideVerdict", "lambda:invoke", {
            "FunctionName": self.decider.function_arn,
            "Payload": {
                "team": spec.team, "environment": spec.environment, "change": spec.change, "thresholds": spec.thresholds,
                "price_per_hour_usd": spec.price_per_hour_usd, "instance_count": 1, "prediction": spec.prediction,
                "bucket": self.bucket.bucket_name,
                "baseline_keys.$": "$.benchmark[*].baseline.key", "candidate_keys.$": "$.benchmark[*].candidate_result.key",
                "evaluation_key.$": f"States.Format('evaluations/{{}}/verdict.json', {self._name('eval')})",
                "report_prefix.$": "States.Format('reports/{}/', $.run.id)",
                **({"shadow": {
                    "window_minutes": spec.shadow.window_minutes, "sampling_percentage": spec.shadow.sampling_percentage,
                    "production_variant": self._production_variant(), "shadow_variant": spec.shadow.variant_name,
                    "ids.$": "$.shadow_metrics.ids", "values.$": "$.shadow_metrics.values",
                }} if spec.shadow else {}),
            },
        }, result_path="$.decision", result_selector={"approved.$": "$.Payload.approved", "summary.$": "$.Payload.summary", "report_key.$": "$.Payload.report_key"}))

        def record(name: str, status: str) -> sfn.CustomState:
            return guarded(_task(self, name, "aws-sdk:sagemaker:createModelPackage", {
                "ModelPackageGroupName": self.group_name,
                "ModelPackageDescription.$": "$.decision.summary",
                "ModelApprovalStatus": status,
                "InferenceSpecification": {
                    "Containers": [{
                        "Image.$": "$.candidate.image",
                        "Environment": spec.candidate_environment,
                        "ModelDataSource": {"S3DataSource": {"S3Uri.$": "$.candidate.model_uri", "S3DataType": "S3Prefix", "CompressionType": "None"}},
                    }],
                    "SupportedRealtimeInferenceInstanceTypes": [spec.instance_type],
                    "SupportedContentTypes": ["application/json"],
                    "SupportedResponseMIMETypes": ["application/json", "application/jsonlines"],
                },
                "CustomerMetadataProperties": {"report.$": "States.Format('s3://" + self.bucket.bucket_name + "/{}', $.decision.report_key)", "gate_run.$": "$.run.id", "fingerprint": spec.fingerprint},
            }, result_path="$.model_package", result_selector={"arn.$": "$.ModelPackageArn"}))

        record_decision = (
            sfn.Choice(self, "Approved?")
            .when(sfn.Condition.boolean_equals("$.decision.approved", True), record("RecordApproved", "Approved").next(cleanup_entry))
            .otherwise(record("RecordRejected", "Rejected").next(cleanup_entry))
        )
        endpoint_ready = (
            sfn.Choice(self, "CandidateInService?")
            .when(sfn.Condition.string_equals("$.endpoint.EndpointStatus", "InService"), bench_baseline)
            .when(sfn.Condition.string_equals("$.endpoint.EndpointStatus", "Failed"),
                  sfn.Pass(self, "CandidateEndpointFailed", parameters={"Error": "CandidateEndpointFailed", "Cause.$": "States.Format('candidate endpoint failed: {}', $.endpoint.FailureReason)"}, result_path="$.failure").next(cleanup_entry))
            .when(sfn.Condition.number_greater_than_equals("$.polls.count", spec.max_polls), fail_with("CandidateEndpointTimedOut", "CandidateEndpointTimedOut", f"the candidate endpoint was not InService within {spec.max_polls} polls of {spec.poll_seconds} s"))
            .otherwise(wait_endpoint)
        )
        wait_endpoint.next(describe_endpoint).next(count_endpoint).next(endpoint_ready)
        if spec.shadow:
            assert restore is not None
            self._after_restore.otherwise(decide)
            levels.next(per_level).next(evaluate).next(self._mirror_live_traffic(guarded, fail_with, restore))
        else:
            levels.next(per_level).next(evaluate).next(decide)
        decide.next(record_decision)
        candidate_ready.next(create_model).next(create_config).next(create_endpoint).next(reset_endpoint_polls).next(wait_endpoint)

        definition = sfn.Chain.start(init).next(self._unless_proven(guarded, start_candidate))
        log_group = logs.LogGroup(self, "Logs", retention=logs.RetentionDays.THREE_MONTHS, removal_policy=RemovalPolicy.DESTROY)
        machine = sfn.StateMachine(
            self,
            "StateMachine",
            state_machine_name=gate_state_machine_name(spec.team, spec.environment),
            definition_body=sfn.DefinitionBody.from_chainable(definition),
            state_machine_type=sfn.StateMachineType.STANDARD,
            tracing_enabled=True,
            logs=sfn.LogOptions(destination=log_group, level=sfn.LogLevel.ALL, include_execution_data=True),
            timeout=Duration.hours(24),
        )
        return machine

    # ------------------------------------------------------------------ no-op for a proven candidate

    def _unless_proven(self, guarded, start: sfn.IChainable) -> sfn.IChainable:
        """The newest package of the group carries the fingerprint of the candidate it judged: the
        same candidate, Approved, passes at once (a pipeline re-run costs seconds, not a benchmark);
        Rejected, fails at once with the earlier verdict. Input {"force": true} proves it again."""
        fingerprint = self.spec.fingerprint
        last = guarded(_task(self, "FindLastProof", "aws-sdk:sagemaker:listModelPackages", {
            "ModelPackageGroupName": self.group_name, "SortBy": "CreationTime", "SortOrder": "Descending", "MaxResults": 1,
        }, result_path="$.last", result_selector={"arns.$": "$.ModelPackageSummaryList[*].ModelPackageArn"}))
        describe = _task(self, "DescribeLastProof", "aws-sdk:sagemaker:describeModelPackage", {"ModelPackageName.$": "States.ArrayGetItem($.last.arns, 0)"}, result_path="$.last_proof", result_selector={
            "arn.$": "$.ModelPackageArn", "status.$": "$.ModelApprovalStatus", "metadata.$": "$.CustomerMetadataProperties", "summary.$": "$.ModelPackageDescription",
        })
        # A package without our metadata (registered by hand) is no proof of anything: prove.
        describe.add_catch(start, errors=["States.ALL"], result_path="$.last_error")
        same = sfn.Condition.and_(
            sfn.Condition.is_not_present("$.force"),
            sfn.Condition.is_present("$.last_proof.metadata.fingerprint"),
            sfn.Condition.string_equals("$.last_proof.metadata.fingerprint", fingerprint),
        )
        proven = sfn.Pass(self, "AlreadyProven", parameters={
            "approved": True, "unchanged": True, "model_package_arn.$": "$.last_proof.arn",
            "summary.$": f"States.Format('UNCHANGED {self.spec.prefix}: candidate {fingerprint} was approved before ({{}}); nothing to prove', $.last_proof.arn)",
        }, result_path="$.decision").next(sfn.Succeed(self, "CandidateAlreadyProven", output_path="$.decision"))
        rejected = sfn.Fail(self, "CandidateRejectedBefore", error="CandidateRejectedBefore", cause_path=f"States.Format('candidate {fingerprint} is unchanged since it was rejected ({{}}): {{}}. Change the candidate, or start the gate with the input force: true to prove it again', $.last_proof.arn, $.last_proof.summary)")
        judged = (
            sfn.Choice(self, "SameCandidateAsLastProof?")
            .when(sfn.Condition.and_(same, sfn.Condition.string_equals("$.last_proof.status", "Approved")), proven)
            .when(sfn.Condition.and_(same, sfn.Condition.string_equals("$.last_proof.status", "Rejected")), rejected)
            .otherwise(start)
        )
        describe.next(judged)
        return sfn.Chain.start(last).next(
            sfn.Choice(self, "ProvenBefore?").when(sfn.Condition.is_present("$.last.arns[0]"), describe).otherwise(start)
        )

    # ------------------------------------------------------------------ shadow on the live endpoint

    def _production_variant(self) -> str:
        assert self.spec.shadow is not None
        return self.spec.shadow.live_config_request["ProductionVariants"][0]["VariantName"]

    def _describe_live(self, name: str) -> sfn.CustomState:
        return _task(self, name, "aws-sdk:sagemaker:describeEndpoint", {"EndpointName": self.spec.live_endpoint}, result_path="$.live")

    def _mirror_live_traffic(self, guarded, fail_with, restore: sfn.IChainable) -> sfn.IChainable:
        """Release the temporary endpoint, put the candidate as shadow on the live endpoint, mirror
        traffic for the window, read per-variant CloudWatch metrics, then restore (→ decide)."""
        spec, shadow = self.spec, self.spec.shadow
        assert shadow is not None
        download, startup = spec.startup_timeouts
        release = guarded(_task(self, "ReleaseCandidateEndpoint", "aws-sdk:sagemaker:deleteEndpoint", {"EndpointName.$": self._name("cand")}, result_path=sfn.JsonPath.DISCARD))
        check_live = guarded(self._describe_live("DescribeLiveEndpoint"))
        create_config = guarded(_task(self, "CreateShadowConfig", "sagemaker:createEndpointConfig", {
            **shadow.live_config_request,
            "EndpointConfigName.$": self._name("shadow"),
            "ShadowProductionVariants": [{
                "VariantName": shadow.variant_name, "ModelName.$": self._name("cand"), "InstanceType": spec.instance_type, "InitialInstanceCount": 1,
                # Relative to the production variant's weight of 1: the mirrored share.
                "InitialVariantWeight": shadow.sampling_percentage / 100,
                "ModelDataDownloadTimeoutInSeconds": download, "ContainerStartupHealthCheckTimeoutInSeconds": startup,
            }],
        }, result_path=sfn.JsonPath.DISCARD))
        # Marked before the update: an update whose response is lost must still be undone.
        mark = sfn.Pass(self, "ShadowApplied", parameters={"applied": True, "config.$": self._name("shadow")}, result_path="$.shadow")
        apply = guarded(_task(self, "PutShadowOnLiveEndpoint", "sagemaker:updateEndpoint", {"EndpointName": spec.live_endpoint, "EndpointConfigName.$": "$.shadow.config"}, result_path=sfn.JsonPath.DISCARD))
        reset = sfn.Pass(self, "ResetShadowPolls", result=sfn.Result.from_object({"count": 0}), result_path="$.polls")
        wait = sfn.Wait(self, "WaitForShadow", time=sfn.WaitTime.duration(Duration.seconds(spec.poll_seconds)))
        describe = guarded(self._describe_live("DescribeShadowedEndpoint"))
        count = sfn.Pass(self, "CountShadowPoll", parameters={"count.$": "States.MathAdd($.polls.count, 1)"}, result_path="$.polls")
        started = sfn.Pass(self, "MirrorWindowStarts", parameters={"at.$": "$$.State.EnteredTime"}, result_path="$.mirror")
        window = sfn.Wait(self, "MirrorLiveTraffic", time=sfn.WaitTime.duration(Duration.minutes(shadow.window_minutes)))
        metrics = guarded(_task(self, "ReadVariantMetrics", "aws-sdk:cloudwatch:getMetricData", {
            "StartTime.$": "$.mirror.at",
            "EndTime.$": "$$.State.EnteredTime",
            "ScanBy": "TimestampAscending",
            "MetricDataQueries": [
                {"Id": f"{side}_{key}", "ReturnData": True, "MetricStat": {
                    "Metric": {"Namespace": "AWS/SageMaker", "MetricName": metric,
                               "Dimensions": [{"Name": "EndpointName", "Value": spec.live_endpoint}, {"Name": "VariantName", "Value": variant}]},
                    "Period": shadow.window_minutes * 60, "Stat": "p99" if key == "latency" else "Sum",
                }}
                for side, variant in (("production", self._production_variant()), ("shadow", shadow.variant_name))
                for key, metric in (("invocations", "Invocations"), ("errors", "Invocation5XXErrors"), ("latency", "ModelLatency"))
            ],
        }, result_path="$.shadow_metrics", result_selector={"ids.$": "$.MetricDataResults[*].Id", "values.$": "$.MetricDataResults[*].Values"}))
        ready = (
            sfn.Choice(self, "ShadowInService?")
            .when(sfn.Condition.and_(sfn.Condition.string_equals("$.live.EndpointStatus", "InService"), sfn.Condition.string_equals_json_path("$.live.EndpointConfigName", "$.shadow.config")), started)
            .when(sfn.Condition.string_equals("$.live.EndpointStatus", "InService"), fail_with("ShadowRolledBack", "ShadowRolledBack", "SageMaker rolled the live endpoint back from the shadow config (see the endpoint's FailureReason)"))
            .when(sfn.Condition.string_equals("$.live.EndpointStatus", "Failed"), fail_with("ShadowFailed", "ShadowFailed", "the live endpoint failed while taking the shadow config"))
            .when(sfn.Condition.number_greater_than_equals("$.polls.count", spec.max_polls), fail_with("ShadowTimedOut", "ShadowTimedOut", f"the shadow config was not InService within {spec.max_polls} polls of {spec.poll_seconds} s"))
            .otherwise(wait)
        )
        at_rest = (
            sfn.Choice(self, "LiveEndpointAtRest?")
            .when(sfn.Condition.and_(sfn.Condition.string_equals("$.live.EndpointStatus", "InService"), sfn.Condition.string_equals("$.live.EndpointConfigName", shadow.live_config_name)), create_config)
            .otherwise(fail_with("LiveEndpointBusy", "LiveEndpointBusy", "the live endpoint is not InService on the config CloudFormation created (a deployment in progress?); the gate does not touch it"))
        )
        wait.next(describe).next(count).next(ready)
        started.next(window).next(metrics).next(restore)
        create_config.next(mark).next(apply).next(reset).next(wait)
        return sfn.Chain.start(release).next(check_live).next(at_rest)

    def _restore_live(self, then: sfn.IChainable) -> sfn.Choice:
        """Return the live endpoint to the config CloudFormation created, waiting out an update in
        flight; bounded. Ends in AfterRestore: `then` when cleaning up or failed, else the decision."""
        spec, shadow = self.spec, self.spec.shadow
        assert shadow is not None
        # The way on: the deletes when cleaning up or failed, else the decision (wired by the caller).
        self._after_restore = sfn.Choice(self, "AfterRestore").when(sfn.Condition.or_(sfn.Condition.is_present("$.cleaning"), sfn.Condition.is_present("$.failure")), then)
        restored = sfn.Pass(self, "LiveEndpointRestored", result=sfn.Result.from_boolean(True), result_path="$.shadow.restored").next(self._after_restore)
        failed = sfn.Pass(self, "LiveEndpointNotRestored", parameters={
            "Error": "LiveEndpointNotRestored",
            "Cause": f"the live endpoint {spec.live_endpoint} could not be returned to its CloudFormation config {shadow.live_config_name}; "
                     f"restore it: aws sagemaker update-endpoint --endpoint-name {spec.live_endpoint} --endpoint-config-name {shadow.live_config_name}",
        }, result_path="$.failure").next(self._after_restore)
        reset = sfn.Pass(self, "ResetRestorePolls", result=sfn.Result.from_object({"count": 0}), result_path="$.restore_polls")
        describe = self._describe_live("DescribeLiveForRestore")
        describe.add_catch(failed, errors=["States.ALL"], result_path="$.restore_error")
        update = _task(self, "RestoreLiveEndpoint", "sagemaker:updateEndpoint", {"EndpointName": spec.live_endpoint, "EndpointConfigName": shadow.live_config_name}, result_path=sfn.JsonPath.DISCARD)
        update.add_catch(failed, errors=["States.ALL"], result_path="$.restore_error")
        wait = sfn.Wait(self, "WaitForRestore", time=sfn.WaitTime.duration(Duration.seconds(spec.poll_seconds)))
        count = sfn.Pass(self, "CountRestorePoll", parameters={"count.$": "States.MathAdd($.restore_polls.count, 1)"}, result_path="$.restore_polls")
        state = (
            sfn.Choice(self, "LiveEndpointOnOriginalConfig?")
            .when(sfn.Condition.and_(sfn.Condition.string_equals("$.live.EndpointStatus", "InService"), sfn.Condition.string_equals("$.live.EndpointConfigName", shadow.live_config_name)), restored)
            .when(sfn.Condition.number_greater_than_equals("$.restore_polls.count", spec.max_polls), failed)
            .when(sfn.Condition.or_(sfn.Condition.string_equals("$.live.EndpointStatus", "InService"), sfn.Condition.string_equals("$.live.EndpointStatus", "Failed")), update)
            .otherwise(wait)
        )
        update.next(wait)
        wait.next(count).next(describe)
        describe.next(state)
        return (
            sfn.Choice(self, "ShadowOnLiveEndpoint?")
            .when(sfn.Condition.and_(sfn.Condition.is_present("$.shadow.applied"), sfn.Condition.is_not_present("$.shadow.restored")), reset.next(describe))
            .otherwise(self._after_restore)
        )

    # ------------------------------------------------------------------ permissions

    def _grant(self, fleet: BenchmarkFleet, evaluation: EvaluationJob) -> None:
        role = self.state_machine.role
        stack = Stack.of(self)
        arn = lambda kind: f"arn:{Aws.PARTITION}:sagemaker:{stack.region}:{stack.account}:{kind}/{self.spec.prefix[:30]}-*"  # noqa: E731
        nag.allow(
            role,
            ["sagemaker:CreateModel", "sagemaker:DeleteModel", "sagemaker:CreateEndpointConfig", "sagemaker:DeleteEndpointConfig",
             "sagemaker:CreateEndpoint", "sagemaker:DeleteEndpoint", "sagemaker:DescribeEndpoint", "sagemaker:AddTags"],
            [arn("model"), arn("endpoint-config"), arn("endpoint")],
            why_wildcard="Temporary candidate resources are named <team>-<env>-cand-<run>; the run id is known only at run time.",
        )
        nag.allow(
            role,
            ["sagemaker:CreateOptimizationJob", "sagemaker:DescribeOptimizationJob", "sagemaker:StopOptimizationJob", "sagemaker:AddTags"],
            [arn("optimization-job")],
            why_wildcard="Optimization jobs are named <team>-<env>-opt-<run>; the run id is known only at run time.",
        )
        if self.spec.shadow:
            live = f"arn:{Aws.PARTITION}:sagemaker:{stack.region}:{stack.account}:endpoint/{self.spec.live_endpoint.lower()}"
            nag.allow(role, ["sagemaker:DescribeEndpoint", "sagemaker:UpdateEndpoint"], [live, self.spec.shadow.live_config_arn, arn("endpoint-config")],
                      why_wildcard="The live endpoint moves between its CloudFormation config and this gate's shadow configs, named <team>-<env>-shadow-<run>.")
            nag.allow(role, ["cloudwatch:GetMetricData"], ["*"], why_wildcard="GetMetricData has no resource-level permissions; it reads the mirrored variants' SageMaker metrics.")
        nag.allow(role, ["sagemaker:ListModelPackages"], ["*"], why_wildcard="ListModelPackages has no resource-level permissions; the gate lists its own group to find its last proof.")
        nag.allow(role, ["sagemaker:CreateModelPackage", "sagemaker:DescribeModelPackage", "sagemaker:AddTags"], [
            f"arn:{Aws.PARTITION}:sagemaker:{stack.region}:{stack.account}:model-package/{self.group_name}/*",
            f"arn:{Aws.PARTITION}:sagemaker:{stack.region}:{stack.account}:model-package-group/{self.group_name}",
        ], why_wildcard="Versions of this gate's own model package group.")
        nag.allow(role, ["iam:PassRole"], [self.spec.model_role_arn], conditions={"StringEquals": {"iam:PassedToService": "sagemaker.amazonaws.com"}})
        self.decider.grant_invoke(role)
        fleet.state_machine.grant_start_execution(role)
        nag.allow(role, ["states:DescribeExecution", "states:StopExecution"], [
            f"arn:{Aws.PARTITION}:states:{stack.region}:{stack.account}:execution:{fleet.state_machine.state_machine_name}:*"
        ], why_wildcard="Executions of the benchmark fleet's own state machine (startExecution.sync).")
        nag.allow(role, ["events:PutTargets", "events:PutRule", "events:DescribeRule"], [
            f"arn:{Aws.PARTITION}:events:{stack.region}:{stack.account}:rule/StepFunctionsGetEventsForStepFunctionsExecutionRule"
        ])
        evaluation.grant_run(role)
        nag.allow(role, ["sns:Publish"], [self.topic.topic_arn])
        nag.allow(role, ["kms:Encrypt", "kms:Decrypt", "kms:GenerateDataKey"], [self.key.key_arn])
        nag.acknowledge_generated_wildcards(self.state_machine, generated_policy_reason)
