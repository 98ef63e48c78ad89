"""optigate.jsonsafe: the one rule for numbers written as JSON."""

from __future__ import annotations

import json
import math

import numpy as np

from optigate.jsonsafe import MAX_KEY_CHARS, MAX_PATH_CHARS, json_path, json_safe


def test_non_finite_numbers_become_null_at_any_depth():
    data = {"a": math.nan, "b": [1.5, math.inf, (-math.inf, 2)], "c": {"d": np.float64("nan")}}
    assert json_safe(data) == {"a": None, "b": [1.5, None, [None, 2]], "c": {"d": None}}
    assert json.loads(json.dumps(json_safe(data), allow_nan=False))["b"] == [1.5, None, [None, 2]]


def test_numpy_scalars_become_python_values_and_keys_strings():
    safe = json_safe({1: np.int64(3), "ok": np.bool_(True), "x": np.float32(0.5)})
    assert safe == {"1": 3, "ok": True, "x": 0.5}
    assert [type(value) for value in safe.values()] == [int, bool, float]


def test_everything_else_is_left_as_it_is():
    assert json_safe("text") == "text" and json_safe(None) is None and json_safe(7) == 7 and json_safe(False) is False


def test_a_json_path_names_items_and_keys_and_cuts_a_huge_key_or_a_deep_path():
    assert json_path(("runs", 0, "samples", "ttft_ms", 3)) == "runs[0].samples.ttft_ms[3]"
    huge = json_path(("runs", 0, "errors", "E" * 300_000))
    assert huge == f"runs[0].errors.{'E' * (MAX_KEY_CHARS - 1)}…(300000 characters)"
    deep = json_path(("thresholds", *["a"] * 10_000))
    assert len(deep) == MAX_PATH_CHARS + 1 and deep.startswith("thresholds.a.a") and deep.endswith(".a.a")
