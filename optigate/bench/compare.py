# Over 400 lines: the rules turning intervals into words (margins, Holm, fail-closed minimums) read together.
"""Baseline vs candidate: one verdict per metric that knows its noise (used by `bench compare`, the
gate's decision and the reports).

**Blocks.** Each side may be measured in several runs ("blocks", e.g. interleaved A B A B A B).
A side's figure is its pooled percentile (latency) or the mean of its blocks' throughput. Its
noise comes from a two-level bootstrap (:func:`optigate.stats.two_level_percentile_replicates`):
blocks are drawn with replacement, then requests inside each drawn block, so drift from run to run
widens the interval instead of deciding. But three blocks estimate drift from two degrees of
freedom: when they happen to agree, the bootstrap sees almost none, and a normal interval at Holm's
confidence then labels drift a change (8 % of simulated A/A pairs at 2 % drift). So a delta's SE is
never below that of an assumed run-to-run drift of :data:`RUN_TO_RUN_DRIFT_PCT` (2 % of the baseline
per block, averaged over each side's blocks; one run a side assumes it too, as it cannot show any).
ITL resamples whole requests (a request's gaps are correlated). Throughput resamples blocks, then
one-second buckets inside them; a side with fewer than :data:`MIN_THROUGHPUT_BUCKETS` buckets (its
blocks pooled), or a block with none, gives no throughput interval (never a ``[x, x]``).

**Intervals.** ``delta ± z · SE``, with SE the standard deviation of the bootstrap replicates of
``candidate − baseline``, or the assumed drift's SE when that is larger (see "Blocks"). The
multiplicity control below asks for confidence levels up to 1 − 0.05 / 39 (two-sided): a percentile
interval that far out needs tens of thousands of replicates and still wobbles; a normal interval on
the bootstrap SE needs a few hundred, and it always contains its estimate by construction.

**Four words** (the judge's comparison of two sides, :func:`optigate.judge.compare_change`). Each metric
has a practical margin (default ±3 % of the baseline, per metric via a mapping,
``gate.benchmark.equivalence_margin_pct`` in the gate):

- ``better`` / ``worse``: the interval excludes "no change" (the data show a change, at the
  confidence the multiplicity control asks for) *and* the estimate lies beyond the margin (the
  change is large enough to matter). A change whose estimate is inside the margin is never better
  or worse. This is a canary judge's rule: Netflix Kayenta's Mann-Whitney classifier calls a
  metric high or low when its confidence interval excludes the no-change bound *and* the effect
  size (the ratio of the sides) passes a threshold. Demanding instead that the whole interval clear
  the margin tests "the change exceeds 3 %", which at the gate's sample sizes spends most of a 10 %
  change on the margin: it found a true 10 % TTFT change in 73 of 100 calibration pairs.
- ``equivalent``: the whole interval lies inside the margin. With the assumed drift and Holm's
  confidence that takes many runs a side (at ±3 % over three levels, about fifteen): at the gate's
  three blocks an unchanged metric reads ``inconclusive``. Likewise the smallest change labelled
  at three blocks is set by the drift floor, about 5 %, not by the 3 % margin; the margin binds
  with more blocks, where a true change just inside it can be labelled when its estimate crosses it.
- ``inconclusive``: anything else, including too few samples (fewer than :data:`MIN_REQUESTS`
  successful requests on a side, or fewer than :data:`MIN_TAIL_UNITS` requests beyond a
  percentile: p99 is judged from 500 requests a side, since the bootstrap of an extreme order
  statistic understates its spread) and a baseline with no successful request. A candidate with no
  successful request where the baseline had some is ``worse`` (fail closed); its figure is
  ``failed``, not a number.

**Multiplicity: Holm over every delta compared** (all metrics × statistics × levels of one
:func:`compare_levels` call; of one level for :func:`compare_blocks`). Each delta tests "no
change" with a two-sided p-value from its z-distance from zero. We chose Holm over a declared
primary set because `bench compare` has no natural primary metric (a quantization change is about
throughput, a speculative-decoding change about ITL), and because in an A/B most deltas of the
changed metric are true changes, which Holm's step-down rewards; with all nulls true it is as
strict as Bonferroni and keeps the chance of *any* false better/worse at 5 % (the margin only
removes labels). The interval each delta shows is at the confidence Holm tested it at (deltas after
the step where Holm stopped show the level of that step), so the verdict can always be read off
the interval and the estimate. Equivalence needs no correction (calling noise "equivalent" is not
the error the gate guards against), but it is read off the same interval, which only makes it more
cautious.

**Goodput** (only when the caller passes an SLO, :mod:`optigate.bench.goodput`): the share of requests that met
it, higher is better, one more delta per level in the same Holm family, its SE from the two-level resampling of
each side's per-request met flags (floored by the assumed drift, as every delta), inconclusive when a side recorded
no per-request outcomes. Without an SLO the deltas are exactly those of before.

Calibration (``benchmarks/verdict_calibration.py``) measures the A/A false-alarm rate and the
power on a true 10 % change at the gate's default sample sizes.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from statistics import NormalDist
from typing import Any

import numpy as np

from optigate import stats
from optigate.bench.core.metrics import RunSamples
from optigate.bench.goodput import Slo, goodput_difference
from optigate.bench.throughput import (
    MIN_THROUGHPUT_BUCKETS,
    THROUGHPUT,
    assumed_drift_se,
    throughput_difference,
)
from optigate.jsonsafe import json_safe
from optigate.judge import Direction, Outcome, compare_change

METRICS = ("ttft_ms", "itl_ms", "tpot_ms", "e2e_ms")
#: Goodput's metric name: the share of requests that met the SLO (compared only when the caller passes one).
GOODPUT = "goodput_share"
QUANTILES = (50, 90, 99)
#: Family-wise error rate of better/worse claims across everything one call compares.
FAMILY_ALPHA = 0.05
#: Confidence of an interval when nothing else is compared (one delta).
CONFIDENCE = stats.CONFIDENCE
#: Default practical margin, percent of the baseline.
DEFAULT_MARGIN_PCT = 3.0
#: Successful requests a side needs before a latency metric is judged at all.
MIN_REQUESTS = 10
#: Units (requests) a side needs beyond a percentile before it is judged: p99 needs 500 requests,
#: p90 50. The bootstrap of an extreme order statistic keeps redrawing the same few top values and
#: understates its spread; real A/A runs on a busy host labelled p99 better/worse below this.
MIN_TAIL_UNITS = 5

MarginLike = float | Mapping[str, float]


@dataclass(frozen=True)
class Delta:
    metric: str
    statistic: str  # p50 | p90 | p99 | mean
    concurrency: int
    baseline: float  # NaN when the side failed or has no figure ("failed" in the table, null in JSON)
    candidate: float
    delta: float
    low: float
    high: float
    lower_is_better: bool = True
    verdict: Outcome = Outcome.INCONCLUSIVE  # better | worse | equivalent | inconclusive
    margin_pct: float = DEFAULT_MARGIN_PCT
    confidence: float = CONFIDENCE  # of the interval shown (Holm's level for this delta)
    p_value: float = math.nan  # two-sided, of "no change" (before Holm)
    note: str = ""  # why a delta is inconclusive without an interval, or which side failed
    adapter: str | None = None  # one adapter's traffic on an inference-component endpoint (None: all traffic)

    @property
    def relative(self) -> float:
        return self.delta / self.baseline if self.baseline and math.isfinite(self.baseline) else math.nan

    def to_dict(self) -> dict[str, Any]:
        """JSON's own types (optigate.jsonsafe); the verdict as its word."""
        fields = json_safe({**asdict(self), "relative": self.relative})
        if self.adapter is None:  # all traffic: the fields every delta has always had
            del fields["adapter"]
        return {**fields, "verdict": str(self.verdict)}


