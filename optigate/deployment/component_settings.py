"""How a team's base inference component is cached and placed (InferenceComponentSpecification DataCacheConfig and
SchedulingConfig): the decision, from the team file alone, that the LoraAdapters construct renders.

Caching keeps the model artifacts and the container image on each instance provisioned for the component, "so the
inference component deploys faster during the auto scaling process" (InferenceComponentDataCacheConfig, API
reference). Unset, optigate enables it when the base component autoscales (copies are added by scale-out or from
zero), where the download is on the path of a waiting request, and otherwise leaves it to SageMaker (which enables
it by itself on instances with more than 232 GiB of NVMe storage, per CloudFormation's schema). Placement has no
optigate default: SageMaker's applies unless the team names one.
"""

from __future__ import annotations

from dataclasses import dataclass

from optigate.config.models import TeamConfig


@dataclass(frozen=True)
class ComponentPlacement:
    """SchedulingConfig: PlacementStrategy, AvailabilityZoneBalance.EnforcementMode and MaxImbalance."""

    placement_strategy: str
    enforcement_mode: str
    max_imbalance: int | None = None


@dataclass(frozen=True)
class BaseComponentSettings:
    """What the base component's Specification carries beside its model and compute.

    :param enable_caching: DataCacheConfig.EnableCaching; None leaves DataCacheConfig out (SageMaker's default).
    :param placement: SchedulingConfig; None leaves it out.
    """

    enable_caching: bool | None = None
    placement: ComponentPlacement | None = None


def base_component_settings(team: TeamConfig) -> BaseComponentSettings:
    """The team's base-component caching and placement (the config rules have refused the combinations
    CloudFormation cannot express: a SchedulingConfig without AvailabilityZoneBalance, OG532)."""
    settings = team.inference_components
    cache = settings.data_cache_config if settings is not None else None
    scaling = team.serving.autoscaling
    scales = scaling is not None and (scaling.scale_to_zero or scaling.max_capacity > scaling.min_capacity)
    enable_caching = cache.enable_caching if cache is not None else (True if scales else None)
    scheduling = settings.scheduling_config if settings is not None else None
    placement = None
    if scheduling is not None:
        balance = scheduling.availability_zone_balance
        if balance is None:
            raise ValueError(f"{team.team}: scheduling_config without availability_zone_balance (rule OG532)")
        placement = ComponentPlacement(scheduling.placement_strategy, balance.enforcement_mode, balance.max_imbalance)
    return BaseComponentSettings(enable_caching, placement)
