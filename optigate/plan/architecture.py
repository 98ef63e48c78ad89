"""Transformer architecture description and the parameter / KV arithmetic that follows from it.

A ``ModelArchitecture`` is built from the fields of a Hugging Face ``config.json``
(a dict, a path to the file or its directory, or the short name of a built-in model
from ``data/models.yaml``). Everything else in the planner derives sizes from it,
so parameter counts are *computed*, not looked up; tests check them against the
publisher's figures.

Supported: decoder-only GQA/MQA/MHA transformers with a gated MLP (Llama, Mistral,
Qwen2/2.5/3) and top-k MoE variants (Mixtral, Qwen3-MoE, Qwen2-MoE shared experts).
Not supported: MLA attention (DeepSeek-V2/V3), sliding-window or hybrid
(Mamba/linear-attention) KV layouts -- ``from_config`` raises rather than guess.
"""

from __future__ import annotations

import difflib
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache, lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

# model_type values whose q/k/v projections carry a bias even though config.json
# has no flag for it.
_QKV_BIAS_MODEL_TYPES = frozenset({"qwen2", "qwen2_moe"})
# model_type values with a per-head RMSNorm on q and k (adds 2*head_dim per layer).
_QK_NORM_MODEL_TYPES = frozenset({"qwen3", "qwen3_moe"})


@dataclass(frozen=True)
class ParameterBreakdown:
    """Parameter counts by component; ``active`` counts one token's path through an MoE."""

    embedding: int
    lm_head: int
    attention: int  # q, k, v, o projections (+ biases) over all layers
    dense_mlp: int  # gate/up/down of non-MoE layers
    experts_total: int  # all routed experts of all MoE layers
    experts_active: int  # the top-k experts one token uses, over all MoE layers
    shared_experts: int
    router: int
    norms: int

    @property
    def total(self) -> int:
        return (
            self.embedding
            + self.lm_head
            + self.attention
            + self.dense_mlp
            + self.experts_total
            + self.shared_experts
            + self.router
            + self.norms
        )

    @property
    def active(self) -> int:
        return self.total - self.experts_total + self.experts_active

    @property
    def active_non_embedding(self) -> int:
        """Parameters that take part in matmuls for one token (the embedding is a lookup)."""
        return self.active - self.embedding


