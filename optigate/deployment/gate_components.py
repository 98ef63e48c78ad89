"""An adapter team's inference components, resolved once: what one copy of the base reserves, and the components
the gate stages on its twin and candidate endpoints (no CDK here; optigate.constructs.lora_adapters wires the live
ones, optigate.constructs.gate.component_stages the gate's)."""

from __future__ import annotations

from dataclasses import dataclass

from optigate.config.limits import ADAPTER_VERSION_MARGIN_PCT
from optigate.config.models import CANDIDATE_ADAPTERS, Autoscaling, TeamConfig
from optigate.deployment.adapter_mix import BASE, resolved_mix
from optigate.deployment.serving import ResolvedServing
from optigate.deployment.source_keys import SourceKeys
from optigate.deployment.team import ResolvedTeam
from optigate.naming import MAX_RUN_COMPONENTS  # also what one ListInferenceComponents page returns (MaxResults)
from optigate.promote.lock import ServedPackage


@dataclass(frozen=True)
class ComponentCompute:
    """What one copy of the base model reserves on an instance.

    :param accelerators: GPUs per copy (the tensor parallel degree).
    :param cpu_cores: @default 2 per accelerator
    :param min_memory_mb: host memory per copy. @default 4096
    :param copies: copies at creation. @default 1
    """

    accelerators: int
    cpu_cores: int | None = None
    min_memory_mb: int = 4096
    copies: int = 1

    @property
    def cores(self) -> int:
        return self.cpu_cores or 2 * self.accelerators


def component_compute(resolved: ResolvedServing, scaling: Autoscaling | None) -> ComponentCompute:
    """The base component's reservation: its GPUs, host memory for the weights (at least 4 GiB), and the copies it
    starts with (one at least: a component at zero copies cannot be created InService)."""
    return ComponentCompute(
        accelerators=resolved.tensor_parallel_degree,
        min_memory_mb=max(4096, int(resolved.weights_gb * 1024)),
        copies=max(1, scaling.min_capacity) if scaling else 1,
    )


@dataclass(frozen=True)
class GateAdapter:
    """One adapter as the gate stages it: the twin's component serves `artifact_uri` (the live version), the
    candidate's `candidate_artifact_uri` (a new version, or the same archive); both are judged on `dataset_uri`.
    `key_arn`: the customer-managed KMS key of the adapter's archives, both versions (Adapter.kms_key_arn), or None."""

    name: str
    index: int  # its component's index on each side (0 is the base)
    artifact_uri: str
    candidate_artifact_uri: str
    dataset_uri: str
    key_arn: str | None = None

    @property
    def changed(self) -> bool:
        return self.artifact_uri != self.candidate_artifact_uri


@dataclass(frozen=True)
class GateComponents:
    """An adapter team's gate: the twin and the candidate each serve a base component (one copy reserving
    `compute`) and every adapter's component on it; the benchmark spreads requests by `mix`, (label, weight)
    pairs, `None` when the gate reads the live endpoint's shares from CloudWatch at run time."""

    compute: ComponentCompute  # the candidate's base copy
    adapters: tuple[GateAdapter, ...]
    mix: tuple[tuple[str, float], ...] | None
    base_dataset_uri: str
    # What a new adapter version must fit (optigate.deployment.adapter_archive.AdapterLimits.event()); None when
    # the candidate brings none.
    adapter_limits: dict[str, object] | None = None
    # The twin's base copy: what the live model needs (its tensor parallel degree and weights); None: `compute`.
    twin_compute: ComponentCompute | None = None

    def compute_of(self, side: str) -> ComponentCompute:
        """What one base copy reserves on `side` ("twin": the live model's needs, "cand": the candidate's)."""
        return self.twin_compute if side == "twin" and self.twin_compute is not None else self.compute

    def __post_init__(self) -> None:
        if self.run_components > MAX_RUN_COMPONENTS:
            raise ValueError(
                f"the gate stages the base and each adapter on two endpoints and counts them in one listing of "
                f"{MAX_RUN_COMPONENTS}: at most {MAX_RUN_COMPONENTS // 2 - 1} adapters, not {len(self.adapters)}"
            )

    @property
    def labels(self) -> tuple[str, ...]:
        """The base and each adapter, in component order."""
        return (BASE, *(adapter.name for adapter in self.adapters))

    #: The endpoints a run stages components on: the twin and the candidate, a base on each.
    SIDES = 2

    @property
    def run_components(self) -> int:
        """The components a run stages: the base and each adapter, on the twin and on the candidate."""
        return self.SIDES * len(self.labels)

    @property
    def approved_adapters(self) -> dict[str, str]:
        """The new adapter versions a promotion of this candidate deploys (the lock records them), by name."""
        return {a.name: a.candidate_artifact_uri for a in self.adapters if a.changed}

    @property
    def proof(self) -> dict[str, object]:
        """What of the components makes a proof (GatePlan.fingerprint)."""
        return {
            "compute": [self.compute.accelerators, self.compute.cores, self.compute.min_memory_mb],
            **(
                {
                    "twin_compute": [
                        self.twin_compute.accelerators,
                        self.twin_compute.cores,
                        self.twin_compute.min_memory_mb,
                    ]
                }
                if self.twin_compute is not None and self.twin_compute != self.compute
                else {}
            ),
            "adapters": [[a.name, a.artifact_uri, a.candidate_artifact_uri, a.dataset_uri] for a in self.adapters],
            "mix": [list(pair) for pair in self.mix] if self.mix is not None else None,
        }


