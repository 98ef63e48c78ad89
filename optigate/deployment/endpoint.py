"""What one team's live endpoint serves and how it scales and rolls out in one environment, resolved once as data (no
CDK here): `EndpointPlan`, beside the gate's `GatePlan` on the same `Deployment`.

Every decision about the endpoint is made here, once: the served package or the baseline, scaling suspended for one
deploy or its maximum replaced by the environment's, the minimum of a model-backed endpoint's scalable target (at
least one instance), the canary at 100 % when the strategy is `none`, the adapter versions the lock approved and
`{region}` filled into their URIs (an environment's region is a plain string in environments.yaml, never a token),
an adapter team's base component (compute, rolling update, caching and placement), and how the live variant and the
shadow are provisioned (instances, pools, timeouts and the host AMI for the image served). The stack only wires it
(optigate.stacks.team_inference_stack); `optigate summary` prints it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from optigate.config.models import Environment, EnvironmentOverrides
from optigate.deployment.component_rollout import ComponentRollout, component_rollout, rollback_latency_ms
from optigate.deployment.component_settings import BaseComponentSettings, base_component_settings
from optigate.deployment.gate_components import ComponentCompute, component_compute
from optigate.deployment.placement import Placement
from optigate.deployment.serving import ResolvedServing
from optigate.deployment.team import ResolvedTeam
from optigate.deployment.variant import VariantSettings, variant_settings
from optigate.promote.lock import ServedPackage


@dataclass(frozen=True)
class EndpointScaling:
    """The scalable target the endpoint gets: on the production variant (`instances`) or on the base inference
    component (`copies`).

    :param min_capacity: instances: the team file's minimum, at least one (a model-backed variant cannot scale to
        zero); copies: the team file's minimum as given.
    :param max_capacity: the environment's autoscaling_max_capacity, else the team file's maximum.
    :param target: invocations per instance, or concurrent requests per copy.
    :param managed_instances: copies only: ManagedInstanceScaling's (min, max) instances as the placement decides
        them (optigate.deployment.placement.CopyPlacement); None where it emits none.
    """

    unit: Literal["instances", "copies"]
    min_capacity: int
    max_capacity: int
    target: int
    scale_in_cooldown_seconds: int
    scale_out_cooldown_seconds: int
    scale_to_zero: bool = False
    managed_instances: tuple[int, int] | None = None


@dataclass(frozen=True)
class BlueGreen:
    """A model-backed endpoint's blue/green update: a new fleet, traffic shifted in a canary step, rolled back on the
    alarms (optigate.constructs.blue_green renders it).

    :param canary_percentage: share of capacity that takes traffic first (100 with strategy `none`: all at once).
        @default 10
    :param wait_minutes: bake time after each shift and before the old fleet goes. @default 10
    :param auto_rollback: roll back when the 5XX or latency alarm fires. @default True
    :param p99_model_latency_ms: p99 ModelLatency that counts as failure. @default 60000
    :param max_5xx_per_minute: errors per minute that count as failure. @default 1
    """

    canary_percentage: int = 10
    wait_minutes: int = 10
    auto_rollback: bool = True
    p99_model_latency_ms: float = 60000
    max_5xx_per_minute: int = 1


@dataclass(frozen=True)
class LiveAdapter:
    """An adapter as the live endpoint serves it: `s3_uri` in this environment's region, the lock's approved version
    when `approved`, else the team file's."""

    name: str
    s3_uri: str
    approved: bool = False


@dataclass(frozen=True)
class LiveComponents:
    """An adapter team's live inference components: the base copy's reservation, its rolling update and caching and
    placement, and every adapter on it."""

    compute: ComponentCompute
    rollout: ComponentRollout | None  # None only for a team without adapters, which has no LiveComponents
    base_settings: BaseComponentSettings
    adapters: tuple[LiveAdapter, ...]


@dataclass(frozen=True)
class ShadowModel:
    """A model-backed endpoint's shadow variant: the candidate `serving` runs on one instance and receives
    `sampling_percentage` of the live requests."""

    serving: ResolvedServing
    image_uri: str
    environment: dict[str, str]
    model_data_uri: str  # the baseline's weights: a shadow candidate changes the serving, not the model
    sampling_percentage: int
    variant: VariantSettings  # one instance of the priority-1 type, named Shadow


@dataclass(frozen=True)
class EndpointPlan:
    """What one team's live endpoint is in one environment (see the module docstring).

    :param served_package_arn: the gate-approved model package the lock names; None: the team file's baseline.
    :param image_uri, environment, model_data_uri: the served model's container, its environment and its weights.
    :param accept_eula: the JumpStart model's EULA is accepted in the team file.
    :param instance_count: instances at creation (the environment's instance_count, else the team file's).
    :param variant: how the live variant is provisioned, for the image served (its host AMI).
    :param scaling: the scalable target; None without autoscaling or while it is suspended.
    :param scaling_suspended: the environment suspends the team's autoscaling for this deploy (no scalable target;
        the instance count scaling last set is kept).
    :param blue_green: a model-backed endpoint's update; None for an adapter team (its base component rolls).
    :param components: an adapter team's live components; None without adapters.
    :param shadow: the shadow variant, with strategy `shadow` and a shadow candidate; None otherwise.
    """

    served_package_arn: str | None
    image_uri: str
    environment: dict[str, str]
    model_data_uri: str
    accept_eula: bool
    instance_count: int
    variant: VariantSettings
    scaling: EndpointScaling | None
    scaling_suspended: bool
    blue_green: BlueGreen | None
    components: LiveComponents | None
    shadow: ShadowModel | None = None

    @property
    def served_model(self) -> str:
        """The approved package's ARN, or `baseline` (the stack's ServedModel output)."""
        return self.served_package_arn or "baseline"


