# Over 400 lines: a level's verdict, the search reading it and the result they make are one rule set.
"""Capacity at the SLO: the highest closed-loop concurrency one instance carries with its p99 TTFT and p99 ITL
within the team's budgets (`optigate bench --find-capacity`), found in a bounded number of runs.

**A level's verdict** (:func:`judge_level`). Each SLO figure gets a 95 % two-level bootstrap interval (blocks,
then requests; ITL resamples whole requests, as `bench compare` does). A failed request counts as a TTFT beyond
every budget (a request that never answered did not meet the SLO). The upper end is never below the
distribution-free one-sided bound of the percentile (the order statistic that exceeds the true p99 with 95 %
confidence for independent samples), nor below the largest sample when a run is too short to have that bound:
the bootstrap of an extreme order statistic understates its spread on few samples.

- ``holds``: every figure's upper end is within its budget;
- ``fails``: some figure's lower end is over its budget;
- ``uncertain``: anything else (the interval straddles the budget): it counts as *not holding*.

So noise can only make the search conservative: a level is counted as carried only when the data show it is,
and the reported capacity is the highest level that held, never an interpolation above it.

**Client-bound** levels are reported and never raise the capacity. A level whose load the client did not offer
(the achieved concurrency fell short of the offered one, or the runner refused the run, e.g. a replay that lagged
its schedule) cannot hold (a failure there still fails: the full load would do no better). A level whose token
frames arrived coalesced beyond the warning share (the client read the stream late) had its latencies inflated, so
a hold stands (with a note), but a level that did not hold is client-bound: the client may have set the bound.

**Saturation**: a level reached by raising the load at least 1.5x whose output throughput rose by less than 5 %
is saturated (the server only queues the extra load). The search stops there: if the SLO still held, that level is
reported as the capacity with the search's reason ("saturated"); more concurrency would only add waiting.

**The search** (:func:`find_capacity`): bracket upward from ``start`` (x4, or the extrapolated crossing of the
budget once two levels held, within 1.25x-4x) until a level does not hold; then narrow the bracket ``[last
holding, first not holding)`` by interpolating where the upper ends cross the budgets (aimed just below after a
failure, just above after a success), falling back to the geometric midpoint when interpolation stalls or when a
level failed far beyond its budget (a cliff: e.g. requests queueing for batch slots). It stops when the bracket is
within ``tolerance`` (10 %), or after ``max_runs`` runs. A first level that straddles the budget is run once more
and judged on both runs (the first run has the fewest streams, so the fewest requests); a client-bound level is
run once more on its own while runs remain (a busy machine's hiccup should not end the search).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from optigate import stats
from optigate.bench.core.metrics import RunSamples, merge
from optigate.bench.goodput import SLO_KEYS, Slo, goodput
from optigate.bench.throughput import THROUGHPUT
from optigate.judge import Direction, Outcome, classify, overall
from optigate.plan.cost import cost_per_million_tokens

HOLDS, FAILS, UNCERTAIN, CLIENT_BOUND = "holds", "fails", "uncertain", "client-bound"
#: Confidence of each figure's interval (two-sided; the upper end is its 97.5th percentile).
CONFIDENCE = 0.95
#: Successful requests a level needs before it can hold at all.
MIN_REQUESTS = 10
#: A level whose achieved concurrency falls below this share of the offered one was shaped by the client.
MIN_ACHIEVED_SHARE = 0.75
#: Saturation: load raised at least this much ...
SATURATION_LOAD_STEP = 1.5
#: ... with output throughput up by less than this share.
SATURATION_GAIN = 0.05
#: A failing level whose lower end is this many times its budget is a cliff: interpolation would crawl toward it.
CLIFF_FACTOR = 3.0
#: Stop narrowing when the first level that did not hold is within this share above the last that held.
TOLERANCE = 0.10
#: Stands in for the TTFT of a failed request: beyond every budget, finite so that percentiles interpolate.
FAILED_TTFT_MS = 1e9
#: Which samples each SLO key is judged on, and whether they cluster by request.
_FIGURES = {"p99_ttft_ms": ("ttft_ms", False), "p99_itl_ms": ("itl_ms", True)}
_WORDS = {"p99_ttft_ms": "p99 TTFT", "p99_itl_ms": "p99 ITL"}


@dataclass(frozen=True)
class LevelRuns:
    """What a level's run returned: its blocks, and why the runner refused to let it judge (None: it did not)."""

    blocks: tuple[RunSamples, ...]
    refused: str | None = None


