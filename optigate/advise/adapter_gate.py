"""What advise says of the gate of a team serving LoRA adapters through inference components, beside each step's
gate.candidate: how the benchmark spreads over the components, which records judge each adapter, how a new adapter
version is proven, and what the gate refuses for such a team (OG401).

A block it offers (`gate.benchmark.adapter_mix`, `adapters[i].evaluation.dataset_s3_uri`) passes the rules of
`optigate validate` with the team's candidate (or the next step's) in place; one they refuse is not offered.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import yaml
from pydantic import ValidationError

from optigate.advise.admission import PREREQUISITE_RULES, with_candidate
from optigate.config.models import Adapter, TeamConfig
from optigate.config.reader import format_path
from optigate.config.rules import check_team
from optigate.config.rules.gate_rules import adapter_gate_limits
from optigate.deployment.gate_components import BASE, configured_mix, shares_text


@dataclass(frozen=True)
class AdapterGate:
    """The adapter team's gate in advise's words: notes, and the block to paste (None: nothing to add)."""

    notes: tuple[str, ...]
    block: dict[str, Any] | None = None

    @property
    def keys(self) -> tuple[str, ...]:
        """Where the block goes in the team file."""
        if self.block is None:
            return ()
        return tuple("gate.benchmark.adapter_mix" if key == "gate" else key for key in self.block)

    @property
    def block_yaml(self) -> str | None:
        if self.block is None:
            return None
        return yaml.safe_dump(self.block, sort_keys=False, default_flow_style=False)

    def to_dict(self) -> dict[str, Any]:
        return {"notes": list(self.notes), "block": self.block, "block_yaml": self.block_yaml}


def _mix(team: TeamConfig) -> tuple[str, dict[str, Any] | None]:
    labels = (BASE, *(adapter.name for adapter in team.adapters))
    shares = configured_mix(team)
    if shares is not None:
        said = shares_text(shares)
        return f"the gate spreads its benchmark over the components by gate.benchmark.adapter_mix: {said}", None
    note = (
        "no gate.benchmark.adapter_mix: the gate reads each live component's share of Invocations over the last 7 "
        "days from CloudWatch at run time, and refuses to run without that history (a new endpoint); to set the "
        "mix yourself, paste adapter_mix below with your traffic's weights (offered: equal)"
    )
    return note, {"adapter_mix": dict.fromkeys(labels, 1)}


def _datasets(team: TeamConfig) -> tuple[str | None, list[dict[str, Any]] | None]:
    shared = team.gate.evaluation.dataset_s3_uri
    own = [adapter.name for adapter in team.adapters if adapter.evaluation is None]
    if not own:
        return None, None
    if shared is None:
        return (
            f"adapters {', '.join(own)} have no evaluation dataset: give each its own records "
            "(adapters[i].evaluation.dataset_s3_uri) or the gate one (gate.evaluation.dataset_s3_uri)",
            None,
        )
    prefix = shared.rstrip("/")
    adapters = [
        adapter.model_dump(mode="json", exclude_none=True)
        if adapter.evaluation is not None
        else {
            **adapter.model_dump(mode="json", exclude_none=True),
            "evaluation": {"dataset_s3_uri": f"{prefix}/{adapter.name}/"},
        }
        for adapter in team.adapters
    ]
    note = (
        f"adapters {', '.join(own)} are judged on gate.evaluation.dataset_s3_uri ({shared}), records that may not "
        "test their tasks: give each adapter its own (offered: a prefix per adapter there; put its records in it)"
    )
    return note, adapters


def adapter_gate(team: TeamConfig, candidate: Mapping[str, Any] | None) -> AdapterGate | None:
    """For a team with adapters: what its gate needs and refuses, with `candidate` (the team's gate.candidate, or
    the next step's block) in place to validate the offered block; None for a team without adapters."""
    if not team.adapters:
        return None
    notes: list[str] = [
        "the gate stages inference components on two endpoints of the candidate's instance type: the live base "
        "with every adapter (the baseline twin), and the candidate's base with the same adapters"
    ]
    mix_note, benchmark = _mix(team)
    dataset_note, adapters = _datasets(team)
    notes += [mix_note, *([dataset_note] if dataset_note else [])]
    notes += [
        "a new adapter version is a candidate too: gate.candidate.adapters: {<adapter>: s3://.../<new>.tar.gz}, "
        "proven against the version served on the same twin base (quality on that adapter's dataset, then latency)",
        f"refused for adapter teams ({adapter_gate_limits.rule.id}, {adapter_gate_limits.rule.title}): "
        "speculative_decoding method eagle under gate.candidate, and gate.benchmark.cross_check: sagemaker",
    ]
    block: dict[str, Any] = {}
    if benchmark is not None:
        block["gate"] = {"benchmark": benchmark}
    if adapters is not None:
        block["adapters"] = adapters
    if not block:
        return AdapterGate(tuple(notes))
    refusals = _refusals(team, candidate, block)
    if refusals:
        notes.append("the block is not offered: the rules refuse it (" + "; ".join(refusals) + ")")
        return AdapterGate(tuple(notes))
    return AdapterGate(tuple(notes), block)


def _refusals(team: TeamConfig, candidate: Mapping[str, Any] | None, block: dict[str, Any]) -> list[str]:
    """What `optigate validate` says of the team with `block` pasted (and a candidate in place)."""
    update: dict[str, Any] = {}
    try:
        if "adapters" in block:
            update["adapters"] = [Adapter.model_validate(adapter) for adapter in block["adapters"]]
        if "gate" in block:
            benchmark = team.gate.benchmark.model_dump() | block["gate"]["benchmark"]
            gate = team.gate.model_copy(update={"benchmark": type(team.gate.benchmark).model_validate(benchmark)})
            update["gate"] = gate
    except ValidationError as error:
        return [str(detail["msg"]) for detail in error.errors(include_url=False)]
    trial = with_candidate(team.model_copy(update=update), candidate or team.gate.candidate)
    return [f"{format_path(p.path)}: {p.message}" for p in check_team(trial) if p.rule_id not in PREREQUISITE_RULES]
