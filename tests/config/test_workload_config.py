"""gate.benchmark.workload and gate.benchmark.synthetic as the gate plan carries them (deployment.gate_workload):
a replay is one run per block on the recorded schedule, sessions keep every level, the workload is part of the proof
(fingerprint) but not of the thresholds, and {p50, p90} becomes values whose median and 90th percentile are those."""

from __future__ import annotations

from typing import Any

import pytest

from optigate.config.models import LengthPercentiles
from optigate.deployment import load_resolved_project
from optigate.deployment.gate_workload import QUANTILES, length_values
from optigate.promote.lock import default_locks_dir
from tests.conftest import edited_config

BUDGET = "    p99_itl_ms_budget: 60\n"  # the last key of chat's gate.benchmark


def chat_plans(config) -> dict[str, Any]:
    """chat's gate plan per environment."""
    project = load_resolved_project(config)
    return {
        d.environment.name: d.gate
        for d in project.deployments(None, default_locks_dir(config))
        if d.team.team == "chat" and d.gate is not None
    }


def with_benchmark(tmp_path, lines: str):
    return edited_config(tmp_path, "teams/chat.yaml", BUDGET, BUDGET + lines)


@pytest.fixture(scope="module")
def unchanged(tmp_path_factory):
    return chat_plans(edited_config(tmp_path_factory.mktemp("unchanged"), "teams/chat.yaml", BUDGET, BUDGET))


def test_percentiles_become_values_with_that_median_and_90th_percentile():
    values = sorted(length_values(LengthPercentiles(p50=512, p90=2048)))
    assert len(values) == QUANTILES
    assert values[49] <= 512 <= values[50]
    assert values[89] <= 2048 <= values[90]
    assert min(values) >= 1
    assert length_values(LengthPercentiles(p50=300, p90=300)) == (300,) * QUANTILES
    assert length_values([128, 4096]) == (128, 4096) and length_values(64) == (64,)


def test_a_replay_is_one_run_per_block_at_the_top_level_and_part_of_the_proof(tmp_path, unchanged):
    plans = chat_plans(
        with_benchmark(
            tmp_path,
            "    min_throughput_gain_pct: -5\n    workload: {from: data_capture, kind: replay, speedup: 4}\n",
        )
    )
    dev = plans["dev"]
    assert (
        dev.benchmark.workload is not None
        and dev.benchmark.workload.from_capture
        and dev.benchmark.workload.speedup == 4
    )
    assert dev.benchmark.levels == (32,) and dev.thresholds.concurrency == (32,)
    items = dev.benchmark.items
    assert [item["per_shard"] for item in items] == [32] and dev.benchmark.rounds == (dev.benchmark.blocks,) * 2
    assert "workload" not in dev.thresholds.to_dict() and "synthetic" not in dev.thresholds.to_dict()
    # The same candidate proven on other requests is another proof.
    assert dev.fingerprint != unchanged["dev"].fingerprint
    assert (
        dev.benchmark.workload.event("s3://capture-bucket/capture/chat-dev/")["source"]
        == "s3://capture-bucket/capture/chat-dev/"
    )


def test_sessions_keep_every_level_and_a_plan_without_workload_keeps_its_proof(tmp_path, unchanged):
    plans = chat_plans(
        with_benchmark(tmp_path, "    workload: {from: 's3://acme-traffic-{region}/chat/', kind: sessions}\n")
    )
    staging = plans["staging"]
    assert staging.benchmark.levels == unchanged["staging"].benchmark.levels == (1, 8, 32)
    assert (
        staging.benchmark.workload is not None
        and staging.benchmark.workload.source == "s3://acme-traffic-us-east-1/chat/"
    )
    assert staging.benchmark.workload.data_location == ("acme-traffic-us-east-1", "chat/*")
    assert unchanged["staging"].benchmark.workload is None and unchanged["staging"].benchmark.synthetic is None


def test_synthetic_distributions_reach_the_plan(tmp_path, unchanged):
    plans = chat_plans(
        with_benchmark(
            tmp_path,
            "    synthetic:\n      prompt_tokens: {p50: 512, p90: 2048}\n      shared_prefix_pct: 25\n"
            "      prefix_tokens: 16\n",
        )
    )
    synthetic = plans["dev"].benchmark.synthetic
    assert synthetic is not None and synthetic.shared_prefix_share == 0.25 and synthetic.prefix_tokens == 16
    assert len(synthetic.prompt_tokens) == QUANTILES and synthetic.max_new_tokens == (256,)  # chat's max_new_tokens
    assert plans["dev"].fingerprint != unchanged["dev"].fingerprint
    assert plans["dev"].benchmark.levels == unchanged["dev"].benchmark.levels


def test_a_shared_prefix_longer_than_the_shortest_drawn_prompt_is_refused(tmp_path):
    """{p50: 512, p90: 2048} draws prompts down to 32 tokens (the log-normal's 0.5 % quantile): a 32-token prefix
    would be a whole prompt, which OG462 refuses at the prefix's line."""
    from optigate.config.loader import ConfigError

    config = with_benchmark(
        tmp_path,
        "    synthetic:\n      prompt_tokens: {p50: 512, p90: 2048}\n      shared_prefix_pct: 25\n"
        "      prefix_tokens: 32\n",
    )
    with pytest.raises(ConfigError) as refused:
        chat_plans(config)
    (issue,) = [i for i in refused.value.issues if i.rule == "OG462"]
    assert "the shortest is 32" in str(issue) and "prefix_tokens" in str(issue)
