"""What output tokens cost: the one formula behind every "$ per million output tokens" optigate shows."""

from __future__ import annotations


def cost_per_million_tokens(price_per_second_usd: float, seconds: float, tokens: float) -> float:
    """USD per million tokens when `tokens` take `seconds` of capacity billed at `price_per_second_usd`
    (a measured rate is `tokens` per `seconds=1`). Written in this order so that every caller's figure is the same
    to the last bit as before this function existed."""
    return price_per_second_usd * seconds / tokens * 1e6
