"""Every registered rule, table-driven as cdk-nag's rule tests: a non-compliant config that the rule reports (its ID
asserted) and its compliant twin, the closest config that passes every rule. A registered rule without a case fails."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from optigate.config.loader import ConfigError, load_team
from optigate.deployment import load_resolved_project, load_resolved_team
from optigate.deployment.all_rules import every_rule
from tests.conftest import edited_config

BASE: dict[str, Any] = {
    "team": "demo",
    "model": {"source": {"s3_uri": "s3://acme-models/llama-3.1-8b/"}, "architecture": "llama-3.1-8b"},
    "serving": {"instance_type": "ml.g6.2xlarge", "max_model_len": 8192},
    "rollout": {"strategy": "canary"},
    "gate": {"benchmark": {"concurrency": [1, 8, 32]}},
}
DROP = object()  # a patch value that removes the key
#: llama-3.1-8b's config.json fields
FIELDS = {
    "num_hidden_layers": 32,
    "hidden_size": 4096,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "intermediate_size": 14336,
    "vocab_size": 128256,
    "max_position_embeddings": 131072,
}
DATASET = {"evaluation": {"dataset_s3_uri": "s3://acme-eval/chat/eval.jsonl"}}
FP8 = {"quantization": "fp8"}
#: The team's captured traffic, sampled as whole sessions (a closed loop at each level).
SESSIONS = {"from": "data_capture", "kind": "sessions"}
TRTLLM = {"container": {"family": "lmi-trtllm"}}
NEURON = {"container": {"family": "lmi-neuronx"}, "instance_type": "ml.inf2.24xlarge", "max_model_len": 4096}
MOE = {"model": {"architecture": "qwen3-30b-a3b"}}
ADAPTER = {"name": "triage", "s3_uri": "s3://acme-models/adapters/triage.tar.gz"}
ADAPTERS = {"adapters": [ADAPTER]}
#: The p99 budgets a new adapter version is judged against (OG455).
SLO = {"benchmark": {"p99_ttft_ms_budget": 800, "p99_itl_ms_budget": 60}}
TRIAGE_V2 = "s3://acme-models/adapters/triage-v2.tar.gz"  # a new version of ADAPTER: gate.candidate.adapters
POOLS = [{"instance_type": "ml.g6.2xlarge", "priority": 1}, {"instance_type": "ml.g6.4xlarge", "priority": 2}]
CROSS_CHECK = {"benchmark": {"cross_check": "sagemaker", "cross_check_tokenizer": "meta-llama/Llama-3.1-8B"}}
HUGGING_FACE = {"model_id": "meta-llama/Llama-3.1-8B-Instruct", "s3_uri": "s3://acme-models/hf/"}
#: A folder with an AWQ checkpoint's config.json (what model.local_dir reads).
AWQ_CHECKPOINT = Path(__file__).parent.parent / "fixtures" / "checkpoints" / "llama-3.1-8b-awq"
CACHED = {"data_cache_config": {"enable_caching": True}}
SPREAD_OVER_ZONES = {"placement_strategy": "SPREAD", "availability_zone_balance": {"enforcement_mode": "PERMISSIVE"}}
#: Autoscaled copies whose instances follow them (ManagedInstanceScaling), so every copy finds a GPU.
MANAGED_3 = {"max_capacity": 3, "managed_instance_scaling": True}
MANAGED_10 = {"max_capacity": 10, "managed_instance_scaling": True}
REASON = "reviewed with the platform team: the shadow variant runs on the primary pool only"


def arch(**changes: Any) -> dict[str, Any]:
    fields = {**FIELDS, **changes}
    return {"model": {"architecture": {k: v for k, v in fields.items() if v is not DROP}}}


def serving(*blocks: dict[str, Any], **fields: Any) -> dict[str, Any]:
    """A serving patch: the blocks (NEURON, TRTLLM) updated by the fields."""
    merged: dict[str, Any] = {}
    for block in (*blocks, fields):
        merged.update(block)
    return {"serving": merged}


def gate(candidate: dict[str, Any], **more: Any) -> dict[str, Any]:
    return {"gate": {"candidate": candidate, **DATASET, **more}}


def both(*patches: dict[str, Any]) -> dict[str, Any]:
    merged: dict[str, Any] = {}
    for patch in patches:
        merged = _merged(merged, patch)
    return merged


def _merged(base: Any, patch: Any) -> Any:
    if not isinstance(base, dict) or not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = copy.deepcopy(base)
    for key, value in patch.items():
        if value is DROP:
            out.pop(key, None)
        else:
            out[key] = _merged(out.get(key), value)
    return out


SIZED = {"moe_intermediate_size": 512}  # experts small enough for the mixture to fit ml.g6.2xlarge
HEADS_30 = arch(num_attention_heads=30, num_key_value_heads=6, head_dim=128)  # shards over 2 GPUs, not 4

# (rule ID, the team patch that breaks it, its compliant twin)
TEAM_CASES: list[tuple[str, dict[str, Any], dict[str, Any]]] = [
    (
        "OG101",
        {
            "model": {
                "source": {"hugging_face": {"model_id": "meta-llama/Llama-3.1-8B", "s3_uri": "s3://acme-models/hf/"}}
            }
        },
        {},
    ),
    ("OG102", arch(intermediate_size=DROP), arch()),
    ("OG103", arch(num_key_value_heads=5), arch(num_key_value_heads=4)),
    ("OG104", arch(hidden_size=4100), arch(hidden_size=4100, head_dim=128)),
    ("OG105", arch(num_local_experts=8, **SIZED), arch(num_local_experts=8, num_experts_per_tok=2, **SIZED)),
    ("OG106", arch(num_experts_per_tok=2, **SIZED), arch(num_local_experts=8, num_experts_per_tok=2, **SIZED)),
    (
        "OG107",
        arch(num_local_experts=8, num_experts_per_tok=9, **SIZED),
        arch(num_local_experts=8, num_experts_per_tok=8, **SIZED),
    ),
    ("OG108", {"model": {"architecture": "llama-3.1-8bb"}}, {"model": {"architecture": "llama-3.1-8b"}}),
    (
        "OG109",
        arch(max_position_embeddings=4096),
        both(arch(max_position_embeddings=4096), serving(max_model_len=4096)),
    ),
    ("OG110", serving(model_data_download_timeout_seconds=120), serving(model_data_download_timeout_seconds=600)),
    (
        "OG111",
        both(HEADS_30, serving(instance_type="ml.g6.12xlarge", tensor_parallel_degree=4)),
        both(HEADS_30, serving(instance_type="ml.g6.12xlarge", tensor_parallel_degree=2)),
    ),
    ("OG112", serving(quantization="gptq"), both({"model": {"weights": "gptq"}}, serving(quantization="gptq"))),
    (
        "OG113",
        {"model": {"source": {"s3_uri": DROP, "hugging_face": HUGGING_FACE}, "weights": "fp8"}},
        {"model": {"source": {"s3_uri": DROP, "hugging_face": HUGGING_FACE}, "weights": "bf16"}},
    ),
    ("OG114", {"model": {"local_dir": "no-such-folder"}}, {"model": {"local_dir": str(AWQ_CHECKPOINT)}}),
    (
        "OG201",
        serving(speculative_decoding={"method": "draft", "model_s3_uri": "s3://acme-drafts/llama-3.2-1b/"}),
        serving(speculative_decoding={"method": "draft", "model_s3_uri": "s3://acme-models/llama-3.1-8b/draft/"}),
    ),
    ("OG202", serving(lora={"max_loras": 4, "max_cpu_loras": 2}), serving(lora={"max_loras": 4, "max_cpu_loras": 4})),
    ("OG203", serving(TRTLLM, gpu_memory_utilization=0.9), serving(TRTLLM)),
    ("OG204", serving(TRTLLM, kv_cache_dtype="fp8"), serving(TRTLLM, kv_cache_dtype="auto")),
    ("OG205", serving(TRTLLM, allow_weight_only_fp8=True), serving(TRTLLM)),
    ("OG206", serving(TRTLLM, enforce_eager=True), serving(enforce_eager=True)),
    (
        "OG207",
        serving(max_batch_size=8, max_num_batched_tokens=4),
        serving(max_batch_size=8, max_num_batched_tokens=8),
    ),
    ("OG208", serving(model_data_download_timeout_seconds=30), serving(model_data_download_timeout_seconds=3600)),
    (
        "OG209",
        serving(autoscaling={"min_capacity": 3, "max_capacity": 2}),
        serving(autoscaling={"min_capacity": 2, "max_capacity": 2}),
    ),
    (
        "OG210",
        serving(autoscaling={"max_capacity": 2, "scale_to_zero": True}),
        both(serving(autoscaling={"max_capacity": 2, "scale_to_zero": True}), {"adapters": [ADAPTER]}),
    ),
    (
        "OG211",
        serving(autoscaling={"min_capacity": 0, "max_capacity": 2}),
        serving(autoscaling={"min_capacity": 1, "max_capacity": 2}),
    ),
    (
        "OG212",
        serving(environment={"OPTION_MAX_MODEL_LEN": "4096"}),
        serving(environment={"OPTION_TRUST_REMOTE_CODE": "true"}),
    ),
    ("OG213", serving(environment={"hf_token_file": "x"}), serving(environment={"HF_TOKEN_FILE": "x"})),
    ("OG214", {"adapters": [{**ADAPTER, "s3_uri": "s3://acme-models/adapters/triage.zip"}]}, {"adapters": [ADAPTER]}),
    ("OG215", {"adapters": [ADAPTER, ADAPTER]}, {"adapters": [ADAPTER, {**ADAPTER, "name": "reply"}]}),
    (
        "OG216",
        serving(autoscaling={"max_capacity": 2, "managed_instance_scaling": True}),
        both(serving(autoscaling={"max_capacity": 2, "managed_instance_scaling": True}), ADAPTERS),
    ),
    (
        "OG217",
        both(
            serving(autoscaling={"max_capacity": 2, "scale_to_zero": True, "managed_instance_scaling": False}), ADAPTERS
        ),
        both(
            serving(autoscaling={"max_capacity": 2, "scale_to_zero": True, "managed_instance_scaling": True}), ADAPTERS
        ),
    ),
    (
        "OG251",
        serving(instance_provision_timeout_seconds=600),
        serving(instance_pools=POOLS, instance_provision_timeout_seconds=600),
    ),
    ("OG252", serving(instance_pools=POOLS[:1]), serving(instance_pools=POOLS)),
    (
        "OG253",
        serving(instance_pools=[{**POOLS[1], "priority": 1}, {**POOLS[0], "priority": 2}]),
        serving(instance_pools=POOLS),
    ),
    ("OG254", serving(instance_pools=[POOLS[0], {**POOLS[0], "priority": 2}]), serving(instance_pools=POOLS)),
    ("OG255", serving(instance_pools=[POOLS[0], {**POOLS[1], "priority": 1}]), serving(instance_pools=POOLS)),
    ("OG256", serving(instance_pools=[POOLS[0], {**POOLS[1], "priority": 3}]), serving(instance_pools=POOLS)),
    (
        "OG257",
        serving(
            NEURON,
            instance_type="ml.inf2.48xlarge",
            tensor_parallel_degree=8,
            instance_pools=[
                {"instance_type": "ml.inf2.48xlarge", "priority": 1},
                {"instance_type": "ml.trn1.32xlarge", "priority": 2},
            ],
        ),
        serving(
            NEURON,
            instance_type="ml.inf2.48xlarge",
            tensor_parallel_degree=8,
            instance_pools=[
                {"instance_type": "ml.inf2.48xlarge", "priority": 1},
                {"instance_type": "ml.inf2.24xlarge", "priority": 2},
            ],
        ),
    ),
    (
        "OG258",
        serving(
            instance_type="ml.p5.48xlarge",
            tensor_parallel_degree=8,
            instance_pools=[
                {"instance_type": "ml.p5.48xlarge", "priority": 1},
                {"instance_type": "ml.p6-b200.48xlarge", "priority": 2},
            ],
        ),
        serving(
            instance_type="ml.p5.48xlarge",
            tensor_parallel_degree=8,
            instance_pools=[
                {"instance_type": "ml.p5.48xlarge", "priority": 1},
                {"instance_type": "ml.p5e.48xlarge", "priority": 2},
            ],
        ),
    ),
    ("OG301", serving(container={"version": "0.1.0"}), serving(container={"version": "0.36.0"})),
    ("OG302", serving(instance_type="ml.g9.2xlarge"), serving(instance_type="ml.g6.2xlarge")),
    ("OG303", serving(container={"family": "lmi-neuronx"}), serving(NEURON)),
    ("OG304", serving(instance_type="ml.inf2.24xlarge", max_model_len=4096), serving(NEURON)),
    (
        "OG305",
        serving(instance_type="ml.g6.12xlarge", tensor_parallel_degree=3),
        serving(instance_type="ml.g6.12xlarge", tensor_parallel_degree=2),
    ),
    ("OG306", serving(NEURON, quantization="fp8"), serving(NEURON)),
    (
        "OG307",
        serving(instance_type="ml.g5.2xlarge", quantization="fp8"),
        serving(instance_type="ml.g5.2xlarge", quantization="fp8", allow_weight_only_fp8=True),
    ),
    ("OG308", serving(quantization="nvfp4"), serving(quantization="fp8")),
    ("OG309", serving(TRTLLM, quantization="gptq"), serving(TRTLLM, quantization="awq")),
    ("OG310", serving(NEURON, kv_cache_dtype="fp8"), serving(NEURON, kv_cache_dtype="auto")),
    (
        "OG311",
        serving(TRTLLM, speculative_decoding={"method": "ngram"}),
        serving(speculative_decoding={"method": "ngram"}),
    ),
    (
        "OG312",
        serving(container={"version": "0.32.0"}, speculative_decoding={"method": "ngram"}),
        serving(container={"version": "0.33.0"}, speculative_decoding={"method": "ngram"}),
    ),
    ("OG313", serving(TRTLLM, lora={"max_loras": 2}), serving(lora={"max_loras": 2})),
    ("OG314", serving(volume_size_gb=100), serving(NEURON, volume_size_gb=100)),
    (
        "OG315",
        serving(container={"version": "0.28.0"}, enable_prefix_caching=True),
        serving(container={"version": "0.29.0"}, enable_prefix_caching=True),
    ),
    (
        "OG316",
        serving(container={"version": "0.34.0"}, attention_backend="TRITON_ATTN"),
        serving(container={"version": "0.35.0"}, attention_backend="TRITON_ATTN"),
    ),
    (
        "OG317",
        serving(instance_type="ml.g6.12xlarge", tensor_parallel_degree=2, enable_expert_parallel=True),
        both(MOE, serving(instance_type="ml.g6e.12xlarge", tensor_parallel_degree=2, enable_expert_parallel=True)),
    ),
    (
        "OG318",
        both(
            MOE,
            serving(
                instance_type="ml.g6e.12xlarge",
                tensor_parallel_degree=1,
                quantization="fp8",
                enable_expert_parallel=True,
            ),
        ),
        both(
            MOE,
            serving(
                instance_type="ml.g6e.12xlarge",
                tensor_parallel_degree=2,
                quantization="fp8",
                enable_expert_parallel=True,
            ),
        ),
    ),
    ("OG321", {"model": {"architecture": "llama-3.1-70b"}}, {"model": {"architecture": "llama-3.1-8b"}}),
    ("OG322", serving(max_model_len=131072), serving(max_model_len=8192)),
    ("OG323", serving(max_batch_size=256), serving(max_batch_size=4)),
    (
        "OG401",
        both(gate({"max_batch_size": 16}, **CROSS_CHECK), {"adapters": [ADAPTER]}),
        both(gate({"max_batch_size": 16}), {"adapters": [ADAPTER]}),
    ),
    ("OG402", {"gate": {"candidate": {"max_batch_size": 16}}}, gate({"max_batch_size": 16})),
    ("OG403", {"gate": {"benchmark": {"concurrency": [8, 1]}}}, {"gate": {"benchmark": {"concurrency": [1, 8]}}}),
    (
        "OG440",
        both({"gate": {"candidate": {"max_batch_size": 16}}}, ADAPTERS),
        both(gate({"max_batch_size": 16}), ADAPTERS),
    ),
    (
        "OG442",
        both(
            gate({"max_batch_size": 16}),
            {
                "adapters": [
                    {**ADAPTER, "name": f"a{i}", "evaluation": {"dataset_s3_uri": f"s3://acme-eval/a{i}/"}}
                    for i in range(12)
                ]
            },
        ),
        both(gate({"max_batch_size": 16}), {"adapters": [{**ADAPTER, "name": f"a{i}"} for i in range(12)]}),
    ),
    (
        "OG441",
        {"adapters": [{**ADAPTER, "evaluation": {"dataset_s3_uri": "s3://acme-eval/triage/"}}]},
        {"adapters": [ADAPTER]},
    ),
    ("OG404", {"gate": CROSS_CHECK}, gate({"max_batch_size": 16}, **CROSS_CHECK)),
    (
        "OG405",
        gate({"container": {"family": "lmi-trtllm"}}, **CROSS_CHECK),
        gate({"max_batch_size": 16}, **CROSS_CHECK),
    ),
    (
        "OG406",
        gate({"max_batch_size": 16}, benchmark={"cross_check": "sagemaker"}),
        gate({"max_batch_size": 16}, **CROSS_CHECK),
    ),
    (
        "OG407",
        serving(speculative_decoding={"method": "eagle", "train_from": "s3://acme-models/llama-3.1-8b/sharegpt/"}),
        serving(speculative_decoding={"method": "eagle3", "model_s3_uri": "s3://acme-models/llama-3.1-8b/eagle3/"}),
    ),
    ("OG408", serving(compile=True), serving(compile=False)),
    ("OG409", gate({"compile": True}), gate({"compile": True, **TRTLLM})),
    (
        "OG410",
        both(serving(speculative_decoding={"method": "ngram"}), gate({"compile": True, **TRTLLM})),
        gate({"compile": True, **TRTLLM}),
    ),
    (
        "OG411",
        gate({"compile": True, **TRTLLM, "quantization": "gptq"}),
        gate({"compile": True, **TRTLLM, "quantization": "fp8"}),
    ),
    ("OG412", gate({**TRTLLM, "quantization": "fp8"}), gate({"compile": True, **TRTLLM, "quantization": "fp8"})),
    ("OG414", gate({"compile": True, **TRTLLM, "instance_type": "ml.g6e.2xlarge"}), gate({"compile": True, **TRTLLM})),
    ("OG415", gate({"compile": True, **TRTLLM, "max_model_len": 4096}), gate({"compile": True, **TRTLLM})),
    ("OG450", gate({"adapters": {"triage": TRIAGE_V2}}), gate({"max_batch_size": 16})),
    (
        "OG460",
        gate(FP8, benchmark={"workload": SESSIONS, "synthetic": {"prompt_tokens": [512, 2048]}}),
        gate(FP8, benchmark={"workload": SESSIONS}),
    ),
    (
        "OG461",
        gate(FP8, benchmark={"synthetic": {"prompt_tokens": {"p50": 1024, "p90": 512}}}),
        gate(FP8, benchmark={"synthetic": {"prompt_tokens": {"p50": 512, "p90": 1024}}}),
    ),
    (
        "OG462",
        gate(
            FP8, benchmark={"synthetic": {"prompt_tokens": [256, 1024], "shared_prefix_pct": 30, "prefix_tokens": 256}}
        ),
        gate(
            FP8, benchmark={"synthetic": {"prompt_tokens": [256, 1024], "shared_prefix_pct": 30, "prefix_tokens": 128}}
        ),
    ),
    (
        "OG464",
        gate(FP8, benchmark={**CROSS_CHECK["benchmark"], "workload": SESSIONS}),
        gate(FP8, benchmark={"cross_check": "none", "workload": SESSIONS}),
    ),
    (
        "OG465",
        gate(FP8, benchmark={"max_rounds": 6, "min_rounds": 8}),
        gate(FP8, benchmark={"max_rounds": 8, "min_rounds": 6}),
    ),
    (
        "OG463",
        gate(FP8, benchmark={"workload": {"from": "s3://acme-traffic/chat/"}}),
        gate(FP8, benchmark={"workload": {"from": "s3://acme-traffic/chat/"}, "min_throughput_gain_pct": -5}),
    ),
    (
        "OG451",
        {"rollout": {"strategy": "shadow", "shadow": {"sampling_percentage": 10, "candidate": {"adapters": {}}}}},
        {"rollout": {"strategy": "shadow", "shadow": {"sampling_percentage": 10, "candidate": {"max_batch_size": 16}}}},
    ),
    (
        "OG452",
        both(gate({"adapters": {"triag": TRIAGE_V2}}, **SLO), {"adapters": [ADAPTER]}),
        both(gate({"adapters": {"triage": TRIAGE_V2}}, **SLO), {"adapters": [ADAPTER]}),
    ),
    (
        "OG453",
        both(gate({"adapters": {"triage": "s3://acme-models/adapters/triage-v2/"}}, **SLO), {"adapters": [ADAPTER]}),
        both(gate({"adapters": {"triage": TRIAGE_V2}, "max_batch_size": 16}, **SLO), {"adapters": [ADAPTER]}),
    ),
    (
        "OG454",
        both(gate({"adapters": {"triage": ADAPTER["s3_uri"]}}, **SLO), {"adapters": [ADAPTER]}),
        both(gate({"adapters": {"triage": TRIAGE_V2}}, **SLO), {"adapters": [ADAPTER]}),
    ),
    (
        "OG455",
        both(gate({"adapters": {"triage": TRIAGE_V2}}), {"adapters": [ADAPTER]}),
        both(gate({"adapters": {"triage": TRIAGE_V2}}, **SLO), {"adapters": [ADAPTER]}),
    ),
    (
        "OG430",
        {"adapters": [ADAPTER], "gate": {"benchmark": {"adapter_mix": {"base": 1, "triag": 3}}}},
        {"adapters": [ADAPTER], "gate": {"benchmark": {"adapter_mix": {"base": 1, "triage": 3}}}},
    ),
    (
        "OG431",
        {"adapters": [ADAPTER], "gate": {"benchmark": {"adapter_mix": {"base": 1, "triage": 0}}}},
        {"adapters": [ADAPTER], "gate": {"benchmark": {"adapter_mix": {"base": 1, "triage": 0.5}}}},
    ),
    (
        "OG432",
        {"gate": {"benchmark": {"adapter_mix": {"base": 1}}}},
        {"adapters": [ADAPTER], "gate": {"benchmark": {"adapter_mix": {"base": 1}}}},
    ),
    (
        "OG501",
        {"rollout": {"strategy": "shadow"}},
        {"rollout": {"strategy": "shadow", "shadow": {"sampling_percentage": 10}}},
    ),
    (
        "OG502",
        {"rollout": {"shadow": {"sampling_percentage": 10}}},
        {"rollout": {"strategy": "shadow", "shadow": {"sampling_percentage": 10}}},
    ),
    (
        "OG503",
        {"rollout": {"strategy": "shadow", "shadow": {"sampling_percentage": 10}}, "adapters": [ADAPTER]},
        {"adapters": [ADAPTER]},
    ),
    ("OG530", both(serving(instance_pools=POOLS), {"adapters": [ADAPTER]}), {"adapters": [ADAPTER]}),
    ("OG531", {"inference_components": CACHED}, {"adapters": [ADAPTER], "inference_components": CACHED}),
    (
        "OG532",
        {"adapters": [ADAPTER], "inference_components": {"scheduling_config": {"placement_strategy": "SPREAD"}}},
        {"adapters": [ADAPTER], "inference_components": {"scheduling_config": SPREAD_OVER_ZONES}},
    ),
    (
        "OG520",
        {"rollout": {"strategy": "canary", "canary": {"traffic_percentage": 4}}, "adapters": [ADAPTER]},
        {"rollout": {"strategy": "canary", "canary": {"traffic_percentage": 5}}, "adapters": [ADAPTER]},
    ),
    (
        "OG521",
        both(serving(autoscaling=MANAGED_10), {"rollout": {"canary": {"wait_minutes": 48}}}, ADAPTERS),
        both(serving(autoscaling=MANAGED_10), {"rollout": {"canary": {"wait_minutes": 47}}}, ADAPTERS),
    ),
    # legal (issue 37): 1-3 copies of one GPU on one one-GPU instance, managed instance scaling off
    ("OG533", both(serving(autoscaling={"max_capacity": 3}), ADAPTERS), both(serving(autoscaling=MANAGED_3), ADAPTERS)),
    (
        "OG701",
        {"acknowledge": [{"id": "OG999", "reason": REASON}]},
        {"acknowledge": [{"id": "OG261", "reason": REASON}]},
    ),
    (
        "OG702",
        {"acknowledge": [{"id": "OG307", "reason": REASON}]},
        {"acknowledge": [{"id": "OG261", "reason": REASON}]},
    ),
    (
        "OG703",
        {"acknowledge": [{"id": "OG261", "reason": "tested"}]},
        {"acknowledge": [{"id": "OG261", "reason": REASON}]},
    ),
]
SHADOW = {"rollout": {"strategy": "shadow", "shadow": {"sampling_percentage": 10}}}
B200 = "ml.p6-b200.48xlarge"
HUB = {
    "model": {
        "source": {
            "s3_uri": DROP,
            "hugging_face": {"model_id": "meta-llama/Llama-3.1-8B-Instruct", "s3_uri": "s3://acme-models/llama/"},
        }
    }
}
EAGLE_FROM_CAPTURE = {"method": "eagle", "train_from": "data_capture"}
EAGLE_FROM_S3 = {"method": "eagle", "train_from": "s3://acme-data/chat/sharegpt/"}
# (note ID, the team patch that makes the note, its twin without it)
NOTE_CASES: list[tuple[str, dict[str, Any], dict[str, Any]]] = [
    # one copy on a one-GPU instance: a rolling batch has no free GPU; two instances leave room for it
    ("OG534", ADAPTERS, both(serving(instance_count=2), ADAPTERS)),
    ("OG261", both(SHADOW, serving(instance_pools=POOLS)), SHADOW),
    ("OG263", both(serving(instance_pools=POOLS), gate({"max_batch_size": 16})), gate({"max_batch_size": 16})),
    (
        "OG421",
        gate({"compile": True, **TRTLLM}),
        both({"model": {"architecture": "qwen2.5-7b"}}, gate({"compile": True, **TRTLLM})),
    ),
    # the newest LMI (cu130) on a family the SDK names no CUDA 13 host AMI for; twin: a cu128 LMI there
    ("OG331", serving(instance_type=B200), serving(instance_type=B200, container={"version": "0.35.0"})),
    (
        "OG422",
        {**HUB, **gate({"max_batch_size": 16}, benchmark={"cross_check": "sagemaker"})},
        {**HUB, **gate({"max_batch_size": 16}, **CROSS_CHECK)},
    ),
    ("OG423", gate({"speculative_decoding": EAGLE_FROM_CAPTURE}), gate({"speculative_decoding": EAGLE_FROM_S3})),
    ("OG424", gate({"speculative_decoding": EAGLE_FROM_S3}), gate({"max_batch_size": 16})),
    # speculation on the newest LMI (0.38.0, no public source: its stream extrapolated); twin: pinned to 0.36.0
    (
        "OG425",
        gate({"speculative_decoding": EAGLE_FROM_S3}),
        both(serving(container={"version": "0.36.0"}), gate({"speculative_decoding": EAGLE_FROM_S3})),
    ),
    # adapters on a model given by its config.json fields alone; twin: the same with its Hugging Face id
    ("OG456", {**arch(), **ADAPTERS}, {"model": {**HUB["model"], **arch()["model"]}, **ADAPTERS}),
]
CAPTURE = "          encryption: s3_managed\n"
CAPTURED = "    workload: {from: data_capture, kind: sessions}\n"
#: support's base component bakes each rolling batch an hour: its own 4 copies fit the API's 8 hours, 8 do not.
HOUR_BAKE = ("teams/support.yaml", "strategy: canary", "strategy: canary\n  canary: {wait_minutes: 60}")
# (rule ID, the edits of the example config (file, old, new) that break it, those of its compliant twin)
PROJECT_CASES: list[tuple[str, list[tuple[str, str, str]], list[tuple[str, str, str]]]] = [
    (
        "OG601",
        [("environments.yaml", "- name: staging", "- name: dev")],
        [("environments.yaml", "- name: staging", "- name: qa")],
    ),
    (
        "OG602",
        [
            (
                "environments.yaml",
                "        instance_count: 2\n",
                "        instance_count: 2\n        data_capture_percentage: 5\n",
            )
        ],
        [("environments.yaml", "        instance_count: 2\n", "        instance_count: 3\n")],
    ),
    (
        "OG603",
        [("environments.yaml", "region: us-west-2", "region: us-wset-2")],
        [("environments.yaml", "region: us-west-2", "region: eu-west-1")],
    ),
    (
        "OG604",
        [
            (
                "environments.yaml",
                "    teams:\n      # chat",
                "    teams:\n      research:\n        autoscaling_max_capacity: 2\n      # chat",
            )
        ],
        [
            (
                "environments.yaml",
                "    teams:\n      # chat",
                "    teams:\n      research:\n        instance_count: 2\n      # chat",
            )
        ],
    ),
    (
        "OG605",
        [("teams/chat.yaml", "    min_capacity: 1\n", "    min_capacity: 2\n")],
        [
            ("environments.yaml", "autoscaling_max_capacity: 1", "autoscaling_max_capacity: 2"),
            ("teams/chat.yaml", "    min_capacity: 1\n", "    min_capacity: 2\n"),
        ],
    ),
    (
        "OG606",
        [("environments.yaml", "        instance_count: 2\n", "        instance_count: 5\n")],
        [("environments.yaml", "        instance_count: 2\n", "        instance_count: 4\n")],
    ),
    (
        "OG607",
        [("environments.yaml", CAPTURE, CAPTURE.replace("s3_managed", "kms"))],
        [("environments.yaml", "request_format: openai_chat", "request_format: sharegpt")],
    ),
    (
        "OG613",
        [HOUR_BAKE, ("environments.yaml", "autoscaling_max_capacity: 1", "autoscaling_max_capacity: 8")],
        [HOUR_BAKE, ("environments.yaml", "autoscaling_max_capacity: 1", "autoscaling_max_capacity: 7")],
    ),
    (
        "OG620",
        [("teams/research.yaml", "    cross_check: sagemaker\n", f"    cross_check: none\n{CAPTURED}")],
        [("teams/chat.yaml", "    p99_itl_ms_budget: 60\n", f"    p99_itl_ms_budget: 60\n{CAPTURED}")],
    ),
    (
        "OG608",
        [
            (
                "environments.yaml",
                "      chat:\n        data_capture:\n          percentage: 50",
                "      chats:\n        data_capture:\n          percentage: 50",
            )
        ],
        [("environments.yaml", "percentage: 50", "percentage: 40")],
    ),
    (
        "OG609",
        [("teams/research.yaml", "team: research", "team: chat")],
        [("teams/research.yaml", "team: research", "team: analysis")],
    ),
    (
        "OG610",
        [
            ("teams/research.yaml", "team: research", "team: chat-x"),
            ("environments.yaml", "- name: prod", "- name: x-dev"),
        ],
        [
            ("teams/research.yaml", "team: research", "team: chat-x"),
            ("environments.yaml", "- name: prod", "- name: x-prod"),
        ],
    ),
    (
        "OG611",
        [("environments.yaml", "    repository: acme/optigate-config\n", "")],
        [("environments.yaml", "repository: acme/optigate-config", "repository: acme/llm-config")],
    ),
    (
        "OG612",
        [("environments.yaml", "    branch: main\n", "    branch: main\n    codecommit: true\n")],
        [("environments.yaml", "    branch: main\n", "    branch: release\n")],
    ),
]


class _NoAliases(yaml.SafeDumper):
    """Values written out (a config file may not use YAML aliases)."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def _team_file(tmp_path: Path, patch: dict[str, Any]) -> Path:
    path = tmp_path / "team.yaml"
    path.write_text(yaml.dump(_merged(BASE, patch), Dumper=_NoAliases, sort_keys=False))
    return path


