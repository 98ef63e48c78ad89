"""Roofline *lower bounds* on decode and prefill time for one tensor-parallel rank.

A step cannot finish faster than the time to stream the bytes it must read from
memory, nor faster than the time to do its FLOPs at peak dense tensor throughput::

    step_time >= max(bytes_read / memory_bandwidth, flops / peak_flops)

All ranks of a tensor-parallel group work in parallel on 1/tp of the weights and
KV heads, so per-rank figures bound the group. Not included (so real times are
higher): all-reduce communication, kernel launch gaps, attention-kernel
inefficiency at small batch, scheduler overhead. ``achievable_fraction`` (default
1.0 = the raw bound) scales both bandwidth and peak FLOPs if you want an estimate
rather than a bound; results keep the ``lower_bound`` wording only at 1.0.

MoE approximation: a decode step with ``b`` tokens each routed to ``k`` of ``E``
experts reads every expert that at least one token chose. With uniform routing the
expected number of distinct experts per layer is ``E * (1 - (1 - k/E)**b)`` -- k at
b=1, approaching E as b grows. Real routers are skewed, so fewer distinct experts
are touched in practice; uniform routing is the standard, slightly pessimistic
choice for bytes. FLOPs always use the *active* parameters (k experts per token).
Under expert parallelism (whole experts per GPU) a step waits for the busiest GPU: it reads the expected maximum
over GPUs of the touched experts it holds (optigate.plan.routing), more than the balanced share distinct / GPUs.
"""

from __future__ import annotations

from dataclasses import dataclass

from .architecture import ModelArchitecture
from .memory import WeightFootprint
from .routing import expected_busiest_rank_experts


@dataclass(frozen=True)
class RankHardware:
    """Peak figures of one tensor-parallel rank (one GPU or one NeuronCore)."""

    memory_bandwidth_bytes_per_s: float
    peak_flops: float

    def scaled(self, achievable_fraction: float) -> RankHardware:
        if not 0 < achievable_fraction <= 1:
            raise ValueError("achievable_fraction must be in (0, 1]")
        return RankHardware(
            self.memory_bandwidth_bytes_per_s * achievable_fraction, self.peak_flops * achievable_fraction
        )


@dataclass(frozen=True)
class StepBound:
    """Lower bound for one step, with the two roofline terms kept for explanation."""

    bytes_read: float
    flops: float
    memory_time_s: float
    compute_time_s: float

    @property
    def time_s(self) -> float:
        return max(self.memory_time_s, self.compute_time_s)

    @property
    def bound(self) -> str:
        """'memory' when streaming bytes takes longer than the math, else 'compute'."""
        return "memory" if self.memory_time_s >= self.compute_time_s else "compute"

    @property
    def arithmetic_intensity(self) -> float:
        return self.flops / self.bytes_read if self.bytes_read else float("inf")


def expected_distinct_experts(arch: ModelArchitecture, tokens: int) -> float:
    """Expected experts touched per MoE layer by ``tokens`` tokens under uniform routing."""
    if not arch.is_moe or tokens <= 0:
        return 0.0
    e, k = arch.num_experts, arch.num_experts_per_tok
    return e * (1 - (1 - k / e) ** tokens)


def experts_read_per_layer(arch: ModelArchitecture, weights: WeightFootprint, tokens: int) -> float:
    """Routed experts one rank reads per MoE layer in a step of `tokens` tokens: every touched expert (1/tp of
    each) under tensor parallelism; under expert parallelism the expected busiest GPU's touched experts under
    uniform top-k routing (optigate.plan.routing), which the step waits for."""
    if not arch.is_moe or tokens <= 0:
        return 0.0
    if weights.expert_parallel_ranks > 1:
        return expected_busiest_rank_experts(
            arch.num_experts, arch.num_experts_per_tok, weights.expert_parallel_ranks, tokens
        )
    return expected_distinct_experts(arch, tokens)


def linear_flops_per_token(arch: ModelArchitecture, tp: int) -> float:
    """2 FLOPs per multiply-accumulate over the active matmul parameters (lm_head included,
    embedding lookup excluded), on one rank."""
    return 2 * arch.parameter_count().active_non_embedding / tp


def attention_flops_per_token(arch: ModelArchitecture, context_tokens: float, tp: int) -> float:
    """QK^T and PV for one new token attending to ``context_tokens`` cached tokens."""
    return 4 * context_tokens * arch.q_size * arch.num_hidden_layers / tp


def decode_step_bound(
    arch: ModelArchitecture,
    weights: WeightFootprint,
    hardware: RankHardware,
    *,
    batch: int,
    context_tokens: float,
    kv_bytes_per_token: float,
    tp: int,
) -> StepBound:
    """One decode step generating one token for each of ``batch`` sequences whose
    average context is ``context_tokens``; ``kv_bytes_per_token`` is per rank."""
    if batch < 1:
        raise ValueError("batch must be >= 1")
    bytes_read = (
        weights.read_per_step(experts_read_per_layer(arch, weights, batch))
        + batch * context_tokens * kv_bytes_per_token
    )
    flops = batch * (linear_flops_per_token(arch, tp) + attention_flops_per_token(arch, context_tokens, tp))
    return StepBound(
        bytes_read=bytes_read,
        flops=flops,
        memory_time_s=bytes_read / hardware.memory_bandwidth_bytes_per_s,
        compute_time_s=flops / hardware.peak_flops,
    )


def prefill_bound(
    arch: ModelArchitecture,
    weights: WeightFootprint,
    hardware: RankHardware,
    *,
    prompt_tokens: int,
    kv_bytes_per_token: float,
    tp: int,
    num_sequences: int = 1,
) -> StepBound:
    """Prefill of ``num_sequences`` prompts of ``prompt_tokens`` each: 2 x active params x N
    for the matmuls plus causal attention (2 x N^2 x heads x head_dim per layer)."""
    if prompt_tokens < 1:
        raise ValueError("prompt_tokens must be >= 1")
    total_tokens = prompt_tokens * num_sequences
    causal_attention = 2 * prompt_tokens**2 * arch.q_size * arch.num_hidden_layers / tp
    flops = total_tokens * linear_flops_per_token(arch, tp) + num_sequences * causal_attention
    bytes_read = (
        weights.read_per_step(experts_read_per_layer(arch, weights, total_tokens)) + total_tokens * kv_bytes_per_token
    )
    return StepBound(
        bytes_read=bytes_read,
        flops=flops,
        memory_time_s=bytes_read / hardware.memory_bandwidth_bytes_per_s,
        compute_time_s=flops / hardware.peak_flops,
    )


@dataclass(frozen=True)
class DecodePoint:
    """Decode lower bound at one batch size; throughput is per model replica."""

    batch: int
    tpot_ms: float
    tokens_per_s_per_request: float
    aggregate_tokens_per_s: float
    bound: str


def decode_curve(
    arch: ModelArchitecture,
    weights: WeightFootprint,
    hardware: RankHardware,
    *,
    max_batch: int,
    context_tokens: float,
    kv_bytes_per_token: float,
    tp: int,
) -> tuple[DecodePoint, ...]:
    points = []
    for b in range(1, max_batch + 1):
        step = decode_step_bound(
            arch,
            weights,
            hardware,
            batch=b,
            context_tokens=context_tokens,
            kv_bytes_per_token=kv_bytes_per_token,
            tp=tp,
        )
        points.append(
            DecodePoint(
                batch=b,
                tpot_ms=step.time_s * 1000,
                tokens_per_s_per_request=1 / step.time_s,
                aggregate_tokens_per_s=b / step.time_s,
                bound=step.bound,
            )
        )
    return tuple(points)