@dataclass(frozen=True)
class Bound:
    """One SLO figure at one level: its point estimate and interval against its budget (ms)."""

    key: str
    budget: float
    point: float
    low: float
    high: float

    def text(self) -> str:
        def ms(value: float) -> str:
            return "failed" if value >= FAILED_TTFT_MS else f"{value:.0f}"

        return f"{_WORDS[self.key]} {ms(self.point)} [{ms(self.low)}, {ms(self.high)}] ms ≤ {self.budget:g}"


@dataclass(frozen=True)
class Step:
    """One run of the search."""

    concurrency: int
    verdict: str  # holds | fails | uncertain | client-bound
    bounds: tuple[Bound, ...]
    requests: int
    successful: int
    output_tokens_per_s: float
    requests_per_s: float
    achieved_concurrency: float
    goodput_share: float | None
    saturated: bool = False
    note: str = ""

    @property
    def held(self) -> bool:
        return self.verdict == HOLDS

    def text(self) -> str:
        figures = "; ".join(bound.text() for bound in self.bounds) or "no figures"
        extra = f" ({self.note})" if self.note else ""
        return (
            f"c={self.concurrency}: {self.verdict}{extra}: {figures}; {self.output_tokens_per_s:.0f} tok/s, "
            f"achieved concurrency {self.achieved_concurrency:.1f}"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "concurrency": self.concurrency,
            "verdict": self.verdict,
            "figures": {
                b.key: {"budget": b.budget, "point": b.point, "low": b.low, "high": b.high} for b in self.bounds
            },
            "requests": self.requests,
            "successful_requests": self.successful,
            "output_tokens_per_s": self.output_tokens_per_s,
            "requests_per_s": self.requests_per_s,
            "achieved_concurrency": self.achieved_concurrency,
            "goodput_share": self.goodput_share,
            "saturated": self.saturated,
            "note": self.note,
        }


@dataclass(frozen=True)
class CapacityResult:
    """The search's answer: ``capacity`` is the highest level that held (None: none did), the truth lying in
    ``[capacity, upper)``, ``upper`` the lowest level above it that the server did not carry (None: none, e.g. it
    held at ``max_concurrency``). Client-bound levels never set ``upper``; ``client_bound`` says one lies between."""

    slo: Slo
    capacity: int | None
    upper: int | None
    steps: tuple[Step, ...]
    stopped: str  # why the search ended, in words
    max_runs: int
    client_bound: bool = False
    tolerance: float = TOLERANCE

    @property
    def runs(self) -> int:
        return len(self.steps)

    @property
    def resolved(self) -> bool:
        """Whether the answer stands: a capacity, and no client-bound level inside a bracket wider than the
        tolerance (then the client, not the server, may have set it)."""
        if self.capacity is None:
            return False
        if not self.client_bound:
            return True
        return self.upper is not None and (
            self.upper - self.capacity <= 1 or self.upper <= (1 + self.tolerance) * self.capacity
        )

    @property
    def at_capacity(self) -> Step | None:
        return next((s for s in self.steps if s.concurrency == self.capacity and s.held), None)

    def cost_per_million_output_tokens(self, price_per_hour_usd: float | None) -> float | None:
        """USD per million output tokens at the capacity (one instance at that load), None without a price."""
        step = self.at_capacity
        if price_per_hour_usd is None or step is None or step.output_tokens_per_s <= 0:
            return None
        return cost_per_million_tokens(price_per_hour_usd / 3600.0, 1.0, step.output_tokens_per_s)

    def to_dict(self, price_per_hour_usd: float | None = None) -> dict[str, Any]:
        step = self.at_capacity
        return {
            "slo": {key: getattr(self.slo, key) for key in SLO_KEYS},
            "capacity": self.capacity,
            "interval": [self.capacity, self.upper],
            "runs": self.runs,
            "max_runs": self.max_runs,
            "stopped": self.stopped,
            "client_bound": self.client_bound,
            "output_tokens_per_s_at_capacity": None if step is None else step.output_tokens_per_s,
            "requests_per_s_at_capacity": None if step is None else step.requests_per_s,
            "price_per_hour_usd": price_per_hour_usd,
            "usd_per_million_output_tokens": self.cost_per_million_output_tokens(price_per_hour_usd),
            "steps": [s.to_dict() for s in self.steps],
        }


# ----------------------------------------------------------------------------- one level


