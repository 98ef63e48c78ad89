"""Expected latency: what a team will measure, not only the roofline bound it cannot beat.

The roofline (optigate.plan.roofline) streams every byte at the datasheet's bandwidth and does every
FLOP at the datasheet's peak. Real engines do neither: a decode step reaches a fraction of peak
bandwidth that depends on the weight format's kernel (4-bit dequantization kernels run far from
memory speed at batch 1), and each step pays fixed costs the bound leaves out (scheduling, sampling,
kernel launches; an all-reduce per layer across tensor-parallel ranks). So::

    expected_step(b) = max(bytes(b) / (bandwidth x eta_bw), flops(b) / (peak x eta_flops))
                       + step_overhead + 2 x layers x allreduce (tensor parallel only)

The efficiencies and overheads live in optigate/plan/data/efficiency.yaml, each with its source: the
published measurements of the *training* split of benchmarks/data/published_decode_latency.csv they
were derived from (`python benchmarks/planner_latency_vs_published.py --derive`), never the held-out
split the same script reports. A team's own gate runs replace the
bandwidth efficiency of their accelerator, format and engine (`optigate plan --calibrate`,
optigate.plan.calibration; kept in config/calibration.yaml), and the plan says which figures are
calibrated by measurement and which are literature estimates.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from optigate.config.models import Calibration

from .architecture import ModelArchitecture
from .catalog import Instance
from .cost import cost_per_million_tokens
from .memory import WeightFootprint
from .roofline import RankHardware, decode_step_bound, prefill_bound

DATA = Path(__file__).resolve().parent / "data" / "efficiency.yaml"

#: Accelerator -> generation: efficiencies are per generation (kernels are tuned per architecture).
GENERATION = {
    "A10G": "ampere",
    "A100-40GB": "ampere",
    "A100-80GB": "ampere",
    "L4": "ada",
    "L40S": "ada",
    "L40": "ada",  # not offered by SageMaker; its published rows stand in for the L40S (benchmarks/)
    "H100": "hopper",
    "H200": "hopper",
    "B200": "blackwell",
    "Inferentia2": "neuron",
    "Trainium": "neuron",
    "Trainium2": "neuron",
}

#: Weight precision (optigate.plan.memory.WEIGHT_PRECISIONS) -> the kernel family that reads it.
FORMAT = {
    "bf16": "16bit",
    "fp16": "16bit",
    "fp8": "fp8",
    "int8": "int8",
    "awq": "int4",
    "gptq": "int4",
    "nvfp4": "fp4",
    "mxfp4": "fp4",
}

#: LMI container family -> engine.
ENGINE = {"lmi": "vllm", "lmi-trtllm": "trtllm", "lmi-neuronx": "neuron"}

#: Batch sizes of the expected decode curve (a few points suffice to choose a batch).
CURVE_BATCHES = (1, 2, 4, 8, 16, 32, 64, 128, 256)


@dataclass(frozen=True)
class Efficiency:
    """How close an engine gets to the roofline for one (generation, format): fractions of peak bandwidth and
    FLOPs, fixed costs per decode step, and where the figures come from."""

    bandwidth: float
    flops: float
    step_overhead_ms: float
    allreduce_us: float  # one all-reduce of a decode step's activations, per layer there are two
    source: str
    calibrated: bool = False
    standing: str = ""  # what the figures rest on and how far off they may be, in a few words

    def __post_init__(self) -> None:
        if not (0 < self.bandwidth <= 1 and 0 < self.flops <= 1):
            raise ValueError(f"efficiencies are fractions of peak in (0, 1]: {self}")
        if self.step_overhead_ms < 0 or self.allreduce_us < 0:
            raise ValueError(f"overheads cannot be negative: {self}")
        if not self.source.strip():
            raise ValueError("every efficiency cites its source")


def calibration_key(calibration: Calibration) -> tuple[str, str, str]:
    """A calibration applies to its accelerator (not its generation: an H20 is no H100), format and engine."""
    return (calibration.accelerator, FORMAT.get(calibration.weight_precision, "16bit"), calibration.engine)


@cache
def _table() -> dict[str, Any]:
    return yaml.safe_load(DATA.read_text())


def _entries() -> list[dict[str, Any]]:
    return list(_table()["efficiencies"])


def literature_efficiency(instance: Instance, weight_precision: str, engine: str) -> Efficiency:
    """The literature estimate for the instance's accelerator generation, the format and the engine: the most
    specific entry of efficiency.yaml (an entry's `generation`, `format` or `engine` may be `any`), with the
    all-reduce cost of the instance's interconnect."""
    wanted = {
        "generation": GENERATION.get(instance.accelerator, "other"),
        "format": FORMAT.get(weight_precision, "16bit"),
        "engine": engine,
    }
    best: tuple[int, dict[str, Any]] | None = None
    for entry in _entries():
        if any(entry[key] not in (value, "any") for key, value in wanted.items()):
            continue
        score = sum(entry[key] == value for key, value in wanted.items())
        if best is None or score > best[0]:
            best = (score, entry)
    if best is None:
        raise LookupError(f"efficiency.yaml has no entry for {wanted} (it needs an any/any/any fallback)")
    entry = best[1]
    link = "nvlink" if instance.has_nvlink else "pcie"
    allreduce = _table()["allreduce_us"][link]
    return Efficiency(
        bandwidth=float(entry["bandwidth"]),
        flops=float(entry["flops"]),
        step_overhead_ms=float(entry["step_overhead_ms"]),
        allreduce_us=float(allreduce["value"]),
        source=f"{entry['source']}; all-reduce over {link}: {allreduce['source']}",
        standing=str(entry["standing"]),
    )


def efficiency_for(
    instance: Instance, weight_precision: str, engine: str, calibrations: Iterable[Calibration] = ()
) -> Efficiency:
    """A team's calibration for the accelerator, format and engine if it has one (the newest), else the literature
    estimate; overheads always come from the literature (a gate run measures one figure, not its split)."""
    literature = literature_efficiency(instance, weight_precision, engine)
    key = (instance.accelerator, FORMAT.get(weight_precision, "16bit"), engine)
    matching = [c for c in calibrations if calibration_key(c) == key]
    if not matching:
        return literature
    latest = matching[-1]
    return Efficiency(
        bandwidth=latest.bandwidth_efficiency,
        flops=literature.flops,
        step_overhead_ms=literature.step_overhead_ms,
        allreduce_us=literature.allreduce_us,
        source=f"calibrated by measurement: {latest.source} (measured {latest.measured_tpot_ms:.2f} ms per token)",
        calibrated=True,
    )


@dataclass(frozen=True)
class ExpectedLatency:
    """What a team should expect to measure, with the efficiency it assumes and whether it is calibrated."""

    tpot_ms_batch1: float
    decode_curve_ms: dict[int, float]  # batch -> expected time per output token
    ttft_ms: float
    cost_per_million_output_tokens: float | None
    bandwidth_efficiency: float
    step_overhead_ms: float
    allreduce_ms_per_step: float
    basis: str  # "literature estimate" or "calibrated by measurement"
    source: str = field(repr=False, default="")
    standing: str = ""  # of a literature estimate: what it rests on and how far off it may be
    # vLLM --enforce-eager: the launch cost of each step without CUDA graphs (0 with graphs); see eager_overhead.
    eager_overhead_ms_per_step: float = 0.0
    # Engine steps the prompt is prefilled in (chunks of max_num_batched_tokens): each pays the per-step overheads.
    prefill_steps: int = 1

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["decode_curve_ms"] = {str(k): v for k, v in self.decode_curve_ms.items()}
        return data


@dataclass(frozen=True)
class EagerOverhead:
    """What a decode step costs more without CUDA graphs (vLLM --enforce-eager), per layer, and its source."""

    us_per_layer: float
    source: str

    def ms_per_step(self, arch: ModelArchitecture) -> float:
        return arch.num_hidden_layers * self.us_per_layer / 1000


def eager_overhead() -> EagerOverhead:
    """efficiency.yaml's eager-mode cost: kernels launched one by one from Python instead of replayed from a graph,
    a fixed CPU cost per layer of every step, so it weighs most at small batch where steps are short."""
    entry = _table()["eager_mode"]["us_per_layer"]
    return EagerOverhead(float(entry["value"]), str(entry["source"]))


def expected_step_ms(
    arch: ModelArchitecture,
    weights: WeightFootprint,
    hardware: RankHardware,
    efficiency: Efficiency,
    *,
    batch: int,
    context_tokens: float,
    kv_bytes_per_token: float,
    tp: int,
    eager_ms: float = 0.0,
) -> float:
    """Expected time of one decode step of `batch` sequences (see the module docstring); `eager_ms` is the
    launch cost without CUDA graphs (EagerOverhead.ms_per_step), 0 with them."""
    bound = decode_step_bound(
        arch,
        weights,
        hardware,
        batch=batch,
        context_tokens=context_tokens,
        kv_bytes_per_token=kv_bytes_per_token,
        tp=tp,
    )
    streaming = max(bound.memory_time_s / efficiency.bandwidth, bound.compute_time_s / efficiency.flops)
    return streaming * 1000 + efficiency.step_overhead_ms + allreduce_ms(arch, efficiency, tp) + eager_ms


def allreduce_ms(arch: ModelArchitecture, efficiency: Efficiency, tp: int) -> float:
    """Two all-reduces per layer (after attention and after the MLP) when the model is split across ranks."""
    return 0.0 if tp <= 1 else 2 * arch.num_hidden_layers * efficiency.allreduce_us / 1000


def expected_latency(
    arch: ModelArchitecture,
    weights: WeightFootprint,
    hardware: RankHardware,
    efficiency: Efficiency,
    *,
    max_batch: int,
    prompt_tokens: int,
    output_tokens: int,
    kv_bytes_per_token: float,
    tp: int,
    replicas: int,
    price_per_second_usd: float | None,
    enforce_eager: bool = False,
    max_num_batched_tokens: int | None = None,
) -> ExpectedLatency:
    """The expected decode curve, TTFT and cost. `enforce_eager` adds the eager launch cost to every step;
    `max_num_batched_tokens` splits the prompt into that many-token prefill steps (vLLM's chunked prefill), each
    rereading the weights and paying the per-step overheads."""
    eager_ms = eager_overhead().ms_per_step(arch) if enforce_eager else 0.0
    context = prompt_tokens + output_tokens / 2
    batches = [b for b in CURVE_BATCHES if b <= max(1, max_batch)]
    if max_batch not in batches and max_batch > 1:
        batches.append(max_batch)
    curve = {
        b: expected_step_ms(
            arch,
            weights,
            hardware,
            efficiency,
            batch=b,
            context_tokens=context,
            kv_bytes_per_token=kv_bytes_per_token,
            tp=tp,
            eager_ms=eager_ms,
        )
        for b in batches
    }
    prefill = prefill_bound(
        arch, weights, hardware, prompt_tokens=prompt_tokens, kv_bytes_per_token=kv_bytes_per_token, tp=tp
    )
    steps = math.ceil(prompt_tokens / max_num_batched_tokens) if max_num_batched_tokens else 1
    # Each prefill step streams the weights again; the compute is the prompt's whatever the chunking.
    prefill_ms = (
        max(steps * prefill.memory_time_s / efficiency.bandwidth, prefill.compute_time_s / efficiency.flops) * 1000
    )
    ttft = prefill_ms + steps * (efficiency.step_overhead_ms + allreduce_ms(arch, efficiency, tp) + eager_ms)
    cost = None
    if price_per_second_usd is not None:
        best = math.inf
        for b, step_ms in curve.items():
            seconds = (b * prefill_ms / 1000) + output_tokens * step_ms / 1000
            best = min(best, cost_per_million_tokens(price_per_second_usd, seconds, b * output_tokens * replicas))
        cost = best
    return ExpectedLatency(
        tpot_ms_batch1=curve[1],
        decode_curve_ms=curve,
        ttft_ms=ttft,
        cost_per_million_output_tokens=cost,
        bandwidth_efficiency=efficiency.bandwidth,
        step_overhead_ms=efficiency.step_overhead_ms,
        allreduce_ms_per_step=allreduce_ms(arch, efficiency, tp),
        basis="calibrated by measurement" if efficiency.calibrated else "literature estimate",
        source=efficiency.source,
        standing=efficiency.standing,
        eager_overhead_ms_per_step=eager_ms,
        prefill_steps=steps,
    )
