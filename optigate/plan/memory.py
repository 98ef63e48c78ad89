"""Per-accelerator memory budget: weights, runtime reserve, and KV-cache capacity.

The budget mirrors how vLLM sizes its KV cache at start-up::

    kv_budget = usable_memory * gpu_memory_utilization
                - weights - peak_activation - non_torch_memory [- cuda_graphs]

where ``usable_memory`` is what the CUDA runtime reports as the device total
(slightly less than the marketed size; see ``catalog``). Everything is per
tensor-parallel rank: one GPU, or one NeuronCore on Inferentia2/Trainium (each
NeuronCore gets ``1/cores_per_accelerator`` of the chip's memory and bandwidth; the
same budget is applied there although the Neuron runtime does not profile the way
vLLM on CUDA does -- treat Neuron numbers as a first-order estimate).

Weight precisions (bytes per parameter of a quantized linear layer, scales included):

=========  =======================================  ===============
name       storage                                  bytes/param
=========  =======================================  ===============
bf16/fp16  16-bit                                   2
fp8        8-bit, per-channel scale (negligible)    1
int8       8-bit, per-channel scale (negligible)    1
awq/gptq   4-bit, group 128, fp16 scale + fp16 zero 0.5 + 4/128 = 0.53125
nvfp4      4-bit, one fp8 (e4m3) scale per 16       0.5 + 1/16  = 0.5625
mxfp4      4-bit, one e8m0 scale per 32             0.5 + 1/32  = 0.53125
=========  =======================================  ===============

Embeddings, lm_head, norms and MoE routers stay in bf16 for every quantized format:
AWQ/GPTQ, llm-compressor FP8, ModelOpt NVFP4 and the gpt-oss MXFP4 checkpoints all
leave them unquantized, and for small-vocabulary-heavy models (Qwen, Llama 3) that is
several hundred MB that a naive ``params x bits`` estimate misses. The AWQ/GPTQ zero
point is counted as fp16 (real checkpoints pack it in 4 bits), a deliberate
over-estimate of ~0.0156 B/param.

Runtime reserve (what vLLM's profiling run measures besides the weights):

* peak activation -- the forward pass over ``max_num_batched_tokens`` tokens. Its peak
  is in the MLP, where the residual stream, the normed input and the down-projection
  output (3 x hidden) coexist with the gate/up output and the activated product
  (3 x intermediate / tp); for MoE the fused-MoE caches hold top_k copies of
  (3 x moe_intermediate / tp + hidden). The sampler's fp32 logits for up to
  ``max_num_seqs`` sequences (seqs x vocab x 4 B) are a separate peak; the larger of
  the two counts. Checked against vLLM profiling logs: Llama-3.1-8B at 20 000 and
  29 000 batched tokens logged 2.07 and 2.99 GiB of activation peak; this formula
  gives 2.06 and 2.99 GiB; at 2 048 tokens it gives 0.21 GiB (logged: 0.22 GiB).
* non-torch memory -- CUDA context, cuBLAS workspaces, NCCL buffers. Logged values
  for a single GPU span 0.01-0.35 GiB (median ~0.1); with tensor parallelism over
  PCIe 0.2-0.25 GiB; over NVLink, where vLLM also allocates custom all-reduce
  buffers, 0.9-2.2 GiB. Constants below: 0.15 / 0.25 / 1.5 GiB.
* CUDA graphs -- vLLM before ~0.11 captures graphs *after* sizing the KV cache, so
  their memory comes out of the (1 - gpu_memory_utilization) headroom; newer
  releases estimate and subtract it (logged 0.48-1 GiB per GPU). The planner
  subtracts 0.75 GiB by default (conservative for sizing); pass
  ``engine_subtracts_cuda_graphs=False`` to model an older engine. With
  ``enforce_eager`` vLLM captures no graphs at all ("disable CUDA graph to save some
  GBs of memory", LMI's vllm_user_guide.md), so the reserve is 0 and the KV cache
  gets that memory.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .architecture import ModelArchitecture

GIB = 1024**3

NON_TORCH_BYTES_SINGLE_GPU = int(0.15 * GIB)
NON_TORCH_BYTES_TP_PCIE = int(0.25 * GIB)
NON_TORCH_BYTES_TP_NVLINK = int(1.5 * GIB)
CUDA_GRAPH_BYTES = int(0.75 * GIB)
ACTIVATION_DTYPE_BYTES = 2  # activations run in bf16/fp16 even for quantized weights
LOGITS_DTYPE_BYTES = 4  # the sampler works on fp32 logits
DEFAULT_BLOCK_SIZE = 16
# vLLM's default share of accelerator memory (--gpu-memory-utilization); LMI passes it through.
DEFAULT_GPU_MEMORY_UTILIZATION = 0.9


@dataclass(frozen=True)
class WeightPrecision:
    """How one weight format stores a quantized linear layer, and what it computes in."""

    name: str
    bytes_per_param: float
    compute_precision: str  # precision the matmuls run in when the hardware supports it
    native_hardware_precision: str  # entry of Instance.supported_precisions needed for that
    description: str


WEIGHT_PRECISIONS: dict[str, WeightPrecision] = {
    p.name: p
    for p in (
        WeightPrecision("bf16", 2.0, "bf16", "bf16", "16-bit bfloat16"),
        WeightPrecision("fp16", 2.0, "fp16", "fp16", "16-bit float16"),
        WeightPrecision("fp8", 1.0, "fp8", "fp8", "FP8 e4m3 weights, per-channel scales (W8A8 on FP8 hardware)"),
        WeightPrecision("int8", 1.0, "int8", "int8", "INT8 weights, per-channel scales (W8A8)"),
        WeightPrecision("awq", 0.5 + 4 / 128, "bf16", "int4", "AWQ 4-bit, group 128, fp16 scale + zero"),
        WeightPrecision("gptq", 0.5 + 4 / 128, "bf16", "int4", "GPTQ 4-bit, group 128, fp16 scale + zero"),
        WeightPrecision("nvfp4", 0.5 + 1 / 16, "fp4", "fp4", "NVFP4: 4-bit + fp8 scale per 16 values"),
        WeightPrecision("mxfp4", 0.5 + 1 / 32, "fp4", "fp4", "MXFP4: 4-bit + e8m0 scale per 32 values"),
    )
}
WEIGHT_PRECISION_ALIASES = {"int4": "awq", "bfloat16": "bf16", "float16": "fp16", "half": "fp16", "w4a16": "awq"}

KV_DTYPE_BYTES = {
    "auto": 2,
    "bf16": 2,
    "bfloat16": 2,
    "fp16": 2,
    "float16": 2,
    "half": 2,
    "fp8": 1,
    "fp8_e4m3": 1,
    "fp8_e5m2": 1,
    "fp32": 4,
    "float32": 4,
}


def weight_precision(name: str) -> WeightPrecision:
    key = WEIGHT_PRECISION_ALIASES.get(name.lower(), name.lower())
    try:
        return WEIGHT_PRECISIONS[key]
    except KeyError:
        raise ValueError(f"unknown weight precision {name!r}; choose from {sorted(WEIGHT_PRECISIONS)}") from None


def kv_dtype_bytes(kv_cache_dtype: str) -> int:
    """Bytes per KV element. 'auto' follows the activation dtype (bf16/fp16 = 2 B), also
    for quantized weights, because vLLM keeps activations in 16-bit."""
    try:
        return KV_DTYPE_BYTES[kv_cache_dtype.lower()]
    except KeyError:
        raise ValueError(f"unknown kv_cache_dtype {kv_cache_dtype!r}; choose from {sorted(KV_DTYPE_BYTES)}") from None


@dataclass(frozen=True)
class WeightFootprint:
    """Weight bytes held by one tensor-parallel rank, by component (so the roofline can
    tell which bytes a decode step actually reads)."""

    embedding: float
    lm_head: float
    attention: float
    dense_mlp: float
    expert_each_layer: float  # one routed expert of one MoE layer (whole under expert parallelism, else 1/tp)
    num_moe_layers: int
    num_experts: int  # routed experts this rank holds per MoE layer (all of them unless expert parallel)
    shared_experts: float
    router: float
    norms: float
    expert_parallel_ranks: int = 1  # ranks the experts are spread over whole (vLLM --enable-expert-parallel)

    @property
    def experts_total(self) -> float:
        return self.expert_each_layer * self.num_moe_layers * self.num_experts

    @property
    def total(self) -> float:
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
    def total_gib(self) -> float:
        return self.total / GIB

    def read_per_step(self, experts_read_per_layer: float) -> float:
        """Bytes streamed from memory by one forward step on this rank: everything except the embedding table (a row
        lookup) and the experts this rank was not routed to; `experts_read_per_layer` is what this rank reads
        (optigate.plan.roofline.experts_read_per_layer: the busiest rank's share under expert parallelism)."""
        experts = self.expert_each_layer * self.num_moe_layers * min(experts_read_per_layer, self.num_experts)
        return self.lm_head + self.attention + self.dense_mlp + experts + self.shared_experts + self.router + self.norms


def weight_footprint(
    arch: ModelArchitecture, precision: str | WeightPrecision = "bf16", tp: int = 1, *, expert_parallel: bool = False
) -> WeightFootprint:
    """Weight bytes per rank under tensor parallelism.

    Linear layers, experts, embedding and lm_head are split across ranks
    (vocab-parallel); norms are replicated; K/V projections are replicated when the
    model has fewer KV heads than ranks.

    With ``expert_parallel`` (vLLM's --enable-expert-parallel, expert-parallel size = the tp ranks without data
    parallelism) each rank holds ceil(E / tp) whole routed experts instead of 1/tp of every expert; attention,
    shared experts, embeddings and the KV cache stay tensor parallel
    (https://docs.vllm.ai/en/latest/serving/expert_parallel_deployment.html). vLLM gives the first E mod tp ranks
    one expert more, so the busiest rank is what is sized.
    """
    wp = precision if isinstance(precision, WeightPrecision) else weight_precision(precision)
    q_bytes = wp.bytes_per_param
    unq = 2.0  # bf16 for embeddings, lm_head, norms, routers, biases
    h = arch.hidden_size
    params = arch.parameter_count()
    kv_share = arch.kv_heads_per_rank(tp) / arch.num_key_value_heads
    per_layer_q_o = 2 * h * arch.q_size / tp
    per_layer_kv = 2 * h * arch.kv_size * kv_share
    bias = ((arch.q_size / tp) + 2 * arch.kv_size * kv_share) if arch.attention_bias else 0
    attention = arch.num_hidden_layers * ((per_layer_q_o + per_layer_kv) * q_bytes + bias * unq)
    ep = tp if expert_parallel and arch.is_moe and tp > 1 else 1
    return WeightFootprint(
        embedding=params.embedding * unq / tp,
        lm_head=params.lm_head * unq / tp,
        attention=attention,
        dense_mlp=params.dense_mlp * q_bytes / tp,
        expert_each_layer=arch.expert_parameters() * q_bytes / (1 if ep > 1 else tp),
        num_moe_layers=arch.num_moe_layers,
        num_experts=math.ceil(arch.num_experts / ep),
        shared_experts=params.shared_experts * q_bytes / tp,
        router=params.router * unq,
        norms=params.norms * unq,
        expert_parallel_ranks=ep,
    )


def weight_bytes_per_accelerator(arch: ModelArchitecture, precision: str = "bf16", tp: int = 1) -> float:
    return weight_footprint(arch, precision, tp).total


@dataclass(frozen=True)
class RuntimeReserve:
    """Memory vLLM's start-up profiling attributes to everything but weights and KV."""

    activation_bytes: float
    non_torch_bytes: float
    cuda_graph_bytes: float
    max_num_batched_tokens: int
    max_num_seqs: int

    @property
    def total(self) -> float:
        return self.activation_bytes + self.non_torch_bytes + self.cuda_graph_bytes

    @property
    def total_gib(self) -> float:
        return self.total / GIB


def forward_activation_peak_bytes(arch: ModelArchitecture, num_tokens: int, tp: int = 1) -> float:
    """Peak activation memory of one forward pass over ``num_tokens`` tokens on one rank."""
    h = arch.hidden_size
    attention_phase = 2 * h + (arch.q_size + 2 * arch.kv_size) / tp + arch.q_size / tp
    per_token = attention_phase
    if arch.num_dense_layers:
        per_token = max(per_token, 3 * h + 3 * arch.intermediate_size / tp)
    if arch.is_moe:
        experts = arch.num_experts_per_tok * (3 * arch.moe_intermediate_size / tp + h)
        shared = 3 * arch.shared_expert_intermediate_size / tp
        per_token = max(per_token, 3 * h + experts + shared)
    return num_tokens * per_token * ACTIVATION_DTYPE_BYTES


def sampler_peak_bytes(arch: ModelArchitecture, num_seqs: int) -> float:
    """fp32 logits for the last token of each scheduled sequence."""
    return num_seqs * arch.vocab_size * LOGITS_DTYPE_BYTES


def non_torch_bytes(tp: int, nvlink: bool) -> float:
    if tp <= 1:
        return NON_TORCH_BYTES_SINGLE_GPU
    return NON_TORCH_BYTES_TP_NVLINK if nvlink else NON_TORCH_BYTES_TP_PCIE


def estimate_runtime_reserve(
    arch: ModelArchitecture,
    *,
    tp: int = 1,
    max_num_batched_tokens: int = 2048,
    max_num_seqs: int = 256,
    nvlink: bool = False,
    engine_subtracts_cuda_graphs: bool = True,
) -> RuntimeReserve:
    """Activation peak + non-torch memory (+ CUDA graphs for engines that subtract them)."""
    num_seqs = min(max_num_seqs, max_num_batched_tokens)
    activation = max(
        forward_activation_peak_bytes(arch, max_num_batched_tokens, tp),
        sampler_peak_bytes(arch, num_seqs),
    )
    return RuntimeReserve(
        activation_bytes=activation,
        non_torch_bytes=non_torch_bytes(tp, nvlink),
        cuda_graph_bytes=CUDA_GRAPH_BYTES if engine_subtracts_cuda_graphs else 0.0,
        max_num_batched_tokens=max_num_batched_tokens,
        max_num_seqs=max_num_seqs,
    )


def kv_budget_bytes(
    usable_memory_bytes: float, gpu_memory_utilization: float, weight_bytes: float, reserve: RuntimeReserve
) -> float:
    """Memory left for the KV cache on one rank (may be negative: nothing fits)."""
    if not 0 < gpu_memory_utilization <= 1:
        raise ValueError("gpu_memory_utilization must be in (0, 1]")
    return usable_memory_bytes * gpu_memory_utilization - weight_bytes - reserve.total


def kv_capacity_tokens(kv_budget: float, kv_bytes_per_token: float, block_size: int = DEFAULT_BLOCK_SIZE) -> int:
    """Tokens the KV cache holds, rounded down to whole blocks (vLLM allocates blocks)."""
    if kv_budget <= 0:
        return 0
    blocks = math.floor(kv_budget / (kv_bytes_per_token * block_size))
    return blocks * block_size


def max_concurrency(kv_capacity: int, sequence_tokens: int, block_size: int = DEFAULT_BLOCK_SIZE) -> float:
    """How many sequences of ``sequence_tokens`` fit at once (vLLM's 'Maximum concurrency')."""
    if sequence_tokens <= 0:
        raise ValueError("sequence length must be positive")
    blocks_per_sequence = math.ceil(sequence_tokens / block_size)
    return (kv_capacity // block_size) / blocks_per_sequence


def max_concurrent_sequences(kv_capacity: int, sequence_tokens: int, block_size: int = DEFAULT_BLOCK_SIZE) -> int:
    return math.floor(max_concurrency(kv_capacity, sequence_tokens, block_size))
