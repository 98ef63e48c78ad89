"""What an endpoint runs at its minimum and maximum capacity, and where an adapter team's base copies are placed (pure:
no CDK; optigate.constructs.lora_adapters renders the managed instance scaling decided here).

A model-backed endpoint runs its scalable target's range of instances (else its fixed count), plus a shadow variant's
instance. An adapter team's base inference component runs copies of `tensor_parallel_degree` accelerators each
(NumberOfAcceleratorDevicesRequired) on the variant's instances: `accelerators per instance // per copy` copies fit
one instance, and a copy never spans two. Without managed instance scaling the instances are the variant's fixed
count, whatever the copies; with it (ProductionVariant ManagedInstanceScaling) SageMaker adds an instance when a copy
finds no room and removes one no copy uses, so the instances are those the copies need, packed.

A rolling update of the base (a new model, image or environment: a promotion) provisions each batch's copies before
it removes the old ones: "For each step, SageMaker AI provisions capacity on the new endpoint fleet, routes traffic
to that fleet, and terminates capacity on the old endpoint fleet" (InferenceComponentRollingUpdatePolicy,
MaximumBatchSize, API reference), so a batch needs free accelerators beside the copies it replaces.

Rules: OG533 refuses copies the instances can never hold (at creation or at autoscaling's maximum, without managed
instance scaling: they would stay pending); OG534 notes a rolling batch that finds no free accelerator (an update at
that copy count cannot start; whether SageMaker then waits, fails or rolls back is not documented).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from optigate.config.models import EnvironmentOverrides, TeamConfig
from optigate.config.rolling_update import rolling_batch_percent
from optigate.config.rules import PathT, Problem, Rule, Severity, rule
from optigate.plan.catalog import Instance
from optigate.plan.cost import CostBasis, cost_per_month

COPIES_FIT_INSTANCES = rule(
    "OG533", "the base component's copies fit the endpoint's instances at creation and at autoscaling's maximum"
)
ROLLING_BATCH_HAS_ROOM = rule(
    "OG534", "a rolling update of the base component finds free accelerators for its batch", Severity.NOTE
)


@dataclass(frozen=True)
class CopyPlacement:
    """An adapter team's base copies on its instances (see the module docstring)."""

    instance_type: str
    accelerators_per_copy: int
    accelerators_per_instance: int
    min_copies: int  # the scalable target's minimum (0 with scale to zero)
    initial_copies: int  # CopyCount at creation (at least 1)
    max_copies: int
    instance_count: int  # InitialInstanceCount
    managed: bool  # ManagedInstanceScaling is emitted
    batch_percent: int  # the rolling update's MaximumBatchSize (CAPACITY_PERCENT)

    @property
    def copies_per_instance(self) -> int:
        return self.accelerators_per_instance // self.accelerators_per_copy

    def instances_for(self, copies: int) -> int:
        """The instances `copies` need, packed (a copy never spans instances)."""
        per = self.copies_per_instance
        return 0 if copies <= 0 else math.ceil(copies / per) if per else copies

    def batch_copies(self, copies: int) -> int:
        """The copies a rolling batch provisions at `copies` (a share of them, at least one: how SageMaker rounds a
        share of few copies is not documented)."""
        return max(1, math.ceil(copies * self.batch_percent / 100))

    def capacity(self, instances: int) -> int:
        return instances * self.copies_per_instance

    def most_copies_with_room(self, capacity: int) -> int:
        """The most copies that leave a rolling batch room among `capacity` places (0: none)."""
        return max((n for n in range(capacity + 1) if n + self.batch_copies(n) <= capacity), default=0)

    @property
    def min_instances(self) -> int:
        """Instances at the scalable target's minimum: the fixed count, or those the copies need."""
        return self.instances_for(self.min_copies) if self.managed else self.instance_count

    @property
    def max_instances(self) -> int:
        """Instances at autoscaling's maximum, the copies packed: the fixed count, or those the copies need."""
        return self.instances_for(self.max_copies) if self.managed else self.instance_count

    @property
    def managed_min_instances(self) -> int:
        """ManagedInstanceScaling.MinInstanceCount: 0 with scale to zero, else what the minimum copies need."""
        return self.instances_for(self.min_copies)

    @property
    def managed_max_instances(self) -> int:
        """ManagedInstanceScaling.MaxInstanceCount: a copy per instance at most (SageMaker may spread copies over
        instances), and room for a rolling batch at the maximum, never below the variant's count."""
        with_batch = self.instances_for(self.max_copies + self.batch_copies(self.max_copies))
        return max(self.instance_count, self.max_copies, with_batch)

    def described(self) -> str:
        """What runs, one phrase: `0-1 × ml.g6e.12xlarge (0-4 copies of 1 GPU, 4 per instance; ...)`."""
        copies = (
            _copies(self.max_copies)
            if self.min_copies == self.max_copies
            else f"{self.min_copies}-{self.max_copies} copies"
        )
        fit = f"{copies} of {_gpus(self.accelerators_per_copy)}, {self.copies_per_instance} per instance"
        if self.managed:
            return (
                f"{_range(self.min_instances, self.max_instances)} × {self.instance_type} ({fit}; managed instance "
                f"scaling, MaxInstanceCount {self.managed_max_instances})"
            )
        return f"{self.instance_count} × {self.instance_type} ({fit}; fixed: no managed instance scaling)"

    def findings(self) -> list[tuple[str, Rule, str]]:
        """(the key to change, the rule, the message) for each copy count the instances cannot place; with managed
        instance scaling none (the instances follow the copies, MaxInstanceCount leaves room for a batch)."""
        if self.managed:
            return []
        found: list[tuple[str, Rule, str]] = []
        cap = self.capacity(self.instance_count)
        unit = _gpus(self.accelerators_per_copy).split(" ", 1)[1]
        held = (
            f"{self.instance_count} × {self.instance_type} ({_gpus(self.accelerators_per_instance)} each) hold "
            f"{cap} cop{'y' if cap == 1 else 'ies'} of {self.accelerators_per_copy} {unit}"
        )
        fixes = (
            "set serving.autoscaling.managed_instance_scaling: true (instances follow the copies: {need} for the "
            f"copies packed, MaxInstanceCount {self.managed_max_instances} for a rolling batch and spread copies)"
        )
        if self.initial_copies > cap:
            need = self.instances_for(self.initial_copies)
            return [
                (
                    "min_capacity",
                    COPIES_FIT_INSTANCES,
                    f"the base component starts with {self.initial_copies} copies and {held}: it cannot be created "
                    f"(its copies stay pending); {fixes.format(need=need)}, raise serving.instance_count to {need}, "
                    f"or lower min_capacity to {cap}",
                )
            ]
        if self.max_copies > cap:
            need = self.instances_for(self.max_copies)
            pending = f"{cap + 1}-{self.max_copies}" if self.max_copies > cap + 1 else f"{self.max_copies}"
            found.append(
                (
                    "max_capacity",
                    COPIES_FIT_INSTANCES,
                    f"autoscaling may ask for {self.max_copies} copies and {held}: copies {pending} would stay "
                    f"pending forever (managed instance scaling is off, so no instance is added for them); "
                    f"{fixes.format(need=need)}, raise serving.instance_count to {need}, or lower max_capacity to "
                    f"{cap}",
                )
            )
        counts = [(self.initial_copies, "at creation", "instance_count")]
        if self.max_copies != self.initial_copies and self.max_copies <= cap:
            counts.append((self.max_copies, "at autoscaling's maximum", "max_capacity"))
        for copies, where, key in counts:
            batch = self.batch_copies(copies)
            free = cap - copies
            if batch <= free:
                continue
            need = self.instances_for(copies + batch)
            room_left = "no room for another copy" if free <= 0 else f"room for {_copies(free)} more"
            room = self.most_copies_with_room(cap)
            keep = f", or keep max_capacity at {room}" if key == "max_capacity" and room >= self.initial_copies else ""
            found.append(
                (
                    key,
                    ROLLING_BATCH_HAS_ROOM,
                    f"a rolling update of the base component (a new model, image or environment: a promotion) "
                    f"provisions a batch of {_copies(batch)} ({self.batch_percent}% of {copies}) before it removes "
                    f"old ones, and at {_copies(copies)} ({where}) {self.instance_count} × {self.instance_type} "
                    f"({_gpus(self.accelerators_per_instance)} each) have {room_left}: the update "
                    f"cannot start; {fixes.format(need=need)}, or raise serving.instance_count to {need}{keep}",
                )
            )
            break
        return found