def order_statistic_bound(values: np.ndarray, q: float, confidence: float = CONFIDENCE) -> float:
    """The lowest order statistic that lies above the q-th percentile with ``confidence`` (one-sided, for
    independent samples); the largest sample when there are too few for one (then it is no bound at all)."""
    n = len(values)
    ordered = np.sort(values)
    # The k-th largest sample is above the percentile unless fewer than k samples are: with m ~ Binomial(n, 1 - q)
    # samples above it, take the largest k with P(m < k) <= 1 - confidence.
    p = 1 - q / 100
    below = 0.0
    k = 0
    while k < n:
        log_pmf = (
            math.lgamma(n + 1)
            - math.lgamma(k + 1)
            - math.lgamma(n - k + 1)
            + k * math.log(p)
            + (n - k) * math.log1p(-p)
        )
        below += math.exp(log_pmf)
        if below > 1 - confidence:
            break
        k += 1
    return float(ordered[n - max(k, 1)])


def _bound(key: str, budget: float, blocks: Sequence[RunSamples], rng: np.random.Generator) -> Bound:
    metric, by_request = _FIGURES[key]
    values = []
    counts = []
    for block in blocks:
        samples = list(getattr(block, metric))
        failed = block.requests - len(block.ttft_ms)
        if metric == "ttft_ms":
            samples += [FAILED_TTFT_MS] * failed
        values.append(np.asarray(samples, dtype=float))
        counts.append(list(block.itl_counts))
    use_counts = by_request and all(sum(c) == len(v) for c, v in zip(counts, values, strict=True))
    point, replicates = stats.two_level_percentile_replicates(
        values, [99], counts=counts if use_counts else None, replicates=stats.SE_REPLICATES, rng=rng
    )
    low, high = stats.percentile_interval(replicates[:, 0], CONFIDENCE)
    pooled = np.concatenate(values)
    high = max(high, order_statistic_bound(pooled, 99, 1 - (1 - CONFIDENCE) / 2))
    return Bound(key, budget, float(point[0]), min(low, float(point[0])), high)


def coalesced_reason(blocks: Sequence[RunSamples]) -> str | None:
    """Why the client may have inflated a level's latencies (token frames read coalesced), or None."""
    for block in blocks:
        share = block.coalesced_share()
        if block.warnings() and share is not None:
            return f"{share:.0%} of token frames arrived coalesced: the client fell behind the stream"
    return None


def short_load_reason(blocks: Sequence[RunSamples], concurrency: int) -> str | None:
    """Why the client did not offer a level's load (its achieved concurrency fell short), or None."""
    achieved = sum(block.to_result(include_samples=False)["achieved_concurrency"] for block in blocks) / len(blocks)
    if achieved < MIN_ACHIEVED_SHARE * concurrency:
        return f"achieved concurrency {achieved:.1f} of {concurrency} offered"
    return None


def level_runs(measured: RunSamples | Sequence[RunSamples] | LevelRuns) -> LevelRuns:
    """What a level's run returned, as blocks and the runner's refusal."""
    if isinstance(measured, LevelRuns):
        return LevelRuns(tuple(measured.blocks), measured.refused)
    if isinstance(measured, RunSamples):
        return LevelRuns((measured,))
    return LevelRuns(tuple(measured))


