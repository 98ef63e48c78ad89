"""`optigate advise --from-report`: what the last gate run says about the step it proved.

The report is the JSON verdict the gate's decision writes (optigate.gate.decision.verdict.GateVerdict.to_dict).
Whether the step paid off is the gate's own outcome (APPROVED, REJECTED, INCONCLUSIVE), never a new statistic;
the measured figures beside it (latency at each level, measured $ per 1M output tokens, the tokens-per-chunk
acceptance proxy, the planner-vs-measured ratio) say by how much, and what the advice reads next.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from pydantic import ValidationError

from optigate.config.models import Serving, TeamConfig, serving_with
from optigate.config.rules import check_team
from optigate.deployment import ResolvedTeam, resolve_team
from optigate.gate.decision import APPROVED, OUTCOMES, REJECTED
from optigate.plan.cost import CostBasis

#: The step a changed serving key belongs to (a change spanning several is the latest of them).
STEP_OF_KEY = {
    "max_model_len": 1,
    "max_batch_size": 1,
    "gpu_memory_utilization": 1,
    "quantization": 2,
    "kv_cache_dtype": 2,
    "speculative_decoding": 3,
    "container": 4,
    "compile": 4,
    "instance_type": 5,
    "instance_pools": 5,
    "tensor_parallel_degree": 5,
}
#: Outside 1/RATIO .. RATIO of the expected TPOT, the plan is off for this instance: calibrate it.
CALIBRATE_RATIO = 1.25


class ReportError(ValueError):
    """A file that is not a gate report of this team, and why (one line)."""


@dataclass(frozen=True)
class Reading:
    """What a gate report says about the step it proved."""

    source: str
    step: int | None
    change: dict[str, Any]
    outcome: str
    summary: str
    reasons: tuple[str, ...]
    levels: tuple[dict[str, Any], ...]
    tpot_expected_ratio: float | None
    notes: tuple[str, ...] = field(default_factory=tuple)
    cost_basis: CostBasis | None = None  # what the $/M figures price (the report's, or the team's once repriced)

    @property
    def paid_off(self) -> bool | None:
        """The gate's verdict: True approved, False rejected, None inconclusive (a person decides)."""
        return True if self.outcome == APPROVED else False if self.outcome == REJECTED else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "step": self.step,
            "change": self.change,
            "outcome": self.outcome,
            "paid_off": self.paid_off,
            "summary": self.summary,
            "reasons": list(self.reasons),
            "levels": list(self.levels),
            "tpot_expected_ratio": self.tpot_expected_ratio,
            "notes": list(self.notes),
            "cost_basis": self.cost_basis.to_json() if self.cost_basis else None,
        }


