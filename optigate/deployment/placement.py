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
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from optigate.config.models import EnvironmentOverrides, TeamConfig
from optigate.config.rolling_update import rolling_batch_percent
from optigate.config.rule_registry import Found, PathT, Problem, Severity, rule_check
from optigate.plan.catalog import Instance
from optigate.plan.cost import CostBasis, cost_per_month


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


def _range(low: int, high: int) -> str:
    return str(low) if low == high else f"{low}-{high}"


def _copies(count: int) -> str:
    return f"{count} copy" if count == 1 else f"{count} copies"


def _gpus(count: int) -> str:
    return f"{count} GPU" if count == 1 else f"{count} GPUs"


def _managed_fix(placed: CopyPlacement, need: int) -> str:
    """A finding's first fix: managed instance scaling, `need` the instances the copies need, packed."""
    return (
        f"set serving.autoscaling.managed_instance_scaling: true (instances follow the copies: {need} for the "
        f"copies packed, MaxInstanceCount {placed.managed_max_instances} for a rolling batch and spread copies)"
    )


@rule_check(
    "OG533", "the base component's copies fit the endpoint's instances at creation and at autoscaling's maximum"
)
def copies_fit_instances(placed: CopyPlacement | None, path_of: Callable[[str], PathT]) -> Iterator[Found]:
    """Without managed instance scaling, an adapter team's base copies fit the variant's fixed instances
    (`accelerators per instance // per copy` copies each, a copy never spanning two): at creation (`CopyCount`, the
    minimum's copies, at least one) and at autoscaling's maximum; reported at the YAML path `path_of(key)` gives
    for the key to change (min_capacity or max_capacity).

    Why: each copy reserves `tensor_parallel_degree` accelerators (NumberOfAcceleratorDevicesRequired), and without
    ProductionVariant ManagedInstanceScaling the variant keeps its InitialInstanceCount, so copies beyond what its
    instances hold stay pending: at creation the component cannot be created, at the maximum they never run. With
    managed instance scaling the instances follow the copies (API reference: ProductionVariantManagedInstanceScaling;
    docs/inference-components.md).
    """
    if placed is None or placed.managed:
        return
    cap = placed.capacity(placed.instance_count)
    unit = _gpus(placed.accelerators_per_copy).split(" ", 1)[1]
    held = (
        f"{placed.instance_count} × {placed.instance_type} ({_gpus(placed.accelerators_per_instance)} each) hold "
        f"{cap} cop{'y' if cap == 1 else 'ies'} of {placed.accelerators_per_copy} {unit}"
    )
    if placed.initial_copies > cap:
        need = placed.instances_for(placed.initial_copies)
        yield (
            path_of("min_capacity"),
            f"the base component starts with {placed.initial_copies} copies and {held}: it cannot be created "
            f"(its copies stay pending); {_managed_fix(placed, need)}, raise serving.instance_count to {need}, "
            f"or lower min_capacity to {cap}",
        )
        return
    if placed.max_copies > cap:
        need = placed.instances_for(placed.max_copies)
        pending = f"{cap + 1}-{placed.max_copies}" if placed.max_copies > cap + 1 else f"{placed.max_copies}"
        yield (
            path_of("max_capacity"),
            f"autoscaling may ask for {placed.max_copies} copies and {held}: copies {pending} would stay "
            f"pending forever (managed instance scaling is off, so no instance is added for them); "
            f"{_managed_fix(placed, need)}, raise serving.instance_count to {need}, or lower max_capacity to "
            f"{cap}",
        )


@rule_check("OG534", "a rolling update of the base component finds free accelerators for its batch", Severity.NOTE)
def rolling_batch_has_room(placed: CopyPlacement | None, path_of: Callable[[str], PathT]) -> Iterator[Found]:
    """Without managed instance scaling, a rolling update of an adapter team's base component finds free
    accelerators on the fixed instances for its first batch (a share of the copies, at least one): at creation's
    copies, else at autoscaling's maximum when the instances hold it; noted once, at the YAML path `path_of(key)`
    gives for the key to change. Not checked when the copies at creation do not fit (OG533).

    Why: a rolling update (a new model, image or environment: a promotion) provisions each batch's copies before it
    removes the old ones: "For each step, SageMaker AI provisions capacity on the new endpoint fleet, routes traffic
    to that fleet, and terminates capacity on the old endpoint fleet" (InferenceComponentRollingUpdatePolicy,
    MaximumBatchSize, API reference). An update at a copy count without room cannot start; whether SageMaker then
    waits, fails or rolls back is not documented, so this is a note.
    """
    if placed is None or placed.managed:
        return
    cap = placed.capacity(placed.instance_count)
    if placed.initial_copies > cap:
        return
    counts = [(placed.initial_copies, "at creation", "instance_count")]
    if placed.max_copies != placed.initial_copies and placed.max_copies <= cap:
        counts.append((placed.max_copies, "at autoscaling's maximum", "max_capacity"))
    for copies, where, key in counts:
        batch = placed.batch_copies(copies)
        free = cap - copies
        if batch <= free:
            continue
        need = placed.instances_for(copies + batch)
        room_left = "no room for another copy" if free <= 0 else f"room for {_copies(free)} more"
        room = placed.most_copies_with_room(cap)
        keep = f", or keep max_capacity at {room}" if key == "max_capacity" and room >= placed.initial_copies else ""
        yield (
            path_of(key),
            f"a rolling update of the base component (a new model, image or environment: a promotion) "
            f"provisions a batch of {_copies(batch)} ({placed.batch_percent}% of {copies}) before it removes "
            f"old ones, and at {_copies(copies)} ({where}) {placed.instance_count} × {placed.instance_type} "
            f"({_gpus(placed.accelerators_per_instance)} each) have {room_left}: the update "
            f"cannot start; {_managed_fix(placed, need)}, or raise serving.instance_count to {need}{keep}",
        )
        return


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


def placement_problems(placed: CopyPlacement | None, path_of: Callable[[str], PathT]) -> list[Problem]:
    """OG533 and OG534, one rule function each, at the YAML path `path_of(key)` gives for the key to change."""
    return copies_fit_instances(placed, path_of) + rolling_batch_has_room(placed, path_of)


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
    copies_fit_instances,
    rolling_batch_has_room,
)
