"""One rule for numbers written as JSON: strict parsers read no NaN or infinity, so those become null."""

from __future__ import annotations

import math
from collections.abc import Mapping
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
