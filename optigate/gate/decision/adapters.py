"""The gate's checks per adapter, for an endpoint whose traffic is spread over inference components (an adapter
team): each run's samples are split by adapter (``RunSamples.by_adapter``), and every latency check of a level
(``p99_ttft``, ``p99_itl``) is applied to each adapter's samples too, beside the check on all traffic; the quality
evaluation, which judges each adapter on its own records, is one ``quality`` check per adapter
(:func:`quality_checks`).

**One rule, per adapter.** An adapter's check is :func:`optigate.gate.decision.checks.latency_check`'s: the
candidate's pooled p99 and its two-level percentile-bootstrap interval (blocks, then requests) against the
same budget, read by the one judge (:func:`optigate.judge.classify`).

**Holm across adapters.** Any failing adapter rejects the candidate, so with m adapters the chance that
noise alone fails one grows with m. The family is the adapters of one check at one level; each adapter's
"over the budget" is tested by Holm's step-down on its bootstrap p-value (twice the share of replicates at
or under the budget: the equal-tailed interval's lower end clears the budget exactly when it is below
alpha), and the interval shown is at the confidence Holm tested it at (after the step where Holm stopped,
that step's): the outcome can always be read off the interval. A pass is read off the same, wider interval,
which only makes it harder (a pass needs every adapter's, so it needs no correction).

**Fail closed.** An adapter whose candidate requests all failed fails; one with fewer than
:data:`MIN_ADAPTER_REQUESTS` successful requests is INCONCLUSIVE (too few to tell), never a pass, and is
left out of the Holm family (it is not tested).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from optigate import stats
from optigate.bench.compare import MIN_REQUESTS
from optigate.bench.core.metrics import RunSamples
from optigate.config.models import BenchmarkGate
from optigate.gate.decision.checks import check_seed, pooled_p99, quality_check
from optigate.gate.decision.wording import CheckName, ms
from optigate.judge import Check, Direction, Outcome, classify, overall

#: Successful candidate requests an adapter needs at a level before its latency is judged: `bench compare`'s
#: minimum before a latency metric is judged at all (fewer: INCONCLUSIVE).
MIN_ADAPTER_REQUESTS = MIN_REQUESTS
#: Family-wise error rate of "over the budget" across one check's adapters: the two-sided 95 % of one check.
FAMILY_ALPHA = 1 - stats.CONFIDENCE


def adapter_names(*sides: Sequence[RunSamples]) -> list[str]:
    """Every adapter label in either side's blocks, sorted (empty: the runs carry no labels)."""
    return sorted({name for blocks in sides for block in blocks for name in block.by_adapter})


def adapter_blocks(blocks: Sequence[RunSamples], adapter: str) -> list[RunSamples]:
    """One adapter's runs in a side's blocks, in block order (a block that sent it nothing is left out)."""
    return [block.by_adapter[adapter] for block in blocks if adapter in block.by_adapter]


def adapter_latency_checks(
    level: int,
    base_blocks: Sequence[RunSamples],
    cand_blocks: Sequence[RunSamples],
    thresholds: BenchmarkGate,
    seed: int,
    confidence: float = stats.CONFIDENCE,
) -> list[Check]:
    """Each latency check with a budget, per adapter the runs name, Holm across the adapters (see the module) at
    the family-wise `confidence`."""
    adapters = adapter_names(base_blocks, cand_blocks)
    checks: list[Check] = []
    budgets = (
        (CheckName.P99_TTFT, "TTFT", thresholds.p99_ttft_ms_budget),
        (CheckName.P99_ITL, "ITL", thresholds.p99_itl_ms_budget),
    )
    for name, label, budget in budgets:
        if budget is not None and adapters:
            checks += _family(name, label, budget, level, adapters, cand_blocks, seed, 1 - confidence)
    return checks


