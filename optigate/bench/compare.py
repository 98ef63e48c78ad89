"""Baseline vs candidate: percentile deltas with bootstrap confidence intervals.

Noise must never read as a speed-up, so every delta carries a 95 % interval and a delta whose
interval spans zero is "not distinguishable". Per-request metrics (TTFT, TPOT, E2E) resample
requests; ITL resamples *requests* too (a cluster bootstrap), because the gaps of one request
are correlated and resampling them one by one would make the interval too narrow. Throughput
resamples one-second buckets of the measurement window.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from optigate.bench.metrics import RunSamples

METRICS = ("ttft_ms", "itl_ms", "tpot_ms", "e2e_ms")
QUANTILES = (50, 90, 99)
BOOTSTRAP_REPLICATES = 400
CONFIDENCE = 0.95


@dataclass(frozen=True)
class Delta:
    metric: str
    statistic: str  # p50 | p90 | p99 | mean
    concurrency: int
    baseline: float
    candidate: float
    delta: float
    low: float
    high: float
    lower_is_better: bool = True

    @property
    def relative(self) -> float:
        return self.delta / self.baseline if self.baseline else float("nan")

    @property
    def verdict(self) -> str:
        if self.low <= 0 <= self.high:
            return "not distinguishable"
        improved = (self.delta < 0) == self.lower_is_better
        return "better" if improved else "worse"

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "relative": self.relative, "verdict": self.verdict}


def _cluster_resample(values: np.ndarray, counts: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Resample whole requests (their consecutive ITL samples) with replacement."""
    starts = np.concatenate(([0], np.cumsum(counts)[:-1]))
    chosen = rng.integers(0, len(counts), len(counts))
    lengths = counts[chosen]
    total = int(lengths.sum())
    if total == 0:
        return values[:0]
    offsets = np.repeat(starts[chosen] - np.concatenate(([0], np.cumsum(lengths)[:-1])), lengths)
    return values[np.arange(total) + offsets]


def _bootstrap_percentiles(samples: np.ndarray, counts: np.ndarray | None, rng: np.random.Generator) -> np.ndarray:
    """(replicates, len(QUANTILES)) of percentiles of resampled data."""
    out = np.empty((BOOTSTRAP_REPLICATES, len(QUANTILES)))
    for i in range(BOOTSTRAP_REPLICATES):
        if counts is not None:
            draw = _cluster_resample(samples, counts, rng)
        else:
            draw = samples[rng.integers(0, len(samples), len(samples))]
        out[i] = np.percentile(draw, QUANTILES) if len(draw) else np.nan
    return out


def _interval(differences: np.ndarray) -> tuple[float, float]:
    tail = (1 - CONFIDENCE) / 2 * 100
    low, high = np.nanpercentile(differences, [tail, 100 - tail])
    return float(low), float(high)


def throughput_buckets(run: RunSamples, seconds: float = 1.0) -> np.ndarray:
    """Output tokens per second in consecutive buckets of the measurement window."""
    bounds = run.window()
    if bounds is None:
        return np.array([])
    start, end = bounds
    count = max(1, int((end - start) // seconds))
    edges = start + np.arange(count + 1) * seconds
    times = np.array([t for t, _ in run.token_arrivals])
    tokens = np.array([k for _, k in run.token_arrivals], dtype=float)
    histogram, _ = np.histogram(times, bins=edges, weights=tokens)
    return histogram / seconds


def compare_runs(baseline: RunSamples, candidate: RunSamples, seed: int = 0) -> list[Delta]:
    rng = np.random.default_rng(seed)
    deltas: list[Delta] = []
    for metric in METRICS:
        base = np.asarray(getattr(baseline, metric), dtype=float)
        cand = np.asarray(getattr(candidate, metric), dtype=float)
        if not len(base) or not len(cand):
            continue
        clustered = metric == "itl_ms" and baseline.itl_counts and candidate.itl_counts
        base_counts = np.asarray(baseline.itl_counts) if clustered else None
        cand_counts = np.asarray(candidate.itl_counts) if clustered else None
        boot_base = _bootstrap_percentiles(base, base_counts, rng)
        boot_cand = _bootstrap_percentiles(cand, cand_counts, rng)
        point_base, point_cand = np.percentile(base, QUANTILES), np.percentile(cand, QUANTILES)
        for index, q in enumerate(QUANTILES):
            low, high = _interval(boot_cand[:, index] - boot_base[:, index])
            deltas.append(Delta(metric, f"p{q}", candidate.concurrency, float(point_base[index]), float(point_cand[index]), float(point_cand[index] - point_base[index]), low, high))
    base_rate, cand_rate = throughput_buckets(baseline), throughput_buckets(candidate)
    if len(base_rate) and len(cand_rate):
        means = [
            rng.choice(cand_rate, len(cand_rate)).mean() - rng.choice(base_rate, len(base_rate)).mean()
            for _ in range(BOOTSTRAP_REPLICATES)
        ]
        low, high = _interval(np.asarray(means))
        base_tput = baseline.to_result(include_samples=False)["output_tokens_per_s"]
        cand_tput = candidate.to_result(include_samples=False)["output_tokens_per_s"]
        deltas.append(Delta("output_tokens_per_s", "mean", candidate.concurrency, base_tput, cand_tput, cand_tput - base_tput, low, high, lower_is_better=False))
    return deltas


def compare_results(baseline: dict[str, Any], candidate: dict[str, Any]) -> list[Delta]:
    """Every concurrency level both result files measured."""
    base_runs = {run["concurrency"]: run for run in baseline["runs"]}
    deltas: list[Delta] = []
    for run in candidate["runs"]:
        other = base_runs.get(run["concurrency"])
        if other is not None:
            deltas += compare_runs(RunSamples.from_result(other), RunSamples.from_result(run))
    return deltas
