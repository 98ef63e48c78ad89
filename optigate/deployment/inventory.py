"""What one team's stack creates in one environment, and what its instances cost a month: read from the resolved
deployment (no synth), for `optigate summary` and its `--json`.

Each count mirrors a condition of the stack's constructs (optigate.stacks.team_inference_stack and the constructs it
builds); tests/cli/test_summary_inventory.py synthesizes the example app and compares every count with the
templates, so a construct that creates one more resource fails there rather than drifting from the summary.

Costs are endpoint instance-hours only, at the on-demand list prices of optigate/plan/data/instances.csv
(SageMaker real-time inference, us-east-1): KMS keys, alarms, storage, data transfer and the gate's runs (billed per
run, on temporary endpoints) are not included.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass, field
from math import ceil
from typing import Any

from optigate import naming
from optigate.deployment.environment import Deployment
from optigate.deployment.gate_components import BASE
from optigate.plan.cost import HOURS_PER_MONTH

#: Where the prices come from, said wherever a cost is shown.
PRICE_SOURCE = (
    "on-demand list prices of SageMaker real-time inference in us-east-1 "
    f"(optigate/plan/data/instances.csv), {HOURS_PER_MONTH} hours a month, endpoint instances only"
)

#: The name the production variant gets (optigate.deployment.variant.VariantSettings.variant_name).
PRODUCTION_VARIANT = "AllTraffic"
SHADOW_VARIANT = "Shadow"

#: Metrics an alarm reads at most; the scale-from-zero alarms watch this many components each
#: (optigate.constructs.lora_adapters.MAX_METRICS_PER_ALARM, CloudWatch's limit on metrics in one alarm).
MAX_METRICS_PER_ALARM = 10


@dataclass(frozen=True)
class Scaling:
    """The scalable target Application Auto Scaling gets: on the production variant (instances) or on the base
    inference component (copies)."""

    unit: str  # "instances" or "copies"
    min_capacity: int
    max_capacity: int
    target: int
    target_metric: str
    scale_to_zero: bool


@dataclass(frozen=True)
class GateResources:
    """What a team's gate adds to its stack."""

    state_machines: tuple[str, ...]
    functions: tuple[str, ...]
    package_group: str
    workload_configs: int  # SageMaker's managed benchmark, one per level (cross_check)


@dataclass(frozen=True)
class MonthlyCost:
    """Instances billed at minimum and maximum capacity, and what they cost a month (None: no list price)."""

    min_instances: int
    max_instances: int
    min_usd: float | None
    max_usd: float | None
    unpriced: tuple[str, ...] = ()  # instance types the price table has no price for
    runs: str = ""  # what runs, one phrase (optigate.deployment.placement.Placement.described)
    # The planner's $ per million output tokens (expected, and its roofline bound) at one replica's share of an
    # instance, the basis `plan`, `advise` and the gate's report price at (optigate.plan.cost.CostBasis).
    per_million_output_tokens: float | None = None
    per_million_output_tokens_bound: float | None = None
    priced_per_token_at: str = ""
    replica_hourly_usd: float | None = None


@dataclass(frozen=True)
class StackInventory:
    """One team's stack in one environment: every resource a user pays for or is paged by, named."""

    stack: str
    team: str
    environment: str
    region: str
    endpoint: str
    instance_type: str
    instance_count: int
    pools: tuple[str, ...]
    variants: tuple[str, ...]
    models: int
    inference_components: tuple[str, ...]
    alarms: tuple[str, ...]
    scaling: Scaling | None
    scaling_suspended: bool
    buckets: tuple[str, ...]
    dashboards: int
    gate: GateResources | None
    cost: MonthlyCost
    notes: tuple[str, ...] = field(default_factory=tuple)

    def resource_counts(self) -> dict[str, int]:
        """CloudFormation resource type → how many the stack's template holds, for the types the summary shows."""
        counts = {
            "AWS::SageMaker::Endpoint": 1,
            "AWS::SageMaker::EndpointConfig": 1,
            "AWS::SageMaker::Model": self.models,
            "AWS::SageMaker::InferenceComponent": len(self.inference_components),
            "AWS::CloudWatch::Alarm": len(self.alarms),
            "AWS::CloudWatch::Dashboard": self.dashboards,
            "AWS::ApplicationAutoScaling::ScalableTarget": 1 if self.scaling else 0,
            "AWS::ApplicationAutoScaling::ScalingPolicy": _scaling_policies(self.scaling),
            "AWS::S3::Bucket": len(self.buckets),
            "AWS::StepFunctions::StateMachine": len(self.gate.state_machines) if self.gate else 0,
            "AWS::Lambda::Function": len(self.gate.functions) if self.gate else 0,
            "AWS::SageMaker::ModelPackageGroup": 1 if self.gate else 0,
            "AWS::SageMaker::AIWorkloadConfig": self.gate.workload_configs if self.gate else 0,
        }
        return counts

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["resource_counts"] = self.resource_counts()
        return data