@dataclass
class _Raw:
    """One delta before the multiplicity control: estimate, bootstrap SE and margin."""

    metric: str
    statistic: str
    concurrency: int
    baseline: float
    candidate: float
    se: float  # NaN: not judged (see note)
    lower_is_better: bool
    margin_pct: float
    note: str = ""
    forced: Outcome | None = None  # a verdict without statistics (a failed side)

    @property
    def delta(self) -> float:
        return self.candidate - self.baseline

    @property
    def distance(self) -> float:
        """How many SEs the estimate lies from "no change" (Holm orders and tests the deltas by it)."""
        if self.se > 0:
            return abs(self.delta) / self.se
        return math.inf if self.delta else 0.0

    @property
    def judged(self) -> bool:
        return self.forced is None and math.isfinite(self.se) and self.baseline != 0


def margin_for(margin_pct: MarginLike, metric: str) -> float:
    """The margin of one metric: a number for all, or a mapping by metric name (``default`` key or 3 %)."""
    if isinstance(margin_pct, Mapping):
        return float(margin_pct.get(metric, margin_pct.get("default", DEFAULT_MARGIN_PCT)))
    return float(margin_pct)


def _successes(blocks: Sequence[RunSamples]) -> int:
    return sum(len(block.ttft_ms) for block in blocks)


