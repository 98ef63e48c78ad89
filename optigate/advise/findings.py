"""What `optigate advise` says about a step: its status, why, the block to paste and the block's re-planned effect.

Every proposed block goes through the same rules as `optigate validate` (`optigate.advise.admission`); its
predicted effect is the re-plan of the merged serving block by the team's resolution, never a rule of thumb.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import yaml

from optigate.advise.adapter_gate import AdapterGate
from optigate.advise.admission import GATE, Admission, admit
from optigate.advise.promotion import Promotion, promotion
from optigate.config.models import TeamConfig
from optigate.deployment import ResolvedServing, ResolvedTeam
from optigate.plan.planner import PlanResult
from optigate.plan.speculation import expected_tpot_at

RECOMMENDED, PROVING, DONE, NOT_NOW, NEEDS_INPUT, TRIED = (
    "recommended",
    "proving",  # the team's gate.candidate already proves this step
    "done",
    "not now",
    "needs input",
    "tried",  # a gate report says this step did not pay off
)
STEPS = {
    1: "container settings",
    2: "quantize",
    3: "speculative decoding",
    4: "freeze the family, then compile",
    5: "a bigger or different instance",
}


#: How each figure is printed (the rest with one decimal); a change is real only where it shows at this precision.
FORMATS = {
    "kv_capacity_tokens": "{:,.0f}",
    "sequences_at_max_model_len": "{:,.0f}",
    "expected_cost_per_million_output_tokens": "${:.3f}",
    "cost_per_million_output_tokens": "${:.3f}",
}
#: Figures where less is better (time, dollars); the others (capacity) are better when larger.
LOWER_IS_BETTER = ("_ms", "cost_")


def shown(key: str, value: float | None) -> str:
    """`value` as advise prints it."""
    return "n/a" if value is None else FORMATS.get(key, "{:.1f}").format(value)


@dataclass(frozen=True)
class Figure:
    """One planner figure before and after a step (None where the planner has none)."""

    key: str
    label: str
    before: float | None
    after: float | None

    @property
    def changes(self) -> bool:
        """Whether the step changes the figure as printed (not below its precision)."""
        return (
            self.before is not None
            and self.after is not None
            and shown(self.key, self.before) != shown(self.key, self.after)
        )

    @property
    def improves(self) -> bool:
        if not self.changes or self.before is None or self.after is None:
            return False
        lower = any(part in self.key for part in LOWER_IS_BETTER)
        return self.after < self.before if lower else self.after > self.before

    @property
    def worsens(self) -> bool:
        return self.changes and not self.improves

    def to_dict(self) -> dict[str, Any]:
        return {"key": self.key, "label": self.label, "before": self.before, "after": self.after}


@dataclass(frozen=True)
class Finding:
    """What advise says about one step: its status, why (with the numbers), the block and its re-planned effect."""

    step: int
    status: str
    why: str
    candidate: dict[str, Any] | None = None
    target: str = GATE  # where the block goes
    effect: tuple[Figure, ...] = ()
    notes: tuple[str, ...] = ()
    # What the team must add before the gate takes any candidate (the same for every step: said once by Advice).
    prerequisites: tuple[str, ...] = ()
    # A step the team's gate.candidate already proves: how to promote it into the team file once approved.
    promotion: Promotion | None = None

    @property
    def title(self) -> str:
        return STEPS[self.step]

    @property
    def candidate_yaml(self) -> str | None:
        """The exact YAML to paste (under `gate:` as `candidate:`); none for a step the gate already proves."""
        if self.candidate is None or self.status == PROVING:
            return None
        return yaml.safe_dump({"gate": {"candidate": self.candidate}}, sort_keys=False, default_flow_style=False)

    def to_dict(self) -> dict[str, Any]:
        return {
            "step": self.step,
            "title": self.title,
            "status": self.status,
            "why": self.why,
            "target": self.target if self.candidate is not None else None,
            "candidate": self.candidate,
            "candidate_yaml": self.candidate_yaml,
            "effect": [f.to_dict() for f in self.effect],
            "notes": list(self.notes),
            "prerequisites": list(self.prerequisites),
            "promotion": self.promotion.to_dict() if self.promotion else None,
        }


@dataclass(frozen=True)
class Advice:
    team: str
    environment: str | None
    findings: tuple[Finding, ...]
    concurrency: int  # the real concurrency: the highest level the gate benchmarks
    # A team serving adapters: what its gate needs beside the candidate, and refuses (None without adapters).
    adapter_gate: AdapterGate | None = None

    @property
    def recommendations(self) -> tuple[Finding, ...]:
        """The steps to take, in the order of the sequence (the first is next)."""
        return tuple(f for f in self.findings if f.status in (RECOMMENDED, PROVING))

    @property
    def next(self) -> Finding | None:
        """The next block to paste: the first recommended step (one the gate already proves is not pasted again)."""
        return next((f for f in self.recommendations if f.status == RECOMMENDED), None)

    @property
    def proving(self) -> tuple[Finding, ...]:
        """The steps the team's gate.candidate already proves."""
        return tuple(f for f in self.findings if f.status == PROVING)

    @property
    def prerequisites(self) -> tuple[str, ...]:
        """What the gate needs before it takes any of the recommended blocks, each said once."""
        return tuple(dict.fromkeys(p for f in self.recommendations for p in f.prerequisites))

    def to_dict(self) -> dict[str, Any]:
        upcoming = self.next
        return {
            "team": self.team,
            "environment": self.environment,
            "concurrency": self.concurrency,
            "next_step": upcoming.step if upcoming else None,
            "proven_by_gate": [f.step for f in self.proving],
            "prerequisites": list(self.prerequisites),
            "recommendations": [f.to_dict() for f in self.recommendations],
            "findings": [f.to_dict() for f in self.findings],
            "adapter_gate": self.adapter_gate.to_dict() if self.adapter_gate else None,
        }


