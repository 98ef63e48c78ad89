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

from optigate import stats
from optigate.bench.metrics import RunSamples

METRICS = ("ttft_ms", "itl_ms", "tpot_ms", "e2e_ms")
QUANTILES = (50, 90, 99)
#: Replicates per interval; each caller keeps its own count until the verdicts issue calibrates them.
BOOTSTRAP_REPLICATES = 400
CONFIDENCE = stats.CONFIDENCE


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
    rng = stats.generator(seed)  # one generator for every delta of the level: reproducible as a whole
    deltas: list[Delta] = []
    for metric in METRICS:
        base = np.asarray(getattr(baseline, metric), dtype=float)
        cand = np.asarray(getattr(candidate, metric), dtype=float)
        if not len(base) or not len(cand):
            continue
        clustered = metric == "itl_ms" and baseline.itl_counts and candidate.itl_counts
        differences = stats.two_sample_difference(
            base,
            cand,
            stats.percentiles(QUANTILES),
            baseline_counts=baseline.itl_counts if clustered else None,
            candidate_counts=candidate.itl_counts if clustered else None,
            replicates=BOOTSTRAP_REPLICATES,
            confidence=CONFIDENCE,
            rng=rng,
        )
        point_base, point_cand = np.percentile(base, QUANTILES), np.percentile(cand, QUANTILES)
        for index, (q, difference) in enumerate(zip(QUANTILES, differences, strict=True)):
            deltas.append(
                Delta(
                    metric,
                    f"p{q}",
                    candidate.concurrency,
                    float(point_base[index]),
                    float(point_cand[index]),
                    float(point_cand[index] - point_base[index]),
                    difference.low,
                    difference.high,
                )
            )
    base_rate, cand_rate = throughput_buckets(baseline), throughput_buckets(candidate)
    if len(base_rate) and len(cand_rate):
        # The interval comes from the one-second buckets; the figures are the runs' own throughput.
        [difference] = stats.two_sample_difference(
            base_rate, cand_rate, stats.mean, replicates=BOOTSTRAP_REPLICATES, confidence=CONFIDENCE, rng=rng
        )
        base_tput = baseline.to_result(include_samples=False)["output_tokens_per_s"]
        cand_tput = candidate.to_result(include_samples=False)["output_tokens_per_s"]
        deltas.append(
            Delta(
                "output_tokens_per_s",
                "mean",
                candidate.concurrency,
                base_tput,
                cand_tput,
                cand_tput - base_tput,
                difference.low,
                difference.high,
                lower_is_better=False,
            )
        )
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