def _range(low: int, high: int) -> str:
    return str(low) if low == high else f"{low}-{high}"


def _copies(count: int) -> str:
    return f"{count} copy" if count == 1 else f"{count} copies"


def _gpus(count: int) -> str:
    return f"{count} GPU" if count == 1 else f"{count} GPUs"


def copy_placement(
    team: TeamConfig,
    instance: Instance,
    tensor_parallel_degree: int,
    instance_count: int,
    max_capacity: int | None = None,
) -> CopyPlacement | None:
    """The base copies of an adapter team on `instance` (team.serving.instance_type, resolved; None without
    adapters); `max_capacity`: an environment's override of autoscaling's maximum."""
    if not team.adapters:
        return None
    scaling = team.serving.autoscaling
    if scaling is None:
        low = high = initial = 1
        managed = False
    else:
        low = 0 if scaling.scale_to_zero else scaling.min_capacity
        high = max_capacity or scaling.max_capacity
        initial = max(1, scaling.min_capacity)
        managed = scaling.instances_follow_copies
    return CopyPlacement(
        instance_type=instance.instance_type,
        accelerators_per_copy=tensor_parallel_degree,
        accelerators_per_instance=instance.tp_units,
        min_copies=low,
        initial_copies=initial,
        max_copies=high,
        instance_count=instance_count,
        managed=managed,
        batch_percent=rolling_batch_percent(team.rollout),
    )


