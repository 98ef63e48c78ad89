"""Goodput: the share (and rate) of requests that met the team's SLO, with intervals from the same two-level
resampling as every other figure. One rule for `optigate bench`, `bench compare`, the capacity search and the gate.

A request **meets** the SLO when it succeeded, its TTFT is within ``ttft_ms`` and its TPOT (its own mean time
per output token after the first) within ``itl_ms`` (vLLM's and inference-perf's per-request goodput: a request
is judged as the user felt it). A failed request never meets it; a one-token request is judged on TTFT alone.
The same two numbers, read as percentiles over every request (p99 TTFT) and every token (p99 ITL), are the SLO
a load *holds* (:func:`Slo.holds`), which the capacity search and the gate's latency checks judge.

- **share**: met / measured requests (failed ones count against it);
- **rate**: share × completed requests per second in the run's window (requests per second that met the SLO).

A run without per-request outcomes (a result written before they were recorded, or one whose outcomes do not
cover its requests) has no goodput: None, never a pass.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from optigate import stats
from optigate.bench.core.metrics import RunSamples, percentile

#: The SLO keys `--slo` takes, each a budget in milliseconds.
SLO_KEYS = ("p99_ttft_ms", "p99_itl_ms")


@dataclass(frozen=True)
class Slo:
    """Budgets in ms: p99 TTFT and p99 ITL for a load to hold; the same numbers per request for goodput."""

    p99_ttft_ms: float | None = None
    p99_itl_ms: float | None = None

    def __post_init__(self) -> None:
        for key in SLO_KEYS:
            value = getattr(self, key)
            if value is not None and not (
                isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value) and value > 0
            ):
                raise ValueError(f"SLO {key}: expected a number of milliseconds > 0, got {value!r}")
        if self.p99_ttft_ms is None and self.p99_itl_ms is None:
            raise ValueError(f"an SLO needs at least one of {', '.join(SLO_KEYS)}")

    @classmethod
    def parse(cls, text: str) -> Slo:
        """``p99_ttft_ms=800,p99_itl_ms=60``; ValueError naming what is wrong, in one line."""
        values: dict[str, float] = {}
        for item in (part.strip() for part in text.split(",") if part.strip()):
            key, equals, number = item.partition("=")
            key = key.strip()
            if not equals or key not in SLO_KEYS:
                raise ValueError(f"{item!r}: expected KEY=MS with KEY one of {', '.join(SLO_KEYS)}")
            if key in values:
                raise ValueError(f"{key} given twice")
            try:
                values[key] = float(number)
            except ValueError:
                raise ValueError(f"{item!r}: {number.strip()!r} is not a number of milliseconds") from None
        return cls(**values)

    def text(self) -> str:
        words = {"p99_ttft_ms": "p99 TTFT", "p99_itl_ms": "p99 ITL"}
        return ", ".join(f"{words[key]} ≤ {getattr(self, key):g} ms" for key in self._set())

    def _set(self) -> list[str]:
        return [key for key in SLO_KEYS if getattr(self, key) is not None]

    def met(self, ttft_ms: float | None, tpot_ms: float | None) -> bool:
        """Whether one request met the SLO (see the module docstring)."""
        if ttft_ms is None:
            return False
        if self.p99_ttft_ms is not None and not ttft_ms <= self.p99_ttft_ms:
            return False
        return self.p99_itl_ms is None or tpot_ms is None or tpot_ms <= self.p99_itl_ms

    def holds(self, run: RunSamples) -> bool | None:
        """Whether the run's p99 TTFT and p99 ITL are within the budgets (point estimates; None: no samples).
        Callers that decide on it use an interval (optigate.bench.capacity)."""
        figures = {"p99_ttft_ms": run.ttft_ms, "p99_itl_ms": run.itl_ms}
        for key in self._set():
            values = figures[key]
            if not values:
                return None
            if percentile(sorted(values), 99) > getattr(self, key):
                return False
        return True


def met_flags(run: RunSamples, slo: Slo) -> np.ndarray | None:
    """1.0 per measured request that met the SLO, else 0.0; None when the run's outcomes do not cover its requests."""
    if not run.requests or len(run.outcomes) != run.requests:
        return None
    return np.array([1.0 if slo.met(ttft, tpot) else 0.0 for ttft, tpot in run.outcomes])


@dataclass(frozen=True)
class Goodput:
    """One run's goodput (see the module docstring); share and rate None when unknown."""

    share: float | None
    rate_per_s: float | None
    met: int
    requests: int

    def to_dict(self) -> dict[str, float | int | None]:
        return {"share": self.share, "rate_per_s": self.rate_per_s, "met": self.met, "requests": self.requests}


def goodput(run: RunSamples, slo: Slo) -> Goodput:
    flags = met_flags(run, slo)
    if flags is None:
        return Goodput(None, None, 0, run.requests)
    share = float(flags.mean())
    rate = share * float(run.to_result(include_samples=False)["requests_per_s"])
    return Goodput(share, rate, int(flags.sum()), run.requests)


@dataclass(frozen=True)
class GoodputDifference:
    """Each side's share (the mean of its blocks'), the SE of candidate − baseline and each side's replicates;
    ``missing`` names a side without outcomes (then no SE)."""

    baseline: float
    candidate: float
    se: float
    missing: str = ""
    baseline_replicates: np.ndarray | None = None
    candidate_replicates: np.ndarray | None = None


def _side_share(
    blocks: Sequence[RunSamples], slo: Slo, *, rng: stats.SeedLike = 0, replicates: int = stats.SE_REPLICATES
) -> tuple[float, np.ndarray] | None:
    """A side's goodput share over its blocks and its two-level replicates (blocks, then requests); None when a
    block has no outcomes."""
    flags = [met_flags(block, slo) for block in blocks]
    if not flags or any(f is None for f in flags):
        return None
    series = [f for f in flags if f is not None]
    points = [float(f.mean()) for f in series]
    # Requests resampled inside each block: a share is a mean of 0/1, so the two-level mean bootstrap applies (a
    # block's share times the ratio of its resampled mean to its mean is the resampled share).
    return stats.two_level_mean_replicates(points, series, replicates=replicates, rng=rng)


def goodput_difference(
    base: Sequence[RunSamples],
    cand: Sequence[RunSamples],
    slo: Slo,
    *,
    rng: stats.SeedLike = 0,
    replicates: int = stats.SE_REPLICATES,
) -> GoodputDifference:
    """Goodput share of each side and the two-level bootstrap SE of candidate − baseline (in share, 0-1)."""
    draw = stats.generator(rng)
    sides = []
    missing = []
    for name, blocks in (("baseline", base), ("candidate", cand)):
        side = _side_share(blocks, slo, rng=draw, replicates=replicates)
        if side is None:
            missing.append(name)
        sides.append(side)
    if missing:
        known = [s[0] if s else math.nan for s in sides]
        why = " and ".join(missing) + " recorded no per-request outcomes"
        return GoodputDifference(known[0], known[1], math.nan, why)
    (base_point, base_reps), (cand_point, cand_reps) = sides  # type: ignore[misc]
    se = float(np.std(cand_reps - base_reps, ddof=1))
    return GoodputDifference(base_point, cand_point, se, "", base_reps, cand_reps)
