"""A verified fix of a plan problem (its own module: the problems and the sentences about them both read it)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Suggestion:
    """One change that fixes a plan problem, with the figures of the plan after the change.

    ``setting`` is the ``plan()`` keyword to change (one of ``SUGGESTION_SETTINGS``) and ``value``
    its new value; figures that do not apply to the change are None.
    """

    setting: str
    value: str | int
    kv_capacity_tokens: int | None = None
    concurrent_sequences: int | None = None  # sequences of the typical length the KV cache then holds
    weights_gib_per_accelerator: float | None = None
    tensor_parallel: int | None = None
    price_per_hour_usd: float | None = None
