"""The grouped parts of the gate's plan (optigate.deployment.gate_parts): the thresholds are gate.benchmark's, in its
order, so that what the decision reads and the fingerprint stay what a dict of them was."""

from __future__ import annotations

from optigate.config.models import BenchmarkGate
from optigate.deployment.gate_parts import NOT_THRESHOLDS, BenchmarkPlan, Thresholds


def test_the_thresholds_are_every_threshold_of_gate_benchmark_in_its_order():
    benchmark = BenchmarkGate(concurrency=[1, 64], min_throughput_gain_pct=5.0, metric_margins_pct={"ttft_ms": 4.0})
    thresholds = Thresholds.of(benchmark, [1, 64], max_error_rate=0.02)
    expected = {**benchmark.model_dump(exclude=set(NOT_THRESHOLDS)), "max_error_rate": 0.02}
    assert list(thresholds.to_dict().items()) == list(expected.items())


def test_thresholds_from_a_payload_take_gate_benchmarks_defaults():
    thresholds = Thresholds.from_dict({"concurrency": [4], "p99_ttft_ms_budget": 400.0})
    assert thresholds.concurrency == (4,) and thresholds.p99_ttft_ms_budget == 400.0
    assert thresholds.max_error_rate == BenchmarkGate().max_error_rate


def test_the_benchmark_splits_each_level_into_blocks_with_at_least_the_floor_of_requests():
    benchmark = BenchmarkPlan(levels=(1, 16), shards=2, requests_per_slot=4, blocks=2)
    assert benchmark.measured_concurrency == (2, 32) and benchmark.requests_per_level == (32, 64)
    assert [i["per_shard"] for i in benchmark.items] == [1, 16]  # one round: every level once
    assert benchmark.rounds == (2, 2) and benchmark.looks() == {"min_rounds": 2, "max_rounds": 2, "max_minutes": None}


def test_a_benchmark_in_rounds_looks_from_min_rounds_and_smaller_rounds_have_a_smaller_floor():
    benchmark = BenchmarkPlan(levels=(1, 16), requests_per_slot=1, blocks=3, max_rounds=12, min_rounds=4)
    assert benchmark.requests_per_level == (8, 16)
    assert benchmark.rounds == (4, 12)