def _side_failed(blocks: Sequence[RunSamples]) -> bool:
    return sum(block.requests for block in blocks) > 0 and _successes(blocks) == 0


def error_rate(blocks: Sequence[RunSamples]) -> float | None:
    """Failed over measured requests across a side's blocks (None when nothing was measured)."""
    sent = sum(block.requests for block in blocks)
    return sum(sum(block.errors.values()) for block in blocks) / sent if sent else None


def _latency(
    metric: str, base: Sequence[RunSamples], cand: Sequence[RunSamples], level: int, margin: float, rng: Any
) -> list[_Raw]:
    def raw(statistic: str, b: float, c: float, se: float, note: str = "", forced: Outcome | None = None) -> _Raw:
        return _Raw(metric, statistic, level, b, c, se, True, margin, note, forced)

    labels = [f"p{q}" for q in QUANTILES]
    base_failed, cand_failed = _side_failed(base), _side_failed(cand)
    if base_failed or cand_failed:
        note = {(True, True): "both sides failed", (True, False): "baseline failed"}.get(
            (base_failed, cand_failed), "candidate failed"
        )
        forced = Outcome.WORSE if cand_failed and not base_failed else Outcome.INCONCLUSIVE
        return [raw(s, math.nan, math.nan, math.nan, note, forced) for s in labels]
    points: list[np.ndarray] = []
    replicates: list[np.ndarray | None] = []
    units: list[int] = []
    for blocks in (base, cand):
        values = [np.asarray(getattr(block, metric), dtype=float) for block in blocks]
        pooled = np.concatenate(values)
        if not len(pooled) or _successes(blocks) < MIN_REQUESTS:
            points.append(np.percentile(pooled, QUANTILES) if len(pooled) else np.full(len(QUANTILES), math.nan))
            replicates.append(None)
            continue
        counts = None
        if metric == "itl_ms":
            counts = [block.itl_counts for block in blocks]
            if any(sum(c) != len(v) for c, v in zip(counts, values, strict=True)):
                counts = None  # no request structure recorded: one value per unit
        units.append(len(pooled) if counts is None else sum(1 for c in counts for n in c if n > 0))
        point, reps = stats.two_level_percentile_replicates(
            values, QUANTILES, counts=counts, replicates=stats.SE_REPLICATES, rng=rng
        )
        points.append(point)
        replicates.append(reps)
    base_point, cand_point = points
    base_reps, cand_reps = replicates
    if base_reps is None or cand_reps is None:
        note = f"fewer than {MIN_REQUESTS} successful requests or no {metric} samples on a side"
        return [
            raw(label, float(base_point[i]), float(cand_point[i]), math.nan, note) for i, label in enumerate(labels)
        ]
    spread = np.nanstd(cand_reps - base_reps, axis=0, ddof=1)
    out = []
    for i, (q, label) in enumerate(zip(QUANTILES, labels, strict=True)):
        needed = math.ceil(MIN_TAIL_UNITS / (min(q, 100 - q) / 100))
        if min(units) < needed:
            note = f"{label} needs {needed} requests a side ({MIN_TAIL_UNITS} beyond it), {min(units)} measured"
            out.append(raw(label, float(base_point[i]), float(cand_point[i]), math.nan, note))
        else:
            out.append(raw(label, float(base_point[i]), float(cand_point[i]), float(spread[i])))
    return out