def _family(
    name: CheckName,
    label: str,
    budget: float,
    level: int,
    adapters: list[str],
    cand_blocks: Sequence[RunSamples],
    seed: int,
    alpha: float = FAMILY_ALPHA,
) -> list[Check]:
    out: dict[str, Check] = {}
    judged: dict[str, tuple[float, np.ndarray, int, int]] = {}  # adapter: p99, replicates, samples, blocks
    for index, adapter in enumerate(adapters):
        blocks = adapter_blocks(cand_blocks, adapter)
        sent = sum(block.requests for block in blocks)
        succeeded = sum(len(block.completions) for block in blocks)
        if sent and not succeeded:
            detail = f"adapter {adapter}: none of the candidate's {sent} requests succeeded"
            out[adapter] = Check(name, Outcome.FAIL, None, budget, detail, concurrency=level, adapter=adapter)
            continue
        samples = [block.ttft_ms if name is CheckName.P99_TTFT else block.itl_ms for block in blocks]
        counts = None if name is CheckName.P99_TTFT else [block.itl_counts for block in blocks]
        count = sum(len(values) for values in samples)
        if succeeded < MIN_ADAPTER_REQUESTS or not count:
            detail = (
                f"adapter {adapter}: {succeeded} successful candidate requests ({count} {label} samples), "
                f"fewer than the {MIN_ADAPTER_REQUESTS} its p99 is judged on: too few to tell"
            )
            out[adapter] = Check(name, Outcome.INCONCLUSIVE, None, budget, detail, concurrency=level, adapter=adapter)
            continue
        rng = [*check_seed(seed, level, name), index + 1]  # each adapter its own stream, apart from all traffic's
        point, replicates = pooled_p99(samples, counts, rng, stats.replicates_for(1 - alpha))
        judged[adapter] = (point, replicates, count, len(blocks))
    for adapter, confidence, p_value in stats.holm_levels(
        {a: _p_over(r[1], budget) for a, r in judged.items()}, alpha=alpha
    ):
        point, replicates, count, block_count = judged[adapter]
        figures = point, replicates, count, block_count, confidence, p_value
        out[adapter] = _check(name, label, budget, level, adapter, *figures)
    return [out[adapter] for adapter in adapters]


def _p_over(replicates: np.ndarray, budget: float) -> float:
    """The bootstrap p-value of "over the budget": twice the share of replicates at or under it (at most 1)."""
    valid = replicates[~np.isnan(replicates)]
    return min(1.0, 2 * float(np.mean(valid <= budget))) if len(valid) else 1.0


def _check(
    name: CheckName,
    label: str,
    budget: float,
    level: int,
    adapter: str,
    p99: float,
    replicates: np.ndarray,
    samples: int,
    blocks: int,
    confidence: float,
    p_value: float,
) -> Check:
    low, high = stats.percentile_interval(replicates, confidence)
    low, high = min(low, p99), max(high, p99)  # an interval always contains its estimate
    outcome = classify(stats.Interval(p99, low, high), budget, Direction.AT_MOST)
    blocks_text = f", {blocks} blocks" if blocks > 1 else ""
    detail = (
        f"adapter {adapter}: candidate p99 {label} {ms(p99)} ({confidence:.1%} CI {ms(low)} to {ms(high)}, Holm "
        f"across adapters, p {p_value:.3g}; {samples} samples{blocks_text}) vs budget {ms(budget)}"
    )
    if outcome is Outcome.FAIL:
        detail += ": over the budget, the whole interval"
    elif outcome is Outcome.INCONCLUSIVE:
        detail += ": the interval straddles the budget (cannot tell)"
    return Check(name, outcome, p99, budget, detail, low, high, level, adapter=adapter)


def quality_checks(evaluation: Mapping[str, Any] | None) -> list[Check]:
    """The quality evaluation's checks: the run-wide one (checks.quality_check); for an adapter team's evaluation
    (verdict.json's `adapters`: each adapter's own verdict, optigate.evaluate.adapter_verdicts) one per adapter
    instead, naming it, plus the run-wide one wherever the adapters' do not come to the evaluation's own outcome
    (an adapter without a verdict, an entry that is none): never more lenient than the evaluation's status."""
    run_wide = quality_check(evaluation)
    adapters = evaluation.get("adapters") if isinstance(evaluation, Mapping) else None
    if not isinstance(adapters, Mapping) or not adapters:
        return [run_wide]
    own = [
        replace(quality_check(verdict if isinstance(verdict, Mapping) else {}), adapter=str(name))
        for name, verdict in adapters.items()
    ]
    return own if overall(check.outcome for check in own) is run_wide.outcome else [*own, run_wide]
