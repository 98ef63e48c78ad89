"""What serving costs: the one formula behind every "$ per million output tokens" optigate shows, and a month
of always-on instances."""

from __future__ import annotations


def cost_per_million_tokens(price_per_second_usd: float, seconds: float, tokens: float) -> float:
    """USD per million tokens when `tokens` take `seconds` of capacity billed at `price_per_second_usd`
    (a measured rate is `tokens` per `seconds=1`). Written in this order so that every caller's figure is the same
    to the last bit as before this function existed."""
    return price_per_second_usd * seconds / tokens * 1e6


HOURS_PER_MONTH = 730  # AWS's pricing convention


def cost_per_month(price_per_hour_usd: float, instance_count: int) -> float:
    """USD per month of `instance_count` instances running every hour."""
    return price_per_hour_usd * instance_count * HOURS_PER_MONTH