@dataclass(frozen=True)
class Context:
    """What every step reads: the team, its resolved baseline, and the workload the gate benchmarks."""

    resolved_team: ResolvedTeam
    baseline: ResolvedServing
    plan: PlanResult
    instance_count: int
    utilization_pct: float | None
    # The instances at minimum capacity, as `optigate summary` prices them (optigate.deployment.placement); None:
    # the instance count or autoscaling's minimum, whichever is more.
    min_instances: int | None = None

    @property
    def team(self) -> TeamConfig:
        return self.resolved_team.team

    @property
    def concurrency(self) -> int:
        return max(self.team.gate.benchmark.concurrency)

    @property
    def prompt_tokens(self) -> int:
        return self.team.gate.benchmark.prompt_tokens

    @property
    def output_tokens(self) -> int:
        return self.team.gate.benchmark.max_new_tokens

    @property
    def family(self) -> str:
        return self.baseline.image_family


# --------------------------------------------------------------------------- figures


def effect(before: PlanResult, after: PlanResult | None, concurrency: int) -> tuple[Figure, ...]:
    """The planner's figures of the deployed plan and of the re-planned block."""

    def pair(key: str, label: str, read) -> Figure:
        return Figure(key, label, read(before), read(after) if after is not None else None)

    return (
        pair("kv_capacity_tokens", "KV capacity (tokens)", lambda p: p.kv_capacity_tokens),
        pair(
            "sequences_at_max_model_len",
            "sequences of max_model_len the cache holds",
            lambda p: p.max_concurrent_sequences_at_max_model_len,
        ),
        pair("expected_tpot_ms_batch1", "TPOT at batch 1, expected (ms)", lambda p: p.expected_tpot_ms_batch1),
        pair("decode_tpot_ms_batch1", "TPOT at batch 1, bound (ms)", lambda p: p.decode_tpot_ms_batch1),
        pair(
            "expected_tpot_ms_at_concurrency",
            f"TPOT at concurrency {concurrency}, expected (ms)",
            lambda p: expected_tpot_at(p, concurrency),
        ),
        pair(
            "expected_cost_per_million_output_tokens",
            "$ per 1M output tokens, expected",
            lambda p: p.expected.cost_per_million_output_tokens if p.expected else None,
        ),
        pair(
            "cost_per_million_output_tokens",
            "$ per 1M output tokens, bound",
            lambda p: p.cost_per_million_output_tokens,
        ),
    )


