"""TunedEndpoint: endpoint config + endpoint sized for an LLM, with safe updates and observability."""

from __future__ import annotations

from typing import Any

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sagemaker as sagemaker
from constructs import Construct

from optigate.constructs.blue_green import blue_green_alarms, deployment_config
from optigate.constructs.common import target_tracking
from optigate.constructs.data_capture import CaptureSettings, capture_config, capture_prefix
from optigate.constructs.lmi_model import LmiModel
from optigate.constructs.rollback_alarms import variant_metric
from optigate.deployment.endpoint import BlueGreen, EndpointScaling
from optigate.deployment.observability import metrics_config
from optigate.deployment.variant import VariantSettings
from optigate.plan.catalog import has_instance_storage


def _api(value: Any) -> Any:
    """A CloudFormation property struct as its API request form (the same PascalCase names)."""
    if hasattr(value, "_values"):
        return {_pascal(k): _api(v) for k, v in value._values.items() if v is not None}
    if isinstance(value, (list, tuple)):
        return [_api(v) for v in value]
    return value


def metrics_property(enabled: bool) -> sagemaker.CfnEndpointConfig.MetricsConfigProperty:
    """The endpoint config's MetricsConfig (optigate.deployment.observability.metrics_config) as CloudFormation's."""
    config = metrics_config(enabled)
    return sagemaker.CfnEndpointConfig.MetricsConfigProperty(
        enable_detailed_observability=config["EnableDetailedObservability"]
    )


def _pascal(snake: str) -> str:
    return "".join(part.upper() if part == "gb" else part.title() for part in snake.split("_"))


def variant_placement(variant: VariantSettings) -> dict[str, Any]:
    """The ProductionVariantProperty members that say where `variant` runs: InstanceType, or InstancePools (and the
    provisioning timeout) without InstanceType."""
    if not variant.instance_pools:
        return {"instance_type": variant.instance_type}
    return {
        "instance_pools": [
            sagemaker.CfnEndpointConfig.InstancePoolProperty(instance_type=instance_type, priority=priority)
            for instance_type, priority in variant.instance_pools
        ],
        "variant_instance_provision_timeout_in_seconds": variant.provision_timeout_seconds,
    }


def production_variant(
    variant: VariantSettings, model_name: str, weight: float = 1.0, **extra: Any
) -> sagemaker.CfnEndpointConfig.ProductionVariantProperty:
    """`variant` as the endpoint config's ProductionVariant serving `model_name` at `weight`."""
    return sagemaker.CfnEndpointConfig.ProductionVariantProperty(
        variant_name=variant.variant_name,
        model_name=model_name,
        **variant_placement(variant),
        initial_instance_count=variant.instance_count,
        initial_variant_weight=weight,
        model_data_download_timeout_in_seconds=variant.model_data_download_timeout_seconds,
        container_startup_health_check_timeout_in_seconds=variant.container_startup_health_check_timeout_seconds,
        volume_size_in_gb=variant.volume_size_gb,
        routing_config=sagemaker.CfnEndpointConfig.RoutingConfigProperty(routing_strategy=variant.routing_strategy),
        inference_ami_version=variant.inference_ami_version,
        **extra,
    )


