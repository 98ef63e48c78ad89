"""A resolved team in one environment: what its stack deploys there (no CDK here).

`deploy` adds what depends on the environment (region-specific image URIs, instance count and
overrides, names, the served package of the lock) to the team's one resolution.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from optigate import naming
from optigate.config.models import Environment, EnvironmentOverrides, TeamConfig
from optigate.config.rules.cross_file import effective_overrides
from optigate.deployment.endpoint import EndpointPlan, resolve_endpoint
from optigate.deployment.gate import GatePlan, resolve_gate
from optigate.deployment.placement import Placement, endpoint_placement
from optigate.deployment.serving import ResolvedServing
from optigate.deployment.source_keys import SourceKeys, source_keys
from optigate.deployment.team import ResolvedTeam
from optigate.promote.lock import ServedPackage


@dataclass(frozen=True)
class Deployment:
    """What one team's stack deploys in one environment: the inputs of the stack, and of the summary."""

    resolved_team: ResolvedTeam
    environment: Environment
    overrides: EnvironmentOverrides
    instance_count: int
    endpoint_name: str
    # The gate-approved package the lock file names for this team and environment; None: the baseline.
    served: ServedPackage | None = None
    # The promotion pipeline's (account, region), when environments.yaml configures one.
    pipeline: tuple[str, str] | None = None

    @property
    def team(self) -> TeamConfig:
        return self.resolved_team.team

    @property
    def resolved(self) -> ResolvedServing:
        baseline = self.resolved_team.baseline
        if baseline is None:
            raise ValueError(f"team {self.team.team} did not resolve: {self.resolved_team.problems}")
        return baseline

    @property
    def shadow(self) -> ResolvedServing | None:
        return self.resolved_team.shadow

    @property
    def candidate(self) -> ResolvedServing | None:
        return self.resolved_team.candidate

    @cached_property
    def endpoint(self) -> EndpointPlan:
        """What the live endpoint serves and how it scales and rolls out here, resolved once (the stack wires it)."""
        return resolve_endpoint(
            self.resolved_team, self.environment, self.overrides, self.instance_count, self.placement, self.served
        )

    @cached_property
    def gate(self) -> GatePlan | None:
        """What the team's gate measures and proves here (None without a gate candidate), resolved once."""
        return resolve_gate(self.resolved_team, self.environment, served=self.served, pipeline=self.pipeline)

    @cached_property
    def placement(self) -> Placement:
        """What the endpoint runs here: instances at minimum and maximum capacity, an adapter team's copies on them,
        and the basis a token is priced at (optigate.deployment.placement)."""
        resolved = self.resolved
        shadowed = not self.team.adapters and self.shadow is not None and self.team.rollout.shadow is not None
        return endpoint_placement(
            self.team,
            resolved.instance,
            resolved.tensor_parallel_degree,
            tuple(pool.instance for pool in resolved.pools),
            self.instance_count,
            self.overrides,
            self.shadow.instance if shadowed and self.shadow is not None else None,
        )

    @property
    def image_uri(self) -> str:
        return self.resolved.image_uri(self.environment.region)

    @property
    def container_environment(self) -> dict[str, str]:
        return self.resolved.environment

    @property
    def model_prefix(self) -> str:
        """The baseline's S3 prefix in this environment's region."""
        return self.team.model.source.artifact_uri.replace("{region}", self.environment.region)

    @cached_property
    def source_keys(self) -> SourceKeys:
        """The customer-managed KMS keys of the model's prefix and the adapters' archives here (`{region}` filled)."""
        return source_keys(self.team, self.environment.region)

    @property
    def stack_name(self) -> str:
        return naming.stack_name(self.environment.name, self.team.team)


def deploy(
    resolved_team: ResolvedTeam,
    environment: Environment,
    served: ServedPackage | None = None,
    pipeline: tuple[str, str] | None = None,
) -> Deployment:
    """The team's resolution in `environment`; `served`: the Approved package the environment's
    lock names for the team (else the baseline)."""
    team = resolved_team.team
    overrides = effective_overrides(team, environment)
    return Deployment(
        resolved_team=resolved_team,
        environment=environment,
        overrides=overrides,
        instance_count=overrides.instance_count or team.serving.instance_count,
        endpoint_name=naming.endpoint_name(team.team, environment.name),
        served=served,
        pipeline=pipeline,
    )