def _team_rules(tmp_path: Path, patch: dict[str, Any]) -> tuple[list[str | None], list[str | None]]:
    """(the rule IDs of the refusals, the rule IDs of the notes) of BASE with `patch`."""
    try:
        resolved = load_resolved_team(_team_file(tmp_path, patch))
    except ConfigError as error:
        return [issue.rule for issue in error.issues], []
    return [], [note.rule_id for note in resolved.advisories]


def _project_rules(tmp_path: Path, edits: list[tuple[str, str, str]]) -> list[str | None]:
    config = tmp_path / "config"
    for file, old, new in edits:
        config = edited_config(tmp_path, file, old, new)
    try:
        load_resolved_project(config)
    except ConfigError as error:
        return [issue.rule for issue in error.issues]
    return []


@pytest.mark.parametrize(("rule_id", "broken", "twin"), TEAM_CASES, ids=[case[0] for case in TEAM_CASES])
def test_a_team_rule_refuses_its_case_and_passes_its_twin(tmp_path, rule_id, broken, twin):
    assert rule_id in _team_rules(tmp_path, broken)[0]
    assert _team_rules(tmp_path, twin)[0] == []


@pytest.mark.parametrize(("rule_id", "noted", "twin"), NOTE_CASES, ids=[case[0] for case in NOTE_CASES])
def test_a_note_is_said_for_its_case_and_not_for_its_twin(tmp_path, rule_id, noted, twin):
    refused, notes = _team_rules(tmp_path, noted)
    assert refused == [] and rule_id in notes
    refused, notes = _team_rules(tmp_path, twin)
    assert refused == [] and rule_id not in notes


