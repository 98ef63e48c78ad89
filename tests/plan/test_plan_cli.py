"""`optigate plan` for team files, ad hoc, as JSON, and --compare."""

from __future__ import annotations

import json

import pytest

from optigate.cli import main
from optigate.plan.architecture import load_architecture
from tests.conftest import CONFIG

REQUIRED_KEYS = {
    "weights_gib_per_accelerator",
    "kv_bytes_per_token",
    "kv_capacity_tokens",
    "max_concurrency_at_max_model_len",
    "decode_tpot_ms_batch1",
    "decode_bound",
    "cost_per_million_output_tokens",
}


@pytest.mark.parametrize("team", ["chat", "research", "support"])
def test_plan_works_for_every_example_team(team, capsys):
    assert main(["plan", str(CONFIG / "teams" / f"{team}.yaml"), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data.keys() >= REQUIRED_KEYS
    assert data["fits"] is True
    assert data["decode_bound"] == "memory"  # decode rereads the weights every step


def test_chat_plan_uses_fp8_weights_and_kv_as_configured(capsys):
    main(["plan", str(CONFIG / "teams" / "chat.yaml"), "--json"])
    data = json.loads(capsys.readouterr().out)
    assert (data["weight_precision"], data["kv_cache_dtype"], data["max_model_len"]) == ("fp8", "fp8", 8192)
    assert data["kv_bytes_per_token"] == 65536  # 2 x 32 layers x 8 KV heads x 128 x 1 byte


def test_ad_hoc_plan_json_has_the_documented_keys_and_hand_checked_kv(capsys):
    code = main(["plan", "--model", "llama-3.1-8b", "--instance", "ml.g6e.xlarge", "--max-model-len", "8192", "--json"])
    assert code == 0
    data = json.loads(capsys.readouterr().out)
    assert data.keys() >= REQUIRED_KEYS
    assert data["kv_bytes_per_token"] == 2 * 32 * 8 * 128 * 2  # 128 KiB in bf16
    params = load_architecture("llama-3.1-8b").parameter_count().total
    assert data["weights_gib_per_accelerator"] == pytest.approx(params * 2 / 2**30, rel=0.01)


def test_ad_hoc_fp8_kv_and_tensor_parallel_divide_the_per_accelerator_kv(capsys):
    main(
        [
            "plan",
            "--model",
            "llama-3.1-70b",
            "--instance",
            "ml.p5.48xlarge",
            "--tensor-parallel",
            "8",
            "--kv-cache-dtype",
            "fp8",
            "--json",
        ]
    )
    data = json.loads(capsys.readouterr().out)
    assert data["kv_bytes_per_token"] == 2 * 80 * 8 * 128 * 1 / 8


def test_ad_hoc_plan_that_does_not_fit_exits_non_zero_and_says_why(capsys):
    assert main(["plan", "--model", "llama-3.3-70b", "--instance", "ml.g6e.2xlarge"]) == 1
    assert "weights need" in capsys.readouterr().err


def test_ad_hoc_plan_reads_a_config_json(tmp_path, capsys):
    config = tmp_path / "config.json"
    config.write_text(
        json.dumps(
            {
                "model_type": "llama",
                "num_hidden_layers": 16,
                "hidden_size": 2048,
                "intermediate_size": 8192,
                "num_attention_heads": 32,
                "num_key_value_heads": 8,
                "head_dim": 64,
                "vocab_size": 128256,
                "max_position_embeddings": 131072,
                "tie_word_embeddings": True,
            }
        )
    )
    assert (
        main(["plan", "--model", str(config), "--instance", "ml.g6.xlarge", "--max-model-len", "8192", "--json"]) == 0
    )
    data = json.loads(capsys.readouterr().out)
    assert data["kv_bytes_per_token"] == 2 * 16 * 8 * 64 * 2


def test_compare_marks_the_cheapest_candidate_that_meets_the_tpot(capsys):
    code = main(
        [
            "plan",
            "--model",
            "llama-3.1-8b",
            "--compare",
            "--instance",
            "ml.g5.2xlarge,ml.g6e.xlarge,ml.p5.48xlarge",
            "--precisions",
            "bf16,fp8",
            "--max-model-len",
            "8192",
            "--tpot-ms",
            "20",
            "--json",
        ]
    )
    assert code == 0
    data = json.loads(capsys.readouterr().out)
    candidates = data["candidates"]
    assert len(candidates) == 6
    g5_fp8 = next(c for c in candidates if c["instance_type"] == "ml.g5.2xlarge" and c["weight_precision"] == "fp8")
    assert g5_fp8["reason"] == "no native fp8" and g5_fp8["cost_within_target"] is None
    meeting = [c for c in candidates if c["cost_within_target"] is not None]
    assert data["cheapest"]["cost_within_target"] == min(c["cost_within_target"] for c in meeting)
    for c in meeting:
        assert c["decode_tpot_ms_batch1"] <= 20


def test_list_models(capsys):
    assert main(["plan", "--list-models"]) == 0
    assert "llama-3.1-8b" in capsys.readouterr().out.split()
