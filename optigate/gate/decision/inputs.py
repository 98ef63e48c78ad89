"""What the gate decides on: :class:`GateInputs`, its thresholds and its benchmark runs."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from optigate.bench.core.metrics import RunSamples
from optigate.config.models import CROSS_CHECK_KEYS, ROUNDS_KEYS, BenchmarkGate
from optigate.plan.cost import CostBasis

SEED = 0
#: Values of ``change.speculative_decoding`` that mean "off".
_SPECULATION_OFF = frozenset({"", "none", "off", "false", "no", "disabled"})
#: Keys of ``gate.benchmark`` that configure the benchmark, not the decision.
BENCHMARK_ONLY_KEYS = frozenset({"prompt_tokens", "max_new_tokens", "blocks"}) | CROSS_CHECK_KEYS | ROUNDS_KEYS


@dataclass(frozen=True, kw_only=True)
class GateInputs:
    """Everything the gate decides on (JSON-shaped, so a Step Functions state can carry it)."""

    team: str
    environment: str
    change: Mapping[str, Any] = field(default_factory=dict)  # quantization, speculative_decoding, container_version...
    thresholds: Mapping[str, Any] = field(default_factory=dict)  # the team's gate.benchmark (see gate_thresholds)
    baseline_benchmark: Mapping[str, Any]  # `optigate bench --json` / BenchmarkFleet merge: {"runs": [...]}
    candidate_benchmark: Mapping[str, Any]
    evaluation: Mapping[str, Any] | None = None  # optigate.evaluate verdict.json, None when not run
    price_per_hour_usd: float | None = None  # per instance
    instance_count: int = 1
    # What the measured tokens are priced at (optigate.plan.cost.CostBasis.to_json, the plan's): an adapter team's
    # gate measures one base copy, priced at its share of the instance. None (older state machines): every one of
    # `instance_count` instances at `price_per_hour_usd`.
    cost_basis: Mapping[str, Any] | None = None
    prediction: Mapping[str, Any] | None = None  # planner: decode_tpot_ms_batch1, cost_per_million_output_tokens, ...
    # Mirrored live traffic, when the candidate ran as a shadow variant: {"window_minutes",
    # "sampling_percentage", "production": {...}, "shadow": {...}}, each side {"variant",
    # "invocations", "errors_5xx", "p99_model_latency_ms"} from CloudWatch (None when no datapoint).
    shadow: Mapping[str, Any] | None = None
    # SageMaker's managed benchmark beside optigate's (gate.benchmark.cross_check: sagemaker): {"tolerance":
    # gate.benchmark.cross_check_tolerance, "jobs": [{"concurrency", "side", "job", "status", "reason"?,
    # "profile"?}]} (optigate.gate.cross_check.compare). Reported, never decided on.
    cross_check: Mapping[str, Any] | None = None
    # Today's peak of concurrent streams on the live endpoint, when known: capacity at the SLO is then also
    # said in instances ("N fewer instances at today's peak").
    peak_concurrency: float | None = None
    # The endpoints' own metrics for the benchmark's window (optigate.gate.server_metrics), carried into the
    # verdict and its report as given: None when not read.
    server_metrics: Mapping[str, Any] | None = None
    # A speculative candidate's proof as the plan resolved it (optigate.deployment.speculation_proof.SpeculationProof
    # .event): what its acceptance is read from and the break-even per level. None: a change that speculates cannot
    # be approved (no evidence named).
    speculation: Mapping[str, Any] | None = None
    # The team's own traffic the benchmark sent, when gate.benchmark.workload is set: its shape (counts, length
    # percentiles, sessions, schedule; never text: optigate.bench.core.workload.shape). Reported, never decided on.
    traffic: Mapping[str, Any] | None = None
    # The stager's check of each new adapter version's archive, by adapter ({"uri", "rank", "lora_alpha",
    # "base_model", "base_model_check": "same" | "unknown", "base_model_why", "architecture_checked"}): reported,
    # never decided on (a refused archive stopped the run before anything was created).
    adapter_check: Mapping[str, Any] | None = None
    seed: int = SEED

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> GateInputs:
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"gate inputs: unknown key(s) {', '.join(unknown)}")
        required = ("team", "environment", "baseline_benchmark", "candidate_benchmark")
        missing = sorted(f for f in required if data.get(f) is None)
        if missing:
            raise ValueError(f"gate inputs: missing {', '.join(missing)}")
        values = dict(data)
        for key in ("change", "thresholds"):
            if values.get(key) is None:
                values.pop(key, None)
        if values.get("instance_count") is None:
            values.pop("instance_count", None)
        return cls(**values)

    def __post_init__(self) -> None:
        if int(self.instance_count) < 1:
            raise ValueError(f"instance_count must be >= 1, got {self.instance_count}")
        if self.price_per_hour_usd is not None and not float(self.price_per_hour_usd) >= 0:
            raise ValueError(f"price_per_hour_usd must be >= 0, got {self.price_per_hour_usd}")
        if self.peak_concurrency is not None and not float(self.peak_concurrency) > 0:
            raise ValueError(f"peak_concurrency must be > 0, got {self.peak_concurrency}")

    @property
    def basis(self) -> CostBasis:
        """The cost basis the event carries, else `instance_count` whole instances at `price_per_hour_usd`."""
        price = None if self.price_per_hour_usd is None else float(self.price_per_hour_usd)
        given = CostBasis.from_json(self.cost_basis)
        return given or CostBasis.instances("the endpoint's instance type", price, 1, int(self.instance_count))

    def gate_thresholds(self) -> BenchmarkGate:
        """The thresholds as the config validates them: a misspelt budget must not switch a check off.

        Raises pydantic's ValidationError (a ValueError) on an unknown key or an invalid value.
        """
        return BenchmarkGate.model_validate(dict(self.thresholds))


def speculative_method(change: Mapping[str, Any]) -> str | None:
    """The speculative-decoding method the change turns on, or None."""
    value = change.get("speculative_decoding")
    if value is None or value is False:
        return None
    if value is True:
        return "enabled"
    if isinstance(value, str):
        return None if value.strip().lower() in _SPECULATION_OFF else value
    if isinstance(value, Mapping):
        method = value.get("method")
        if isinstance(method, str) and method.strip().lower() in _SPECULATION_OFF:
            return None
        return str(method) if method else "enabled"
    return "enabled"


def blocks_by_level(result: Mapping[str, Any], label: str) -> dict[int, list[RunSamples]]:
    """One benchmark's runs by concurrency level, each level's blocks in block order (a run without
    ``block`` is block 0); each run must carry its raw samples."""
    found: dict[int, dict[int, RunSamples]] = {}
    for run in result.get("runs") or []:
        level, block = int(run["concurrency"]), int(run.get("block") or 0)
        if block in found.get(level, {}):
            raise ValueError(
                f"{label} benchmark: two runs at concurrency {level}, block {block}; "
                "merge shards first (optigate.bench.core.metrics.merge)"
            )
        if "samples" not in run:
            raise ValueError(
                f"{label} benchmark: the run at concurrency {level} has no raw samples "
                "(they are needed for the intervals)"
            )
        found.setdefault(level, {})[block] = RunSamples.from_result(run)
    return {level: [blocks[b] for b in sorted(blocks)] for level, blocks in found.items()}