@pytest.mark.parametrize(("rule_id", "broken", "twin"), PROJECT_CASES, ids=[case[0] for case in PROJECT_CASES])
def test_a_project_rule_refuses_its_case_and_passes_its_twin(tmp_path, rule_id, broken, twin):
    assert rule_id in _project_rules(tmp_path / "broken", broken)
    assert _project_rules(tmp_path / "twin", twin) == []


def test_an_optimization_job_runs_on_an_instance_type_the_job_takes(tmp_path):
    """OG413: every type in the catalog is one CreateOptimizationJob takes today, so no team file reaches the rule;
    it is asked directly with a type botocore's enum lacks (ml.p5.4xlarge)."""
    from optigate.config.models import Serving
    from optigate.deployment.team import optimization_job_problems

    team = load_team(_team_file(tmp_path, gate({"quantization": "fp8"})), rules=False)
    (problem,) = optimization_job_problems(team, Serving(instance_type="ml.p5.4xlarge"))
    assert problem.rule_id == "OG413"
    assert optimization_job_problems(team, Serving(instance_type="ml.p5.48xlarge")) == []


def test_every_registered_rule_has_a_case():
    cases = [case[0] for case in TEAM_CASES + NOTE_CASES] + [case[0] for case in PROJECT_CASES] + ["OG413"]
    assert sorted(found.id for found in every_rule()) == sorted(cases)


@pytest.mark.parametrize("key", ["max_minutes", "min_rounds"])
def test_a_rounds_setting_without_max_rounds_is_refused_not_ignored(tmp_path, key):
    """OG465's second half: without max_rounds the benchmark has a fixed size, so a minimum or a time budget would do
    nothing; with max_rounds both are taken, and `blocks` is the one refused."""
    value = {"max_minutes": 30, "min_rounds": 3}[key]
    refused, _ = _team_rules(tmp_path, gate(FP8, benchmark={key: value}))
    assert "OG465" in refused
    taken, _ = _team_rules(tmp_path, gate(FP8, benchmark={key: value, "max_rounds": 12}))
    assert "OG465" not in taken
    blocks, _ = _team_rules(tmp_path, gate(FP8, benchmark={key: value, "max_rounds": 12, "blocks": 4}))
    assert "OG465" in blocks
