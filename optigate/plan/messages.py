"""The sentences users read about a plan problem, written from its data in one place.

Config validation, ``optigate plan`` and the tests show these strings as they are, so a change
of wording here is a change of user-visible output.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from .catalog import GIB
from .suggestion import Suggestion

if TYPE_CHECKING:
    from .sizing import MemoryPlan, PlanInputs


def _instance_text(suggestion: Suggestion) -> str:
    price = suggestion.price_per_hour_usd
    cost = "price unknown" if price is None else f"${price:.2f}/h"
    return f"{suggestion.value} ({cost}, KV holds {suggestion.kv_capacity_tokens:,} tokens)"


def _suggestion_text(kind: str, suggestion: Suggestion, inputs: PlanInputs) -> str:
    setting, value = suggestion.setting, suggestion.value
    if setting == "weight_precision":
        return f"{str(value).upper()} weights ({suggestion.weights_gib_per_accelerator:.1f} GiB per accelerator) fit"
    if setting == "kv_cache_dtype":
        capacity = suggestion.kv_capacity_tokens or 0
        if kind == "batch_times_length_does_not_fit":
            return f"{str(value).upper()} KV cache ({capacity:,} tokens, {suggestion.concurrent_sequences} sequences)"
        return (
            f"{str(value).upper()} KV cache holds {capacity:,} tokens "
            f"({capacity / inputs.max_model_len:.1f}x one sequence)"
        )
    if setting == "max_model_len":
        return f"lower max_model_len to {value:,}"
    if setting == "max_batch_size":
        return f"lower max_batch_size to {value}"
    if setting == "instance_type":
        return _instance_text(suggestion)
    raise ValueError(f"no wording for a suggested change of {setting!r}")


def _try(kind: str, inputs: PlanInputs, suggestions: Sequence[Suggestion]) -> str:
    """' Try: a; or b.' listing the fixes, or nothing when there are none."""
    texts = [_suggestion_text(kind, s, inputs) for s in suggestions]
    return f" Try: {'; or '.join(texts)}." if texts else ""


def _position_embeddings(inputs: PlanInputs, memory: MemoryPlan, suggestions: Sequence[Suggestion]) -> str:
    limit = inputs.model.max_position_embeddings
    return (
        f"max_model_len={inputs.max_model_len:,} exceeds {inputs.model.name}'s max_position_embeddings="
        f"{limit:,}; set max_model_len <= {limit:,} (or configure RoPE scaling explicitly)."
    )


def _weights_do_not_fit(inputs: PlanInputs, memory: MemoryPlan, suggestions: Sequence[Suggestion]) -> str:
    gmu = inputs.gpu_memory_utilization
    room = memory.room_for_weights(gmu)
    return (
        f"{inputs.model.name} {inputs.weights.name} weights need {memory.weights.total / GIB:.1f} GiB per accelerator "
        f"at TP={memory.tp}, but {inputs.instance.instance_type} leaves {max(room, 0) / GIB:.1f} GiB "
        f"(usable {memory.usable_bytes / GIB:.1f} GiB x gpu_memory_utilization {gmu} - "
        f"{memory.reserve.total / GIB:.1f} GiB runtime reserve)." + _try("weights_do_not_fit", inputs, suggestions)
    )


def _kv_cannot_hold_one_sequence(inputs: PlanInputs, memory: MemoryPlan, suggestions: Sequence[Suggestion]) -> str:
    max_len = inputs.max_model_len
    return (
        f"KV cache on {inputs.instance.instance_type} holds {memory.kv_capacity:,} tokens (TP={memory.tp}, "
        f"{memory.kv_budget / GIB:.2f} GiB at {memory.kv_bytes_per_token / 1024:.0f} KiB/token), but one "
        f"max_model_len={max_len:,} sequence needs {max_len:,}."
        + _try("kv_cannot_hold_one_sequence", inputs, suggestions)
    )


def _batch_times_length_does_not_fit(inputs: PlanInputs, memory: MemoryPlan, suggestions: Sequence[Suggestion]) -> str:
    batch, typical = inputs.max_batch_size, inputs.typical_length
    need = (batch or 0) * typical
    return (
        f"max_batch_size={batch} x {typical:,} tokens (prompt+output) = {need:,} tokens, but the "
        f"KV cache on {inputs.instance.instance_type} holds {memory.kv_capacity:,}."
        + _try("batch_times_length_does_not_fit", inputs, suggestions)
    )


_WRITERS: dict[str, Callable[[PlanInputs, MemoryPlan, Sequence[Suggestion]], str]] = {
    "max_model_len_exceeds_position_embeddings": _position_embeddings,
    "weights_do_not_fit": _weights_do_not_fit,
    "kv_cannot_hold_one_sequence": _kv_cannot_hold_one_sequence,
    "batch_times_length_does_not_fit": _batch_times_length_does_not_fit,
}


def describe_problem(kind: str, inputs: PlanInputs, memory: MemoryPlan, suggestions: Sequence[Suggestion]) -> str:
    """The user-facing message for a problem of ``kind`` found in ``memory`` of ``inputs``, with its fixes."""
    return _WRITERS[kind](inputs, memory, suggestions)
