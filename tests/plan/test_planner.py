"""plan(): result shape, problems with actionable messages, cost."""

import pytest

from optigate.plan import PROBLEM_KINDS, get_instance, plan

REQUIRED_KEYS = {
    "weights_gib_per_accelerator",
    "kv_bytes_per_token",
    "kv_capacity_tokens",
    "max_concurrency_at_max_model_len",
    "decode_tpot_ms_batch1",
    "decode_bound",
    "prefill_ms",
    "prefill_bound",
    "cost_per_million_output_tokens",
}


def test_to_dict_has_required_keys_and_curve():
    data = plan("llama-3.1-8b", "ml.g6e.xlarge", max_model_len=32768).to_dict()
    assert set(data) >= REQUIRED_KEYS
    assert data["decode_curve"][0]["batch"] == 1
    assert data["fits"] is True and data["problems"] == []


def test_fitting_plan_reports_cost_from_the_catalog_price():
    result = plan("llama-3.1-8b", "ml.g6e.xlarge", max_model_len=32768)
    assert result.fits
    assert result.price_per_hour_usd == get_instance("ml.g6e.xlarge").price_per_hour_usd
    assert result.cost_per_million_output_tokens > 0
    assert 1 <= result.best_batch <= result.max_feasible_batch


def test_no_price_means_no_cost():
    result = plan("llama-3.1-70b", "ml.p5e.48xlarge", max_model_len=8192)
    assert result.price_per_hour_usd is None
    assert result.cost_per_million_output_tokens is None


def test_fp8_kv_doubles_capacity_and_tp_divides_kv_per_token():
    auto = plan("llama-3.1-8b", "ml.g6e.xlarge", max_model_len=8192)
    fp8 = plan("llama-3.1-8b", "ml.g6e.xlarge", max_model_len=8192, kv_cache_dtype="fp8")
    assert fp8.kv_bytes_per_token == auto.kv_bytes_per_token / 2
    assert fp8.kv_capacity_tokens == pytest.approx(2 * auto.kv_capacity_tokens, abs=16)
    tp8 = plan("llama-3.1-70b", "ml.p4de.24xlarge", tensor_parallel=8, max_model_len=8192)
    assert tp8.kv_bytes_per_token == 2 * 80 * 8 * 128 * 2 / 8


def test_full_context_on_l4_cannot_hold_one_sequence_and_suggests_fixes():
    result = plan("llama-3.1-8b", "ml.g6.xlarge")  # max_model_len defaults to 131072
    assert not result.fits
    (problem,) = result.problems
    assert problem.kind == "kv_cannot_hold_one_sequence"
    assert "FP8 KV cache holds" in problem.message
    assert f"lower max_model_len to {result.kv_capacity_tokens:,}" in problem.message
    assert problem.details["fp8_kv_capacity_tokens"] > result.kv_capacity_tokens
    assert [s.setting for s in problem.suggestions] == ["kv_cache_dtype", "max_model_len", "instance_type"]
    instance = problem.suggestion_for("instance_type")
    assert instance.value.startswith("ml.") and instance.kv_capacity_tokens >= result.max_model_len
    price, capacity = instance.price_per_hour_usd, instance.kv_capacity_tokens
    assert problem.message.endswith(f"; or {instance.value} (${price:.2f}/h, KV holds {capacity:,} tokens).")


def test_a_suggested_instance_holds_what_the_suggestion_says():
    (problem,) = plan("llama-3.1-70b", "ml.g6.xlarge", max_model_len=8192).problems
    instance = problem.suggestion_for("instance_type")
    again = plan("llama-3.1-70b", instance.value, tensor_parallel=instance.tensor_parallel, max_model_len=8192)
    assert again.fits and again.kv_capacity_tokens == instance.kv_capacity_tokens
    assert again.price_per_hour_usd == instance.price_per_hour_usd


def test_70b_on_one_l4_weights_do_not_fit_and_an_instance_is_suggested():
    result = plan("llama-3.1-70b", "ml.g6.xlarge", max_model_len=8192)
    kinds = [p.kind for p in result.problems]
    assert kinds == ["weights_do_not_fit"]
    message = result.problems[0].message
    assert "131.4 GiB" in message
    assert "Try:" in message and "ml." in message


def test_quantized_weights_suggested_when_they_fit():
    result = plan("qwen3-32b", "ml.g6e.xlarge", max_model_len=8192)
    assert result.problems[0].kind == "weights_do_not_fit"
    assert "FP8 weights" in result.problems[0].message
    lighter = result.problems[0].suggestion_for("weight_precision")
    assert lighter.value == "fp8"
    gib = lighter.weights_gib_per_accelerator
    assert f"FP8 weights ({gib:.1f} GiB per accelerator) fit" in result.problems[0].message


def test_max_model_len_beyond_position_embeddings():
    result = plan("qwen3-8b", "ml.g6e.2xlarge", max_model_len=65536)
    assert "max_model_len_exceeds_position_embeddings" in [p.kind for p in result.problems]


def test_batch_times_length_problem_with_feasible_batch():
    result = plan(
        "llama-3.1-8b", "ml.g6.xlarge", max_model_len=8192, max_batch_size=200, prompt_tokens=2048, output_tokens=512
    )
    (problem,) = result.problems
    assert problem.kind == "batch_times_length_does_not_fit"
    feasible = problem.details["feasible_batch"]
    assert feasible * 2560 <= result.kv_capacity_tokens < (feasible + 1) * 2560
    assert f"lower max_batch_size to {feasible}" in problem.message
    assert problem.suggestions[0].setting == "max_batch_size" and problem.suggestions[0].value == feasible


def test_without_fix_search_only_the_feasible_batch_is_suggested():
    (problem,) = plan(
        "llama-3.1-8b",
        "ml.g6.xlarge",
        max_model_len=8192,
        max_batch_size=200,
        prompt_tokens=2048,
        output_tokens=512,
        suggest_fixes=False,
    ).problems
    assert [s.setting for s in problem.suggestions] == ["max_batch_size"]
    assert problem.message.endswith(f"Try: lower max_batch_size to {problem.suggestions[0].value}.")
    (weights,) = plan("llama-3.1-70b", "ml.g6.xlarge", max_model_len=8192, suggest_fixes=False).problems
    assert weights.suggestions == () and "Try:" not in weights.message


def test_every_problem_kind_is_documented():
    for result in (plan("llama-3.1-8b", "ml.g6.xlarge"), plan("llama-3.1-70b", "ml.g6.xlarge")):
        assert {p.kind for p in result.problems} <= set(PROBLEM_KINDS)


def test_auto_tensor_parallel_prefers_replicas_and_rejects_invalid_degree():
    result = plan("llama-3.1-8b", "ml.p4d.24xlarge", max_model_len=8192)
    assert (result.tensor_parallel, result.replicas) == (1, 8)
    with pytest.raises(ValueError, match="heads"):
        plan("qwen2.5-7b", "ml.g6e.48xlarge", tensor_parallel=8)


def test_quantized_weights_without_native_support_compute_at_bf16():
    result = plan("llama-3.1-8b", "ml.g5.xlarge", weight_precision="fp8", max_model_len=8192)
    assert result.compute_precision == "bf16"
    assert any("weight-only" in note for note in result.notes)
    assert plan("llama-3.1-8b", "ml.g6.xlarge", weight_precision="fp8", max_model_len=8192).compute_precision == "fp8"
