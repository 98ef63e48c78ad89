"""optigate.stats on data whose answer is known: intervals, cluster resamples that keep requests
whole, paired resamples that keep pairs, and reproducibility from a seed."""

from __future__ import annotations

import numpy as np
import pytest

from optigate import stats


def test_percentile_interval_is_equal_tailed_and_ignores_nan():
    replicates = np.arange(1001, dtype=float)  # percentiles of 0..1000 are the values themselves
    assert stats.percentile_interval(replicates) == pytest.approx((25.0, 975.0))
    assert stats.percentile_interval(replicates, confidence=0.9) == pytest.approx((50.0, 950.0))
    assert stats.percentile_interval(np.append(replicates, [np.nan] * 50)) == pytest.approx((25.0, 975.0))


def test_bootstrap_mean_of_a_fair_coin_matches_the_binomial_interval():
    coin = np.array([0.0, 1.0] * 200)  # 400 tosses, mean 0.5: the mean's standard error is 0.025
    point, low, high = stats.bootstrap_mean(coin, replicates=4000)
    assert point == 0.5
    assert low == pytest.approx(0.5 - 1.96 * 0.025, abs=0.006) and high == pytest.approx(0.5 + 1.96 * 0.025, abs=0.006)


def test_bootstrap_mean_width_matches_the_normal_approximation():
    values = stats.generator(0).normal(100, 10, 500)
    point, low, high = stats.bootstrap_mean(values)
    assert point == pytest.approx(values.mean()) and low < point < high
    assert high - low == pytest.approx(2 * 1.96 * values.std() / np.sqrt(500), rel=0.15)


def test_constant_data_has_a_zero_width_interval():
    assert stats.bootstrap_percentile([7.0] * 30, 99) == (7.0, 7.0, 7.0)
    assert stats.bootstrap_mean([3.0] * 30) == (3.0, 3.0, 3.0)


def test_bootstrap_percentile_point_is_numpy_percentile_and_interval_covers_it():
    values = stats.generator(1).lognormal(0, 1, 301)
    point, low, high = stats.bootstrap_percentile(values, 90)
    assert point == pytest.approx(np.percentile(values, 90)) and low < point < high
    # The interval of the 90th percentile lies within the sample's 80th to 97th percentiles.
    assert np.percentile(values, 80) < low and high < np.percentile(values, 97)


def test_cluster_resample_keeps_requests_whole():
    counts = np.array([3, 0, 5, 1, 4, 2])
    # Request i's values are 100 * i + position, so a value tells which request and position it is.
    values = np.concatenate([100.0 * i + np.arange(c) for i, c in enumerate(counts)])
    rng = stats.generator(3)
    for _ in range(200):
        draw = stats.cluster_resample(values, counts, rng)
        position = 0
        while position < len(draw):
            request = int(draw[position] // 100)
            size = counts[request]
            assert list(draw[position : position + size]) == list(100.0 * request + np.arange(size)), draw
            position += size


def test_cluster_replicates_refuse_counts_that_do_not_add_up():
    with pytest.raises(ValueError, match="add up"):
        stats.cluster_replicates([1.0, 2.0, 3.0], [1, 1], stats.mean)
    with pytest.raises(ValueError, match="no samples"):
        stats.bootstrap_percentile([], 99)


def test_cluster_bootstrap_is_wider_than_resampling_correlated_values_one_by_one():
    rng = stats.generator(7)
    levels = rng.lognormal(np.log(15), 0.4, 80)  # each request has its own speed: its values are correlated
    counts = np.full(80, 50)
    values = np.repeat(levels, 50) * rng.lognormal(0, 0.05, 4000)
    point, low, high = stats.bootstrap_percentile(values, 99, counts=counts, rng=1)
    naive = stats.bootstrap_percentile(values, 99, rng=1)
    assert point == naive.point == pytest.approx(np.percentile(values, 99))
    assert high - low > 2 * (naive.high - naive.low)
    assert stats.bootstrap_percentile(values, 99, counts=counts, rng=1) == (point, low, high)  # a seed reproduces


def test_paired_bootstrap_keeps_pairs_together():
    baseline = stats.generator(4).normal(0, 50, 200)  # very spread records...
    candidate = baseline + 1.0  # ...each exactly one better
    assert stats.paired_mean_difference(baseline, candidate) == pytest.approx((1.0, 1.0, 1.0))
    # Resampled apart, the same samples leave the difference wide open.
    [unpaired] = stats.two_sample_difference(baseline, candidate, stats.mean)
    assert unpaired.point == pytest.approx(1.0) and unpaired.low < -5 and unpaired.high > 5
    with pytest.raises(ValueError, match="differ in length"):
        stats.paired_mean_difference(baseline, candidate[:-1])


def test_two_sample_difference_per_statistic():
    rng = stats.generator(5)
    baseline = rng.normal(100, 5, 400)
    shifted = rng.normal(100, 5, 400) + 20
    p50, p90 = stats.two_sample_difference(baseline, shifted, stats.percentiles((50, 90)))
    assert p50.point == pytest.approx(np.percentile(shifted, 50) - np.percentile(baseline, 50))
    assert p90.point == pytest.approx(np.percentile(shifted, 90) - np.percentile(baseline, 90))
    for difference in (p50, p90):
        assert 15 < difference.low < difference.point < difference.high < 25
    [same] = stats.two_sample_difference(baseline, baseline, stats.mean)
    assert same.point == 0 and same.low < 0 < same.high


def test_two_sample_difference_with_clusters_uses_the_counts():
    counts = [4] * 50
    levels = stats.generator(6).lognormal(0, 0.5, 50)
    values = np.repeat(levels, 4)
    clustered = stats.two_sample_difference(values, values, stats.mean, baseline_counts=counts, candidate_counts=counts)
    one_by_one = stats.two_sample_difference(values, values, stats.mean)
    assert clustered[0].high - clustered[0].low > 1.5 * (one_by_one[0].high - one_by_one[0].low)


def test_a_seed_reproduces_and_a_generator_continues():
    values = np.arange(50, dtype=float)
    assert stats.bootstrap_mean(values, rng=[1, 2, 3]) == stats.bootstrap_mean(values, rng=[1, 2, 3])
    assert stats.bootstrap_mean(values, rng=1) != stats.bootstrap_mean(values, rng=2)
    shared = stats.generator(9)
    assert stats.generator(shared) is shared
    first, second = stats.bootstrap_mean(values, rng=shared), stats.bootstrap_mean(values, rng=shared)
    assert first != second and first == stats.bootstrap_mean(values, rng=9)


def test_large_series_are_drawn_in_blocks_with_the_same_result_shape():
    values = np.arange(9000, dtype=float)  # 9000 values: blocks of stats._BLOCK_VALUES // 9000 replicates
    replicates = stats.resample_replicates(values, stats.percentiles((50, 99)), replicates=1000, rng=0)
    assert replicates.shape == (1000, 2) and np.isfinite(replicates).all()
