"""EvaluationJob: the fmeval comparison as a SageMaker Processing job a state machine can run."""

from __future__ import annotations

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
        bucket, key_prefix = split_s3_uri(self.dataset_uri)
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

    def request(
        self, job_name: str, baseline: str, candidate: str, *, endpoint_url: str | None = None
    ) -> dict[str, Any]:
        """The CreateProcessingJob request (JSONPath values allowed, as `Key.$`)."""
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
            "ProcessingInputs": [
                {
                    "InputName": "dataset",
                    "S3Input": {
                        "S3Uri": self.dataset_uri,
                        "LocalPath": INPUT_DIR,
                        "S3DataType": "S3Prefix",
                        "S3InputMode": "File",
                        "S3DataDistributionType": "FullyReplicated",
                    },
                }
            ],
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
    ) -> sfn.CustomState:
        """A state that runs the job and waits for it (`createProcessingJob.sync`)."""
        return sfn.CustomState(
            scope,
            construct_id,
            state_json={
                "Type": "Task",
                "Resource": f"arn:{Aws.PARTITION}:states:::sagemaker:createProcessingJob.sync",
                "Parameters": self.request(job_name, baseline, candidate),
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


def results_bucket(scope: Construct, construct_id: str, key: kms.IKey) -> s3.Bucket:
    """An SSL-only, KMS-encrypted bucket for evaluation and benchmark results."""
    return secure_bucket(scope, construct_id, key, purpose="optigate's jobs")
