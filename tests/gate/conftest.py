"""Emulator processes shared by the gate's executed tests (one pair per module)."""

from __future__ import annotations

import pytest

from optigate.bench.harness import emulator_process


@pytest.fixture(scope="module")
def emulators():
    baseline = {"default": {"ttft_ms": 60, "itl_ms": 8}}
    candidate = {"default": {"ttft_ms": 30, "itl_ms": 5}}
    with emulator_process(baseline) as baseline_url, emulator_process(candidate) as candidate_url:
        yield baseline_url, candidate_url


@pytest.fixture(scope="module")
def slow_candidate(emulators):
    """A candidate whose first token takes longer than the 400 ms p99 TTFT budget."""
    with emulator_process({"default": {"ttft_ms": 450, "itl_ms": 3}}) as url:
        yield emulators[0], url
