"""BenchmarkFleet: N Lambda workers at c streams each, fanned out by a Distributed Map."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from aws_cdk import Aws, Duration, RemovalPolicy, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_stepfunctions as sfn
from aws_cdk import aws_stepfunctions_tasks as tasks
from constructs import Construct

from optigate.constructs import nag, retries
from optigate.constructs.assets import bench_lambda_code
from optigate.constructs.common import STREAMING_INVOKE_ACTIONS, function_role, secure_bucket
from optigate.lambdas.events import FromState, MergeEvent
from optigate.naming import RESULTS_PREFIX

WORKER_TIMEOUT = Duration.minutes(15)  # Lambda's maximum


@dataclass(frozen=True)
class FleetTarget:
    """The endpoint the fleet loads (and optionally one variant or inference component of it)."""

    endpoint_name: str
    target_variant: str | None = None
    inference_component: str | None = None


@dataclass(frozen=True)
class CaptureAccess:
    """Captured traffic the workers read as their workload (optigate.bench.core.shard_workload), and nothing else of
    its bucket: the objects under one prefix, a listing of that prefix, and kms:Decrypt of the key that encrypts the
    capture (through S3 only), if any.

    :param objects_arn: ARN pattern of the objects, e.g. the capture's `arn_for_objects("capture/<endpoint>/*")`.
    :param bucket_arn: the bucket's ARN.
    :param listed: the s3:prefix the workers list, e.g. `capture/<endpoint>/*`.
    :param key_arn: the KMS key the capture is encrypted with (DataCaptureConfig.KmsKeyId). @default none (SSE-S3)
    """

    objects_arn: str
    bucket_arn: str
    listed: str
    key_arn: str | None = None


class BenchmarkFleet(Construct):
    """A Standard state machine that benchmarks one endpoint from many Lambda workers at once.

    Input: `{"endpoint_name", "run_id", "concurrency_per_shard", "requests_per_shard", "prompt_tokens",
    "max_new_tokens", "engine_mode"}`; the endpoint name must match `endpoints` (IAM allows only those), and
    `engine_mode` is LMI's engine mode of its container (optigate.serving.engine_mode), which the workers speak.
    One Python Lambda process holds about 64 streams accurately; more concurrency takes more shards.
    Each worker writes its raw samples to S3 (KMS); a merge step combines them exactly and
    writes `benchmarks/<run_id>/result.json`; the output carries the merged summary.

    :param target: the endpoint to benchmark (and the variant or inference component).
    :param endpoints: the endpoint names the workers may invoke (`*` allowed), such as
        optigate.naming.invocable_endpoints. @default names starting with `target.endpoint_name`
    :param shards: workers run side by side. @default 4
    :param results_bucket: @default a new SSL-only bucket encrypted with `encryption_key`
    :param encryption_key: @default a new key with rotation
    :param worker_timeout: @default 15 minutes (Lambda's maximum; keep a level shorter)
    :param components: inference-component names the workers may invoke (`*` allowed), e.g.
        optigate.naming.run_component_patterns; given, the input carries `inference_components`
        ([{name, adapter, weight}]), over which each worker spreads its requests. @default none
    :param capture: captured traffic the workers may read; given, the input carries `workload` ({source, kind,
        window_days, max_requests, speedup, until, digest}), which every worker rebuilds and takes its share of.
        @default none
    :param varied_lengths: the input carries `synthetic` (length distributions, a shared prefix). @default False
    :param training_data: the capture an EAGLE head trains from, which a worker counts before the optimization job
        is created (its `training_data_check` event); the same read grant as `capture`, made once when both are one
        object. @default none
    """

    # Over 80 lines: the fleet's resources wired in the order they depend on each other.
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        target: FleetTarget,
        endpoints: Sequence[str] | None = None,
        shards: int = 4,
        results_bucket: s3.IBucket | None = None,
        encryption_key: kms.IKey | None = None,
        worker_timeout: Duration = WORKER_TIMEOUT,
        components: Sequence[str] = (),
        capture: CaptureAccess | None = None,
        varied_lengths: bool = False,
        training_data: CaptureAccess | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        if shards < 1:
            raise ValueError(f"{self.node.path}: shards must be at least 1")
        stack = Stack.of(self)
        self.key = encryption_key or kms.Key(
            self, "Key", enable_key_rotation=True, description="Encrypts benchmark results"
        )
        self.bucket = results_bucket or secure_bucket(
            self, "Results", self.key, purpose="this fleet's Lambda functions", expire_days=365
        )
        self.shards = shards

        self.worker, worker_role = self._function("Worker", "benchmark", worker_timeout, memory_mb=2048)
        self.merger, merger_role = self._function("Merge", "benchmark_merge", Duration.minutes(5), memory_mb=1024)
        # The execution input names the endpoint (the gate benchmarks per-run candidates), so the
        # worker may invoke each of `endpoints`, by default those whose names start with the target's.
        invocable = endpoints if endpoints is not None else [f"{target.endpoint_name}*"]
        sagemaker_arn = f"arn:{Aws.PARTITION}:sagemaker:{stack.region}:{stack.account}"
        wildcard = "Endpoints named after the team and environment: the gate's per-run baseline twins and candidates."
        nag.allow(
            worker_role,
            list(STREAMING_INVOKE_ACTIONS),
            [f"{sagemaker_arn}:endpoint/{name.lower()}" for name in invocable],
            why_wildcard=wildcard if any("*" in name for name in invocable) else None,
        )
        if target.inference_component:
            component_arn = (
                f"arn:{Aws.PARTITION}:sagemaker:{stack.region}:{stack.account}"
                f":inference-component/{target.inference_component.lower()}"
            )
            nag.allow(worker_role, list(STREAMING_INVOKE_ACTIONS), [component_arn])
        if components:
            # InvokeEndpoint with InferenceComponentName is authorized on the component too (the service
            # authorization reference lists the inference-component resource type for it).
            nag.allow(
                worker_role,
                list(STREAMING_INVOKE_ACTIONS),
                [f"{sagemaker_arn}:inference-component/{name.lower()}" for name in components],
                why_wildcard="Inference components named after the team and environment: the gate's per-run "
                "components on its twin and candidate endpoints.",
            )
        results = self.bucket.arn_for_objects(f"{RESULTS_PREFIX}/*")
        nag.allow(
            worker_role,
            ["s3:PutObject"],
            [results],
            why_wildcard="Shard results under the fleet's benchmarks/ prefix, one object per run and shard.",
        )
        nag.allow(
            merger_role,
            ["s3:GetObject", "s3:PutObject"],
            [results],
            why_wildcard="Reads the shard results and writes the merged result under benchmarks/.",
        )
        for role in (worker_role, merger_role):
            nag.allow(role, ["kms:Decrypt", "kms:Encrypt", "kms:GenerateDataKey"], [self.key.key_arn])

        if capture is not None:
            self._read_capture(
                worker_role,
                capture,
                "The team's captured requests the benchmark replays: the records under the capture's prefix only, "
                "read inside the account.",
            )
        if training_data is not None and training_data != capture:
            self._read_capture(
                worker_role,
                training_data,
                "The capture the gate's EAGLE head trains from, counted before the optimization job: the records "
                "under the capture's prefix only, read inside the account.",
            )
        self.reads_capture = capture is not None
        self.reads_training_data = training_data is not None
        self.varied_lengths = varied_lengths
        self.spread_over_components = bool(components)
        self.state_machine = self._state_machine(target)

    @staticmethod
    def _read_capture(role: iam.Role, capture: CaptureAccess, why: str) -> None:
        nag.allow(role, ["s3:GetObject"], [capture.objects_arn], why_wildcard=why)
        nag.allow(
            role, ["s3:ListBucket"], [capture.bucket_arn], conditions={"StringLike": {"s3:prefix": [capture.listed]}}
        )
        if capture.key_arn is not None:
            # Through S3 only: the capture's objects, not anything else the endpoint's key encrypts (kms:ViaService,
            # https://docs.aws.amazon.com/kms/latest/developerguide/conditions-kms.html#conditions-kms-via-service).
            nag.allow(
                role,
                ["kms:Decrypt"],
                [capture.key_arn],
                conditions={"StringEquals": {"kms:ViaService": f"s3.{Stack.of(role).region}.amazonaws.com"}},
            )

    def _function(
        self, construct_id: str, handler_folder: str, timeout: Duration, memory_mb: int
    ) -> tuple[lambda_.Function, iam.Role]:
        """The function and its role (Function.role is optional in CDK's types)."""
        role, log_group = function_role(self, construct_id)
        function = lambda_.Function(
            self,
            construct_id,
            runtime=lambda_.Runtime.PYTHON_3_14,
            architecture=lambda_.Architecture.ARM_64,
            handler="handler.handler",
            code=bench_lambda_code(handler_folder),
            timeout=timeout,
            memory_size=memory_mb,
            role=role,
            log_group=log_group,
            description=f"optigate benchmark {handler_folder.replace('_', ' ')}",
        )
        return function, role

    # Over 80 lines: one state machine's definition, read top to bottom as the console draws it.
    def _state_machine(self, target: FleetTarget) -> sfn.StateMachine:
        indexes = {"shards.$": f"States.ArrayRange(0, {self.shards - 1}, 1)"} if self.shards > 1 else {"shards": [0]}
        shard_indexes = sfn.Pass(
            self,
            "ShardIndexes",
            parameters={
                **indexes,
                # One clock for every shard of a replay (optigate.lambdas.benchmark.shared_start).
                "entered.$": "$$.State.EnteredTime",
            },
            result_path="$.fanout",
        )
        worker_payload: dict[str, object] = {
            "endpoint_name.$": "$.endpoint_name",
            "target_variant": target.target_variant,
            "inference_component": target.inference_component,
            "region": Stack.of(self).region,
            "bucket": self.bucket.bucket_name,
            "prefix": RESULTS_PREFIX,
            "shard.$": "$$.Map.Item.Value",
            "run_id.$": "$.run_id",
            "concurrency.$": "$.concurrency_per_shard",
            "requests.$": "$.requests_per_shard",
            "prompt_tokens.$": "$.prompt_tokens",
            "max_new_tokens.$": "$.max_new_tokens",
            "engine_mode.$": "$.engine_mode",
        }
        if self.spread_over_components:
            worker_payload["inference_components.$"] = "$.inference_components"
        if self.reads_capture:
            worker_payload["workload.$"] = "$.workload"
            worker_payload["shards"] = self.shards  # each worker sends every shards-th captured request
            worker_payload["schedule_entered.$"] = "$.fanout.entered"  # a replay's shards share one start
        if self.varied_lengths:
            worker_payload["synthetic.$"] = "$.synthetic"
        fan_out = sfn.DistributedMap(
            self,
            "Shards",
            items_path="$.fanout.shards",
            max_concurrency=self.shards,
            item_selector={k: v for k, v in worker_payload.items() if v is not None},
            result_path="$.shard_results",
        )
        run_shard = tasks.LambdaInvoke(
            self,
            "RunShard",
            lambda_function=self.worker,  # the payload is the item: the whole state input
            payload_response_only=True,
            retry_on_service_exceptions=False,  # retries.lambda_retry() instead: the same errors, a float rate
        )
        fan_out.item_processor(run_shard)
        merge = tasks.LambdaInvoke(
            self,
            "MergeShards",
            lambda_function=self.merger,
            payload=sfn.TaskInput.from_object(
                MergeEvent(
                    shards=FromState("$.shard_results"),
                    bucket=self.bucket.bucket_name,
                    key=FromState(f"States.Format('{RESULTS_PREFIX}/{{}}/result.json', $.run_id)"),
                ).to_payload()
            ),
            result_selector={"bucket.$": "$.bucket", "key.$": "$.key", "summary.$": "$.summary"},
            payload_response_only=True,
            retry_on_service_exceptions=False,  # retries.lambda_retry() instead: the same errors, a float rate
        )
        for task in (run_shard, merge):
            retry = retries.lambda_retry()
            task.add_retry(
                errors=retry["ErrorEquals"],
                interval=Duration.seconds(retry["IntervalSeconds"]),
                max_attempts=retry["MaxAttempts"],
                backoff_rate=retry["BackoffRate"],
            )
        log_group = logs.LogGroup(
            self, "StateMachineLogs", retention=logs.RetentionDays.ONE_MONTH, removal_policy=RemovalPolicy.DESTROY
        )
        machine = sfn.StateMachine(
            self,
            "StateMachine",
            definition_body=sfn.DefinitionBody.from_chainable(shard_indexes.next(fan_out).next(merge)),
            state_machine_type=sfn.StateMachineType.STANDARD,
            tracing_enabled=True,
            logs=sfn.LogOptions(destination=log_group, level=sfn.LogLevel.ALL, include_execution_data=True),
            timeout=Duration.hours(2),
        )
        nag.acknowledge_generated_wildcards(machine, generated_policy_reason)
        return machine


GENERATED_WILDCARD_REASONS = {
    "lambda:": "invokes only this construct's functions (':*' covers their versions)",
    "xray:": "X-Ray's trace APIs have no resource scope (tracing on, AwsSolutions-SF2)",
    "logs:": "CloudWatch Logs' vended-log delivery APIs have no resource scope (execution logging, SF1)",
    "states:": "the Distributed Map starts, describes and stops child executions of this state machine only",
}


def generated_policy_reason(actions: list[str]) -> str | None:
    """Why the wildcards CDK puts in a state machine's policies are needed, or None if unknown."""
    families = {prefix for action in actions for prefix in GENERATED_WILDCARD_REASONS if action.startswith(prefix)}
    if not families or any(not action.startswith(tuple(families)) for action in actions):
        return None
    return "CDK-generated grant: " + "; ".join(GENERATED_WILDCARD_REASONS[f] for f in sorted(families)) + "."