def judge_level(
    concurrency: int, measured: RunSamples | Sequence[RunSamples] | LevelRuns, slo: Slo, *, seed: stats.SeedLike = 0
) -> Step:
    """One level's verdict against the SLO (see the module docstring) with its figures."""
    blocks, refused = level_runs(measured).blocks, level_runs(measured).refused
    if not blocks:
        raise ValueError(f"c={concurrency}: the level's run returned no block")
    rng = stats.generator(seed)
    pooled = merge(list(blocks)) if len(blocks) > 1 else blocks[0]
    summary = pooled.to_result(include_samples=False)
    tokens = float(np.mean([b.to_result(include_samples=False)[THROUGHPUT] for b in blocks]))
    requests_per_s = float(np.mean([b.to_result(include_samples=False)["requests_per_s"] for b in blocks]))
    achieved = float(np.mean([b.to_result(include_samples=False)["achieved_concurrency"] for b in blocks]))
    share = goodput(pooled, slo).share
    successful = int(summary["successful_requests"])
    keys = [key for key in SLO_KEYS if getattr(slo, key) is not None]

    def step(verdict: str, bounds: tuple[Bound, ...], note: str = "") -> Step:
        return Step(
            concurrency, verdict, bounds, pooled.requests, successful, tokens, requests_per_s, achieved, share,
            note=note,
        )  # fmt: skip

    if successful < MIN_REQUESTS:
        if pooled.requests and not successful:
            return step(FAILS, (), "every request failed")
        return step(UNCERTAIN, (), f"{successful} successful requests, {MIN_REQUESTS} needed")
    bounds: list[Bound] = []
    for key in keys:
        metric = _FIGURES[key][0]
        if not any(getattr(block, metric) for block in blocks):
            return step(UNCERTAIN, tuple(bounds), f"no {metric} samples")
        bounds.append(_bound(key, float(getattr(slo, key)), blocks, rng))
    # The one judge (optigate.judge.classify), as the gate's p99 checks apply it to the same kind of interval.
    judged = overall(classify(stats.Interval(b.point, b.low, b.high), b.budget, Direction.AT_MOST) for b in bounds)
    verdict = {Outcome.FAIL: FAILS, Outcome.INCONCLUSIVE: UNCERTAIN, Outcome.PASS: HOLDS}[judged]
    # A client that offered less load than asked makes any hold unproven; one that read the stream late only
    # inflated the latencies, so a hold stands and anything else may be the client's doing.
    short = refused or short_load_reason(blocks, concurrency)
    if short and verdict != FAILS:
        return step(CLIENT_BOUND, tuple(bounds), short)
    late = coalesced_reason(blocks)
    if late and verdict != HOLDS:
        return step(CLIENT_BOUND, tuple(bounds), late)
    return step(verdict, tuple(bounds), late or "")


def saturated(lower: Step, upper: Step) -> bool:
    """Whether raising the load from `lower` to `upper` (at least 1.5x) bought less than 5 % more throughput."""
    return (
        upper.concurrency >= SATURATION_LOAD_STEP * lower.concurrency
        and lower.output_tokens_per_s > 0
        and upper.output_tokens_per_s < (1 + SATURATION_GAIN) * lower.output_tokens_per_s
    )


# ----------------------------------------------------------------------------- the search


def _crossing(a: Step, b: Step) -> float | None:
    """Where the upper ends' straight line through two levels reaches the first budget (None: it does not rise)."""
    crossings = []
    for bound_a, bound_b in zip(a.bounds, b.bounds, strict=False):
        rise = bound_b.high - bound_a.high
        if rise <= 0 or bound_b.key != bound_a.key:
            continue
        crossings.append(a.concurrency + (bound_a.budget - bound_a.high) * (b.concurrency - a.concurrency) / rise)
    return min(crossings) if crossings else None


def _cliff(step: Step) -> bool:
    return any(b.low > CLIFF_FACTOR * b.budget for b in step.bounds) or not step.bounds


def _next_up(low: int, held: list[Step], max_concurrency: int) -> int:
    target = 4.0 * low
    if len(held) >= 2:
        estimate = _crossing(held[-2], held[-1])
        if estimate is not None:
            target = min(max(1.05 * estimate, 1.25 * low), 4.0 * low)
    return min(max_concurrency, max(low + 1, math.ceil(target)))


def _next_between(low: Step, high: Step, last_held: bool | None, stalled: bool) -> int:
    lo, hi = low.concurrency, high.concurrency
    middle = math.sqrt(lo * hi)
    estimate = None if stalled or _cliff(high) else _crossing(low, high)
    if estimate is None:
        target = middle
    else:
        # Aim past the last move: just above after a success (to close the bracket), just below after a failure.
        target = estimate * (1.03 if last_held else 0.97)
        target = min(max(target, lo * (hi / lo) ** 0.1), lo * (hi / lo) ** 0.9)
    return min(hi - 1, max(lo + 1, round(target)))


