"""optigate.plan.speculation and the planner's one cost formula: the math advise words."""

from __future__ import annotations

import pytest

from optigate.plan import load_architecture, plan
from optigate.plan.catalog import get_instance
from optigate.plan.cost import cost_per_million_tokens, cost_per_month
from optigate.plan.speculation import SpeculationCeiling, expected_tpot_at, speculation_ceiling
from optigate.plan.team_plan import LENGTH_GRANULE, plan_longest_held


def test_break_even_acceptance_is_where_speculation_gains_nothing():
    ceiling = SpeculationCeiling(batch=4, k=4, memory_ms=10.0, compute_ms=2.0, overhead_ms=1.0, verify_ms=13.2)
    assert ceiling.plain_ms == 11.0
    assert ceiling.break_even_acceptance == pytest.approx((13.2 / 11.0 - 1) / 4)
    # A verify step yielding 1 + a x k tokens at the break-even share a is exactly as fast as plain steps.
    assert ceiling.gain_pct(1 + ceiling.break_even_acceptance * ceiling.k) == pytest.approx(0.0, abs=1e-9)
    assert ceiling.full_acceptance_gain_pct == pytest.approx(100 * (5 * 11.0 / 13.2 - 1))


def test_break_even_is_zero_when_verifying_costs_no_more_than_a_plain_step():
    ceiling = SpeculationCeiling(batch=1, k=3, memory_ms=10.0, compute_ms=1.0, overhead_ms=0.0, verify_ms=9.0)
    assert ceiling.break_even_acceptance == 0.0


def test_verifying_drafts_costs_more_at_high_concurrency_where_decode_turns_compute_bound():
    arch = load_architecture("llama-3.1-8b")
    instance = get_instance("ml.g5.xlarge")
    result = plan(arch, instance, max_model_len=4096, prompt_tokens=1024, output_tokens=256)
    ceilings = [
        speculation_ceiling(result, instance, arch, 4, concurrency=c, prompt_tokens=1024, output_tokens=256)
        for c in (1, 64)
    ]
    low, high = (c for c in ceilings if c is not None)
    assert low.memory_ms > low.compute_ms  # batch 1 reads far more than it computes: verifying is nearly free
    assert low.break_even_acceptance == 0.0
    assert high.batch == result.max_feasible_batch < 64  # capped at the batch the plan runs
    assert high.compute_ms * 5 > high.memory_ms  # five tokens per sequence to verify turn the step compute-bound
    assert high.break_even_acceptance > 0.0
    tpot = expected_tpot_at(result, 1)
    assert tpot is not None and tpot == result.expected_tpot_ms_batch1


def test_cost_per_million_tokens():
    assert cost_per_million_tokens(3.6 / 3600, 1.0, 1000) == pytest.approx(1.0)
    assert cost_per_million_tokens(0.002, 30.0, 6000) == pytest.approx(10.0)


def test_an_ad_hoc_plan_takes_the_longest_length_the_cache_holds_when_the_models_does_not_fit():
    arch = load_architecture("llama-3.1-8b")
    refused = plan(arch, "ml.g6.xlarge")
    assert not refused.fits  # 128k tokens of KV do not fit beside 16 GB of weights on 24 GB
    result, model_length = plan_longest_held(arch, "ml.g6.xlarge")
    assert model_length == refused.max_model_len == arch.max_position_embeddings
    assert result.fits and result.max_model_len % LENGTH_GRANULE == 0
    assert result.max_model_len == refused.kv_capacity_tokens // LENGTH_GRANULE * LENGTH_GRANULE
    # A length the user asked for is planned as asked, fitting or not.
    asked, replaced = plan_longest_held(arch, "ml.g6.xlarge", max_model_len=131072)
    assert replaced is None and not asked.fits


def test_cost_per_month_counts_every_hour_of_every_instance():
    assert cost_per_month(2.0, 3) == 2.0 * 3 * 730
