"""How the gate proves a speculative candidate (no CDK): its draft length, what its acceptance is read from (the
container's surfaces: optigate.serving.surfaces) and the acceptance it must reach at each measured level (the
planner's break-even there: optigate.plan.speculation). Resolved once per team and environment; the decision reads
it as data (`SpeculationProof.event`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from optigate.plan.speculation import DEFAULT_BREAK_EVEN_ACCEPTANCE, DEFAULT_BREAK_EVEN_SOURCE, speculation_ceiling
from optigate.plan.team_plan import architecture_for
from optigate.serving import surfaces


@dataclass(frozen=True)
class SpeculationProof:
    """A speculative candidate's proof: `draft_tokens` per step (vLLM's num_speculative_tokens), the `evidence` of
    its acceptance, and the break-even acceptance per measured concurrency (total streams)."""

    method: str
    draft_tokens: int
    evidence: surfaces.Evidence
    break_even: tuple[tuple[int, float], ...]
    break_even_source: str

    def event(self) -> dict[str, Any]:
        """As the decision's event carries it (JSON: levels as strings)."""
        return {
            "method": self.method,
            "draft_tokens": self.draft_tokens,
            "evidence": self.evidence.to_dict(),
            "break_even": {str(level): round(value, 4) for level, value in self.break_even},
            "break_even_source": self.break_even_source,
        }


def draft_tokens(speculation: Any) -> int | None:
    """num_speculative_tokens of a speculative_decoding block (a model or its dict), None when it names none."""
    value = speculation.get("num_speculative_tokens") if isinstance(speculation, dict) else None
    if value is None:
        value = getattr(speculation, "num_speculative_tokens", None)
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def resolve_speculation(
    resolved_team: Any,
    image: str,
    engine_mode: str,
    levels: Sequence[int],
    *,
    prompt_tokens: int,
    max_new_tokens: int,
) -> SpeculationProof | None:
    """The proof of the candidate's speculative decoding at `levels` (total concurrent streams), None when the
    change does not speculate. `image`: the candidate's image URI, whose container's surfaces say what the
    acceptance is read from."""
    change = resolved_team.change.get("speculative_decoding")
    candidate = resolved_team.candidate
    if not change or candidate is None:
        return None
    method = str(change.get("method", "enabled")) if isinstance(change, dict) else str(change)
    head = resolved_team.trained_head  # an EAGLE head the gate trains: its draft length, defaulted as configured
    k = draft_tokens(change) or draft_tokens(candidate.serving.speculative_decoding) or draft_tokens(head)
    if k is None:
        raise ValueError(f"team {resolved_team.team.team}: the speculative candidate names no num_speculative_tokens")
    evidence = surfaces.acceptance_evidence(surfaces.Container.from_image(image), engine_mode)
    team = resolved_team.team
    break_even: list[tuple[int, float]] = []
    for level in sorted(set(levels)):
        ceiling = (
            speculation_ceiling(
                candidate.plan,
                candidate.instance,
                architecture_for(team.model.architecture),
                k,
                concurrency=level,
                prompt_tokens=prompt_tokens,
                output_tokens=max_new_tokens,
                calibrations=team.calibrations,
            )
            if candidate.plan is not None
            else None
        )
        # The planner prices verifying k drafts, not drafting them: its break-even can only raise the rule's bar.
        verify = ceiling.break_even_acceptance if ceiling is not None else 0.0
        break_even.append((level, max(DEFAULT_BREAK_EVEN_ACCEPTANCE, verify)))
    source = (
        f"the higher of {DEFAULT_BREAK_EVEN_SOURCE}, which covers drafting's cost, and the planner's break-even for "
        f"verifying {k} drafts per sequence at each level's batch on {candidate.instance.instance_type} "
        "(optigate.plan.speculation)"
    )
    return SpeculationProof(method, k, evidence, tuple(break_even), source)
