"""Roofline lower bounds, checked against hand-computed figures from the catalog."""

from itertools import pairwise

import pytest

from optigate.plan import (
    RankHardware,
    decode_step_bound,
    get_instance,
    load_architecture,
    plan,
    weight_footprint,
)
from optigate.plan.roofline import expected_distinct_experts

LLAMA_8B_PARAMS = 8_030_261_248
LLAMA_8B_EMBEDDING = 128256 * 4096


def test_l4_batch1_decode_is_memory_bound_at_about_50_ms():
    l4 = get_instance("ml.g6.xlarge")
    result = plan("llama-3.1-8b", l4, max_model_len=8192, prompt_tokens=1024, output_tokens=256)
    bandwidth = l4.memory_bandwidth_gbps_per_accelerator * 1e9
    context = 1024 + 256 / 2
    # every weight but the embedding table is streamed, plus the sequence's KV
    bytes_read = (LLAMA_8B_PARAMS - LLAMA_8B_EMBEDDING) * 2 + context * 131072
    expected_ms = bytes_read / bandwidth * 1000
    assert 45 < expected_ms < 55  # ~16 GB / 300 GB/s
    assert result.decode_bound == "memory"
    assert result.decode_tpot_ms_batch1 == pytest.approx(expected_ms, rel=1e-6)


def test_l4_prefill_of_2k_tokens_is_compute_bound():
    l4 = get_instance("ml.g6.xlarge")
    result = plan("llama-3.1-8b", l4, max_model_len=8192, prompt_tokens=2048, output_tokens=128)
    assert result.prefill_bound == "compute"
    peak = l4.bf16_dense_tflops * 1e12
    matmul = 2 * (LLAMA_8B_PARAMS - LLAMA_8B_EMBEDDING) * 2048
    attention = 2 * 2048**2 * 4096 * 32
    assert result.prefill_ms == pytest.approx((matmul + attention) / peak * 1000, rel=1e-6)


def test_large_batch_short_context_decode_turns_compute_bound_on_h100():
    arch = load_architecture("llama-3.1-8b")
    h100 = get_instance("ml.p5.48xlarge")
    hw = RankHardware(h100.memory_bandwidth_bytes_per_s_per_tp_unit, h100.peak_flops_per_tp_unit("bf16"))
    weights = weight_footprint(arch, "bf16")
    small = decode_step_bound(arch, weights, hw, batch=1, context_tokens=64, kv_bytes_per_token=131072, tp=1)
    large = decode_step_bound(arch, weights, hw, batch=512, context_tokens=64, kv_bytes_per_token=131072, tp=1)
    assert small.bound == "memory"
    assert large.bound == "compute"
    assert large.time_s / 512 < small.time_s  # batching amortises the weight reads


def test_aggregate_throughput_grows_with_batch_and_tpot_never_shrinks():
    result = plan("llama-3.1-8b", "ml.g6e.xlarge", max_model_len=16384)
    curve = result.decode_curve
    assert len(curve) == result.max_feasible_batch > 8
    assert all(b.aggregate_tokens_per_s > a.aggregate_tokens_per_s for a, b in pairwise(curve))
    assert all(b.tpot_ms >= a.tpot_ms for a, b in pairwise(curve))


def test_moe_reads_only_routed_experts_at_batch_one():
    arch = load_architecture("qwen3-30b-a3b")
    assert expected_distinct_experts(arch, 1) == pytest.approx(8)
    assert expected_distinct_experts(arch, 10_000) == pytest.approx(128, rel=1e-3)
    weights = weight_footprint(arch, "bf16")
    assert weights.read_per_step(8) < 0.2 * weights.total


def test_achievable_fraction_scales_the_bound():
    raw = plan("llama-3.1-8b", "ml.g6.xlarge", max_model_len=8192)
    half = plan("llama-3.1-8b", "ml.g6.xlarge", max_model_len=8192, achievable_fraction=0.5)
    assert raw.is_lower_bound and not half.is_lower_bound
    assert half.decode_tpot_ms_batch1 == pytest.approx(2 * raw.decode_tpot_ms_batch1)
