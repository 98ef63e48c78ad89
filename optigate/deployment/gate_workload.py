"""What the gate's benchmark sends, resolved from gate.benchmark.workload / gate.benchmark.synthetic (no CDK here).

A captured workload (`CapturePlan`) is read by the benchmark workers themselves, inside the account
(optigate.bench.core.shard_workload): the gate first checks it once before anything is paid for (the fleet's worker in
check mode), pins the time window and a digest of the requests, and every worker of both sides then rebuilds exactly
those requests or refuses. A synthetic workload with distributions (`SyntheticPlan`) carries its lengths as values the
workers draw from uniformly (optigate.bench.core.workload.synthetic).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import asdict, dataclass
from typing import Any

from optigate.bench.core.workload import lengths_from_percentiles
from optigate.config.models import BenchmarkGate, LengthPercentiles, TeamConfig, split_s3_uri
from optigate.config.rule_registry import Found, PathT, rule_check

#: The value count a {p50, p90} distribution becomes: its quantiles at (i + 0.5) / N, drawn uniformly by the workers.
QUANTILES = 100
SYNTHETIC: PathT = ("gate", "benchmark", "synthetic")


@dataclass(frozen=True)
class CapturePlan:
    """The team's captured traffic as the benchmark's workload.

    :param source: "data_capture" (the environment's endpoint capture: its S3 URI is a token the stack adds,
        GateResources.workload_uri) or an S3 URI, region resolved.
    :param kind: replay | sessions | distribution (optigate.bench.core.workload.from_capture).
    """

    source: str
    kind: str
    window_days: float
    max_requests: int
    speedup: float

    @property
    def from_capture(self) -> bool:
        return self.source == "data_capture"

    @property
    def data_location(self) -> tuple[str, str] | None:
        """(bucket, key pattern) the workers read from an S3 source (one .jsonl file, or everything under a
        prefix), None from data capture (the stack knows the capture's bucket)."""
        if self.from_capture:
            return None
        bucket, key = split_s3_uri(self.source)
        return bucket, key if key.endswith(".jsonl") else f"{key}*"

    @property
    def replayed(self) -> bool:
        """A replay runs on the recorded schedule: one run per block, not one per concurrency level."""
        return self.kind == "replay"

    def event(self, uri: str | None) -> dict[str, Any]:
        """What the workers read (`uri`: the capture's S3 URI when from data capture)."""
        source = uri if self.from_capture else self.source
        if source is None:
            raise ValueError("a workload from data capture needs the capture's S3 URI")
        return {
            "source": source,
            "kind": self.kind,
            "window_days": self.window_days,
            "max_requests": self.max_requests,
            "speedup": self.speedup,
        }

    @property
    def proof(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class SyntheticPlan:
    """Synthetic requests whose lengths are drawn (uniformly) from these values, and a share that starts with one
    common prefix (optigate.bench.core.workload.synthetic)."""

    prompt_tokens: tuple[int, ...]
    max_new_tokens: tuple[int, ...]
    shared_prefix_share: float = 0.0
    prefix_tokens: int = 0

    def event(self) -> dict[str, Any]:
        return {
            "prompt_tokens": list(self.prompt_tokens),
            "max_new_tokens": list(self.max_new_tokens),
            "shared_prefix_share": self.shared_prefix_share,
            "prefix_tokens": self.prefix_tokens,
        }

    @property
    def proof(self) -> dict[str, Any]:
        return self.event()


def length_values(lengths: int | list[int] | LengthPercentiles) -> tuple[int, ...]:
    """The values a length distribution draws from: one length, the list given, or for {p50, p90} the quantiles of
    the log-normal with that median and 90th percentile (optigate.bench.core.workload.lengths_from_percentiles)."""
    if isinstance(lengths, int):
        return (lengths,)
    if isinstance(lengths, list):
        return tuple(lengths)
    return lengths_from_percentiles(lengths.p50, lengths.p90, values=QUANTILES)


@rule_check("OG462", "a synthetic shared prefix has a length, shorter than every prompt drawn")
def shared_prefix_fits(team: TeamConfig) -> Iterator[Found]:
    """A shared prefix in `gate.benchmark.synthetic` has both a share of requests (`shared_prefix_pct`) and a length
    (`prefix_tokens`), and is shorter than every prompt the workers may draw (`synthetic.prompt_tokens`, else
    `gate.benchmark.prompt_tokens`; for {p50, p90} the shortest of its quantiles).

    Why: a prefixed request is the prefix plus its own text, `prompt_tokens` counting the whole prompt, so the
    workers' synthetic workload (optigate.bench.core.workload.synthetic) refuses a share without a length, or a
    prefix as long as the shortest prompt; a length without a share has no effect.
    """
    benchmark = team.gate.benchmark
    synthetic = benchmark.synthetic
    if synthetic is None:
        return
    if synthetic.shared_prefix_pct > 0 and synthetic.prefix_tokens == 0:
        yield (
            (*SYNTHETIC, "prefix_tokens"),
            f"{synthetic.shared_prefix_pct:g} % of requests share a prefix, but prefix_tokens is 0: say how long "
            "the common prefix is (e.g. a system prompt's tokens)",
        )
        return
    if synthetic.prefix_tokens > 0 and synthetic.shared_prefix_pct == 0:
        yield (
            (*SYNTHETIC, "shared_prefix_pct"),
            "a prefix length without a share of requests that use it has no effect: set shared_prefix_pct",
        )
        return
    prompts = synthetic.prompt_tokens if synthetic.prompt_tokens is not None else benchmark.prompt_tokens
    shortest = min(length_values(prompts))
    if 0 < shortest <= synthetic.prefix_tokens:
        yield (
            (*SYNTHETIC, "prefix_tokens"),
            f"the shared prefix ({synthetic.prefix_tokens:,} tokens) must be shorter than every prompt drawn "
            f"(the shortest is {shortest:,}): a request is its prefix plus its own text",
        )


def resolve_capture(benchmark: BenchmarkGate, region: str) -> CapturePlan | None:
    workload = benchmark.workload
    if workload is None:
        return None
    return CapturePlan(
        source=workload.source.replace("{region}", region),
        kind=workload.kind,
        window_days=workload.window_days,
        max_requests=workload.max_requests,
        speedup=workload.speedup,
    )


def resolve_synthetic(benchmark: BenchmarkGate) -> SyntheticPlan | None:
    """The synthetic distributions, None when every request has gate.benchmark's one prompt and output length."""
    synthetic = benchmark.synthetic
    if synthetic is None:
        return None
    prompts = synthetic.prompt_tokens if synthetic.prompt_tokens is not None else benchmark.prompt_tokens
    outputs = synthetic.max_new_tokens if synthetic.max_new_tokens is not None else benchmark.max_new_tokens
    return SyntheticPlan(
        prompt_tokens=length_values(prompts),
        max_new_tokens=length_values(outputs),
        shared_prefix_share=synthetic.shared_prefix_pct / 100,
        prefix_tokens=synthetic.prefix_tokens,
    )


#: This module's rules, in ID order: optigate.deployment.all_rules collects them (every_rule).
RULES = (shared_prefix_fits,)
