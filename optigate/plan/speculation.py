"""Decode at the real concurrency: the expected time per output token there, and what verifying k draft tokens
per sequence costs against a plain step (the speculation roofline `optigate advise` words)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from optigate.config.models import Calibration

from .architecture import ModelArchitecture
from .catalog import Instance
from .expected import allreduce_ms, efficiency_for
from .memory import weight_footprint
from .planner import PlanResult
from .roofline import attention_flops_per_token, experts_read_per_layer, linear_flops_per_token

#: The share of drafted tokens below which speculation loses to drafting's cost, which the planner does not model
#: (it prices verifying k drafts only): the seed tutorial's rule, "below roughly 40 % acceptance, drafting and
#: verifying costs more than it saves". The gate holds a candidate to the higher of this and the planner's
#: break-even for verifying (SpeculationCeiling.break_even_acceptance).
DEFAULT_BREAK_EVEN_ACCEPTANCE = 0.40
DEFAULT_BREAK_EVEN_SOURCE = "the seed tutorial's rule of thumb (below ~40 % acceptance speculation loses)"


def batch_at(plan: PlanResult, concurrency: int) -> int:
    """The decode batch at `concurrency`: capped at the batch the plan runs."""
    return max(1, min(concurrency, plan.max_feasible_batch))


def expected_tpot_at(plan: PlanResult, concurrency: int) -> float | None:
    """The expected time per output token at `concurrency` (capped at the batch the plan runs): the expected
    decode curve's point at that batch, or the next larger one it has (conservative)."""
    if plan.expected is None:
        return None
    curve = plan.expected.decode_curve_ms
    batch = batch_at(plan, concurrency)
    larger = [b for b in curve if b >= batch]
    return curve[min(larger)] if larger else curve[max(curve)]


@dataclass(frozen=True)
class SpeculationCeiling:
    """Expected decode steps at the real concurrency (optigate.plan.expected: the roofline terms at the efficiencies
    engines reach, plus per-step overheads), without and with `k` draft tokens to verify per sequence."""

    batch: int
    k: int
    memory_ms: float  # streaming weights and KV once per step
    compute_ms: float  # the math of one token per sequence
    overhead_ms: float  # scheduler, sampling, launches, all-reduces
    verify_ms: float  # the step verifying k + 1 tokens per sequence

    @property
    def plain_ms(self) -> float:
        return max(self.memory_ms, self.compute_ms) + self.overhead_ms

    def gain_pct(self, tokens_per_step: float) -> float:
        """Output tokens per second gained when a verification step yields `tokens_per_step` tokens per sequence."""
        return 100 * (tokens_per_step * self.plain_ms / self.verify_ms - 1)

    @property
    def full_acceptance_gain_pct(self) -> float:
        return self.gain_pct(self.k + 1)

    @property
    def break_even_acceptance(self) -> float:
        """The share of the k draft tokens that must be accepted for a verify step (1 + accepted tokens) to beat
        plain steps: (1 + a x k) x plain >= verify."""
        return max(0.0, (self.verify_ms / self.plain_ms - 1) / self.k)


def speculation_ceiling(
    plan: PlanResult,
    instance: Instance,
    arch: ModelArchitecture,
    k: int,
    *,
    concurrency: int,
    prompt_tokens: int,
    output_tokens: int,
    calibrations: Sequence[Calibration] = (),
) -> SpeculationCeiling | None:
    """A decode step at `concurrency`, and the step verifying k draft tokens per sequence: k + 1 query tokens per
    sequence read the weights and each sequence's KV once, and do k + 1 times the math. None without the
    instance's bandwidth or peak."""
    bandwidth = instance.memory_bandwidth_bytes_per_s_per_tp_unit
    peak = instance.peak_flops_per_tp_unit(plan.compute_precision)
    if not (bandwidth and peak):
        return None
    efficiency = efficiency_for(instance, plan.weight_precision, plan.engine, calibrations)
    weights = weight_footprint(arch, plan.weight_precision, plan.tensor_parallel, expert_parallel=plan.expert_parallel)
    batch = batch_at(plan, concurrency)
    context = prompt_tokens + output_tokens / 2
    tp = plan.tensor_parallel
    kv = batch * context * plan.kv_bytes_per_token
    per_token = linear_flops_per_token(arch, tp) + attention_flops_per_token(arch, context, tp)

    def memory_ms(tokens: int) -> float:
        read = weights.read_per_step(experts_read_per_layer(arch, weights, tokens)) + kv
        return 1000 * read / (bandwidth * efficiency.bandwidth)

    def compute_ms(tokens: int) -> float:
        return 1000 * tokens * per_token / (peak * efficiency.flops)

    overhead = efficiency.step_overhead_ms + allreduce_ms(arch, efficiency, tp)
    verify = max(memory_ms(batch * (k + 1)), compute_ms(batch * (k + 1))) + overhead
    return SpeculationCeiling(batch, k, memory_ms(batch), compute_ms(batch), overhead, verify)
