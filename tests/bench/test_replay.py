"""Replay on a recorded schedule (optigate.bench.load mode "replay"), its schedule fidelity and refusal
(optigate.bench.runner), workloads in the closed loop, and levels sharded over processes (optigate.bench.shards)."""

from __future__ import annotations

import asyncio
import json
import random
import time
from dataclasses import replace

import pytest

from optigate.bench.client import StreamingClient, Target
from optigate.bench.emulator_process import emulator_process, fetch_trace
from optigate.bench.load import LoadSpec, run_load
from optigate.bench.metrics import percentile
from optigate.bench.runner import refusal, run_levels, schedule_fidelity
from optigate.bench.shards import split_spec
from optigate.bench.workload import Workload, WorkloadRequest

FAST = {"ttft_ms": 20, "itl_ms": 2, "output_tokens": 6}


def _workload(offsets: list[float], kind: str = "replay") -> Workload:
    return Workload(
        tuple(
            WorkloadRequest(
                {"inputs": f"prompt {n}"}, max_new_tokens=4 + n % 3, prompt_tokens=2, offset_s=offsets[n] if kind == "replay" else None
            )
            for n in range(len(offsets))
        ),
        kind,
        "test",
    )


def _known_gaps(count: int, seed: int = 7) -> list[float]:
    """Offsets with irregular, known gaps (2 to 60 ms, bursts and pauses), not a rate a loop could guess."""
    rng = random.Random(seed)
    offsets, at = [], 0.0
    for _ in range(count):
        offsets.append(at)
        at += rng.choice((0.002, 0.005, 0.01, 0.02, 0.06))
    return offsets


def _received_offsets(records, trace) -> list[float]:
    """When the emulator received each measured request (its clock, the host's monotonic one), from the first, in
    the order the client scheduled them."""
    ordered = sorted((r for r in records if not r.warmup), key=lambda r: r.scheduled_at)
    received = [trace[r.request_id]["received_at"] for r in ordered]
    return [at - received[0] for at in received]


def _replay(url: str, spec: LoadSpec):
    client = StreamingClient(Target("replay", endpoint_url=url), timeout=10)
    fetch_trace(url, clear=True)
    result = asyncio.run(run_load(client, spec))
    return result, fetch_trace(url, clear=True)


def _gap_errors_ms(offsets: list[float], received: list[float]) -> list[float]:
    recorded = [b - a for a, b in zip(offsets, offsets[1:], strict=False)]
    replayed = [b - a for a, b in zip(received, received[1:], strict=False)]
    return sorted(abs(x - y) * 1000 for x, y in zip(recorded, replayed, strict=True))


# --------------------------------------------------------------------------- the arrival process


def test_replayed_arrivals_keep_the_recorded_inter_arrival_gaps():
    offsets = _known_gaps(60)
    with emulator_process({"default": FAST}) as url:
        result, trace = _replay(url, LoadSpec(concurrency=4, requests=None, mode="replay", workload=_workload(offsets)))
    records = [r for r in result.records if not r.warmup]
    assert len(records) == 60 and all(r.error is None for r in records)
    assert not any(r.warmup for r in result.records)  # no warm-up request shifts the schedule
    received = _received_offsets(result.records, trace)
    errors = _gap_errors_ms(offsets, received)
    # The server saw the recorded gaps: a busy 2-core host jitters a few ms, never the pattern itself.
    assert percentile(errors, 50) < 2.0, errors
    assert percentile(errors, 95) < 10.0, errors
    assert abs(received[-1] - offsets[-1]) < 0.02  # the whole span, not just the gaps
    # The check can tell: the same gaps in another order (same rate, another process) are far off.
    shuffled = offsets[:1]
    for gap in random.Random(1).sample([b - a for a, b in zip(offsets, offsets[1:], strict=False)], len(offsets) - 1):
        shuffled.append(shuffled[-1] + gap)
    assert percentile(_gap_errors_ms(shuffled, received), 50) > 5.0