@dataclass
class _Search:
    slo: Slo
    run_level: Callable[[int], Any]
    max_runs: int
    seed: int
    on_step: Callable[[Step], None] | None
    steps: list[Step] = field(default_factory=list)
    measured: dict[int, LevelRuns] = field(default_factory=dict)

    def probe(self, concurrency: int, fresh: bool = False) -> Step:
        """Run a level and judge it on everything measured there (a level run again is judged on both runs), or on
        this run alone when `fresh`."""
        new = level_runs(self.run_level(concurrency))
        before = None if fresh else self.measured.get(concurrency)
        if before is not None:
            new = LevelRuns(before.blocks + new.blocks, before.refused or new.refused)
        self.measured[concurrency] = new
        step = judge_level(concurrency, new, self.slo, seed=[self.seed, concurrency, len(new.blocks)])
        if before is not None:
            step = replace(step, note="; ".join(filter(None, [f"{len(new.blocks)} runs", step.note])))
        below = [s for s in self.steps if s.concurrency < concurrency]
        if below and saturated(max(below, key=lambda s: s.concurrency), step):
            step = replace(step, saturated=True)
        self.steps.append(step)
        if self.on_step is not None:
            self.on_step(step)
        return step

    def measure(self, concurrency: int) -> Step:
        """A new level; client-bound, it is run once more on its own while runs remain (a busy machine's hiccup
        should not end the search; the new run must hold by itself)."""
        step = self.probe(concurrency)
        if step.verdict == CLIENT_BOUND and self.left > 0:
            step = self.probe(concurrency, fresh=True)
        return step

    @property
    def left(self) -> int:
        return self.max_runs - len(self.steps)


def find_capacity(
    run_level: Callable[[int], RunSamples | Sequence[RunSamples] | LevelRuns],
    slo: Slo,
    *,
    start: int = 1,
    max_concurrency: int = 1024,
    max_runs: int = 8,
    tolerance: float = TOLERANCE,
    seed: int = 0,
    on_step: Callable[[Step], None] | None = None,
) -> CapacityResult:
    """The highest concurrency at which ``slo`` holds, with ``run_level(c)`` measuring one level (one run or
    several blocks); at most ``max_runs`` calls. See the module docstring for the rules."""
    if not 1 <= start <= max_concurrency:
        raise ValueError(f"start {start} must lie in 1..max_concurrency ({max_concurrency})")
    if max_runs < 1:
        raise ValueError(f"max_runs {max_runs}: at least one run")
    search = _Search(slo, run_level, max_runs, seed, on_step)

    def result(capacity: Step | None, stopped: str) -> CapacityResult:
        floor = 0 if capacity is None else capacity.concurrency
        above = sorted((s for s in search.steps if s.concurrency > floor and not s.held), key=lambda s: s.concurrency)
        server = next((s.concurrency for s in above if s.verdict != CLIENT_BOUND), None)
        client = any(s.verdict == CLIENT_BOUND and (server is None or s.concurrency < server) for s in above)
        return CapacityResult(
            slo, None if capacity is None else capacity.concurrency, server, tuple(search.steps), stopped, max_runs,
            client, tolerance,
        )  # fmt: skip

    first = search.probe(start)
    if first.verdict == UNCERTAIN and search.left > 1:
        # The first run is the shortest (fewest streams), so the likeliest to straddle: measure it once more.
        first = search.probe(start)
    if not first.held:
        return result(None, f"the first level c={start} did not hold ({first.verdict})")
    low, high = first, None
    held = [first]
    while high is None:
        if low.saturated:
            return result(low, f"saturated at c={low.concurrency}: more load only queues; the SLO still held")
        if low.concurrency >= max_concurrency:
            return result(low, f"held at the maximum concurrency searched ({max_concurrency})")
        if search.left <= 0:
            return result(low, f"run budget spent ({max_runs}) before a level failed")
        step = search.measure(_next_up(low.concurrency, held, max_concurrency))
        if step.held:
            low = step
            held.append(step)
        else:
            high = step
    last_held: bool | None = None
    moves: list[bool] = []
    while high.concurrency - low.concurrency > 1 and high.concurrency > (1 + tolerance) * low.concurrency:
        if search.left <= 0:
            return result(low, f"run budget spent ({max_runs}); bracket [{low.concurrency}, {high.concurrency})")
        stalled = len(moves) >= 2 and moves[-1] == moves[-2]
        step = search.measure(_next_between(low, high, last_held, stalled))
        last_held = step.held
        moves.append(step.held)
        if step.held:
            low = step
        else:
            high = step
    return result(low, f"bracket [{low.concurrency}, {high.concurrency}) within {tolerance:.0%}")


def goodput_cell(run: dict[str, Any], slo: Slo | None) -> str:
    """A result run's goodput share for the bench table ("97 %"), "-" without an SLO or per-request outcomes."""
    if slo is None or "samples" not in run:
        return "-"
    share = goodput(RunSamples.from_result(run), slo).share
    return "-" if share is None else f"{share:.0%}"
