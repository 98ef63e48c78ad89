"""One rule for numbers written as JSON: strict parsers read no NaN or infinity, so those become null."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any


def json_safe(value: Any) -> Any:
    """`value` ready for `json.dumps(..., allow_nan=False)`: every NaN or infinity None, numpy scalars plain
    Python (read through `.item()`, so this module needs no numpy), mappings dicts with string keys, tuples lists."""
    if isinstance(value, Mapping):
        return {str(key): json_safe(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(item) for item in value]
    if type(value).__module__ == "numpy" and getattr(value, "ndim", None) == 0:
        value = value.item()
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    return value


#: The longest key a JSON path shows whole, and the longest path (a deeply nested one keeps its two ends).
MAX_KEY_CHARS, MAX_PATH_CHARS = 40, 160


def json_path(loc: Iterable[Any]) -> str:
    """A location in a JSON document (a pydantic error's ``loc``) as a path: ``runs[0].samples.ttft_ms[3]``. A key
    longer than MAX_KEY_CHARS is cut and its length said: keys are the file's own (one can be megabytes), and the path
    goes into one-line messages, the gate's Step Functions output and its SNS notification (so does a deep one)."""
    text = ""
    for part in loc:
        if isinstance(part, int):
            text += f"[{part}]"
            continue
        key = str(part)
        if len(key) > MAX_KEY_CHARS:
            key = f"{key[: MAX_KEY_CHARS - 1]}…({len(key)} characters)"
        text += f".{key}" if text else key
    if len(text) > MAX_PATH_CHARS:
        half = MAX_PATH_CHARS // 2
        text = f"{text[:half]}…{text[-half:]}"
    return text
