"""How many GPU LoRA slots a team's adapter mix needs, and the share of requests that pay a LoRA swap.

vLLM keeps ``max_loras`` adapters in GPU slots and evicts the least recently used one when a request needs
another (vllm-project/vllm, vllm/lora/model_manager.py @ bb1d76e5: ``LRUCacheLoRAModelManager.activate_adapter``
removes the oldest of ``_active_adapters``, an LRU cache of ``lora_slots = max_loras``). Requests to the base
model carry no LoRA and take no slot (the scheduler counts ``lora_int_id > 0`` only). Its scheduler also runs at
most ``max_loras`` distinct adapters in one batch: a waiting request of another adapter is skipped until a slot
frees (vllm/v1/core/sched/scheduler.py @ 00024d31, "Scheduling would exceed max_loras, skip").

Two figures follow from a mix (relative weights per adapter, ``base`` for the base model):

- **swap share**: requests whose adapter is not resident when they arrive. Under the independent reference
  model (each request picks its adapter from the mix, independently) the LRU hit probability of adapter i with
  k slots is Che's approximation ``1 - exp(-p_i T)``, T the root of ``sum_i (1 - exp(-p_i T)) = k``: the number
  of adapter requests within which k distinct adapters are used (H. Che, Y. Tung, Z. Wang, "Hierarchical Web
  caching systems: modeling, design and experimental results", IEEE JSAC 20(7), 2002; why it is accurate:
  C. Fricker, P. Robert, J. Roberts, "A versatile and accurate approximation for LRU cache
  performance", ITC 24, 2012, arXiv:1202.3974). It is analytic (instant, no sampling noise) and, for the
  handful of adapters a team serves, within 0.025 of an LRU simulation from two slots up
  (tests/plan/test_adapter_slots.py checks it against a seeded LRU stream). At one slot, where it is worst
  (0.26 for 0.19 with one dominant adapter), the exact figure is used: a request hits when the adapter request
  before it was to the same adapter, ``1 - sum p_i^2``. With equal-length requests in a closed loop, the
  requests in flight are the latest ones and vLLM touches their adapters every step, so the LRU order is the
  order of arrival and the swap share does not depend on the concurrency.
- **over-slots share**: the probability that the requests in flight at a concurrency span more adapters than the
  slots, so the scheduler holds some back. That is an occupancy probability of ``concurrency`` draws from the
  mix; it has no closed form for unequal weights (inclusion-exclusion is exponential in the adapters) and
  Poissonization is wrong at low concurrency, so it is estimated from a seeded multinomial sample of
  ``OCCUPANCY_DRAWS`` in-flight sets (standard error below 0.002 at a share of 5 %).

The slots a mix needs: the fewest slots at which both stay at or below ``RESIDENT_BOUND`` (5 %: "95 % resident").
Pure: no AWS, no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from optigate.stats import SEED, generator

#: The mix key of the base model: its requests use no LoRA slot.
BASE_ADAPTER = "base"
#: At most this share of requests may pay a swap, or find the slots full, for a slot count to be enough.
RESIDENT_BOUND = 0.05
#: In-flight sets sampled per slot count for the over-slots share.
OCCUPANCY_DRAWS = 20_000


class MixError(ValueError):
    """A mix that says nothing: no positive weight, or a weight that is negative or not a number."""


@dataclass(frozen=True)
class SlotPlan:
    """What a mix needs at a concurrency, beside what the team has (``max_loras``)."""

    adapters: int  # adapters the mix sends requests to
    max_loras: int
    concurrency: int
    bound: float
    slots_needed: int
    swap_share: float  # of all requests (base included), at max_loras
    over_slots_share: float  # probability the in-flight requests span more than max_loras adapters

    @property
    def enough(self) -> bool:
        return self.slots_needed <= self.max_loras

    def message(self) -> str:
        resident = f"{100 * (1 - self.bound):g} % resident"
        if self.adapters <= self.max_loras:
            return f"{self.adapters} adapters, max_loras {self.max_loras}: every adapter resident"
        cost = f"{100 * self.swap_share:.1f} % of requests pay a LoRA swap"
        if self.concurrency > 1:
            cost += (
                f"; the {self.concurrency} requests in flight span more than {self.max_loras} adapters "
                f"{100 * self.over_slots_share:.1f} % of the time"
            )
        if self.enough:
            return (
                f"{self.adapters} adapters, max_loras {self.max_loras}: the mix needs {self.slots_needed} slots for "
                f"{resident} at concurrency {self.concurrency} ({cost})"
            )
        return (
            f"mix needs {self.slots_needed} slots for {resident} at concurrency {self.concurrency}; max_loras is "
            f"{self.max_loras}: {cost}"
        )

    def to_dict(self) -> dict:
        return {
            "adapters": self.adapters,
            "max_loras": self.max_loras,
            "concurrency": self.concurrency,
            "bound": self.bound,
            "slots_needed": self.slots_needed,
            "swap_share": round(self.swap_share, 4),
            "over_slots_share": round(self.over_slots_share, 4),
            "message": self.message(),
        }


def _shares(mix: Mapping[str, float]) -> tuple[np.ndarray, float]:
    """The adapters' shares of all requests (positive ones only), and the base model's share."""
    for name, weight in mix.items():
        if not isinstance(weight, int | float) or not math.isfinite(weight) or weight < 0:
            raise MixError(f"adapter mix: {name}'s weight {weight!r} is not a non-negative number")
    total = float(sum(mix.values()))
    if total <= 0:
        raise MixError("adapter mix: no adapter (nor base) has a positive weight")
    adapters = np.array([w for name, w in mix.items() if name != BASE_ADAPTER and w > 0], dtype=float) / total
    return adapters, float(mix.get(BASE_ADAPTER, 0.0)) / total


def characteristic_time(popularity: np.ndarray, slots: int) -> float:
    """Che's T: the root of ``sum(1 - exp(-p T)) = slots`` (infinite when every adapter fits)."""
    if slots >= len(popularity):
        return math.inf
    low, high = 0.0, 1.0
    while np.sum(1 - np.exp(-popularity * high)) < slots:
        high *= 2
    for _ in range(200):  # bisection: the left side increases with T
        middle = (low + high) / 2
        if np.sum(1 - np.exp(-popularity * middle)) < slots:
            low = middle
        else:
            high = middle
        if high - low <= 1e-12 * high:
            break
    return (low + high) / 2