def _unreal(figures: tuple[Figure, ...], cost_may_rise: bool) -> str | None:
    """Why a re-plan is no predicted gain (None when it is one): no figure improves as printed, or it costs more per
    output token (unless the step buys latency: `cost_may_rise`)."""
    cost = next((f for f in figures if f.key == "expected_cost_per_million_output_tokens"), None)
    if cost is not None and cost.worsens and not cost_may_rise:
        return f"the re-plan predicts {cost.label} {shown(cost.key, cost.before)} -> {shown(cost.key, cost.after)}"
    if not any(f.improves for f in figures):
        return "the re-plan predicts no figure better than now"
    return None


def proposal(
    ctx: Context,
    step: int,
    why: str,
    block: dict[str, Any],
    notes: tuple[str, ...] = (),
    figures: tuple[Figure, ...] = (),
    *,
    cost_may_rise: bool = False,
) -> Finding:
    """A step's block through the rules: recommended with its re-planned effect (and `figures`, what the step
    predicts beyond the planner's), or why it cannot be offered: the rules refuse it, or the re-plan predicts
    nothing better (`cost_may_rise`: a step that buys latency, such as a faster instance, may cost more per token)."""
    if ctx.team.gate.candidate and _same(ctx.team.gate.candidate, block):
        proving = ctx.resolved_team.candidate  # resolved once with the team: reused, not re-planned
        return Finding(
            step,
            PROVING,
            why + "; your gate proves this (gate.candidate holds it: nothing to paste)",
            dict(ctx.team.gate.candidate),
            GATE,
            effect(ctx.plan, proving.plan if proving else None, ctx.concurrency) + figures,
            notes,
            promotion=promotion(ctx.resolved_team, ctx.team.gate.candidate),
        )
    admission: Admission = admit(ctx.team, block)
    if not admission.admitted:
        refusal = "; ".join(admission.refusals)
        return Finding(step, NOT_NOW, f"{why}; but the rules refuse the change ({refusal})", notes=notes)
    resolved = admission.resolved
    replanned = resolved.plan if resolved else None
    figures = effect(ctx.plan, replanned, ctx.concurrency) + figures
    unreal = _unreal(figures, cost_may_rise)
    if unreal is not None:
        return Finding(step, NOT_NOW, f"{why}; but {unreal}: not offered", notes=notes)
    seconds = resolved.startup_quantization_seconds if resolved else None
    if resolved is not None and seconds is not None and ctx.baseline.startup_quantization_seconds is None:
        notes += (
            f"quantized at start-up (+{seconds} s per cold start): the endpoint downloads the "
            f"{resolved.downloaded_weights} checkpoint and quantizes it on every cold start and scale-out; "
            "a pre-quantized checkpoint (a SageMaker optimization job's output as model.source, with model.weights) "
            "avoids it",
        )
    return Finding(step, RECOMMENDED, why, admission.block, admission.target, figures, notes, admission.prerequisites)


def _same(candidate: Mapping[str, Any], block: Mapping[str, Any]) -> bool:
    """The team's candidate makes the change `block` makes (the same keys, the same values where both say)."""
    for key, value in block.items():
        have = candidate.get(key)
        if key == "speculative_decoding" and have:
            continue  # any speculation method proves step 3
        if key == "container" and isinstance(have, Mapping) and isinstance(value, Mapping):
            if have.get("family") != value.get("family"):
                return False
            continue
        if key not in candidate or have != value:
            return False
    return True
