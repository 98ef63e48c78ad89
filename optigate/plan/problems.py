"""Why a plan does not work, and what would fix it, as data.

``find_problems`` checks one sized plan and returns ``PlanProblem``s; each carries its figures
(``details``) and the fixes the planner verified by re-planning (``suggestions``: FP8 KV cache,
lighter weights, a shorter max_model_len or smaller batch, or the cheapest catalog instance that
fits). The sentences users read are written from this data in ``messages``, in one place.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from .catalog import GIB
from .memory import DEFAULT_BLOCK_SIZE, max_concurrent_sequences
from .memory import weight_precision as lookup_weight_precision
from .messages import describe_problem
from .search import cheapest_fitting_instance
from .sizing import MemoryPlan, PlanInputs, memory_plan
from .suggestion import Suggestion

PROBLEM_KINDS = (
    "weights_do_not_fit",
    "kv_cannot_hold_one_sequence",
    "max_model_len_exceeds_position_embeddings",
    "batch_times_length_does_not_fit",
)

#: The plan() keywords a suggestion may change.
SUGGESTION_SETTINGS = ("weight_precision", "kv_cache_dtype", "max_model_len", "max_batch_size", "instance_type")

# Lighter weight precisions tried, in order, when the weights do not fit.
_LIGHTER_WEIGHTS = ("fp8", "awq")


@dataclass(frozen=True)
class PlanProblem:
    """Why a plan does not work: ``kind`` (one of ``PROBLEM_KINDS``), the figures, the verified fixes,
    and ``message``, the sentence for users written from them."""

    kind: str
    message: str
    details: dict[str, Any] = field(default_factory=dict, compare=False)
    suggestions: tuple[Suggestion, ...] = field(default=(), compare=False)

    def suggestion_for(self, setting: str) -> Suggestion | None:
        """The suggested change of ``setting``, if the planner found one."""
        return next((s for s in self.suggestions if s.setting == setting), None)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "message": self.message, "details": dict(self.details)}


def _any(_: Suggestion) -> bool:
    return True


#: Whether a fix may be offered: the caller's rules re-check each one (a fix the rules refuse is never offered).
Admissible = Callable[[Suggestion], bool]


def _problem(
    kind: str,
    inputs: PlanInputs,
    memory: MemoryPlan,
    details: dict[str, Any],
    suggestions: list[Suggestion],
    admissible: Admissible,
) -> PlanProblem:
    fixes = tuple(s for s in suggestions if admissible(s))
    return PlanProblem(kind, describe_problem(kind, inputs, memory, fixes), details, fixes)


def _instance_suggestion(inputs: PlanInputs, need_tokens: int) -> list[Suggestion]:
    fit = cheapest_fitting_instance(inputs, need_tokens)
    if fit is None:
        return []
    return [
        Suggestion(
            "instance_type",
            fit.instance.instance_type,
            kv_capacity_tokens=fit.kv_capacity_tokens,
            tensor_parallel=fit.tensor_parallel,
            price_per_hour_usd=fit.instance.price_per_hour_usd,
        )
    ]


def _fp8_kv_memory(inputs: PlanInputs, memory: MemoryPlan) -> MemoryPlan:
    return memory_plan(inputs, memory.tp, kv_bytes=1)


def _position_embeddings_problem(inputs: PlanInputs, memory: MemoryPlan, admissible: Admissible) -> PlanProblem:
    limit = inputs.model.max_position_embeddings
    details = {"max_model_len": inputs.max_model_len, "max_position_embeddings": limit}
    return _problem(
        "max_model_len_exceeds_position_embeddings",
        inputs,
        memory,
        details,
        [Suggestion("max_model_len", limit)],
        admissible,
    )


def _weights_problem(
    inputs: PlanInputs, memory: MemoryPlan, suggest_fixes: bool, admissible: Admissible
) -> PlanProblem:
    details = {
        "weights_gib_per_accelerator": memory.weights.total / GIB,
        "available_gib_per_accelerator": memory.room_for_weights(inputs.gpu_memory_utilization) / GIB,
        "tensor_parallel": memory.tp,
    }
    suggestions: list[Suggestion] = []
    if suggest_fixes:
        for name in _LIGHTER_WEIGHTS:
            lighter = lookup_weight_precision(name)
            if lighter.bytes_per_param >= inputs.weights.bytes_per_param:
                continue
            lighter_memory = memory_plan(replace(inputs, weights=lighter), memory.tp)
            if lighter_memory.kv_capacity >= inputs.max_model_len:
                suggestion = Suggestion(
                    "weight_precision",
                    lighter.name,
                    kv_capacity_tokens=lighter_memory.kv_capacity,
                    weights_gib_per_accelerator=lighter_memory.weights.total / GIB,
                    tensor_parallel=memory.tp,
                )
                if admissible(suggestion):  # else the next lighter precision the rules accept
                    suggestions.append(suggestion)
                    break
        suggestions += _instance_suggestion(inputs, inputs.max_model_len)
    return _problem("weights_do_not_fit", inputs, memory, details, suggestions, admissible)


def _one_sequence_problem(
    inputs: PlanInputs, memory: MemoryPlan, suggest_fixes: bool, admissible: Admissible
) -> PlanProblem:
    details: dict[str, Any] = {"kv_capacity_tokens": memory.kv_capacity, "max_model_len": inputs.max_model_len}
    suggestions: list[Suggestion] = []
    if suggest_fixes:
        if inputs.kv_bytes > 1:
            fp8 = _fp8_kv_memory(inputs, memory)
            details["fp8_kv_capacity_tokens"] = fp8.kv_capacity
            suggestions.append(Suggestion("kv_cache_dtype", "fp8", kv_capacity_tokens=fp8.kv_capacity))
        if memory.kv_capacity >= DEFAULT_BLOCK_SIZE:
            suggestions.append(Suggestion("max_model_len", memory.kv_capacity, kv_capacity_tokens=memory.kv_capacity))
        suggestions += _instance_suggestion(inputs, inputs.max_model_len)
    return _problem("kv_cannot_hold_one_sequence", inputs, memory, details, suggestions, admissible)


def _batch_problem(
    inputs: PlanInputs, memory: MemoryPlan, batch: int, suggest_fixes: bool, admissible: Admissible
) -> PlanProblem:
    typical = inputs.typical_length
    need = batch * typical
    feasible = max_concurrent_sequences(memory.kv_capacity, typical)
    details = {"needed_tokens": need, "kv_capacity_tokens": memory.kv_capacity, "feasible_batch": feasible}
    # The feasible batch is named even when fixes are not searched for: it costs no re-planning.
    suggestions = [Suggestion("max_batch_size", feasible, kv_capacity_tokens=memory.kv_capacity)]
    if suggest_fixes:
        if inputs.kv_bytes > 1:
            fp8 = _fp8_kv_memory(inputs, memory)
            sequences = max_concurrent_sequences(fp8.kv_capacity, typical)
            suggestions.append(
                Suggestion("kv_cache_dtype", "fp8", kv_capacity_tokens=fp8.kv_capacity, concurrent_sequences=sequences)
            )
        suggestions += _instance_suggestion(inputs, need)
    return _problem("batch_times_length_does_not_fit", inputs, memory, details, suggestions, admissible)


def find_problems(
    inputs: PlanInputs, memory: MemoryPlan, *, suggest_fixes: bool = True, admissible: Admissible | None = None
) -> list[PlanProblem]:
    """Every reason the plan ``memory`` of ``inputs`` cannot serve; the memory problems are checked
    in order (weights, one sequence, the batch) and only the first that applies is reported.
    ``admissible`` re-checks each fix before it is offered (all are offered without it)."""
    ok = admissible or _any
    problems: list[PlanProblem] = []
    limit = inputs.model.max_position_embeddings
    if limit and inputs.max_model_len > limit:
        problems.append(_position_embeddings_problem(inputs, memory, ok))

    batch = inputs.max_batch_size
    if memory.weights.total > memory.room_for_weights(inputs.gpu_memory_utilization):
        problems.append(_weights_problem(inputs, memory, suggest_fixes, ok))
    elif memory.kv_capacity < inputs.max_model_len:
        problems.append(_one_sequence_problem(inputs, memory, suggest_fixes, ok))
    elif batch is not None and batch * inputs.typical_length > memory.kv_capacity:
        problems.append(_batch_problem(inputs, memory, batch, suggest_fixes, ok))
    return problems
