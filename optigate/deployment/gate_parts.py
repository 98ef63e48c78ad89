"""The parts of a gate's plan (optigate.deployment.gate.GatePlan) that come in groups (no CDK here): each side's
container, the benchmark the gate runs, and the thresholds its decision is judged by."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from optigate.config.models import CROSS_CHECK_KEYS, ROUNDS_KEYS, BenchmarkGate
from optigate.deployment.gate_workload import CapturePlan, SyntheticPlan
from optigate.deployment.optimization import OPTIMIZATION_MAX_POLLS, OPTIMIZATION_POLL_SECONDS

#: Each worker sends `requests_per_slot` requests per stream at each level in a block, and at least this many...
MIN_REQUESTS_PER_LEVEL = 32
#: ... or this many times `requests_per_slot` when that is fewer: 32 at the default 4 (enough one-second buckets
#: for the throughput interval at c=1), 8 in rounds of one request a stream (the rounds pool their buckets).
MIN_REQUESTS_PER_STREAM_FACTOR = 8
#: Keys of `gate.benchmark` that say what is sent, not how it is judged: in the plan's workload, not its thresholds.
WORKLOAD_KEYS = ("workload", "synthetic")
#: Keys of `gate.benchmark` that are no threshold of the decision (the benchmark's shape, the cross-check, the mix).
NOT_THRESHOLDS = frozenset(
    {"prompt_tokens", "max_new_tokens", "blocks", "adapter_mix", *CROSS_CHECK_KEYS, *ROUNDS_KEYS, *WORKLOAD_KEYS}
)


@dataclass(frozen=True)
class Side:
    """One side of the gate's comparison as its endpoint runs it: the candidate, or the baseline's twin (the live
    model on the candidate's instance type).

    :param image: the container image.
    :param engine_mode: LMI's engine mode of the container (optigate.serving.engine_mode): the stream the benchmark
        speaks to it.
    :param ami_version: the host AMI (InferenceAmiVersion) the image needs on the instance type, None for SageMaker's
        default.
    :param startup_timeouts: (model download, container start-up health check) seconds.
    """

    image: str
    engine_mode: str
    ami_version: str | None = None
    startup_timeouts: tuple[int, int] = (1200, 1200)


@dataclass(frozen=True)
class BenchmarkPlan:
    """What the gate's benchmark runs, and how the gate waits on what it starts.

    :param levels: streams per fleet worker at each benchmarked level, run one level after the other.
    :param shards: the benchmark fleet's workers: each level runs on every worker.
    :param requests_per_slot: requests each worker sends per stream at each level in one block (a level's block at
        least MIN_REQUESTS_PER_LEVEL, or MIN_REQUESTS_PER_STREAM_FACTOR times this many when that is fewer).
    :param blocks: interleaved blocks per level of a fixed-size benchmark: the twin then the candidate, `blocks`
        times (A B A B ...), each block sending the level's requests; judged once, after the last.
    :param max_rounds: a benchmark in rounds (a round: at each level a block of the twin, then one of the candidate),
        judged after each round from `min_rounds` on, at most this many (None: `blocks` rounds, judged once).
    :param max_minutes: with max_rounds, also stop before a round that would end past this many minutes.
    :param poll_seconds: between two reads of an endpoint (or components) the gate waits on; `max_polls` reads.
    :param optimization_poll_seconds: between two reads of the optimization job; `optimization_max_polls` reads.
    :param workload: the team's captured traffic as the workload; `synthetic`: lengths drawn from distributions;
        neither: every request has prompt_tokens and max_new_tokens (optigate.deployment.gate_workload).
    """

    levels: tuple[int, ...] = (16,)
    shards: int = 1
    requests_per_slot: int = 4
    blocks: int = 1
    max_rounds: int | None = None
    min_rounds: int = 4
    max_minutes: float | None = None
    prompt_tokens: int = 1024
    max_new_tokens: int = 256
    poll_seconds: int = 60
    max_polls: int = 90
    optimization_poll_seconds: int = OPTIMIZATION_POLL_SECONDS
    optimization_max_polls: int = OPTIMIZATION_MAX_POLLS
    workload: CapturePlan | None = None
    synthetic: SyntheticPlan | None = None

    @property
    def requests_per_level(self) -> tuple[int, ...]:
        """One block's requests per worker at each of `levels`."""
        floor = min(MIN_REQUESTS_PER_LEVEL, MIN_REQUESTS_PER_STREAM_FACTOR * self.requests_per_slot)
        return tuple(max(floor, self.requests_per_slot * c) for c in self.levels)

    @property
    def measured_concurrency(self) -> tuple[int, ...]:
        """The total streams at each level: every worker runs the level's streams."""
        return tuple(self.shards * c for c in self.levels)

    @property
    def items(self) -> list[dict[str, int]]:
        """Each level one round runs, in order: streams and requests per worker (the round is the block)."""
        return [
            {"per_shard": c, "requests": requests}
            for c, requests in zip(self.levels, self.requests_per_level, strict=True)
        ]

    @property
    def rounds(self) -> tuple[int, int]:
        """(first look, budget) in rounds: a fixed-size benchmark looks once, after its `blocks`."""
        return (self.blocks, self.blocks) if self.max_rounds is None else (self.min_rounds, self.max_rounds)

    def looks(self) -> dict[str, Any]:
        """The budget as the round judge reads it (optigate.gate.decision.looks.Looks)."""
        first, budget = self.rounds
        return {"min_rounds": first, "max_rounds": budget, "max_minutes": self.max_minutes}

    @property
    def proof(self) -> list[Any]:
        """What of the benchmark makes a proof (GatePlan.fingerprint adds the instance count)."""
        return [list(self.levels), self.requests_per_slot, self.prompt_tokens, self.max_new_tokens]


@dataclass(frozen=True)
class Thresholds:
    """What the decision judges the benchmark by (gate.benchmark's thresholds), `concurrency` the total streams each
    level measures (shards x levels). `to_dict` is what the decision reads (BenchmarkGate's keys, in its order)."""

    concurrency: tuple[int, ...]
    p99_ttft_ms_budget: float | None
    p99_itl_ms_budget: float | None
    min_throughput_gain_pct: float
    max_error_rate: float
    min_tokens_per_chunk_gain_pct: float
    min_shadow_requests: int
    equivalence_margin_pct: float
    metric_margins_pct: Mapping[str, float] = field(default_factory=dict)
    max_goodput_loss_pct: float = 2.0

    @classmethod
    def of(cls, benchmark: BenchmarkGate, concurrency: list[int], **overrides: float) -> Thresholds:
        """`benchmark`'s thresholds at the measured `concurrency`, with `overrides` (e.g. an adapter-only change's
        non-inferiority margin)."""
        values = {**benchmark.model_dump(exclude=set(NOT_THRESHOLDS)), **overrides}
        values["concurrency"] = tuple(concurrency)
        return cls(**values)

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> Thresholds:
        """Thresholds as a decision's payload gives them (missing keys: BenchmarkGate's defaults)."""
        benchmark = BenchmarkGate.model_validate({k: v for k, v in values.items() if k != "concurrency"})
        return cls.of(benchmark, list(values.get("concurrency", ())))

    def to_dict(self) -> dict[str, Any]:
        """The thresholds as the decision reads them (and the fingerprint and `summary --gate` show them)."""
        return {
            "concurrency": list(self.concurrency),
            "p99_ttft_ms_budget": self.p99_ttft_ms_budget,
            "p99_itl_ms_budget": self.p99_itl_ms_budget,
            "min_throughput_gain_pct": self.min_throughput_gain_pct,
            "max_error_rate": self.max_error_rate,
            "min_tokens_per_chunk_gain_pct": self.min_tokens_per_chunk_gain_pct,
            "min_shadow_requests": self.min_shadow_requests,
            "equivalence_margin_pct": self.equivalence_margin_pct,
            "metric_margins_pct": dict(self.metric_margins_pct),
            "max_goodput_loss_pct": self.max_goodput_loss_pct,
        }