def _throughput(base: Sequence[RunSamples], cand: Sequence[RunSamples], level: int, margin: float, rng: Any) -> _Raw:
    def raw(b: float, c: float, se: float, note: str = "", forced: Outcome | None = None) -> _Raw:
        return _Raw(THROUGHPUT, "mean", level, b, c, se, False, margin, note, forced)

    base_failed, cand_failed = _side_failed(base), _side_failed(cand)
    if cand_failed and not base_failed:
        return raw(math.nan, math.nan, math.nan, "candidate failed", Outcome.WORSE)
    if base_failed:
        return raw(
            math.nan, math.nan, math.nan, "baseline failed" + (" (both)" if cand_failed else ""), Outcome.INCONCLUSIVE
        )
    difference = throughput_difference(base, cand, rng=rng)
    if difference.short:
        note = (
            f"too few one-second buckets for an interval ({difference.short}; {MIN_THROUGHPUT_BUCKETS} a side "
            "needed, one in every block)"
        )
        return raw(difference.baseline, difference.candidate, math.nan, note)
    return raw(difference.baseline, difference.candidate, difference.se)


def _goodput(
    base: Sequence[RunSamples], cand: Sequence[RunSamples], level: int, margin: float, slo: Slo, rng: Any
) -> _Raw:
    """The goodput share (higher is better), its SE from the two-level resampling of each side's met flags; no SE
    (inconclusive, never a pass) when a side recorded no per-request outcomes."""
    difference = goodput_difference(base, cand, slo, rng=rng)
    se = math.nan if difference.missing else difference.se
    return _Raw(
        GOODPUT, "share", level, difference.baseline, difference.candidate, se, False, margin, difference.missing
    )


def _raw_level(
    baseline: Sequence[RunSamples],
    candidate: Sequence[RunSamples],
    margin_pct: MarginLike,
    rng: Any,
    slo: Slo | None = None,
) -> list[_Raw]:
    if not baseline or not candidate:
        raise ValueError("each side needs at least one block (run)")
    levels = {block.concurrency for block in [*baseline, *candidate]}
    if len(levels) != 1:
        raise ValueError(f"blocks of one level must share a concurrency, got {sorted(levels)}")
    [level] = levels
    raws: list[_Raw] = []
    for metric in METRICS:
        raws += _latency(metric, baseline, candidate, level, margin_for(margin_pct, metric), rng)
    raws.append(_throughput(baseline, candidate, level, margin_for(margin_pct, THROUGHPUT), rng))
    if slo is not None:
        raws.append(_goodput(baseline, candidate, level, margin_for(margin_pct, GOODPUT), slo, rng))
    # A few blocks cannot show drift they happen not to have had: assume at least the usual amount.
    for raw in raws:
        if math.isfinite(raw.se):
            raw.se = max(raw.se, assumed_drift_se(raw.baseline, len(baseline), len(candidate)))
    return raws