class TunedEndpoint(Construct):
    """A real-time endpoint for one LMI model, tuned for LLM start-up and safe to update.

    - timeouts for downloading weights and starting the container (the 600 s defaults kill 70B
      deployments), volume size and routing strategy per variant;
    - a customer-managed KMS key (created with rotation unless given) for the storage volume where
      the instance has no NVMe storage, and for captured data;
    - blue/green deployment with canary traffic shifting and automatic rollback on a 5XX alarm and a
      p99 model-latency alarm;
    - optional data capture to an SSL-only bucket, KMS-encrypted by default; a CloudWatch dashboard;
    - optional target-tracking autoscaling.

    :param model: the LmiModel of the production variant.
    :param variant: provisioning of the production variant.
    :param endpoint_name: the SageMaker endpoint name (explicit, so benchmarks and the gate can find it).
    :param encryption_key: @default a new key with rotation
    :param blue_green: the update (the endpoint plan's, optigate.deployment.endpoint). @default BlueGreen(); None
        updates all at once without rollback
    :param data_capture_percentage: share of requests captured to S3 (KMS). @default 0 (off)
    :param data_capture: the capture in full; replaces data_capture_percentage. @default None
    :param scaling: the variant's scalable target (the endpoint plan's, in `instances`). @default no autoscaling
    :param scaling_suspended: autoscaling is configured but off for this deploy (to change the instance type,
        which SageMaker refuses for a registered variant): the instance count it set is kept. @default False
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        model: LmiModel,
        variant: VariantSettings,
        endpoint_name: str,
        encryption_key: kms.IKey | None = None,
        blue_green: BlueGreen | None = BlueGreen(),  # noqa: B008 (frozen: one shared default is safe)
        data_capture_percentage: int = 0,
        data_capture: CaptureSettings | None = None,
        scaling: EndpointScaling | None = None,
        scaling_suspended: bool = False,
        detailed_metrics: bool = True,
    ) -> None:
        super().__init__(scope, construct_id)
        if scaling is not None and scaling.unit != "instances":
            raise ValueError(f"{self.node.path}: a model-backed variant scales instances, not {scaling.unit}")
        self.endpoint_name = endpoint_name
        self.variant = variant
        self.key = encryption_key or kms.Key(
            self, "Key", enable_key_rotation=True, description=f"Encrypts {endpoint_name} volumes and captured data"
        )
        self._production_variants = [production_variant(variant, model.model_name)]
        self._shadow_variants: list[sagemaker.CfnEndpointConfig.ProductionVariantProperty] = []

        self.capture_bucket: s3.Bucket | None = None
        capture = data_capture or (CaptureSettings(data_capture_percentage) if data_capture_percentage > 0 else None)
        data_capture_config = None
        if capture is not None and capture.percentage > 0:
            data_capture_config, self.capture_bucket = capture_config(self, model, self.key, capture)

        local_storage = has_instance_storage(variant.instance_type)  # every pool's is the same (VariantSettings)
        self._data_capture_config = data_capture_config
        self.config = sagemaker.CfnEndpointConfig(
            self,
            "Config",
            production_variants=self._production_variants,
            kms_key_id=None if local_storage else self.key.key_arn,
            data_capture_config=data_capture_config,
            # The server's own metrics in CloudWatch (optigate.deployment.observability; serving.detailed_metrics).
            metrics_config=metrics_property(detailed_metrics),
        )

        self.alarms = blue_green_alarms(self, endpoint_name, variant, blue_green, self.metric)
        self.endpoint = sagemaker.CfnEndpoint(
            self,
            "Endpoint",
            endpoint_name=endpoint_name,
            endpoint_config_name=self.config.attr_endpoint_config_name,
            deployment_config=deployment_config(self.variant, blue_green, self.alarms),
            # A new config (a promotion) would otherwise reset a scaled-out variant to InitialInstanceCount:
            # retained, the update keeps the count Application Auto Scaling set (UpdateEndpoint's
            # RetainAllVariantProperties, which CloudFormation passes on an update).
            retain_all_variant_properties=True if scaling is not None or scaling_suspended else None,
        )
        if scaling is not None:
            self._autoscaling(scaling)
        self.dashboard = self._dashboard()

    @property
    def production_variant_names(self) -> list[str]:
        return [v.variant_name for v in self._production_variants]

    @property
    def shadow_variant_names(self) -> list[str]:
        return [v.variant_name for v in self._shadow_variants]

    def config_request(self) -> dict[str, Any]:
        """The production side of this endpoint's config as a CreateEndpointConfig request (no name,
        no shadow): what the gate needs to put a temporary shadow next to exactly these variants."""
        request: dict[str, Any] = {"ProductionVariants": [_api(v) for v in self._production_variants]}
        if self.config.kms_key_id is not None:
            request["KmsKeyId"] = self.config.kms_key_id
        if self._data_capture_config is not None:
            request["DataCaptureConfig"] = _api(self._data_capture_config)
        if self.config.metrics_config is not None:
            request["MetricsConfig"] = _api(self.config.metrics_config)
        return request

    def add_production_variant(self, model: LmiModel, variant: VariantSettings, weight: float = 1.0) -> None:
        """Split live traffic by weight with another production variant (A/B across instance types)."""
        if self._shadow_variants:
            raise ValueError(
                f"{self.node.path}: an endpoint with a shadow variant takes exactly one production variant"
            )
        if variant.variant_name in self.production_variant_names:
            raise ValueError(f"{self.node.path}: variant name {variant.variant_name!r} is already used")
        self._production_variants.append(production_variant(variant, model.model_name, weight))
        self.config.production_variants = list(self._production_variants)

    def add_shadow_variant(self, model: LmiModel, variant: VariantSettings, sampling_percentage: int) -> None:
        """Mirror `sampling_percentage` % of live requests to `model`; its responses are only logged."""
        if len(self._production_variants) != 1:
            raise ValueError(
                f"{self.node.path}: a shadow variant needs exactly one production variant, the endpoint has "
                f"{len(self._production_variants)} ({', '.join(self.production_variant_names)}); SageMaker allows one "
                "production plus one shadow variant"
            )
        if self._shadow_variants:
            raise ValueError(f"{self.node.path}: the endpoint already has a shadow variant; SageMaker allows one")
        if not 1 <= sampling_percentage <= 100:
            raise ValueError(f"{self.node.path}: sampling_percentage must be 1-100, got {sampling_percentage}")
        if variant.variant_name in self.production_variant_names:
            raise ValueError(
                f"{self.node.path}: the shadow variant needs its own name, {variant.variant_name!r} is taken"
            )
        if has_instance_storage(variant.instance_type) != has_instance_storage(self.variant.instance_type):
            raise ValueError(
                f"{self.node.path}: mix of NVMe and EBS instance types; one KmsKeyId setting cannot serve both"
            )
        # The shadow's weight relative to the production variant's (1.0) is the sampled share.
        self._shadow_variants.append(production_variant(variant, model.model_name, sampling_percentage / 100))
        self.config.shadow_production_variants = list(self._shadow_variants)

    # ------------------------------------------------------------------ parts

    def capture_prefix(self) -> str | None:
        """Where this endpoint's captured records are (optigate.constructs.data_capture.capture_prefix)."""
        return capture_prefix(self.capture_bucket, self.endpoint_name)

    def metric(self, name: str, statistic: str = "Sum", variant_name: str | None = None) -> cloudwatch.Metric:
        return variant_metric(self.endpoint_name, variant_name or self.variant.variant_name, name, statistic)

    def _autoscaling(self, scaling: EndpointScaling) -> None:
        target_tracking(
            self,
            resource_id=f"endpoint/{self.endpoint_name}/variant/{self.variant.variant_name}",
            dimension="sagemaker:variant:DesiredInstanceCount",
            min_capacity=scaling.min_capacity,
            max_capacity=scaling.max_capacity,
            metric="SageMakerVariantInvocationsPerInstance",
            target_value=scaling.target,
            policy_name=f"{self.endpoint_name}-invocations",
            cooldowns=(scaling.scale_in_cooldown_seconds, scaling.scale_out_cooldown_seconds),
            depends_on=self.endpoint,
        )

    def _dashboard(self) -> cloudwatch.Dashboard:
        def instance_metric(name: str) -> cloudwatch.Metric:
            return cloudwatch.Metric(
                namespace="/aws/sagemaker/Endpoints",
                metric_name=name,
                dimensions_map={"EndpointName": self.endpoint_name, "VariantName": self.variant.variant_name},
                statistic="Average",
                period=Duration.minutes(1),
            )

        dashboard = cloudwatch.Dashboard(self, "Dashboard", dashboard_name=f"optigate-{self.endpoint_name}")
        dashboard.add_widgets(
            cloudwatch.GraphWidget(title="Invocations", left=[self.metric("Invocations")]),
            cloudwatch.GraphWidget(
                title="Model latency (µs)",
                left=[self.metric("ModelLatency", "p50"), self.metric("ModelLatency", "p99")],
            ),
            cloudwatch.GraphWidget(
                title="Errors", left=[self.metric("Invocation4XXErrors"), self.metric("Invocation5XXErrors")]
            ),
            cloudwatch.GraphWidget(
                title="GPU", left=[instance_metric("GPUUtilization"), instance_metric("GPUMemoryUtilization")]
            ),
        )
        return dashboard
