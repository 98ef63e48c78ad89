"""Pure-Python capacity and roofline planner for LLM serving on SageMaker.

>>> from optigate.plan import plan
>>> result = plan("llama-3.1-8b", "ml.g6.xlarge", max_model_len=8192)
>>> result.kv_capacity_tokens, result.decode_bound
"""

from .architecture import ModelArchitecture, ParameterBreakdown, known_models, load_architecture
from .catalog import Instance, all_instances, get_instance
from .memory import (
    KV_DTYPE_BYTES,
    WEIGHT_PRECISIONS,
    RuntimeReserve,
    WeightFootprint,
    WeightPrecision,
    estimate_runtime_reserve,
    kv_budget_bytes,
    kv_capacity_tokens,
    kv_dtype_bytes,
    max_concurrency,
    max_concurrent_sequences,
    weight_bytes_per_accelerator,
    weight_footprint,
    weight_precision,
)
from .planner import PROBLEM_KINDS, PlanProblem, PlanResult, Suggestion, plan
from .roofline import DecodePoint, RankHardware, StepBound, decode_curve, decode_step_bound, prefill_bound

__all__ = [
    "KV_DTYPE_BYTES",
    "PROBLEM_KINDS",
    "WEIGHT_PRECISIONS",
    "DecodePoint",
    "Instance",
    "ModelArchitecture",
    "ParameterBreakdown",
    "PlanProblem",
    "PlanResult",
    "RankHardware",
    "RuntimeReserve",
    "StepBound",
    "Suggestion",
    "WeightFootprint",
    "WeightPrecision",
    "all_instances",
    "decode_curve",
    "decode_step_bound",
    "estimate_runtime_reserve",
    "get_instance",
    "known_models",
    "kv_budget_bytes",
    "kv_capacity_tokens",
    "kv_dtype_bytes",
    "load_architecture",
    "max_concurrency",
    "max_concurrent_sequences",
    "plan",
    "prefill_bound",
    "weight_bytes_per_accelerator",
    "weight_footprint",
    "weight_precision",
]