def test_replay_sends_each_request_its_own_body_and_output_length_and_ignores_the_concurrency():
    # Requests 40 ms long arriving every 5 ms: about 8 in flight, with one connection opened beforehand.
    offsets = [n * 0.005 for n in range(30)]
    with emulator_process({"default": {"ttft_ms": 40, "itl_ms": 1}}) as url:
        result, _ = _replay(url, LoadSpec(concurrency=1, requests=None, mode="replay", workload=_workload(offsets)))
    records = sorted(result.records, key=lambda r: r.scheduled_at)
    assert [r.output_tokens for r in records] == [4 + n % 3 for n in range(30)]
    lags = [(r.sent_at - r.scheduled_at) * 1000 for r in records]
    assert percentile(sorted(lags), 50) < 5.0  # not queued behind the one connection (40 ms each)
    ends = [(r.sent_at, r.completed_at) for r in records]
    assert max(sum(1 for s, e in ends if s <= t < e) for t, _ in ends) >= 4


def test_replay_budget_is_the_first_requests_or_the_first_seconds_of_the_schedule():
    offsets = [n * 0.01 for n in range(40)]
    with emulator_process({"default": FAST}) as url:
        counted, _ = _replay(url, LoadSpec(concurrency=2, requests=7, mode="replay", workload=_workload(offsets)))
        timed, _ = _replay(
            url, LoadSpec(concurrency=2, requests=None, duration_s=0.155, mode="replay", workload=_workload(offsets))
        )
    assert len(counted.records) == 7
    assert len(timed.records) == 16  # offsets 0.00 .. 0.15


def test_replay_needs_a_scheduled_workload_and_a_positive_lag_bound():
    with pytest.raises(ValueError, match="recorded schedule"):
        LoadSpec(concurrency=1, mode="replay")
    with pytest.raises(ValueError, match="recorded schedule"):
        LoadSpec(concurrency=1, mode="replay", workload=_workload([0.0, 0.1], kind="sessions"))
    with pytest.raises(ValueError, match="max_lag_ms"):
        LoadSpec(concurrency=1, mode="replay", workload=_workload([0.0]), max_lag_ms=0)
    with pytest.raises(ValueError, match="load mode"):
        LoadSpec(concurrency=1, mode="poisson")


# --------------------------------------------------------------------------- workloads in the closed loop


def test_a_workload_gives_each_request_its_body_and_output_length_in_order_cycling():
    workload = Workload(
        (
            WorkloadRequest({"inputs": "first"}, max_new_tokens=3, prompt_tokens=1),
            WorkloadRequest({"messages": [{"role": "user", "content": "second"}]}, max_new_tokens=9, prompt_tokens=1),
        ),
        "sessions",
        "test",
    )
    spec = LoadSpec(concurrency=1, workload=workload, max_new_tokens=256, prompt_tokens=1024)
    bodies = [json.loads(spec.body(n)) for n in range(4)]
    assert [b["messages"][-1]["content"] for b in bodies] == ["first", "second", "first", "second"]
    assert [b["max_tokens"] for b in bodies] == [3, 9, 3, 9]
    with pytest.raises(ValueError, match="messages schema"):
        LoadSpec(concurrency=1, workload=workload, engine_mode="rolling-batch")


# --------------------------------------------------------------------------- fidelity and refusal


def test_schedule_fidelity_reports_the_lag_and_refuses_beyond_the_bound():
    kept = schedule_fidelity([0.2] * 98 + [1.0, 3.0], 5.0)
    assert kept["client_bound"] is False and kept["bound_ms"] == 5.0 and kept["max_lag_ms"] == 3.0
    assert refusal(kept) is None
    behind = schedule_fidelity([0.2] * 97 + [9.0, 12.0, 40.0], 5.0)
    assert behind["client_bound"] is True and behind["p99_lag_ms"] > 5.0
    assert "the client, not the server, shaped the load" in refusal(behind)
    unknown = schedule_fidelity([], 5.0)  # nothing sent: fail closed
    assert unknown["client_bound"] is True and "unknown" in refusal(unknown)


