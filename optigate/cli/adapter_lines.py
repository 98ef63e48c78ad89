"""What `summary` and `plan` print for a team serving LoRA adapters through inference components: the live
components, the rollout the team file asks of them, and the components and benchmark mix of the gate.

Every line is built whole (an S3 URI never shares a line with another), so it stays within 100 columns at the
indent it is printed with and carries no padding when the output is redirected.
"""

from __future__ import annotations

from optigate import naming
from optigate.config.models import TeamConfig
from optigate.deployment.component_rollout import ComponentRollout
from optigate.deployment.endpoint import EndpointScaling, LiveComponents
from optigate.deployment.gate_components import BASE, ComponentCompute, GateComponents, configured_mix, shares_text

#: Where the gate reads the mix when the team file sets none (optigate.deployment.gate, issue 26).
MIX_FROM_CLOUDWATCH = "read from CloudWatch at run time"


def compute_line(compute: ComponentCompute) -> str:
    """What one copy of the base component reserves on an instance."""
    gpus = f"{compute.accelerators} GPU{'s' if compute.accelerators != 1 else ''}"
    return f"{gpus}, {compute.cores} CPU cores, {compute.min_memory_mb:,} MB host memory per copy"


def live_component_lines(endpoint: str, components: LiveComponents, scaling: EndpointScaling | None) -> list[str]:
    """The live endpoint's components as its plan says (optigate.deployment.endpoint): the base with its reservation
    and copies (`scaling`: the base component's scalable target, None when fixed or suspended), each adapter with the
    archive it serves (the lock's approved version, else the team file's, in the environment's region)."""
    compute = components.compute
    if scaling is None:
        copies = f"{compute.copies} cop{'y' if compute.copies == 1 else 'ies'}"
    else:
        copies = f"{scaling.min_capacity}-{scaling.max_capacity} copies"
        copies += ", scale to zero" if scaling.scale_to_zero else ""
    lines = [
        f"{naming.inference_component_name(endpoint, BASE)}: the base model, {copies}",
        f"  {compute_line(compute)}",
    ]
    for adapter in components.adapters:
        name = naming.inference_component_name(endpoint, adapter.name)
        approved = ", the gate-approved version" if adapter.approved else ""
        lines.append(f"{name}: adapter {adapter.name} on the base{approved}")
        lines.append(f"  {adapter.s3_uri}")
    return lines


def plan_lines(team: TeamConfig, compute: ComponentCompute) -> list[str]:
    """`plan`'s view of an adapter team: the base's reservation, the adapters on it, the gate's benchmark mix."""
    labels = (BASE, *(adapter.name for adapter in team.adapters))
    return [
        f"inference components: {BASE}, {compute_line(compute)}",
        "  adapters on it: " + ", ".join(labels[1:]),
        *mix_lines(configured_mix(team)),
    ]


def rollout_lines(rollout: ComponentRollout | None) -> list[str]:
    """The team file's `rollout` as the endpoint's plan carries it for an adapter team: the live base component's
    rolling update (`rollout`: LiveComponents.rollout, optigate.deployment.endpoint)."""
    if rollout is None:
        return []
    canary = f"wait_minutes {rollout.wait_seconds // 60}"
    if rollout.strategy != "none":
        canary = f"traffic_percentage {rollout.batch_percent}, {canary}"
    said = f"strategy {rollout.strategy}; canary: {canary}; auto_rollback {str(rollout.auto_rollback).lower()}"
    return [
        "rollout (the live base component's rolling update; adapter components get none):",
        f"  team file: {said}",
    ]


def mix_lines(mix: tuple[tuple[str, float], ...] | None) -> list[str]:
    """The benchmark's spread over the components: the configured shares, or where the gate reads them."""
    if mix is None:
        return [
            f"benchmark mix: {MIX_FROM_CLOUDWATCH}",
            "  each live component's share of Invocations over 7 days; none and no adapter_mix: refused",
        ]
    return ["benchmark mix (gate.benchmark.adapter_mix): " + shares_text(mix)]


def gate_component_lines(components: GateComponents) -> list[str]:
    """The gate's components on the twin and on the candidate, each adapter's archives and dataset, the mix."""
    sides = "the baseline twin and the candidate"
    lines = [
        f"components on {sides}: {BASE} and {len(components.adapters)} adapters on each",
        f"  {BASE}: {compute_line(components.compute)}, one copy each side",
        f"    quality on: {components.base_dataset_uri}",
    ]
    for adapter in components.adapters:
        lines.append(f"  {adapter.name}: {adapter.artifact_uri}")
        if adapter.changed:
            lines.append(f"    candidate serves a new version: {adapter.candidate_artifact_uri}")
        lines.append(f"    quality on: {adapter.dataset_uri}")
    lines.extend(mix_lines(components.mix))
    return lines