def swap_share(mix: Mapping[str, float], slots: int) -> float:
    """Share of all requests (base included) whose adapter is not in one of ``slots`` LRU slots (Che)."""
    adapters, _ = _shares(mix)
    if slots >= len(adapters):
        return 0.0
    popularity = adapters / adapters.sum()  # the LRU sees adapter requests only
    if slots == 1:  # exact: a hit is the previous adapter request's adapter again (Che is worst here)
        return float(np.sum(adapters * (1 - popularity)))
    time = characteristic_time(popularity, slots)
    return float(np.sum(adapters * np.exp(-popularity * time)))


def over_slots_share(mix: Mapping[str, float], concurrency: int, slots: int, *, seed: int = SEED) -> float:
    """Probability that ``concurrency`` requests drawn from the mix use more than ``slots`` distinct adapters."""
    adapters, base = _shares(mix)
    if slots >= min(len(adapters), concurrency):
        return 0.0
    draws = generator(seed).multinomial(concurrency, np.append(adapters, base), size=OCCUPANCY_DRAWS)
    distinct = (draws[:, : len(adapters)] > 0).sum(axis=1)
    return float(np.mean(distinct > slots))


def slots_for_mix(
    mix: Mapping[str, float], *, concurrency: int, max_loras: int, bound: float = RESIDENT_BOUND
) -> SlotPlan:
    """The fewest slots at which the swap share and the over-slots share both stay at or below ``bound``."""
    if concurrency < 1 or max_loras < 1 or not 0 < bound < 1:
        raise ValueError(f"concurrency {concurrency}, max_loras {max_loras} and bound {bound}: out of range")
    adapters, _ = _shares(mix)
    # At as many slots as adapters both shares are 0, so the search always ends.
    needed = next(
        (
            slots
            for slots in range(1, len(adapters) + 1)
            if swap_share(mix, slots) <= bound and over_slots_share(mix, concurrency, slots) <= bound
        ),
        0,
    )
    return SlotPlan(
        adapters=len(adapters),
        max_loras=max_loras,
        concurrency=concurrency,
        bound=bound,
        slots_needed=needed,
        swap_share=swap_share(mix, max_loras),
        over_slots_share=over_slots_share(mix, concurrency, max_loras),
    )


def team_slots(
    adapter_names: list[str], mix: Mapping[str, float] | None, *, concurrency: int, max_loras: int
) -> SlotPlan | str:
    """A team's slot plan, or why there is none: what `optigate plan` shows for a team with adapters.

    Without a mix, the answer is known only when every adapter fits (no adapter is ever evicted).
    """
    count = len(adapter_names)
    if count <= max_loras:
        return SlotPlan(count, max_loras, concurrency, RESIDENT_BOUND, count, 0.0, 0.0)
    if mix is None:
        return (
            f"{count} adapters, max_loras {max_loras}: the slots the mix needs are unknown until the gate reads the "
            "live endpoint's per-component invocations from CloudWatch (or set gate.benchmark.adapter_mix)"
        )
    unknown = sorted(set(mix) - set(adapter_names) - {BASE_ADAPTER})
    if unknown:
        raise MixError(f"adapter mix names {', '.join(unknown)}, not among the team's adapters nor `base`")
    return slots_for_mix(mix, concurrency=concurrency, max_loras=max_loras)
