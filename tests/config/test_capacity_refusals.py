"""The planner's refusals reach the user through config validation, with numbers and a fix."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from optigate.config.loader import ConfigError, load_team
from optigate.deployment import load_resolved_team
from optigate.plan.architecture import load_architecture
from optigate.plan.catalog import get_instance
from optigate.plan.team_plan import derive_settings
from tests.fixtures.config_files import minimal_team

GIB = 2**30


def _team_file(tmp_path, architecture: str, instance: str, serving_extra: str = "") -> Path:
    return minimal_team(tmp_path, architecture, instance, serving_extra)


def _refusal(path):
    with pytest.raises(ConfigError) as caught:
        load_resolved_team(path)
    (issue,) = caught.value.issues
    return issue


def test_weights_that_do_not_fit_are_refused_with_sizes_and_a_bigger_instance(tmp_path):
    issue = _refusal(_team_file(tmp_path, "llama-3.3-70b", "ml.g6e.2xlarge"))
    params = load_architecture("llama-3.3-70b").parameter_count().total
    weights_gib = params * 2 / GIB  # bf16, TP 1 on the single L40S
    assert issue.path == "serving.instance_type" and issue.line == 7
    assert f"weights need {weights_gib:.1f} GiB per accelerator at TP=1" in issue.message
    assert "but ml.g6e.2xlarge leaves" in issue.message
    suggested = re.search(r"Try: (ml\.[\w.-]+)", issue.message).group(1)
    assert get_instance(suggested).memory_gib_per_accelerator * get_instance(suggested).accelerator_count > weights_gib


def test_a_context_the_kv_cache_cannot_hold_once_is_refused_with_the_fp8_kv_ratio(tmp_path):
    issue = _refusal(_team_file(tmp_path, "llama-3.1-8b", "ml.g6.2xlarge", "max_model_len: 32768\n"))
    assert issue.path == "serving.max_model_len" and issue.line == 8
    capacity = int(re.search(r"holds ([\d,]+) tokens \(TP=1", issue.message).group(1).replace(",", ""))
    fp8_capacity = int(re.search(r"FP8 KV cache holds ([\d,]+) tokens", issue.message).group(1).replace(",", ""))
    assert capacity < 32768 <= fp8_capacity
    # FP8 halves 128 KiB of bf16 KV per token, so the same memory holds twice the tokens.
    assert fp8_capacity == pytest.approx(2 * capacity, rel=0.01)
    assert f"({fp8_capacity / 32768:.1f}x one sequence)" in issue.message
    assert "128 KiB/token" in issue.message
    assert f"lower max_model_len to {capacity:,}" in issue.message


def test_a_batch_that_cannot_fit_at_the_typical_length_is_refused_with_the_feasible_batch(tmp_path):
    issue = _refusal(
        _team_file(tmp_path, "llama-3.1-8b", "ml.g6.2xlarge", "max_model_len: 8192\nmax_batch_size: 256\n")
    )
    assert issue.path == "serving.max_batch_size" and issue.line == 9
    capacity = int(re.search(r"KV cache on ml.g6.2xlarge holds ([\d,]+)", issue.message).group(1).replace(",", ""))
    # The gate's default request: 1,024 prompt + 256 output tokens.
    assert "max_batch_size=256 x 1,280 tokens (prompt+output) = 327,680 tokens" in issue.message
    assert f"lower max_batch_size to {capacity // 1280}" in issue.message


def test_suggestions_stay_on_the_platform_and_the_precision(tmp_path):
    issue = _refusal(
        _team_file(tmp_path, "llama-3.1-8b", "ml.g6.2xlarge", "max_model_len: 131072\nquantization: fp8\n")
    )
    suggested = re.search(r"or (ml\.[\w.-]+) \(", issue.message).group(1)
    instance = get_instance(suggested)
    assert not instance.is_neuron and instance.compute_capability >= 8.9


def test_unset_settings_are_derived_so_that_the_team_can_batch(tmp_path):
    team = load_team(_team_file(tmp_path, "llama-3.1-8b", "ml.g6.2xlarge", "quantization: fp8\nkv_cache_dtype: fp8\n"))
    instance = get_instance(team.serving.instance_type)
    derived = derive_settings(team, team.serving, weight_precision="fp8", instance=instance)
    assert derived.max_model_len == 4096  # 2 x (1,024 + 256), to a power of two
    assert derived.plan.fits
    fits = derived.plan.max_concurrent_sequences_at_typical_length
    assert derived.max_batch_size == min(fits, derived.plan.max_num_seqs) and derived.max_batch_size > 1
    assert [note.split("=")[0] for note in derived.notes] == [
        "gpu_memory_utilization",
        "tensor_parallel_degree",
        "max_model_len",
        "max_batch_size",
    ]


def test_a_derived_length_never_exceeds_what_the_cache_holds(tmp_path):
    path = _team_file(tmp_path, "llama-3.1-8b", "ml.g6.2xlarge")
    path.write_text(path.read_text() + "gate:\n  benchmark:\n    prompt_tokens: 30000\n    max_new_tokens: 1000\n")
    team = load_team(path)
    instance = get_instance(team.serving.instance_type)
    derived = derive_settings(team, team.serving, weight_precision="bf16", instance=instance)
    assert derived.max_model_len <= derived.plan.kv_capacity_tokens
    assert derived.max_model_len % 1024 == 0


def test_every_kind_of_planner_problem_is_placed_at_a_field_and_a_rule():
    """The planner's problems reach validate through one table; a kind missing from it would be dropped silently."""
    from optigate.config.models import Serving
    from optigate.config.rules import REGISTRY
    from optigate.deployment.rules import PLAN_PROBLEM_RULES, serving_architecture_problems
    from optigate.plan import PROBLEM_KINDS, PlanProblem

    assert set(PLAN_PROBLEM_RULES) == set(PROBLEM_KINDS)
    serving = Serving(instance_type="ml.g6.2xlarge", max_model_len=8192, max_batch_size=8)
    for kind, reported in PLAN_PROBLEM_RULES.items():
        if reported is None:  # reported before the plan, by the rule that names the model's own limit
            assert (
                kind == "max_model_len_exceeds_position_embeddings"
                and serving_architecture_problems.rule.id in REGISTRY
            )
            continue
        assert REGISTRY[reported.rule.id] is reported.rule
        (found,) = reported(PlanProblem(kind, "m"), serving, ("serving",))
        assert found.path[1] in ("instance_type", "max_model_len", "max_batch_size") and found.rule is reported.rule
        assert all(not reported(PlanProblem(other, "m"), serving, ()) for other in PROBLEM_KINDS if other != kind)