def _scaling_policies(scaling: Scaling | None) -> int:
    """Target tracking, plus the step policy that adds the first copy back from zero."""
    if scaling is None:
        return 0
    return 2 if scaling.scale_to_zero else 1


def inventory(deployment: Deployment) -> StackInventory:
    """What `deployment`'s stack creates, as TeamInferenceStack builds it."""
    team, overrides, plan = deployment.team, deployment.overrides, deployment.endpoint
    resolved = deployment.resolved
    # The scalable target as the endpoint's plan has it (None when fixed, or suspended for one deploy).
    autoscaling = plan.scaling
    endpoint = deployment.endpoint_name
    pools = tuple(pool.instance_type for pool in resolved.pools)
    shadowed = plan.shadow is not None
    capture = overrides.capture
    buckets: tuple[str, ...] = (
        (f"data capture of {endpoint}",) if capture is not None and capture.percentage > 0 else ()
    )
    rollback = (f"{endpoint} 5XX errors", f"{endpoint} p99 model latency")
    scaling: Scaling | None = None
    notes: list[str] = []
    if team.adapters:
        components = (
            naming.inference_component_name(endpoint, BASE),
            *(naming.inference_component_name(endpoint, adapter.name) for adapter in team.adapters),
        )
        alarms: tuple[str, ...] = rollback  # the base component's rolling update rolls back on them
        if autoscaling is not None:
            scaling = Scaling(
                "copies",
                0 if autoscaling.scale_to_zero else autoscaling.min_capacity,  # the target's, with scale to zero
                autoscaling.max_capacity,
                autoscaling.target,
                "concurrent requests per copy",
                autoscaling.scale_to_zero,
            )
            if autoscaling.scale_to_zero:  # a request that finds no copy adds the first one back
                groups = ceil(len(components) / MAX_METRICS_PER_ALARM)
                alarms += tuple(f"{endpoint} no capacity ({i + 1} of {groups})" for i in range(groups))
    else:
        components = ()
        alarms = rollback  # made with or without blue/green (optigate.constructs.blue_green)
        if autoscaling is not None:
            scaling = Scaling(
                "instances",
                autoscaling.min_capacity,
                autoscaling.max_capacity,
                autoscaling.target,
                "invocations per instance",
                False,
            )
    if plan.scaling_suspended:
        notes.append("autoscaling suspended for this deploy: the instance count scaling last set is kept")
    gate = _gate(deployment)
    if gate is not None:
        buckets += ("the gate's results",)
    return StackInventory(
        stack=deployment.stack_name,
        team=team.team,
        environment=deployment.environment.name,
        region=deployment.environment.region,
        endpoint=endpoint,
        instance_type=team.serving.instance_type,
        instance_count=plan.instance_count,
        pools=pools,
        variants=(PRODUCTION_VARIANT, SHADOW_VARIANT) if shadowed else (PRODUCTION_VARIANT,),
        models=2 if shadowed else 1,
        inference_components=components,
        alarms=alarms,
        scaling=scaling,
        scaling_suspended=plan.scaling_suspended,
        buckets=buckets,
        dashboards=0 if team.adapters else 1,
        gate=gate,
        cost=_cost(deployment),
        notes=tuple(notes),
    )


