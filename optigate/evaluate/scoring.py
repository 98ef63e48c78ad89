"""Per-record quality scores that need no model download: QA exact / quasi-exact match and
token F1 (SQuAD-style normalisation), and refusal detection with configurable patterns.

fmeval's own QAAccuracy imports BERTScore from the hub at import time, so these are computed
here and run inside fmeval's pipeline as a transform (`optigate.evaluate.transforms`).
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Mapping
from typing import Any

DEFAULT_REFUSAL_PATTERNS = (
    r"\bI(?:'m| am) (?:sorry|unable|not able)\b",
    r"\bI can(?:not|'t) (?:help|assist|answer|provide|comply)\b",
    r"\bI (?:won't|will not) (?:help|assist|answer|provide)\b",
    r"\bas an AI\b",
    r"\bnot (?:allowed|permitted) to\b",
)
ARTICLES = re.compile(r"\b(a|an|the)\b")
PUNCTUATION = str.maketrans("", "", string.punctuation)


def normalize(text: str) -> str:
    """Lower case, no punctuation, no articles, single spaces (the SQuAD normalisation)."""
    return " ".join(ARTICLES.sub(" ", text.lower().translate(PUNCTUATION)).split())


def targets(target_output: str, delimiter: str = "<OR>") -> list[str]:
    """The acceptable answers; an empty reference is one acceptable answer, the empty one."""
    return [t for t in (part.strip() for part in target_output.split(delimiter)) if t] or [""]


def exact_match(model_output: str, target_output: str) -> float:
    return float(any(model_output.strip() == target for target in targets(target_output)))


def quasi_exact_match(model_output: str, target_output: str) -> float:
    return float(any(normalize(model_output) == normalize(target) for target in targets(target_output)))


def f1(model_output: str, target_output: str) -> float:
    """Best token-overlap F1 against any acceptable answer."""
    predicted = normalize(model_output).split()
    best = 0.0
    for target in targets(target_output):
        expected = normalize(target).split()
        if not expected or not predicted:  # SQuAD's rule: 1 when both are empty, else 0
            best = max(best, float(expected == predicted))
            continue
        common = sum((Counter(predicted) & Counter(expected)).values())
        if common == 0:
            continue
        precision, recall = common / len(predicted), common / len(expected)
        best = max(best, 2 * precision * recall / (precision + recall))
    return best


def is_refusal(model_output: str, patterns: tuple[str, ...] = DEFAULT_REFUSAL_PATTERNS) -> float:
    return float(any(re.search(pattern, model_output, flags=re.IGNORECASE) for pattern in patterns))


def estimate_tokens(text: str) -> int:
    """About four characters a token in English for Llama-, Qwen- and Mistral-style tokenizers."""
    return max(1, len(text) // 4)


def qa_rows(answers: Mapping[str, str], records: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The rows fmeval's QA pipeline gives (optigate.evaluate.job.score_model), for answers known by record id,
    computed here: the offline scorer of the tests and the rehearsal (no endpoint, no fmeval)."""
    rows = {}
    for record in records:
        output, target = answers[record["id"]], record["target_output"]
        rows[record["id"]] = {
            **record,
            "model_output": output,
            "qa_exact_match": exact_match(output, target),
            "qa_quasi_exact_match": quasi_exact_match(output, target),
            "qa_f1": f1(output, target),
            "refusal": is_refusal(output),
        }
    return rows
