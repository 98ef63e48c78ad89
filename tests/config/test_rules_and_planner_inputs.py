"""Every rule the guide states is enforced, every planner input is one the planner can size, and a fix the
planner offers passes the rules: each refused as a ConfigIssue at its YAML path, never a traceback."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from pydantic import ValidationError

from optigate.cli import main
from optigate.config.loader import ConfigError
from optigate.config.models import BenchmarkGate
from optigate.deployment import load_resolved_team
from optigate.plan import catalog
from optigate.plan.architecture import ModelArchitecture, known_models, load_architecture
from optigate.plan.parallel import default_degree, valid_degrees
from optigate.plan.team_plan import TRTLLM_KV_CACHE_FREE_GPU_MEM_FRACTION, architecture_for, weights_gb
from optigate.plan.timeouts import minimum_timeouts, sized_timeouts
from tests.fixtures.config_files import minimal_team

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "guide.md"

SIX_KV_HEADS = (
    "{num_hidden_layers: 4, hidden_size: 1536, num_attention_heads: 12, num_key_value_heads: 6, "
    "vocab_size: 32000, max_position_embeddings: 8192, intermediate_size: 4096}"
)


def _team_file(tmp_path, architecture: str, instance: str, serving_extra: str = "", tail: str = "") -> Path:
    return minimal_team(tmp_path, architecture, instance, serving_extra, tail)


def _issues(path) -> list:
    with pytest.raises(ConfigError) as caught:
        load_resolved_team(path)
    return caught.value.issues


def _only_issue(path):
    (issue,) = _issues(path)
    assert issue.line is not None
    return issue


def _plan_cli(path, capsys) -> tuple[int, dict | None, str]:
    """`optigate plan <file> --json`: exit code, the plan (None when refused) and stderr; never a traceback."""
    code = main(["plan", str(path), "--json"])
    captured = capsys.readouterr()
    return code, (json.loads(captured.out) if captured.out.strip() else None), captured.err


# --------------------------------------------------------------------------- planner inputs


def test_a_head_size_that_is_not_whole_is_refused_instead_of_dividing_by_zero(tmp_path, capsys):
    fields = (
        "{num_hidden_layers: 2, hidden_size: 16, num_attention_heads: 32, vocab_size: 100, "
        "max_position_embeddings: 4096, intermediate_size: 64}"
    )
    path = _team_file(tmp_path, fields, "ml.g6.2xlarge")
    issue = _only_issue(path)
    assert issue.path == "model.architecture.num_attention_heads" and issue.line == 5
    assert "hidden_size 16 / num_attention_heads 32 = 0.5 is not a whole head size; give head_dim" in issue.message
    code, plan, err = _plan_cli(path, capsys)
    assert code != 0 and plan is None and "Traceback" not in err
    # With head_dim, as config.json gives it, the same shape sizes.
    load_resolved_team(_team_file(tmp_path, fields.replace("}", ", head_dim: 8}"), "ml.g6.2xlarge"))
    # And a config.json handed to the planner directly is refused with a sentence, not a ZeroDivisionError.
    with pytest.raises(ValueError, match="give head_dim"):
        ModelArchitecture.from_config(
            {"num_hidden_layers": 2, "hidden_size": 16, "num_attention_heads": 32, "vocab_size": 9}
        )


def test_an_unknown_architecture_with_a_shadow_rollout_gets_the_did_you_mean(tmp_path):
    shadow = (
        "rollout:\n  strategy: shadow\n  shadow:\n    sampling_percentage: 10\n    candidate: {quantization: fp8}\n"
    )
    issue = _only_issue(_team_file(tmp_path, "llama-3.1-8bb", "ml.g6.2xlarge", tail=shadow))
    assert issue.path == "model.architecture" and issue.line == 5
    assert issue.message.endswith("did you mean 'llama-3.1-8b'?")


def test_moe_fields_without_experts_per_token_are_refused_not_sized_as_dense(tmp_path):
    moe = (
        "{num_hidden_layers: 4, hidden_size: 1024, num_attention_heads: 8, vocab_size: 32000, "
        "max_position_embeddings: 8192, intermediate_size: 4096, num_local_experts: 8, moe_intermediate_size: 1024}"
    )
    issue = _only_issue(_team_file(tmp_path, moe, "ml.g6.2xlarge"))
    assert issue.path == "model.architecture.num_local_experts"
    assert "give num_experts_per_tok too" in issue.message
    team = load_resolved_team(_team_file(tmp_path, moe.replace("}", ", num_experts_per_tok: 2}"), "ml.g6.2xlarge"))
    arch = architecture_for(team.team.model.architecture)
    assert arch.is_moe and (arch.num_experts, arch.num_experts_per_tok, arch.num_moe_layers) == (8, 2, 4)
    parameters = arch.parameter_count()
    assert parameters.experts_total == 4 * 8 * 3 * 1024 * 1024 and parameters.dense_mlp == 0


# --------------------------------------------------------------------------- tensor parallelism


@pytest.mark.parametrize(
    ("architecture", "instance", "extra", "deployed"),
    [
        ("qwen2.5-7b", "ml.g6e.48xlarge", "", 4),  # 28 heads: 8 GPUs would not shard them
        ("qwen2.5-0.5b", "ml.g6e.12xlarge", "", 2),  # 14 heads, 2 KV heads on 4 GPUs
        ("llama-3.1-8b", "ml.inf2.24xlarge", "container: {family: lmi-neuronx}\n", 8),  # 12 cores; Inf2 runs 8
    ],
)
def test_the_default_tensor_parallel_degree_is_the_largest_valid_one(
    tmp_path, capsys, architecture, instance, extra, deployed
):
    path = _team_file(tmp_path, architecture, instance, extra)
    resolved = load_resolved_team(path).baseline
    assert resolved.tensor_parallel_degree == deployed
    assert resolved.environment["OPTION_TENSOR_PARALLEL_DEGREE"] == str(deployed)
    assert any(note.startswith(f"tensor_parallel_degree={deployed}: the largest degree") for note in resolved.notes)
    _, plan, err = _plan_cli(path, capsys)
    assert "Traceback" not in err and plan is not None and plan["tensor_parallel"] == deployed


@pytest.mark.parametrize(
    ("architecture", "instance", "extra", "message"),
    [
        (
            "qwen2.5-7b",
            "ml.g6e.48xlarge",
            "tensor_parallel_degree: 8\n",
            "8 cannot shard the model's 28 attention heads / 4 KV heads; use one of [1, 2, 4]",
        ),
        (
            SIX_KV_HEADS,
            "ml.g6e.12xlarge",
            "tensor_parallel_degree: 4\n",
            "4 cannot shard the model's 12 attention heads / 6 KV heads; use one of [1, 2]",
        ),
        (
            "llama-3.1-8b",
            "ml.inf2.24xlarge",
            "container: {family: lmi-neuronx}\ntensor_parallel_degree: 12\n",
            "12 is not a degree the Neuron runtime runs within the 12 NeuronCores of ml.inf2.24xlarge; "
            "use one of [1, 2, 4, 8]",
        ),
    ],
)
def test_an_explicit_tensor_parallel_degree_that_cannot_shard_is_refused_with_the_valid_ones(
    tmp_path, capsys, architecture, instance, extra, message
):
    path = _team_file(tmp_path, architecture, instance, extra)
    issue = _only_issue(path)
    assert issue.path == "serving.tensor_parallel_degree"
    assert message in issue.message
    code, plan, err = _plan_cli(path, capsys)
    assert code != 0 and plan is None and "Traceback" not in err


def test_every_default_degree_shards_every_built_in_model_and_none_larger_does():
    for instance in catalog.all_instances():
        for name in known_models():
            model = load_architecture(name)
            degrees = valid_degrees(model, instance)
            tp = default_degree(model, instance)
            assert tp == max(degrees) and tp <= instance.tp_units, (name, instance.instance_type)
            assert model.num_attention_heads % tp == 0, (name, instance.instance_type)
            if not instance.is_neuron:  # vLLM: KV heads divide the degree or the degree divides them
                kv = model.num_key_value_heads
                assert instance.tp_units % tp == 0 and (kv % tp == 0 or tp % kv == 0)
            larger = [d for d in range(tp + 1, instance.tp_units + 1) if d in degrees]
            assert larger == [], (name, instance.instance_type)


# --------------------------------------------------------------------------- rules the guide states


def test_timeouts_below_what_the_weights_need_are_refused_with_the_minimum(tmp_path):
    extra = "model_data_download_timeout_seconds: 300\ncontainer_startup_health_check_timeout_seconds: 300\n"
    path = _team_file(tmp_path, "llama-3.3-70b", "ml.p5.48xlarge", extra)
    issues = _issues(path)
    size = weights_gb(load_architecture("llama-3.3-70b"), "bf16")
    download, startup = minimum_timeouts(size)
    assert [(i.path, i.line) for i in issues] == [
        ("serving.model_data_download_timeout_seconds", 8),
        ("serving.container_startup_health_check_timeout_seconds", 9),
    ]
    assert f"300 s is below the {download} s that 141 GB of downloaded weights need" in issues[0].message
    assert f"300 s is below the {startup} s that 141 GB of downloaded weights need" in issues[1].message
    assert 600 < download < startup < 3600  # SageMaker's own 600 s default would kill it too
    # The minimum itself is accepted.
    at_minimum = extra.replace("300\ncontainer", f"{download}\ncontainer").replace(": 300\n", f": {startup}\n")
    load_resolved_team(_team_file(tmp_path, "llama-3.3-70b", "ml.p5.48xlarge", at_minimum))


def test_the_guide_timeout_figures_are_the_ones_the_code_computes():
    text = " ".join(GUIDE.read_text().split())
    match = re.search(r"8B: (\d+)/(\d+) s, 70B: (\d+)/(\d+) s\)", text)
    assert match, "the guide states the sized timeouts for 8B and 70B"
    eight, seventy = (weights_gb(load_architecture(name), "bf16") for name in ("llama-3.1-8b", "llama-3.3-70b"))
    assert tuple(int(g) for g in match.groups()) == (*sized_timeouts(eight), *sized_timeouts(seventy))
    minimum = re.search(r"below the weights' minimum \(8B: (\d+)/(\d+) s, 70B: (\d+)/(\d+) s", text)
    assert minimum, "the guide states the minimum timeouts"
    assert tuple(int(g) for g in minimum.groups()) == (*minimum_timeouts(eight), *minimum_timeouts(seventy))


def test_weights_that_do_not_fit_are_refused_on_neuron_too(tmp_path, capsys):
    path = _team_file(tmp_path, "llama-3.3-70b", "ml.inf2.xlarge", "container: {family: lmi-neuronx}\n")
    issue = _only_issue(path)
    assert issue.path == "serving.instance_type"
    assert "bf16 weights need 65.7 GiB per accelerator at TP=2, but ml.inf2.xlarge leaves" in issue.message
    suggested = re.search(r"Try: (ml\.[\w.-]+)", issue.message).group(1)
    assert catalog.get_instance(suggested).is_neuron  # a fix on the platform the container family runs
    code, plan, err = _plan_cli(path, capsys)
    assert code != 0 and plan is None and "Traceback" not in err


def test_a_context_the_neuron_kv_cache_cannot_hold_is_refused_without_an_fp8_kv_fix(tmp_path):
    path = _team_file(
        tmp_path, "llama-3.1-8b", "ml.inf2.xlarge", "container: {family: lmi-neuronx}\nmax_model_len: 131072\n"
    )
    issue = _only_issue(path)
    assert issue.path == "serving.max_model_len" and "KV cache" in issue.message
    assert "FP8 KV" not in issue.message  # the rules refuse an FP8 KV cache with lmi-neuronx


@pytest.mark.parametrize(
    ("extra", "path", "fragment"),
    [
        ("kv_cache_dtype: fp8\n", "serving.kv_cache_dtype", "not offered by LMI's TensorRT-LLM options"),
        ("gpu_memory_utilization: 0.8\n", "serving.gpu_memory_utilization", "kv_cache_free_gpu_mem_fraction"),
    ],
)
def test_trtllm_refuses_the_vllm_memory_settings_it_would_drop(tmp_path, extra, path, fragment):
    issue = _only_issue(
        _team_file(tmp_path, "llama-3.1-8b", "ml.g6e.2xlarge", "container: {family: lmi-trtllm}\n" + extra)
    )
    assert issue.path == path and fragment in issue.message


def test_trtllm_refuses_weight_only_fp8(tmp_path):
    extra = "container: {family: lmi-trtllm}\nquantization: fp8\nallow_weight_only_fp8: true\n"
    issue = _only_issue(_team_file(tmp_path, "llama-3.1-8b", "ml.g5.2xlarge", extra))
    assert issue.path == "serving.allow_weight_only_fp8" and "never weight-only" in issue.message


def test_trtllm_is_planned_with_the_kv_share_it_is_actually_given(tmp_path):
    resolved = load_resolved_team(
        _team_file(tmp_path, "llama-3.1-8b", "ml.g6e.2xlarge", "container: {family: lmi-trtllm}\n")
    ).baseline
    assert "OPTION_GPU_MEMORY_UTILIZATION" not in resolved.environment
    assert "OPTION_KV_CACHE_DTYPE" not in resolved.environment
    assert resolved.plan.gpu_memory_utilization == TRTLLM_KV_CACHE_FREE_GPU_MEM_FRACTION
    assert resolved.plan.kv_cache_dtype == "auto"


# --------------------------------------------------------------------------- finite, sane numbers


@pytest.mark.parametrize("value", [float("inf"), float("-inf"), float("nan")])
def test_non_finite_numbers_never_reach_the_planner_or_synth(value):
    with pytest.raises(ValidationError, match="finite number"):
        BenchmarkGate(p99_ttft_ms_budget=value)


def test_infinite_budget_in_a_file_is_a_config_issue(tmp_path):
    tail = "gate:\n  benchmark:\n    p99_ttft_ms_budget: .inf\n"
    issue = _only_issue(_team_file(tmp_path, "llama-3.1-8b", "ml.g6.2xlarge", tail=tail))
    assert issue.path == "gate.benchmark.p99_ttft_ms_budget" and issue.line == 10


@pytest.mark.parametrize(
    ("extra", "tail", "path"),
    [
        ("max_model_len: 100000000000000\n", "", "serving.max_model_len"),
        ("", "gate:\n  benchmark:\n    prompt_tokens: 1000000000000\n", "gate.benchmark.prompt_tokens"),
        ("tensor_parallel_degree: 100000\n", "", "serving.tensor_parallel_degree"),
        ("autoscaling: {max_capacity: 10000000}\n", "", "serving.autoscaling.max_capacity"),
    ],
)
def test_numbers_beyond_any_real_model_or_endpoint_are_refused_with_the_bound(tmp_path, extra, tail, path):
    issue = _only_issue(_team_file(tmp_path, "llama-3.1-8b", "ml.g6.2xlarge", extra, tail))
    assert issue.path == path and "must be at most" in issue.message


# --------------------------------------------------------------------------- suggested fixes


def test_a_suggested_fix_is_one_the_rules_accept(tmp_path):
    issue = _only_issue(_team_file(tmp_path, "llama-3.3-70b", "ml.g5.12xlarge"))
    assert issue.path == "serving.instance_type"
    assert "FP8" not in issue.message  # A10G has no FP8 tensor cores: the FP8 rule refuses it
    # Nor AWQ: the checkpoint is taken as bf16, which LMI's vLLM cannot quantize to AWQ at start-up (OG112).
    assert "AWQ" not in issue.message and "Try: ml.g6e.12xlarge" in issue.message
    # Taking the fix gives a config the rules accept.
    load_resolved_team(_team_file(tmp_path, "llama-3.3-70b", "ml.g6e.12xlarge"))
    # An AWQ checkpoint is served as AWQ, so it is planned so and fits, with quantization unset or set to awq.
    awq = _team_file(tmp_path, "llama-3.3-70b", "ml.g5.12xlarge")
    awq.write_text(awq.read_text().replace("  architecture:", "  weights: awq\n  architecture:"))
    assert load_resolved_team(awq).baseline.plan.weight_precision == "awq"
    awq.write_text(awq.read_text() + "  quantization: awq\n")
    assert load_resolved_team(awq).baseline.plan.fits


def test_fp8_is_suggested_on_a10g_once_weight_only_fp8_is_allowed(tmp_path):
    issue = _only_issue(_team_file(tmp_path, "llama-3.3-70b", "ml.g5.12xlarge", "allow_weight_only_fp8: true\n"))
    assert "Try: FP8 weights" in issue.message
