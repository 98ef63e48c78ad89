"""Parameter counts and KV arithmetic, checked against publishers' figures and by hand."""

import json

import pytest

from optigate.plan import ModelArchitecture, known_models, load_architecture

REQUIRED = {
    "llama-3.1-8b",
    "llama-3.1-70b",
    "mistral-7b-v0.3",
    "mixtral-8x7b",
    "qwen2.5-7b",
    "qwen2.5-72b",
    "qwen3-8b",
    "qwen3-32b",
    "qwen3-30b-a3b",
    "llama-3.2-1b",
}


def test_required_models_are_built_in():
    assert set(known_models()) >= REQUIRED
    assert len(known_models()) >= 10
    for name in known_models():
        assert load_architecture(name).hf_repo


@pytest.mark.parametrize("name", known_models())
def test_parameter_count_within_one_percent_of_published(name):
    arch = load_architecture(name)
    published = arch.published_total_parameters
    assert published, f"{name} has no published parameter count"
    assert arch.parameter_count().total == pytest.approx(published, rel=0.01)


@pytest.mark.parametrize("name", [n for n in known_models() if load_architecture(n).is_moe])
def test_moe_active_below_total_and_near_published(name):
    arch = load_architecture(name)
    counts = arch.parameter_count()
    assert counts.active < counts.total
    # Publishers round the activated count to 0.1B and differ on counting embeddings: 2 %.
    assert counts.active == pytest.approx(arch.published_active_parameters, rel=0.02)


def test_llama_31_8b_parameter_breakdown_by_hand():
    counts = load_architecture("llama-3.1-8b").parameter_count()
    embedding = 128256 * 4096
    attention_per_layer = 4096 * 4096 * 2 + 4096 * 1024 * 2  # q, o + k, v (GQA 8 kv heads x 128)
    mlp_per_layer = 3 * 4096 * 14336
    norms = 32 * 2 * 4096 + 4096
    assert counts.total == 2 * embedding + 32 * (attention_per_layer + mlp_per_layer) + norms
    assert counts.active == counts.total


def test_tied_embeddings_are_counted_once():
    tied = load_architecture("llama-3.2-1b")
    assert tied.tie_word_embeddings
    untied = ModelArchitecture(**{**tied.__dict__, "tie_word_embeddings": False})
    assert tied.parameter_count().lm_head == 0
    assert untied.parameter_count().total - tied.parameter_count().total == 128256 * 2048


def test_kv_bytes_per_token_llama_31_8b():
    arch = load_architecture("llama-3.1-8b")
    assert arch.kv_bytes_per_token(2) == 2 * 32 * 8 * 128 * 2 == 131072  # 128 KiB
    assert arch.kv_bytes_per_token(1) == 65536  # FP8 KV halves it
    assert arch.kv_bytes_per_token(2, tp=8) == 131072 / 8


def test_kv_heads_replicate_when_tp_exceeds_kv_heads():
    arch = load_architecture("qwen2.5-7b")  # 4 KV heads
    assert arch.kv_heads_per_rank(8) == 1
    assert arch.kv_bytes_per_token(2, tp=8) == arch.kv_bytes_per_token(2, tp=4)
    assert not arch.valid_tensor_parallel(8)  # 28 attention heads


def test_qwen2_has_qkv_bias_and_qwen3_has_qk_norm():
    qwen2 = load_architecture("qwen2.5-7b")
    assert qwen2.attention_bias and not qwen2.qk_norm
    qwen3 = load_architecture("qwen3-8b")
    assert qwen3.qk_norm and not qwen3.attention_bias


def test_load_from_dict_path_and_repo_id(tmp_path):
    config = {
        "model_type": "llama",
        "num_hidden_layers": 2,
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "vocab_size": 100,
        "max_position_embeddings": 512,
    }
    from_dict = load_architecture(config)
    assert from_dict.head_dim == 16
    (tmp_path / "config.json").write_text(json.dumps(config))
    assert load_architecture(tmp_path).parameter_count() == from_dict.parameter_count()
    assert load_architecture("meta-llama/Llama-3.1-8B-Instruct").name == "llama-3.1-8b"


def test_unknown_model_suggests_close_names():
    with pytest.raises(KeyError, match=r"llama-3\.1-8b"):
        load_architecture("llama-3.1-8")


def test_mla_configs_are_refused():
    with pytest.raises(NotImplementedError):
        ModelArchitecture.from_config(
            {"num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4, "vocab_size": 10, "kv_lora_rank": 512}
        )
