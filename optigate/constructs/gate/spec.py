"""What one team's gate proves, resolved from its config at synth time (no CDK here)."""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field
from typing import Any

from optigate import naming

#: The optimization job's own bounds (its StoppingCondition): at most 10 h of work, and at most 2 h
#: waiting for capacity (a p5 may not be free). SageMaker stops the job at either; the gate polls it
#: for that long plus a grace for the stop, so the job's bound, not the gate's poll count, ends a
#: slow or queued job.
OPTIMIZATION_MAX_RUNTIME_SECONDS = 36_000
OPTIMIZATION_MAX_PENDING_SECONDS = 7_200
OPTIMIZATION_STOP_GRACE_SECONDS = 1_800
OPTIMIZATION_POLL_SECONDS = 300
OPTIMIZATION_MAX_POLLS = math.ceil(
    (OPTIMIZATION_MAX_RUNTIME_SECONDS + OPTIMIZATION_MAX_PENDING_SECONDS + OPTIMIZATION_STOP_GRACE_SECONDS)
    / OPTIMIZATION_POLL_SECONDS
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

    @property
    def production_variant(self) -> str:
        """The live variant whose traffic is mirrored (the first of the live config)."""
        return self.live_config_request["ProductionVariants"][0]["VariantName"]


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
    # The live endpoint's model (CloudFormation's; the gate never deletes it): the baseline twin runs it.
    baseline_model_name: str
    optimization_configs: list[dict[str, Any]] | None = None
    # Streams per fleet worker at each benchmarked level, run one level after the other; each
    # worker sends `requests_per_slot` requests per stream (at least 32) at each level.
    levels: tuple[int, ...] = (16,)
    requests_per_slot: int = 4
    # Interleaved blocks per level: the twin then the candidate, `blocks` times (A B A B ...), each
    # block sending the level's requests.
    blocks: int = 1
    prompt_tokens: int = 1024
    max_new_tokens: int = 256
    # Instances of the candidate's and the baseline twin's endpoints (the same type and count on both
    # sides); the decision's costs use it.
    instance_count: int = 1
    price_per_hour_usd: float | None = None
    prediction: dict[str, Any] = field(default_factory=dict)
    startup_timeouts: tuple[int, int] = (1200, 1200)
    shadow: ShadowStage | None = None
    # The promotion pipeline's (account, region): it may run this gate, read its model packages,
    # and hears of every approval.
    pipeline: tuple[str, str] | None = None
    poll_seconds: int = 60
    max_polls: int = 90
    optimization_poll_seconds: int = OPTIMIZATION_POLL_SECONDS
    optimization_max_polls: int = OPTIMIZATION_MAX_POLLS

    @property
    def prefix(self) -> str:
        return naming.gate_prefix(self.team, self.environment)

    def run_name_template(self, kind: naming.RunKind) -> str:
        """The name a run gives its `kind` of resource, `{}` for the run id."""
        return naming.run_name_template(self.team, self.environment, kind)

    def run_name_pattern(self, kind: naming.RunKind) -> str:
        """The IAM pattern matching every run's `kind` of resource."""
        return naming.run_name_pattern(self.team, self.environment, kind)

    def candidate_container(self) -> dict[str, Any]:
        """The candidate's container (image and weights from `$.candidate`): the model the gate stages
        and the model package it records are the same by construction."""
        return {
            "Image.$": "$.candidate.image",
            "Environment": self.candidate_environment,
            "ModelDataSource": {
                "S3DataSource": {
                    "S3Uri.$": "$.candidate.model_uri",
                    "S3DataType": "S3Prefix",
                    "CompressionType": "None",
                }
            },
        }

    @property
    def fingerprint(self) -> str:
        """What makes a proof: the candidate (its source, image, environment, optimization), where
        and how it is measured, and the thresholds. Not what is live: once the candidate is
        promoted the live endpoint serves it, and an unchanged candidate must pass as a no-op
        rather than be compared with itself."""
        proof = {
            "team": self.team,
            "environment": self.environment,
            "instance_type": self.instance_type,
            "source": self.baseline_model_uri,
            "image": self.candidate_image,
            "container_environment": self.candidate_environment,
            "change": self.change,
            "optimization": self.optimization_configs,
            "thresholds": self.thresholds,
            "benchmark": [list(self.levels), self.requests_per_slot, self.prompt_tokens, self.max_new_tokens]
            + ([self.instance_count] if self.instance_count != 1 else [])
            + ([{"blocks": self.blocks}] if self.blocks != 1 else []),
            "shadow": [self.shadow.sampling_percentage, self.shadow.window_minutes] if self.shadow else None,
        }
        return hashlib.sha256(json.dumps(proof, sort_keys=True, default=str).encode()).hexdigest()[:32]
