"""Speculative decoding's acceptance in the verdict: the `speculative_acceptance` check, from the evidence the gate's
plan names for the candidate's container (optigate.deployment.speculation_proof, optigate.serving.surfaces).

- **client** (every LMI container in async mode): a streamed chunk is one engine step, so the tokens a step yields
  after each request's first chunk is the acceptance length 1 + a x k (vLLM's "mean acceptance length", 1 + accepted
  / drafts: vllm/v1/spec_decode/metrics.py @016a8587). The baseline's twin, which does not speculate, measures what a
  step yields without drafts (1, or more where the stream merges steps for a lagging client), so the acceptance is
  a = (steps_c / steps_b - 1) / k. Its interval resamples blocks, then requests inside them, on both sides
  (optigate.stats.two_level_mean_replicates), at each measured level against that level's break-even.
- **server** (a container exporting vLLM's counters to detailed observability): accepted / drafted tokens over the
  benchmark's window (optigate.gate.server_metrics.acceptance_check).
- **none** (LMI's rolling batch writes a line per token; an unknown container): INCONCLUSIVE, with why.

Fail closed: no plan, no evidence, evidence resting on assumed surfaces alone, or too few decode steps is never a pass.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from optigate import stats
from optigate.bench.core.metrics import RunSamples
from optigate.gate.decision.wording import CheckName, ci
from optigate.gate.server_metrics import acceptance_check
from optigate.judge import Check, Direction, Outcome, classify
from optigate.plan.speculation import DEFAULT_BREAK_EVEN_ACCEPTANCE

NAME = CheckName.SPECULATIVE_ACCEPTANCE
#: Decode steps (chunks after a request's first) a side needs at a level for its acceptance length to mean anything.
MIN_STEPS = 20


def _undecided(detail: str, threshold: float = DEFAULT_BREAK_EVEN_ACCEPTANCE, level: int | None = None) -> Check:
    return Check(NAME, Outcome.INCONCLUSIVE, None, threshold, detail, concurrency=level)


def acceptance_checks(
    method: str | None,
    speculation: Mapping[str, Any] | None,
    levels: Mapping[int, tuple[Sequence[RunSamples], Sequence[RunSamples]]],
    server_metrics: Mapping[str, Any] | None,
    change: Mapping[str, Any],
    seed: int,
    confidence: float = stats.CONFIDENCE,
) -> list[Check]:
    """The speculative_acceptance checks of a change that speculates (`method`), none otherwise: one per measured
    level (`levels`: each level's baseline and candidate blocks) from the client, or one from the server."""
    if method is None:
        return []
    if not isinstance(speculation, Mapping) or not isinstance(speculation.get("evidence"), Mapping):
        return [_undecided(f"speculative decoding ({method}): the gate's plan names no evidence of its acceptance")]
    evidence = speculation["evidence"]
    break_even = _break_even(speculation.get("break_even"))
    source = evidence.get("source")
    if source == "server":
        check = acceptance_check(server_metrics, change, break_even=max(break_even.values(), default=None))
        return [check] if check is not None else []
    if source != "client":
        why = evidence.get("why_none") or "no surface of the candidate's container shows it"
        return [_undecided(f"speculative decoding ({method}): {why}")]
    try:
        k = int(speculation["draft_tokens"])
    except (KeyError, TypeError, ValueError):
        return [_undecided(f"speculative decoding ({method}): the gate's plan names no draft length")]
    checks = []
    for level, (base_blocks, cand_blocks) in sorted(levels.items()):
        threshold = break_even.get(level, DEFAULT_BREAK_EVEN_ACCEPTANCE)
        check = client_acceptance_check(level, base_blocks, cand_blocks, k, threshold, method, seed, confidence)
        assumed = evidence.get("assumed")
        if assumed and check.outcome is not Outcome.INCONCLUSIVE:
            detail = f"{check.detail}; not decided: it rests on assumed surfaces alone ({assumed})"
            check = Check(NAME, Outcome.INCONCLUSIVE, check.measured, threshold, detail, check.low, check.high, level)
        checks.append(check)
    return checks


def _break_even(value: Any) -> dict[int, float]:
    if not isinstance(value, Mapping):
        return {}
    found = {}
    for level, threshold in value.items():
        try:
            found[int(level)] = float(threshold)
        except (TypeError, ValueError):
            continue
    return found


def _side(blocks: Sequence[RunSamples]) -> tuple[list[float], list[list[float]], int] | None:
    """Each block's tokens per decode step, each request's, and the steps in all; None when a block's samples do
    not add up."""
    points, units, total = [], [], 0
    for block in blocks:
        steps = block.decode_steps()
        if steps is None:
            return None
        steps = [(tokens, count) for tokens, count in steps if count]
        if not steps:
            continue
        points.append(sum(t for t, _ in steps) / sum(c for _, c in steps))
        units.append([t / c for t, c in steps])
        total += sum(c for _, c in steps)
    return points, units, total


def client_acceptance_check(
    level: int,
    base_blocks: Sequence[RunSamples],
    cand_blocks: Sequence[RunSamples],
    k: int,
    break_even: float,
    method: str,
    seed: int,
    confidence: float = stats.CONFIDENCE,
) -> Check:
    """The candidate's acceptance at one level from what the client saw: (tokens per step on the candidate / on the
    baseline - 1) / k, its interval over both sides' blocks and requests, against the level's break-even."""
    base, cand = _side(base_blocks), _side(cand_blocks)
    if base is None or cand is None:
        return _undecided(
            "the samples' chunks and ITL counts do not add up: tokens per step unknown", break_even, level
        )
    too_few = [label for label, side in (("baseline", base), ("candidate", cand)) if side[2] < MIN_STEPS]
    if too_few:
        detail = f"fewer than {MIN_STEPS} decode steps measured on the {' and '.join(too_few)}"
        return _undecided(detail, break_even, level)
    (base_mean, base_reps), (cand_mean, cand_reps) = (
        stats.two_level_mean_replicates(
            side[0], side[1], replicates=stats.replicates_for(confidence), rng=[seed, level, 17, i]
        )
        for i, side in enumerate((base, cand))
    )
    acceptance = (cand_mean / base_mean - 1) / k
    replicates = (np.asarray(cand_reps) / np.asarray(base_reps) - 1) / k
    low, high = stats.percentile_interval(replicates, confidence)
    low, high = min(low, acceptance), max(high, acceptance)
    detail = (
        f"speculative decoding ({method}): the client saw {cand_mean:.2f} tokens per decode step against "
        f"{base_mean:.2f} on the baseline, {acceptance:.0%} of {k} drafts accepted "
        f"({ci(confidence)} {low:.0%} to {high:.0%}, a streamed chunk being one engine step)"
    )
    outcome = classify(stats.Interval(acceptance, low, high), break_even, Direction.AT_LEAST)
    if outcome is Outcome.INCONCLUSIVE:
        detail += ": the interval straddles the break-even (cannot tell)"
    return Check(
        NAME, outcome, acceptance, break_even, detail, low, high, level, baseline=base_mean, candidate=cand_mean
    )