def adapter_version_margin(resolved_team: ResolvedTeam) -> dict[str, float]:
    """A candidate that changes nothing but adapter versions is held to not being slower (a non-inferiority
    margin), not to a gain, unless the team set min_throughput_gain_pct itself."""
    team = resolved_team.team
    serving_change = {k: v for k, v in team.gate.candidate.items() if k != CANDIDATE_ADAPTERS}
    benchmark = team.gate.benchmark
    if (
        serving_change
        or not resolved_team.candidate_adapters
        or "min_throughput_gain_pct" in benchmark.model_fields_set
    ):
        return {}
    return {"min_throughput_gain_pct": ADAPTER_VERSION_MARGIN_PCT}


def resolve_components(
    resolved_team: ResolvedTeam, region: str, dataset_uri: str, served: ServedPackage | None, keys: SourceKeys
) -> GateComponents | None:
    """An adapter team's components on the gate's endpoints: the base reserves what the candidate's copy needs
    (the twin's copy the same, so both sides get the same share of the instance), each adapter on it. The twin
    serves the adapter versions the live endpoint serves (an approved package's, else the team file's); each
    adapter's archives are read with its key in `keys`."""
    team, candidate = resolved_team.team, resolved_team.candidate
    if not team.adapters or candidate is None:
        return None
    live_versions = served.adapters if served is not None else {}
    new_versions = resolved_team.candidate_adapters

    def in_region(uri: str) -> str:
        return uri.replace("{region}", region)

    adapters = []
    for index, adapter in enumerate(team.adapters, start=1):
        live = in_region(live_versions.get(adapter.name, adapter.s3_uri))
        adapters.append(
            GateAdapter(
                name=adapter.name,
                index=index,
                artifact_uri=live,
                candidate_artifact_uri=in_region(new_versions[adapter.name]) if adapter.name in new_versions else live,
                dataset_uri=in_region(adapter.evaluation.dataset_s3_uri) if adapter.evaluation else dataset_uri,
                key_arn=keys.adapter(adapter.name),
            )
        )
    return GateComponents(
        compute=component_compute(candidate, None),
        twin_compute=component_compute(resolved_team.baseline, None) if resolved_team.baseline else None,
        adapters=tuple(adapters),
        mix=configured_mix(team),
        base_dataset_uri=dataset_uri,
        adapter_limits=resolved_team.adapter_limits.event() if new_versions else None,
    )


def configured_mix(team: TeamConfig) -> tuple[tuple[str, float], ...] | None:
    """`gate.benchmark.adapter_mix` as (label, share) pairs summing to 1 (optigate.deployment.adapter_mix); None when
    the team sets none, and the gate reads the live components' shares from CloudWatch at run time."""
    mix = team.gate.benchmark.adapter_mix
    if mix is None:
        return None
    return tuple(resolved_mix(mix, [adapter.name for adapter in team.adapters]).items())


def shares_text(shares: tuple[tuple[str, float], ...]) -> str:
    """A mix as people read it: `base 10%, triage 40%, ...`."""
    return ", ".join(f"{label} {share:.0%}" for label, share in shares)