def placement_problems(placement: CopyPlacement | None, path_of: Callable[[str], PathT]) -> list[Problem]:
    """OG533 and OG534 at the YAML path `path_of(key)` gives for the key to change."""
    if placement is None:
        return []
    return [Problem(path_of(key), message, broken) for key, broken, message in placement.findings()]


def team_file_path(team: TeamConfig) -> Callable[[str], PathT]:
    """Where in the team file each key of a placement finding lives (autoscaling's, else the instance count)."""

    def path_of(key: str) -> PathT:
        if key in ("min_capacity", "max_capacity") and team.serving.autoscaling is not None:
            return ("serving", "autoscaling", key)
        return ("serving", "instance_count")

    return path_of


@dataclass(frozen=True)
class Placement:
    """What one endpoint runs: instances at minimum and maximum capacity (and at creation), a shadow variant's
    instance, the base copies of an adapter team, and the basis its cost per token is priced at (one replica)."""

    instance: Instance
    pools: tuple[Instance, ...]  # the pools in priority order, or the one instance
    initial_instances: int
    min_instances: int
    max_instances: int
    shadow: Instance | None  # the shadow variant's instance
    copies: CopyPlacement | None
    basis: CostBasis  # one replica: a base copy, or one tensor-parallel group of the model's container

    @property
    def instance_type(self) -> str:
        return self.instance.instance_type

    @property
    def types(self) -> tuple[str, ...]:
        return tuple(pool.instance_type for pool in self.pools)

    @property
    def shadow_type(self) -> str | None:
        return self.shadow.instance_type if self.shadow is not None else None

    def monthly_usd(self) -> tuple[float | None, float | None, tuple[str, ...]]:
        """(at minimum, at maximum, the types without a list price): the cheapest type prices the minimum, the
        dearest the maximum; a shadow instance is added to both."""
        priced = (*self.pools, *((self.shadow,) if self.shadow is not None else ()))
        prices = {instance.instance_type: instance.price_per_hour_usd for instance in priced}
        unpriced = tuple(sorted(name for name, price in prices.items() if price is None))
        if unpriced:
            return None, None, unpriced
        shadow = cost_per_month(prices[self.shadow_type] or 0.0, 1) if self.shadow_type else 0.0
        cheapest = min(prices[name] or 0.0 for name in self.types)
        dearest = max(prices[name] or 0.0 for name in self.types)
        return (
            round(cost_per_month(cheapest, self.min_instances) + shadow, 2),
            round(cost_per_month(dearest, self.max_instances) + shadow, 2),
            (),
        )

    @property
    def shadow_instances(self) -> int:
        return 1 if self.shadow_type else 0

    def described(self) -> str:
        """What runs, one phrase: `1-4 × ml.g6.2xlarge (2 at creation)`."""
        if self.copies is not None:
            return self.copies.described()
        low, high = self.min_instances, self.max_instances
        at_creation = f" ({self.initial_instances} at creation)" if low != high else ""
        shadow = f" + 1 × {self.shadow_type} (shadow variant)" if self.shadow_type else ""
        return f"{_range(low, high)} × {self.instance_type}{at_creation}{shadow}"