def holm_verdicts(raws: Sequence[_Raw], alpha: float = FAMILY_ALPHA) -> list[Delta]:
    """Holm's step-down over the judged deltas, then each verdict read off its interval."""
    judged = sorted((i for i, r in enumerate(raws) if r.judged), key=lambda i: -raws[i].distance)
    m = len(judged)
    level: dict[int, float] = {}
    stopped: float | None = None
    for step, index in enumerate(judged):
        tail = alpha / (m - step)  # two-sided alpha of this Holm step
        z = NormalDist().inv_cdf(1 - tail / 2) if stopped is None else stopped
        if stopped is None and not raws[index].distance > z:
            stopped = z
        level[index] = z
    deltas = []
    for index, raw in enumerate(raws):
        if index in level:
            deltas.append(_delta(raw, level[index]))
        else:
            verdict = raw.forced or Outcome.INCONCLUSIVE
            deltas.append(
                Delta(
                    raw.metric,
                    raw.statistic,
                    raw.concurrency,
                    raw.baseline,
                    raw.candidate,
                    raw.delta,
                    math.nan,
                    math.nan,
                    raw.lower_is_better,
                    verdict,
                    raw.margin_pct,
                    math.nan,
                    math.nan,
                    raw.note or ("baseline is zero: no relative margin" if raw.baseline == 0 else ""),
                )
            )
    return deltas


def _delta(raw: _Raw, z: float) -> Delta:
    half = z * raw.se
    low, high = raw.delta - half, raw.delta + half
    margin = abs(raw.baseline) * raw.margin_pct / 100
    direction = Direction.AT_MOST if raw.lower_is_better else Direction.AT_LEAST
    verdict = compare_change(stats.Interval(raw.delta, low, high), margin, direction)
    distance = raw.distance
    p_value = 2 * (1 - NormalDist().cdf(distance)) if math.isfinite(distance) else 0.0
    return Delta(
        raw.metric,
        raw.statistic,
        raw.concurrency,
        raw.baseline,
        raw.candidate,
        raw.delta,
        low,
        high,
        raw.lower_is_better,
        verdict,
        raw.margin_pct,
        1 - 2 * (1 - NormalDist().cdf(z)),
        min(1.0, p_value),
        raw.note,
    )


def compare_blocks(
    baseline: Sequence[RunSamples],
    candidate: Sequence[RunSamples],
    *,
    margin_pct: MarginLike = DEFAULT_MARGIN_PCT,
    seed: int = 0,
    slo: Slo | None = None,
) -> list[Delta]:
    """Every metric at one concurrency level, each side measured in one or more blocks (runs); with ``slo``,
    the goodput share too (:data:`GOODPUT`).

    Holm's control covers the deltas of this level only; use :func:`compare_levels` to compare
    several levels as one family. Raises ValueError when a side has no block or the blocks'
    concurrency differs.
    """
    rng = stats.generator(seed)
    return holm_verdicts(_raw_level(baseline, candidate, margin_pct, rng, slo))


def compare_levels(
    baseline: Mapping[int, Sequence[RunSamples]],
    candidate: Mapping[int, Sequence[RunSamples]],
    *,
    margin_pct: MarginLike = DEFAULT_MARGIN_PCT,
    seed: int = 0,
    slo: Slo | None = None,
) -> list[Delta]:
    """Every level both sides measured, as one family: the multiplicity control spans them all (with ``slo``,
    the goodput share of each level is one more delta of the family).

    A level only one side measured is left out (the gate's coverage check reports it).
    """
    rng = stats.generator(seed)
    raws: list[_Raw] = []
    for level in sorted(set(baseline) & set(candidate)):
        raws += _raw_level(baseline[level], candidate[level], margin_pct, rng, slo)
    return holm_verdicts(raws)