def test_a_client_stall_makes_the_replay_refuse_itself():
    offsets = [n * 0.01 for n in range(40)]  # 100 requests/s

    def stalling(level, spec):
        def stall(_exchange):
            time.sleep(0.03)  # the client's loop is blocked: the next sends leave late

        return stall

    with emulator_process({"default": FAST}) as url:
        target = Target("replay", endpoint_url=url)
        spec = LoadSpec(concurrency=4, requests=None, mode="replay", workload=_workload(offsets))
        stalled = asyncio.run(run_levels(target, [4], spec, timeout=10, on_level=stalling))
        # The same replay without the stall, judged against a bound a busy host keeps: not refused.
        kept = asyncio.run(run_levels(target, [4], replace(spec, max_lag_ms=50.0), timeout=10))
    run = stalled["runs"][0]
    assert run["schedule"]["client_bound"] is True and run["schedule"]["p99_lag_ms"] > 5.0
    assert run["refused"].startswith("the client fell behind the recorded schedule")
    assert any("refused" in warning for warning in run["warnings"])
    assert kept["runs"][0]["schedule"]["client_bound"] is False and "refused" not in kept["runs"][0]
    assert set(kept["runs"][0]["schedule"]) == {"p50_lag_ms", "p99_lag_ms", "max_lag_ms", "bound_ms", "client_bound"}


def test_closed_and_open_runs_carry_no_schedule_judgement():
    with emulator_process({"default": FAST}) as url:
        data = asyncio.run(
            run_levels(Target("x", endpoint_url=url), [2], LoadSpec(concurrency=2, requests=4, max_new_tokens=6))
        )
    assert "schedule" not in data["runs"][0] and "refused" not in data["runs"][0]
    assert data["load"]["workers"] == 1


# --------------------------------------------------------------------------- workers


def test_split_spec_shares_concurrency_requests_and_rate_and_deals_the_workload():
    closed = split_spec(LoadSpec(concurrency=5, requests=11), 2)
    assert [s.concurrency for s in closed] == [3, 2] and [s.requests for s in closed] == [6, 5]
    opened = split_spec(LoadSpec(concurrency=4, requests=8, mode="open", rate=10.0), 2)
    assert [s.rate for s in opened] == [5.0, 5.0] and len({s.seed for s in opened}) == 2  # no lock-step arrivals
    replay = split_spec(
        LoadSpec(concurrency=1, requests=5, mode="replay", workload=_workload([n / 10 for n in range(9)])), 2
    )
    assert [[r.offset_s for r in s.workload.requests] for s in replay] == [[0.0, 0.2, 0.4], [0.1, 0.3]]
    assert all(s.requests is None and s.concurrency == 1 for s in replay)
    with pytest.raises(ValueError, match="cannot be split"):
        split_spec(LoadSpec(concurrency=1), 2)
    with pytest.raises(ValueError, match="cannot be dealt"):
        split_spec(LoadSpec(concurrency=2, mode="replay", workload=_workload([0.0])), 2)


def test_workers_shard_a_closed_level_over_processes_and_merge_it():
    with emulator_process({"default": FAST}) as url:
        fetch_trace(url, clear=True)
        data = asyncio.run(
            run_levels(Target("x", endpoint_url=url), [4], LoadSpec(concurrency=4, requests=12, max_new_tokens=6), workers=2)
        )
        trace = fetch_trace(url)
    run = data["runs"][0]
    assert run["concurrency"] == 4 and run["requests"] == 12 and run["successful_requests"] == 12
    assert len(run["samples"]["outcomes"]) == 12 and data["load"]["workers"] == 2
    assert len(trace) == 12 + 2 * 3  # each shard: its probe and one warm-up per stream (2 streams each)


def test_workers_replay_one_schedule_from_a_shared_start():
    offsets = _known_gaps(40, seed=3)
    with emulator_process({"default": FAST}) as url:
        fetch_trace(url, clear=True)
        spec = LoadSpec(concurrency=2, requests=None, mode="replay", workload=_workload(offsets), max_lag_ms=50.0)
        data = asyncio.run(run_levels(Target("x", endpoint_url=url), [2], spec, workers=2))
        trace = fetch_trace(url)
    run = data["runs"][0]
    assert run["requests"] == 40 and run["successful_requests"] == 40 and run["schedule"]["client_bound"] is False
    received = sorted(entry["received_at"] for entry in trace.values())
    errors = _gap_errors_ms(offsets, [at - received[0] for at in received])
    assert percentile(errors, 50) < 3.0, errors  # two processes, one arrival process
    assert abs(received[-1] - received[0] - offsets[-1]) < 0.03
