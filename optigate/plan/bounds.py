"""The roofline lower bounds of one plan: the decode curve, the prefill time and the batch with the lowest cost per
output token (what `plan()` reports as the bound rows)."""

from __future__ import annotations

from dataclasses import dataclass

from .cost import cost_per_million_tokens
from .roofline import DecodePoint, RankHardware, decode_curve, prefill_bound
from .sizing import MemoryPlan, PlanInputs


@dataclass(frozen=True)
class RooflineBounds:
    """Latency lower bounds and the cheapest batch; all None (curve empty) without hardware figures."""

    curve: tuple[DecodePoint, ...] = ()
    tpot_ms_batch1: float | None = None
    decode_bound: str | None = None
    prefill_ms: float | None = None
    prefill_bound: str | None = None
    best_batch: int | None = None
    cost_per_million_output_tokens: float | None = None


def roofline_bounds(
    inputs: PlanInputs, mp: MemoryPlan, compute: str, *, replicas: int, max_feasible: int, fraction: float
) -> RooflineBounds:
    """Decode curve, prefill time and the batch with the lowest cost per output token, on one rank."""
    model, inst, tp = inputs.model, inputs.instance, mp.tp
    prompt_tokens, output_tokens = inputs.prompt_tokens, inputs.output_tokens
    bandwidth = inst.memory_bandwidth_bytes_per_s_per_tp_unit
    peak = inst.peak_flops_per_tp_unit(compute)
    if not (bandwidth and peak):
        return RooflineBounds()
    hardware = RankHardware(bandwidth, peak).scaled(fraction)
    curve = decode_curve(
        model,
        mp.weights,
        hardware,
        max_batch=max(1, max_feasible),
        context_tokens=prompt_tokens + output_tokens / 2,
        kv_bytes_per_token=mp.kv_bytes_per_token,
        tp=tp,
    )
    pf = prefill_bound(
        model, mp.weights, hardware, prompt_tokens=prompt_tokens, kv_bytes_per_token=mp.kv_bytes_per_token, tp=tp
    )
    best_batch = cost = None
    price_per_s = inst.price_per_second_usd
    if price_per_s is not None and max_feasible >= 1:
        for b in range(1, max_feasible + 1):
            batch_prefill = prefill_bound(
                model,
                mp.weights,
                hardware,
                prompt_tokens=prompt_tokens,
                kv_bytes_per_token=mp.kv_bytes_per_token,
                tp=tp,
                num_sequences=b,
            ).time_s
            step = curve[b - 1].tpot_ms / 1000
            seconds = batch_prefill + output_tokens * step
            dollars_per_million = cost_per_million_tokens(price_per_s, seconds, b * output_tokens * replicas)
            if cost is None or dollars_per_million < cost:
                best_batch, cost = b, dollars_per_million
    return RooflineBounds(curve, curve[0].tpot_ms, curve[0].bound, pf.time_s * 1000, pf.bound, best_batch, cost)
