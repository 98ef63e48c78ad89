"""How one production (or shadow) variant of an endpoint is provisioned, decided as data (no CDK here):
`VariantSettings`, which the endpoint's plan (optigate.deployment.endpoint) holds for the live variant and the shadow,
and the constructs render (optigate.constructs.tuned_endpoint, optigate.constructs.lora_adapters)."""

from __future__ import annotations

from dataclasses import dataclass

from optigate.deployment.serving import ResolvedServing
from optigate.plan.catalog import has_instance_storage
from optigate.serving import images


@dataclass(frozen=True)
class VariantSettings:
    """How one production (or shadow) variant is provisioned.

    :param instance_type: e.g. ml.g6.2xlarge.
    :param instance_count: instances at creation. @default 1
    :param model_data_download_timeout_seconds: @default 1200 (size it to the weights; see optigate.serving.lmi)
    :param container_startup_health_check_timeout_seconds: @default 1200
    :param volume_size_gb: EBS volume, only for instances without NVMe storage. @default SageMaker's
    :param routing_strategy: @default LEAST_OUTSTANDING_REQUESTS, which suits long, uneven LLM requests
    :param variant_name: @default AllTraffic
    :param inference_ami_version: the host AMI (InferenceAmiVersion), for an image the default AMI's driver
        cannot run (optigate.serving.images.inference_ami_version); one for every pool. @default SageMaker's
    :param instance_pools: (instance type, priority) pairs SageMaker falls back through when a type has no capacity,
        `instance_type` first as priority 1; rendered as InstancePools *instead of* InstanceType ("replace the
        InstanceType parameter in your production variant with an InstancePools list", user guide:
        https://docs.aws.amazon.com/sagemaker/latest/dg/realtime-endpoints-heterogeneous.html). @default none
    :param provision_timeout_seconds: VariantInstanceProvisionTimeoutInSeconds (300-3600), with pools only.
        @default SageMaker's
    """

    instance_type: str
    instance_count: int = 1
    model_data_download_timeout_seconds: int = 1200
    container_startup_health_check_timeout_seconds: int = 1200
    volume_size_gb: int | None = None
    routing_strategy: str = "LEAST_OUTSTANDING_REQUESTS"
    variant_name: str = "AllTraffic"
    inference_ami_version: str | None = None
    instance_pools: tuple[tuple[str, int], ...] = ()
    provision_timeout_seconds: int | None = None

    def __post_init__(self) -> None:
        if self.instance_pools and self.instance_pools[0] != (self.instance_type, 1):
            raise ValueError(f"instance_pools must start with ({self.instance_type!r}, 1), got {self.instance_pools}")
        if self.provision_timeout_seconds is not None and not self.instance_pools:
            raise ValueError("provision_timeout_seconds bounds the fallback across instance_pools; give pools")
        kinds = {has_instance_storage(instance_type) for instance_type, _ in self.instance_pools}
        if len(kinds) > 1:
            raise ValueError(
                f"instance_pools mix NVMe and EBS instance types ({self.instance_pools}); one KmsKeyId setting "
                "cannot serve both"
            )

    @property
    def instance_types(self) -> tuple[str, ...]:
        """Every type the variant may run on, priority 1 first."""
        return tuple(t for t, _ in self.instance_pools) or (self.instance_type,)


def variant_settings(
    resolved: ResolvedServing,
    instance_count: int,
    image_uri: str,
    *,
    pools: bool = True,
    variant_name: str = "AllTraffic",
) -> VariantSettings:
    """How `resolved` is provisioned, running `image_uri` (the team's, or an approved package's): on its instance
    pools when `pools` (a shadow runs on the priority-1 type only: shadow variants beside pools are undocumented,
    optigate.deployment.pools)."""
    serving = resolved.serving
    instance_pools = tuple((p.instance_type, p.priority) for p in resolved.pools) if pools else ()
    return VariantSettings(
        # One AMI for every pool (the deployment rules refuse pools that would need different ones).
        inference_ami_version=images.inference_ami_version_for(
            images.tag_of(image_uri), [t for t, _ in instance_pools] or [serving.instance_type]
        ),
        instance_type=serving.instance_type,
        instance_pools=instance_pools,
        provision_timeout_seconds=serving.instance_provision_timeout_seconds if pools else None,
        instance_count=instance_count,
        model_data_download_timeout_seconds=resolved.model_data_download_timeout_seconds,
        container_startup_health_check_timeout_seconds=resolved.container_startup_health_check_timeout_seconds,
        volume_size_gb=serving.volume_size_gb,
        routing_strategy=serving.routing_strategy,
        variant_name=variant_name,
    )