# Over 80 lines: one decision per field of the plan, each said where it is made.
def resolve_endpoint(
    resolved_team: ResolvedTeam,
    environment: Environment,
    overrides: EnvironmentOverrides,
    instance_count: int,
    placement: Placement,
    served: ServedPackage | None = None,
) -> EndpointPlan:
    """The team's live endpoint in `environment` with its `overrides` (optigate.config.rules.cross_file), the
    `placement` of its instances and copies, serving the lock's `served` package, else the baseline."""
    team, region = resolved_team.team, environment.region
    baseline = resolved_team.baseline
    if baseline is None:
        raise ValueError(f"team {team.team} did not resolve: {resolved_team.problems}")
    model_prefix = team.model.source.artifact_uri.replace("{region}", region)
    configured = team.serving.autoscaling
    # Suspended for one deploy (an instance-type change of an autoscaled endpoint): no scalable target.
    autoscaling = None if overrides.suspend_autoscaling else configured
    max_capacity = (overrides.autoscaling_max_capacity or autoscaling.max_capacity) if autoscaling else 0
    scaling: EndpointScaling | None = None
    blue_green: BlueGreen | None = None
    components: LiveComponents | None = None
    shadow: ShadowModel | None = None
    if team.adapters:
        if autoscaling is not None:
            copies = placement.copies
            scaling = EndpointScaling(
                unit="copies",
                min_capacity=autoscaling.min_capacity,
                max_capacity=max_capacity,
                target=autoscaling.target_invocations_per_instance,
                scale_in_cooldown_seconds=autoscaling.scale_in_cooldown_seconds,
                scale_out_cooldown_seconds=autoscaling.scale_out_cooldown_seconds,
                scale_to_zero=autoscaling.scale_to_zero,
                managed_instances=(
                    (copies.managed_min_instances, copies.managed_max_instances)
                    if copies is not None and copies.managed
                    else None
                ),
            )
        # An adapter version the gate approved (the lock's package names it) replaces the team file's.
        approved = served.adapters if served is not None else {}
        rollout = component_rollout(
            team, baseline, environment.name, max_copies=max_capacity if autoscaling is not None else 1
        )
        components = LiveComponents(
            compute=component_compute(baseline, autoscaling),
            rollout=rollout,
            base_settings=base_component_settings(team),
            adapters=tuple(
                LiveAdapter(
                    adapter.name,
                    approved.get(adapter.name, adapter.s3_uri).replace("{region}", region),
                    approved=adapter.name in approved,
                )
                for adapter in team.adapters
            ),
        )
    else:
        if autoscaling is not None:
            scaling = EndpointScaling(
                unit="instances",
                min_capacity=max(1, autoscaling.min_capacity),
                max_capacity=max_capacity,
                target=autoscaling.target_invocations_per_instance,
                scale_in_cooldown_seconds=autoscaling.scale_in_cooldown_seconds,
                scale_out_cooldown_seconds=autoscaling.scale_out_cooldown_seconds,
            )
        rollout_config = team.rollout
        blue_green = BlueGreen(
            # `none`: the whole new fleet takes traffic at once (one step of 100 %), still rolled back on the alarms.
            canary_percentage=rollout_config.canary.traffic_percentage if rollout_config.strategy != "none" else 100,
            wait_minutes=rollout_config.canary.wait_minutes,
            auto_rollback=rollout_config.auto_rollback,
            p99_model_latency_ms=rollback_latency_ms(team),
        )
        if resolved_team.shadow is not None and rollout_config.shadow is not None:
            shadow_image = resolved_team.shadow.image_uri(region)
            shadow = ShadowModel(
                serving=resolved_team.shadow,
                image_uri=shadow_image,
                environment=resolved_team.shadow.environment,
                model_data_uri=model_prefix,
                sampling_percentage=rollout_config.shadow.sampling_percentage,
                # On the priority-1 type only: shadow variants beside pools are undocumented (pool_advisories).
                variant=variant_settings(resolved_team.shadow, 1, shadow_image, pools=False, variant_name="Shadow"),
            )
    jumpstart = team.model.source.jumpstart
    image_uri = served.image if served is not None else baseline.image_uri(region)
    return EndpointPlan(
        served_package_arn=served.model_package_arn if served is not None else None,
        image_uri=image_uri,
        environment=dict(served.environment) if served is not None else baseline.environment,
        model_data_uri=served.model_data_uri if served is not None else model_prefix,
        accept_eula=bool(jumpstart and jumpstart.accept_eula),
        instance_count=instance_count,
        variant=variant_settings(baseline, instance_count, image_uri),
        scaling=scaling,
        scaling_suspended=bool(overrides.suspend_autoscaling and configured is not None),
        blue_green=blue_green,
        components=components,
        shadow=shadow,
    )