def step_of(change: Mapping[str, Any]) -> int | None:
    steps = [STEP_OF_KEY[key] for key in change if key in STEP_OF_KEY]
    return max(steps) if steps else None


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def read(report: Mapping[str, Any], team: str, source: str) -> Reading:
    """The report's verdict on its step, refused (ReportError) unless it is the gate's report of `team`."""
    missing = [key for key in ("team", "outcome", "change", "checks", "levels") if key not in report]
    if missing:
        raise ReportError(f"{source}: not a gate report (no {', '.join(missing)}); give the gate's verdict JSON")
    if report["team"] != team:
        raise ReportError(f"{source}: a gate report of team {report['team']!r}, not of {team!r}")
    outcome, change, levels = report["outcome"], report["change"], report["levels"]
    if outcome not in OUTCOMES or not isinstance(change, dict) or not isinstance(levels, list):
        raise ReportError(f"{source}: not a gate report (outcome {outcome!r} is none of {', '.join(OUTCOMES)})")
    figures = []
    costs = {c.get("concurrency"): c for c in report.get("cost_per_million_output_tokens") or [] if isinstance(c, dict)}
    for level in levels:
        if not isinstance(level, dict) or not isinstance(level.get("baseline"), dict):
            raise ReportError(f"{source}: not a gate report (a level without baseline and candidate figures)")
        base, cand = level["baseline"], level.get("candidate") or {}
        cost = costs.get(level.get("concurrency")) or {}
        figures.append(
            {
                "concurrency": level.get("concurrency"),
                "p50_tpot_ms": (_number(base.get("p50_tpot_ms")), _number(cand.get("p50_tpot_ms"))),
                "p99_itl_ms": (_number(base.get("p99_itl_ms")), _number(cand.get("p99_itl_ms"))),
                "p99_ttft_ms": (_number(base.get("p99_ttft_ms")), _number(cand.get("p99_ttft_ms"))),
                "throughput_gain_pct": _number(level.get("throughput_gain_pct")),
                "cost_per_million_output_tokens": (_number(cost.get("baseline")), _number(cost.get("candidate"))),
                "output_tokens_per_s": (
                    _number(cost.get("baseline_output_tokens_per_s", base.get("output_tokens_per_s"))),
                    _number(cost.get("candidate_output_tokens_per_s", cand.get("output_tokens_per_s"))),
                ),
                "tokens_per_chunk": (
                    _number(base.get("mean_tokens_per_chunk")),
                    _number(cand.get("mean_tokens_per_chunk")),
                ),
            }
        )
    comparison = report.get("prediction_vs_measurement") or {}
    decode = comparison.get("decode_tpot_ms_batch1") if isinstance(comparison, dict) else None
    ratio = _number((decode or {}).get("expected_ratio")) if isinstance(decode, dict) else None
    notes = []
    if ratio is not None and not 1 / CALIBRATE_RATIO <= ratio <= CALIBRATE_RATIO:
        notes.append(
            f"measured TPOT at concurrency 1 is {ratio:.2f}x the planner's expected figure: calibrate the plan with "
            f"`optigate plan <team file> --calibrate {source}` before trusting the predicted effects"
        )
    reasons = tuple(str(r) for r in report.get("reasons") or [])
    return Reading(
        source, step_of(change), dict(change), outcome, str(report.get("summary", outcome)), reasons,
        tuple(figures), ratio, tuple(notes), CostBasis.from_json(report.get("cost_basis")),
    )  # fmt: skip


def repriced(reading: Reading, basis: CostBasis) -> Reading:
    """The reading's measured tokens priced at `basis`, the team's gate's (one cost model: what `plan`, `summary`
    and the gate price a replica at, optigate.plan.cost). A report priced otherwise (written before reports carried
    their basis: whole instances, so an adapter team's one-GPU copy at its whole 4-GPU instance) is said in a
    note, with its own figures; a level without measured tokens keeps the report's."""
    levels, changed = [], []
    for level in reading.levels:
        written = level["cost_per_million_output_tokens"]
        rates = level.get("output_tokens_per_s") or (None, None)
        priced = tuple(basis.cost_per_million(rate) if rate else old for rate, old in zip(rates, written, strict=True))
        if any(_differs(old, new) for old, new in zip(written, priced, strict=True)):
            changed.append(f"c{level['concurrency']} ${_money(written[0])} -> ${_money(written[1])}")
        levels.append(
            {**level, "cost_per_million_output_tokens": priced, "report_cost_per_million_output_tokens": written}
        )
    notes = reading.notes
    if changed:
        was = reading.cost_basis.describe() if reading.cost_basis else "whole instances (a report without cost_basis)"
        notes += (
            f"$/M priced at {basis.describe()}, as `optigate plan` and `summary` price a replica; the report priced "
            f"them at {was}: {', '.join(changed)}",
        )
    return replace(reading, levels=tuple(levels), notes=notes, cost_basis=basis)


def _differs(old: float | None, new: float | None) -> bool:
    return old is not None and new is not None and abs(old - new) > 1e-9 * max(1.0, abs(old))


def _money(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def applied(resolved_team: ResolvedTeam, change: Mapping[str, Any]) -> ResolvedTeam | None:
    """The team as it is once an approved change is promoted: `serving` with the change, no candidate; None when
    the change is not a serving block the rules accept."""
    team: TeamConfig = resolved_team.team
    overrides = {key: value for key, value in change.items() if key in Serving.model_fields}
    try:
        serving = serving_with(team.serving, overrides)
    except ValidationError:
        return None
    # Promoted, the team has no candidate, so no gate runs: nor a cross-check beside it (rule OG404 refuses one).
    benchmark = team.gate.benchmark.model_copy(update={"cross_check": "none"})
    gate = team.gate.model_copy(update={"candidate": {}, "benchmark": benchmark})
    trial = team.model_copy(update={"serving": serving, "gate": gate})
    if check_team(trial):
        return None
    promoted = resolve_team(trial)
    return None if promoted.problems or promoted.baseline is None else promoted