def replica_basis(instance: Instance, tensor_parallel_degree: int) -> CostBasis:
    """One replica's share of its instance, what the planner prices a token at (a copy, or one TP group: the
    instance's accelerators over its replicas, as optigate.plan.planner.PlanResult.cost_basis)."""
    replicas = max(1, instance.tp_units // tensor_parallel_degree)
    return CostBasis(
        instance.instance_type, instance.price_per_hour_usd, tensor_parallel_degree * replicas, tensor_parallel_degree
    )


def endpoint_placement(
    team: TeamConfig,
    instance: Instance,
    tensor_parallel_degree: int,
    pools: tuple[Instance, ...],
    instance_count: int,
    overrides: EnvironmentOverrides,
    shadow: Instance | None,
) -> Placement:
    """What the endpoint of `team` runs in an environment (its `overrides`, its `instance_count`): a model-backed
    endpoint the scalable target's range (else the fixed count; suspended for a deploy: the count scaling set),
    an adapter team the instances its copies need (see CopyPlacement). `instance`, `pools` (its instance pools, the
    first `instance`; () without pools) and `shadow` (a shadow variant's): resolved from the catalog."""
    scaling = None if overrides.suspend_autoscaling else team.serving.autoscaling
    max_capacity = overrides.autoscaling_max_capacity or (scaling.max_capacity if scaling else None)
    copies = copy_placement(
        team if scaling is not None else _without_autoscaling(team),
        instance,
        tensor_parallel_degree,
        instance_count,
        max_capacity,
    )
    if copies is not None:
        low, high = copies.min_instances, copies.max_instances
    elif scaling is not None and not team.adapters:
        low, high = max(1, scaling.min_capacity), max_capacity or scaling.max_capacity
    else:
        low = high = instance_count
    return Placement(
        instance=instance,
        pools=pools or (instance,),
        initial_instances=instance_count,
        min_instances=low,
        max_instances=high,
        shadow=shadow,
        copies=copies,
        basis=replica_basis(instance, tensor_parallel_degree),
    )


def _without_autoscaling(team: TeamConfig) -> TeamConfig:
    """The team as one deploy sees it with autoscaling suspended: its copies fixed."""
    serving = team.serving.model_copy(update={"autoscaling": None})
    return team.model_copy(update={"serving": serving})


#: This module's rules, in ID order: optigate.deployment.all_rules collects them (every_rule).
RULES = (
    COPIES_FIT_INSTANCES,
    ROLLING_BATCH_HAS_ROOM,
)
