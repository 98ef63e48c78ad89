"""Weight bytes, runtime reserve and KV capacity, computed by hand."""

import pytest

from optigate.plan import (
    WEIGHT_PRECISIONS,
    estimate_runtime_reserve,
    kv_capacity_tokens,
    kv_dtype_bytes,
    load_architecture,
    max_concurrency,
    weight_footprint,
    weight_precision,
)

GIB = 1024**3
LLAMA_8B_PARAMS = 8_030_261_248
LLAMA_8B_EMBEDDING = 128256 * 4096


def test_llama_8b_bf16_weights_are_about_15_gib():
    weights = weight_footprint(load_architecture("llama-3.1-8b"), "bf16")
    assert weights.total == LLAMA_8B_PARAMS * 2
    assert weights.total_gib == pytest.approx(14.96, abs=0.01)


def test_tensor_parallel_divides_weights_except_replicated_norms():
    arch = load_architecture("llama-3.1-8b")
    one = weight_footprint(arch, "bf16", tp=1)
    eight = weight_footprint(arch, "bf16", tp=8)
    norms = one.norms
    assert eight.total == pytest.approx((one.total - norms) / 8 + norms)


def test_fp8_keeps_embeddings_and_lm_head_in_bf16():
    arch = load_architecture("llama-3.1-8b")
    norms = 32 * 2 * 4096 + 4096
    linear = LLAMA_8B_PARAMS - 2 * LLAMA_8B_EMBEDDING - norms
    expected = linear * 1 + (2 * LLAMA_8B_EMBEDDING + norms) * 2
    assert weight_footprint(arch, "fp8").total == expected


@pytest.mark.parametrize(
    ("name", "bytes_per_param"),
    [
        ("bf16", 2),
        ("fp16", 2),
        ("fp8", 1),
        ("int8", 1),
        ("awq", 0.53125),
        ("gptq", 0.53125),
        ("nvfp4", 0.5625),
        ("mxfp4", 0.53125),
    ],
)
def test_bytes_per_parameter_of_each_format(name, bytes_per_param):
    assert WEIGHT_PRECISIONS[name].bytes_per_param == bytes_per_param


def test_int4_alias_and_unknown_precision():
    assert weight_precision("int4").name == "awq"
    with pytest.raises(ValueError):
        weight_precision("int3")


def test_kv_dtype_bytes():
    assert kv_dtype_bytes("auto") == 2
    assert kv_dtype_bytes("fp8_e4m3") == 1
    with pytest.raises(ValueError):
        kv_dtype_bytes("int2")


def test_activation_peak_matches_vllm_profiling_log():
    # vLLM issue #10517 logged peak_torch_memory - weights = 17.06 - 14.99 = 2.07 GiB at 20 000 tokens.
    reserve = estimate_runtime_reserve(
        load_architecture("llama-3.1-8b"),
        max_num_batched_tokens=20000,
        max_num_seqs=256,
        engine_subtracts_cuda_graphs=False,
    )
    assert reserve.activation_bytes / GIB == pytest.approx(2.07, rel=0.02)
    assert reserve.activation_bytes == 20000 * 2 * (3 * 4096 + 3 * 14336)
    assert reserve.cuda_graph_bytes == 0


def test_sampler_logits_dominate_at_tiny_prefill_budget():
    arch = load_architecture("llama-3.1-8b")
    reserve = estimate_runtime_reserve(arch, max_num_batched_tokens=256, max_num_seqs=256)
    assert reserve.activation_bytes == 256 * 128256 * 4


def test_nvlink_tensor_parallel_reserves_more_than_pcie():
    arch = load_architecture("llama-3.1-70b")
    pcie = estimate_runtime_reserve(arch, tp=4, nvlink=False)
    nvlink = estimate_runtime_reserve(arch, tp=4, nvlink=True)
    assert nvlink.non_torch_bytes > pcie.non_torch_bytes > estimate_runtime_reserve(arch).non_torch_bytes


def test_kv_capacity_rounds_down_to_blocks_and_concurrency():
    per_token = 131072
    budget = per_token * 16 * 10 + per_token * 15  # 10 full blocks + 15 tokens
    assert kv_capacity_tokens(budget, per_token) == 160
    assert kv_capacity_tokens(-1.0, per_token) == 0
    assert max_concurrency(160, 40) == pytest.approx(10 / 3)
