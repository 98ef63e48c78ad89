"""What serving costs: the one formula behind every "$ per million output tokens" optigate shows, the basis every
such figure is priced at (:class:`CostBasis`), and a month of always-on instances.

One basis for `optigate plan`, `summary`, `advise` and the gate's report: the hourly list price of the accelerators
that produced the tokens. The planner prices one replica (a copy of an inference component, or one tensor-parallel
group of a model-backed endpoint) at its share of the instance, the tokens of that replica; the gate prices what it
measured, a whole endpoint of instances, or the one base copy an adapter team's gate stages on each side, at that
copy's share. A copy of one GPU on a 4-GPU instance is a quarter of the instance's price either way, so the figures
of a step agree across the commands (tests/plan/test_one_cost_model.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


def cost_per_million_tokens(price_per_second_usd: float, seconds: float, tokens: float) -> float:
    """USD per million tokens when `tokens` take `seconds` of capacity billed at `price_per_second_usd`
    (a measured rate is `tokens` per `seconds=1`). Written in this order so that every caller's figure is the same
    to the last bit as before this function existed."""
    return price_per_second_usd * seconds / tokens * 1e6


HOURS_PER_MONTH = 730  # AWS's pricing convention


def cost_per_month(price_per_hour_usd: float, instance_count: int) -> float:
    """USD per month of `instance_count` instances running every hour."""
    return price_per_hour_usd * instance_count * HOURS_PER_MONTH


@dataclass(frozen=True)
class CostBasis:
    """What a throughput is priced at: `accelerators` of instances of `instance_type` (`accelerators_per_instance`
    each, `price_per_hour_usd` each, None without a list price). Whole instances are `count × per instance`
    accelerators; one copy of an inference component is its own accelerators, a share of one instance."""

    instance_type: str
    price_per_hour_usd: float | None
    accelerators_per_instance: int
    accelerators: int

    def __post_init__(self) -> None:
        if self.accelerators < 1 or self.accelerators_per_instance < 1:
            raise ValueError(
                f"a cost basis needs accelerators >= 1, got {self.accelerators}/{self.accelerators_per_instance}"
            )
        if self.price_per_hour_usd is not None and not self.price_per_hour_usd >= 0:
            raise ValueError(f"price_per_hour_usd must be >= 0, got {self.price_per_hour_usd}")

    @classmethod
    def instances(cls, instance_type: str, price: float | None, per_instance: int, count: int = 1) -> CostBasis:
        """`count` whole instances."""
        return cls(instance_type, price, per_instance, count * per_instance)

    @property
    def instance_share(self) -> float:
        """How many instances the accelerators are (a copy's share of one: below 1)."""
        return self.accelerators / self.accelerators_per_instance

    @property
    def hourly_usd(self) -> float | None:
        """The list price of the accelerators for an hour."""
        return None if self.price_per_hour_usd is None else self.price_per_hour_usd * self.instance_share

    def cost_per_million(self, output_tokens_per_s: float | None) -> float | None:
        """USD per million output tokens at `output_tokens_per_s` produced on these accelerators; None without a price
        or a rate."""
        hourly = self.hourly_usd
        if hourly is None or not output_tokens_per_s or output_tokens_per_s <= 0:
            return None
        return cost_per_million_tokens(hourly / 3600.0, 1.0, output_tokens_per_s)

    def describe(self) -> str:
        """One phrase: what is priced, at what hourly price (`1 of 4 accelerators of ml.g6e.12xlarge, $3.280/h`)."""
        price = "no list price" if self.hourly_usd is None else f"${self.hourly_usd:,.3f}/h"
        share = self.instance_share
        if share == int(share):
            return f"{int(share)} × {self.instance_type}, {price}"
        return f"{self.accelerators} of {self.accelerators_per_instance} accelerators of {self.instance_type}, {price}"

    def to_json(self) -> dict[str, Any]:
        return {
            "instance_type": self.instance_type,
            "price_per_hour_usd": self.price_per_hour_usd,
            "accelerators_per_instance": self.accelerators_per_instance,
            "accelerators": self.accelerators,
            "hourly_usd": self.hourly_usd,
            "described": self.describe(),
        }

    @classmethod
    def from_json(cls, data: Any) -> CostBasis | None:
        """A basis a gate event or report carries; None when it carries none (older ones) or a malformed one."""
        if not isinstance(data, dict):
            return None
        try:
            price = data.get("price_per_hour_usd")
            return cls(
                str(data["instance_type"]),
                None if price is None else float(price),
                int(data["accelerators_per_instance"]),
                int(data["accelerators"]),
            )
        except (KeyError, TypeError, ValueError):
            return None