@dataclass(frozen=True)
class ModelArchitecture:
    """The shape of a decoder-only transformer, as far as memory and FLOPs are concerned."""

    name: str
    num_hidden_layers: int
    hidden_size: int
    intermediate_size: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    vocab_size: int
    max_position_embeddings: int
    tie_word_embeddings: bool = False
    attention_bias: bool = False
    qk_norm: bool = False
    num_experts: int = 0
    num_experts_per_tok: int = 0
    moe_intermediate_size: int = 0
    shared_expert_intermediate_size: int = 0
    moe_layer_indices: tuple[int, ...] = ()
    model_type: str = ""
    hf_repo: str | None = None
    published_total_parameters: float | None = None
    published_active_parameters: float | None = None
    source: str | None = field(default=None, compare=False)

    # --- shape helpers ----------------------------------------------------

    @property
    def is_moe(self) -> bool:
        return self.num_experts > 0 and self.num_experts_per_tok > 0 and bool(self.moe_layer_indices)

    @property
    def num_moe_layers(self) -> int:
        return len(self.moe_layer_indices) if self.is_moe else 0

    @property
    def num_dense_layers(self) -> int:
        return self.num_hidden_layers - self.num_moe_layers

    @property
    def q_size(self) -> int:
        return self.num_attention_heads * self.head_dim

    @property
    def kv_size(self) -> int:
        return self.num_key_value_heads * self.head_dim

    def attention_parameters_per_layer(self) -> int:
        h = self.hidden_size
        weights = h * self.q_size + 2 * h * self.kv_size + self.q_size * h
        bias = (self.q_size + 2 * self.kv_size) if self.attention_bias else 0
        return weights + bias

    def dense_mlp_parameters_per_layer(self) -> int:
        return 3 * self.hidden_size * self.intermediate_size  # gate, up, down

    def expert_parameters(self) -> int:
        """One routed expert (gate, up, down)."""
        return 3 * self.hidden_size * self.moe_intermediate_size

    def norm_parameters_per_layer(self) -> int:
        return 2 * self.hidden_size + (2 * self.head_dim if self.qk_norm else 0)

    def parameter_count(self) -> ParameterBreakdown:
        """Count parameters from the shapes: embeddings, attention (GQA), MLP or experts,
        routers, norms, and lm_head unless it is tied to the embedding."""
        layers = self.num_hidden_layers
        moe_layers = self.num_moe_layers
        embedding = self.vocab_size * self.hidden_size
        return ParameterBreakdown(
            embedding=embedding,
            lm_head=0 if self.tie_word_embeddings else embedding,
            attention=layers * self.attention_parameters_per_layer(),
            dense_mlp=self.num_dense_layers * self.dense_mlp_parameters_per_layer(),
            experts_total=moe_layers * self.num_experts * self.expert_parameters(),
            experts_active=moe_layers * self.num_experts_per_tok * self.expert_parameters(),
            shared_experts=moe_layers * 3 * self.hidden_size * self.shared_expert_intermediate_size,
            router=moe_layers * self.hidden_size * self.num_experts,
            norms=layers * self.norm_parameters_per_layer() + self.hidden_size,
        )

    # --- KV cache -----------------------------------------------------------

    def kv_heads_per_rank(self, tp: int = 1) -> int:
        """KV heads one tensor-parallel rank stores. When tp exceeds the KV head count
        the heads are replicated (as vLLM does), so each rank keeps one."""
        if tp < 1:
            raise ValueError("tensor parallel degree must be >= 1")
        return max(1, math.ceil(self.num_key_value_heads / tp))

    def kv_bytes_per_token(self, kv_dtype_bytes: float = 2, tp: int = 1) -> float:
        """Bytes of K and V one token occupies on one rank: 2 x layers x kv_heads/tp x head_dim x bytes."""
        return 2 * self.num_hidden_layers * self.kv_heads_per_rank(tp) * self.head_dim * kv_dtype_bytes

    def valid_tensor_parallel(self, tp: int) -> bool:
        """vLLM needs attention heads divisible by tp, and kv heads divisible by tp (or tp by kv heads)."""
        if tp < 1 or self.num_attention_heads % tp:
            return False
        kv = self.num_key_value_heads
        return kv % tp == 0 or tp % kv == 0

    # --- construction -------------------------------------------------------

    @classmethod
    def from_config(
        cls,
        config: Mapping[str, Any],
        *,
        name: str | None = None,
        hf_repo: str | None = None,
        published: Mapping[str, Any] | None = None,
        source: str | None = None,
    ) -> ModelArchitecture:
        """Build from a Hugging Face config.json dict (text_config is used for VLM wrappers)."""
        cfg = dict(config)
        if "text_config" in cfg and "num_hidden_layers" not in cfg:
            cfg = {**cfg, **cfg["text_config"]}
        if cfg.get("kv_lora_rank") or cfg.get("q_lora_rank"):
            raise NotImplementedError("MLA attention (DeepSeek-V2/V3 style) is not modelled by this planner")
        if cfg.get("layer_types") and any(t != "full_attention" for t in cfg["layer_types"]):
            raise NotImplementedError("sliding-window / hybrid layer layouts are not modelled by this planner")
        try:
            layers = int(cfg["num_hidden_layers"])
            hidden = int(cfg["hidden_size"])
            heads = int(cfg["num_attention_heads"])
            vocab = int(cfg["vocab_size"])
        except KeyError as missing:
            raise ValueError(f"config.json lacks required field {missing}") from None
        model_type = str(cfg.get("model_type", ""))
        kv_heads = int(cfg.get("num_key_value_heads") or heads)
        if min(layers, hidden, heads, vocab, kv_heads) < 1:
            raise ValueError("config.json: layer, head, hidden and vocabulary sizes must be positive")
        head_dim = int(cfg.get("head_dim") or 0)
        if not head_dim:
            if hidden % heads:
                raise ValueError(
                    f"hidden_size ({hidden}) is not a multiple of num_attention_heads ({heads}); give head_dim"
                )
            head_dim = hidden // heads
        num_experts = int(cfg.get("num_local_experts") or cfg.get("num_experts") or cfg.get("n_routed_experts") or 0)
        experts_per_tok = int(cfg.get("num_experts_per_tok") or 0)
        intermediate = int(cfg.get("intermediate_size") or 0)
        moe_intermediate = int(cfg.get("moe_intermediate_size") or (intermediate if num_experts else 0))
        shared = int(cfg.get("shared_expert_intermediate_size") or 0)
        if not shared and cfg.get("n_shared_experts"):
            shared = int(cfg["n_shared_experts"]) * moe_intermediate
        moe_layers: tuple[int, ...] = ()
        if num_experts and experts_per_tok:
            step = int(cfg.get("decoder_sparse_step") or 1)
            dense_only = set(cfg.get("mlp_only_layers") or [])
            first_dense = int(cfg.get("first_k_dense_replace") or 0)
            moe_layers = tuple(
                i for i in range(layers) if i not in dense_only and i >= first_dense and (i + 1) % step == 0
            )
        published = published or {}
        return cls(
            name=name or str(cfg.get("_name_or_path") or model_type or "custom"),
            num_hidden_layers=layers,
            hidden_size=hidden,
            intermediate_size=intermediate,
            num_attention_heads=heads,
            num_key_value_heads=kv_heads,
            head_dim=head_dim,
            vocab_size=vocab,
            max_position_embeddings=int(cfg.get("max_position_embeddings") or 0),
            tie_word_embeddings=bool(cfg.get("tie_word_embeddings", False)),
            attention_bias=bool(cfg.get("attention_bias", model_type in _QKV_BIAS_MODEL_TYPES)),
            qk_norm=model_type in _QK_NORM_MODEL_TYPES,
            num_experts=num_experts if moe_layers else 0,
            num_experts_per_tok=experts_per_tok if moe_layers else 0,
            moe_intermediate_size=moe_intermediate if moe_layers else 0,
            shared_expert_intermediate_size=shared if moe_layers else 0,
            moe_layer_indices=moe_layers,
            model_type=model_type,
            hf_repo=hf_repo,
            published_total_parameters=_opt_float(published.get("total")),
            published_active_parameters=_opt_float(published.get("active")),
            source=source,
        )


