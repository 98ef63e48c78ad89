"""An endpoint config's DataCaptureConfig and the bucket it writes to: one way for model-backed endpoints
(TunedEndpoint) and inference-component endpoints (LoraAdapters) alike.

DataCaptureConfig is a member of CreateEndpointConfig (botocore 1.44) and of AWS::SageMaker::EndpointConfig
(cfn-lint 1.58's schema: "The data capture configuration applies to all production variants hosted at the endpoint");
neither excludes an endpoint whose variant has no model and serves inference components. SageMaker writes the
records under `<DestinationS3Uri>/<endpoint>/<variant>/yyyy/mm/dd/hh/`
(https://docs.aws.amazon.com/sagemaker/latest/dg/model-monitor-data-capture-endpoint.html); the documented record
(captureData, eventMetadata: eventId, inferenceId, inferenceTime) names no inference component, so on an endpoint
serving adapters a record does not say which adapter answered (docs/inference-components.md).
"""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sagemaker as sagemaker
from constructs import Construct

from optigate.constructs import nag
from optigate.constructs.common import secure_bucket
from optigate.constructs.lmi_model import LmiModel


@dataclass(frozen=True)
class CaptureSettings:
    """How the endpoint captures requests and responses (EndpointConfig DataCaptureConfig).

    :param percentage: InitialSamplingPercentage, 1-100.
    :param encryption: "kms": the endpoint's KMS key encrypts the bucket and is the capture's KmsKeyId (SSE-KMS).
        "s3_managed": a separate SSL-only bucket with SSE-S3 and no KmsKeyId, which a SageMaker optimization
        job can train an EAGLE head from ("unencrypted captured data", ModelSpeculativeDecodingConfig).
        @default "kms"
    :param json_content_types: CaptureContentTypeHeader.JsonContentTypes (at most 10); other payloads are
        captured base64-encoded. @default none
    """

    percentage: int
    encryption: str = "kms"
    json_content_types: tuple[str, ...] = ()


def capture_config(
    scope: Construct, model: LmiModel, key: kms.IKey, capture: CaptureSettings
) -> tuple[sagemaker.CfnEndpointConfig.DataCaptureConfigProperty, s3.Bucket]:
    """The DataCaptureConfig of an endpoint whose model role writes the records, and the bucket it writes to
    (created in `scope`); the role may write under capture/ only."""
    s3_managed = capture.encryption == "s3_managed"
    bucket: s3.Bucket
    if s3_managed:
        # What an optimization job can train from: SSE-S3 and no capture KmsKeyId. SSL-only and private like
        # every optigate bucket; only this endpoint's capture is in it.
        bucket = s3.Bucket(
            scope,
            "PlainCaptureBucket",
            encryption=s3.BucketEncryption.S3_MANAGED,
            enforce_ssl=True,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            removal_policy=RemovalPolicy.RETAIN,
            lifecycle_rules=[s3.LifecycleRule(expiration=Duration.days(90))],
        )
        nag.acknowledge(
            bucket,
            "AwsSolutions-S1",
            "Only SageMaker (through the model role) writes here, and the gate's optimization job reads it; "
            "reads are audited with CloudTrail S3 data events, which platform accounts enable organisation-wide.",
        )
    else:
        bucket = secure_bucket(
            scope, "CaptureBucket", key, purpose="SageMaker (through the model role)", expire_days=90
        )
    # SageMaker writes captured data with the model's execution role.
    nag.allow(
        model.role,
        ["s3:PutObject"],
        [bucket.arn_for_objects("capture/*")],
        why_wildcard="Captured requests and responses, written under this endpoint's capture/ prefix only.",
    )
    if not s3_managed:
        nag.allow(model.role, ["kms:Encrypt", "kms:GenerateDataKey", "kms:Decrypt"], [key.key_arn])
    header = (
        sagemaker.CfnEndpointConfig.CaptureContentTypeHeaderProperty(
            json_content_types=list(capture.json_content_types)
        )
        if capture.json_content_types
        else None
    )
    config = sagemaker.CfnEndpointConfig.DataCaptureConfigProperty(
        enable_capture=True,
        initial_sampling_percentage=capture.percentage,
        destination_s3_uri=bucket.s3_url_for_object("capture"),
        kms_key_id=None if s3_managed else key.key_arn,
        capture_options=[
            sagemaker.CfnEndpointConfig.CaptureOptionProperty(capture_mode="Input"),
            sagemaker.CfnEndpointConfig.CaptureOptionProperty(capture_mode="Output"),
        ],
        capture_content_type_header=header,
    )
    return config, bucket


def capture_prefix(bucket: s3.IBucket | None, endpoint_name: str) -> str | None:
    """Where an endpoint's captured records are: `<destination>/<endpoint>/` (SageMaker's layout,
    `<DestinationS3Uri>/<endpoint>/<variant>/yyyy/mm/dd/hh/`), or None without capture."""
    if bucket is None:
        return None
    return bucket.s3_url_for_object(f"capture/{endpoint_name}/")