def _gate(deployment: Deployment) -> GateResources | None:
    """The gate's state machine and the benchmark fleet's, and the functions they call (optigate.constructs.gate):
    the fleet's worker and merger and the decision always; the server-metrics reader where the candidate's container
    publishes series the gate reads (none on LMI: GatePlan.server_series); the staging function when a stage needs it
    (candidate.Stager's callers); the managed benchmark's jobs with a cross-check."""
    plan = deployment.gate
    if plan is None:
        return None
    functions = ["benchmark worker", "benchmark merge", "decision"]
    if plan.server_series:
        functions.append("server metrics reader")
    components = plan.components
    stages_files = bool(plan.optimization_configs) and (bool(plan.staged_paths()) or plan.trained_head is not None)
    checks_archives = (
        components is not None
        and components.adapter_limits is not None
        and any(adapter.changed for adapter in components.adapters)
    )
    reads_mix = components is not None and components.mix is None
    if stages_files or checks_archives or reads_mix:
        functions.append("candidate staging")
    if plan.cross_check is not None:
        functions.append("managed benchmark jobs")
    return GateResources(
        state_machines=(
            naming.gate_state_machine_name(plan.team, plan.environment),
            "the benchmark fleet's (generated name)",
        ),
        functions=tuple(functions),
        package_group=naming.package_group(plan.team, plan.environment),
        workload_configs=len(plan.cross_check_levels()) if plan.cross_check is not None else 0,
    )


def _cost(deployment: Deployment) -> MonthlyCost:
    """Instances at minimum and maximum capacity, as the deployment's placement runs them (a model-backed endpoint:
    the scalable target's range, else the fixed count, plus one shadow instance; an adapter team: the fixed count,
    or with managed instance scaling the instances the copies need, packed), and the planner's cost per million
    output tokens at one replica's share (optigate.plan.cost.CostBasis). Pools: the cheapest type prices the
    minimum, the dearest the maximum."""
    placement = deployment.placement
    low, high, unpriced = placement.monthly_usd()
    plan = deployment.resolved.plan
    expected = plan.expected.cost_per_million_output_tokens if plan is not None and plan.expected else None
    return MonthlyCost(
        placement.min_instances + placement.shadow_instances,
        placement.max_instances + placement.shadow_instances,
        low,
        high,
        unpriced,
        runs=placement.described(),
        per_million_output_tokens=expected,
        per_million_output_tokens_bound=plan.cost_per_million_output_tokens if plan is not None else None,
        priced_per_token_at=placement.basis.describe(),
        replica_hourly_usd=placement.basis.hourly_usd,
    )


@dataclass(frozen=True)
class CostTotal:
    """Instances and monthly cost of several stacks; `unpriced` stacks are left out of the dollar figures."""

    stacks: int
    min_instances: int
    max_instances: int
    min_usd: float
    max_usd: float
    unpriced_stacks: tuple[str, ...]


def total(stacks: list[StackInventory]) -> CostTotal:
    priced = [s for s in stacks if s.cost.min_usd is not None and s.cost.max_usd is not None]
    return CostTotal(
        stacks=len(stacks),
        min_instances=sum(s.cost.min_instances for s in stacks),
        max_instances=sum(s.cost.max_instances for s in stacks),
        min_usd=round(sum(s.cost.min_usd or 0.0 for s in priced), 2),
        max_usd=round(sum(s.cost.max_usd or 0.0 for s in priced), 2),
        unpriced_stacks=tuple(s.stack for s in stacks if s not in priced),
    )


def fleet(stacks: list[StackInventory]) -> dict[str, Any]:
    """Per environment (in the order given), per team (across its environments) and for the whole fleet: stacks,
    instances and monthly cost, and how many of each resource type they create."""
    environments = list(dict.fromkeys(s.environment for s in stacks))
    teams = list(dict.fromkeys(s.team for s in stacks))
    resources: Counter[str] = Counter()
    for stack in stacks:
        resources.update(stack.resource_counts())
    return {
        "environments": {name: asdict(total([s for s in stacks if s.environment == name])) for name in environments},
        "teams": {name: asdict(total([s for s in stacks if s.team == name])) for name in teams},
        "fleet": asdict(total(stacks)),
        "resource_counts": dict(sorted(resources.items())),
    }