def _opt_float(value: Any) -> float | None:
    return None if value is None else float(value)


@lru_cache(maxsize=1)
def _builtin_table() -> dict[str, dict[str, Any]]:
    text = resources.files("optigate.plan").joinpath("data/models.yaml").read_text(encoding="utf-8")
    return yaml.safe_load(text)


def builtin_entries() -> dict[str, dict[str, Any]]:
    """The entries of data/models.yaml as written (optigate.plan.checkpoints reads their weights as stored)."""
    return _builtin_table()


@cache
def _builtin(name: str) -> ModelArchitecture:
    entry = _builtin_table()[name]
    return ModelArchitecture.from_config(
        entry["config"],
        name=name,
        hf_repo=entry.get("hf_repo"),
        published=entry.get("published_parameters"),
        source=entry.get("source"),
    )


def known_models() -> tuple[str, ...]:
    """Short names of the built-in models (keys of data/models.yaml)."""
    return tuple(_builtin_table())


def load_architecture(spec: str | Path | Mapping[str, Any] | ModelArchitecture) -> ModelArchitecture:
    """Accept a built-in short name, a Hugging Face repo id of a built-in, a path to a
    config.json (or a directory holding one), a config dict, or an architecture."""
    if isinstance(spec, ModelArchitecture):
        return spec
    if isinstance(spec, Mapping):
        return ModelArchitecture.from_config(spec)
    text = str(spec).strip()
    table = _builtin_table()
    lowered = text.lower()
    if lowered in table:
        return _builtin(lowered)
    for key, entry in table.items():
        if str(entry.get("hf_repo", "")).lower() == lowered:
            return _builtin(key)
    path = Path(text).expanduser()
    if path.is_dir():
        path = path / "config.json"
    if path.is_file():
        return ModelArchitecture.from_config(json.loads(path.read_text(encoding="utf-8")), name=path.parent.name)
    close = difflib.get_close_matches(lowered, list(table), n=3, cutoff=0.5)
    hint = f" Did you mean: {', '.join(close)}?" if close else ""
    raise KeyError(f"Unknown model {text!r}: not a built-in name, known repo id, or config.json path.{hint}")
