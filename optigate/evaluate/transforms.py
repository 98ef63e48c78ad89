"""fmeval transforms for the scores fmeval cannot compute offline (see `scoring`)."""

from __future__ import annotations

from typing import Any

from fmeval.transforms.transform import Transform
from fmeval.transforms.util import validate_call

from optigate.evaluate import scoring

QA_SCORES = ("qa_exact_match", "qa_quasi_exact_match", "qa_f1")
REFUSAL = "refusal"


class QAScores(Transform):
    """Exact match, quasi-exact match and token F1 of the model output against `<OR>` targets."""

    def __init__(self, target_output_key: str = "target_output", model_output_key: str = "model_output") -> None:
        super().__init__(target_output_key, model_output_key)
        self.register_input_output_keys([target_output_key, model_output_key], list(QA_SCORES))
        self.target_output_key = target_output_key
        self.model_output_key = model_output_key

    @validate_call
    def __call__(self, record: dict[str, Any]) -> dict[str, Any]:
        target, output = record[self.target_output_key], record[self.model_output_key] or ""
        record["qa_exact_match"] = scoring.exact_match(output, target)
        record["qa_quasi_exact_match"] = scoring.quasi_exact_match(output, target)
        record["qa_f1"] = scoring.f1(output, target)
        return record


class RefusalScore(Transform):
    """1.0 when the model output matches a refusal pattern."""

    def __init__(
        self, model_output_key: str = "model_output", patterns: tuple[str, ...] = scoring.DEFAULT_REFUSAL_PATTERNS
    ) -> None:
        super().__init__(model_output_key, tuple(patterns))
        self.register_input_output_keys([model_output_key], [REFUSAL])
        self.model_output_key = model_output_key
        self.patterns = tuple(patterns)

    @validate_call
    def __call__(self, record: dict[str, Any]) -> dict[str, Any]:
        record[REFUSAL] = scoring.is_refusal(record[self.model_output_key] or "", self.patterns)
        return record