def compare_adapters(
    baseline: Mapping[int, Sequence[RunSamples]],
    candidate: Mapping[int, Sequence[RunSamples]],
    *,
    margin_pct: MarginLike = DEFAULT_MARGIN_PCT,
    seed: int = 0,
) -> list[Delta]:
    """Every metric per adapter, at every level both sides measured, for results whose runs are split by
    adapter (an inference-component endpoint); empty without labels. The per-adapter deltas of the call are
    one Holm family of their own (beside all traffic's, which :func:`compare_levels` judges), so the chance of
    any false better/worse among them stays at 5 % however many adapters there are. An adapter one side sent
    nothing is left out (nothing to compare)."""
    rng = stats.generator([seed, 1])
    names: list[str] = []
    raws: list[_Raw] = []
    for level in sorted(set(baseline) & set(candidate)):
        base_blocks, cand_blocks = baseline[level], candidate[level]
        for name in sorted({name for block in [*base_blocks, *cand_blocks] for name in block.by_adapter}):
            base = [block.by_adapter[name] for block in base_blocks if name in block.by_adapter]
            cand = [block.by_adapter[name] for block in cand_blocks if name in block.by_adapter]
            if base and cand:
                level_raws = _raw_level(base, cand, margin_pct, rng)
                raws += level_raws
                names += [name] * len(level_raws)
    verdicts = holm_verdicts(raws)
    return [replace(delta, adapter=name) for name, delta in zip(names, verdicts, strict=True)]


def compare_runs(baseline: RunSamples, candidate: RunSamples, seed: int = 0) -> list[Delta]:
    """One run per side at one level (one block each)."""
    return compare_blocks([baseline], [candidate], seed=seed)


def levels_of(results: Sequence[dict[str, Any]]) -> dict[int, list[RunSamples]]:
    """Blocks by concurrency level from result files (one block per file and level)."""
    levels: dict[int, list[RunSamples]] = {}
    for result in results:
        for run in result["runs"]:
            levels.setdefault(int(run["concurrency"]), []).append(RunSamples.from_result(run))
    return levels


def compare_results(
    baseline: dict[str, Any] | Sequence[dict[str, Any]],
    candidate: dict[str, Any] | Sequence[dict[str, Any]],
    *,
    margin_pct: MarginLike = DEFAULT_MARGIN_PCT,
    seed: int = 0,
    slo: Slo | None = None,
) -> list[Delta]:
    """Every concurrency level the result files of both sides measured (each file is one block)."""
    base = [baseline] if isinstance(baseline, dict) else list(baseline)
    cand = [candidate] if isinstance(candidate, dict) else list(candidate)
    return compare_levels(levels_of(base), levels_of(cand), margin_pct=margin_pct, seed=seed, slo=slo)


#: What a workload is, as `optigate bench --json` records it under "load".
WORKLOAD_KEYS = ("prompt_tokens", "max_new_tokens", "schema", "mode", "rate")


def workload(result: dict[str, Any]) -> dict[str, Any]:
    """The workload of a result file: its load keys and levels (a key it does not record is None)."""
    load = result.get("load") or {}
    requests = load.get("workload") if isinstance(load.get("workload"), dict) else {}
    # A workload's requests carry their own lengths (its digest tells two apart); files written before they were
    # recorded as null hold the synthetic defaults there, which were not sent.
    lengths = ("prompt_tokens", "max_new_tokens") if requests else ()
    return {
        **{key: None if key in lengths else load.get(key) for key in WORKLOAD_KEYS},
        "levels": sorted(int(run["concurrency"]) for run in result.get("runs", [])),
        # A captured or drawn workload: the same requests only when the digests agree (None: synthetic prompts).
        "requests": requests.get("digest", "unrecorded") if requests else None,
    }


def workload_difference(results: Sequence[tuple[str, dict[str, Any]]]) -> str | None:
    """What differs between the workloads of labelled result files, or None when they agree."""
    if not results:
        return None
    (first_label, first), *rest = results
    reference = workload(first)
    if not first.get("load"):
        return f"{first_label} records no workload"
    for label, result in rest:
        if not result.get("load"):
            return f"{label} records no workload"
        other = workload(result)
        differs = [
            "different requests (workload digests differ)"
            if key == "requests"
            else f"{key} {reference[key]} vs {other[key]}"
            for key in reference
            if reference[key] != other[key]
        ]
        if differs:
            return f"{label} differs from {first_label}: " + ", ".join(differs)
    return None
