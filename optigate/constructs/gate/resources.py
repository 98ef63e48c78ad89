"""What a gate's constructs add to its plan: the resources the stack creates, known only as CloudFormation tokens."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3

from optigate.constructs.benchmark_fleet import BenchmarkFleet
from optigate.constructs.evaluation_job import EvaluationJob


@dataclass(frozen=True)
class LiveConfig:
    """The live endpoint's config CloudFormation created, which a shadow stage leaves and returns to.

    :param name: its name.
    :param arn: its ARN (SageMaker lower-cases names in ARNs; CloudFormation's Ref has it right).
    :param request: that config as a CreateEndpointConfig request without name and shadow
        (TunedEndpoint.config_request()). A shadow CloudFormation runs is replaced for the window.
    """

    name: str
    arn: str
    request: dict[str, Any]

    @property
    def production_variant(self) -> str:
        """The live variant whose traffic is mirrored (the first of the live config)."""
        return str(self.request["ProductionVariants"][0]["VariantName"])

    @property
    def keys(self) -> list[str]:
        """The KMS keys the config names: its volume key and its data capture key."""
        keys = [self.request.get("KmsKeyId"), (self.request.get("DataCaptureConfig") or {}).get("KmsKeyId")]
        return list(dict.fromkeys(key for key in keys if key))


@dataclass(frozen=True)
class GateResources:
    """The resources a gate uses that its stack creates.

    :param model_role_arn: the live model's role: the candidate, the twin and the optimization job run as it.
    :param baseline_model_name: the live endpoint's model (CloudFormation's; the gate never deletes it), which the
        baseline's twin runs.
    :param bucket: where reports and optimized artifacts go (the fleet's and evaluation's bucket).
    :param key: encrypts artifacts, reports and the notification topic.
    :param fleet: the BenchmarkFleet that loads baseline and candidate.
    :param evaluation: the EvaluationJob comparing their answers.
    :param live_config: the live endpoint's config, with a shadow stage.
    :param training_data_uri: the data capture's S3 URI, when a trained head trains from it.
    :param workload_uri: the data capture's S3 URI, when the benchmark's workload is read from it.
    """

    model_role_arn: str
    baseline_model_name: str
    bucket: s3.IBucket
    key: kms.IKey
    fleet: BenchmarkFleet
    evaluation: EvaluationJob
    live_config: LiveConfig | None = None
    training_data_uri: str | None = None
    workload_uri: str | None = None
