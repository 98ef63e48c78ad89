"""Replay on a recorded schedule (optigate.bench.core.load mode "replay"), its schedule fidelity and refusal
(optigate.bench.core.runner), workloads in the closed loop, and levels sharded over processes
(optigate.bench.core.shards)."""

from __future__ import annotations

import asyncio
import itertools
import json
import random
import time
from dataclasses import replace

import pytest

from optigate.bench.core.client import StreamingClient, Target
from optigate.bench.core.load import LoadSpec, run_load
from optigate.bench.core.metrics import percentile
from optigate.bench.core.runner import run_levels
from optigate.bench.core.schedule import refusal, schedule_fidelity
from optigate.bench.core.shards import split_spec
from optigate.bench.core.workload import Workload, WorkloadRequest
from optigate.emulator.process import emulator_process, fetch_trace

FAST = {"ttft_ms": 20, "itl_ms": 2, "output_tokens": 6}


def _workload(offsets: list[float], kind: str = "replay") -> Workload:
    return Workload(
        tuple(
            WorkloadRequest(
                {"inputs": f"prompt {n}"},
                max_new_tokens=4 + n % 3,
                prompt_tokens=2,
                offset_s=offsets[n] if kind == "replay" else None,
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
    recorded = [b - a for a, b in itertools.pairwise(offsets)]
    replayed = [b - a for a, b in itertools.pairwise(received)]
    return sorted(abs(x - y) * 1000 for x, y in zip(recorded, replayed, strict=True))


# --------------------------------------------------------------------------- the arrival process


@pytest.mark.slow
def test_replayed_arrivals_keep_the_recorded_inter_arrival_gaps():
    offsets = _known_gaps(60)
    with emulator_process({"default": FAST}) as url:
        result, trace = _replay(url, LoadSpec(concurrency=4, requests=None, mode="replay", workload=_workload(offsets)))
    records = sorted(result.records, key=lambda r: r.scheduled_at)
    assert len(records) == 60 and all(r.error is None for r in records)
    assert not any(r.warmup for r in records)  # no warm-up request shifts the schedule
    # The schedule is the capture's, exactly, and no request leaves before its time.
    assert [r.scheduled_at - records[0].scheduled_at for r in records] == pytest.approx(offsets, abs=1e-9)
    assert all(r.sent_at >= r.scheduled_at for r in records)
    # The server saw the recorded gaps. A busy 2-core host stalls a few sends (each stall moves two gaps), so the
    # bulk is held tight and the tail is left to the run's own fidelity figure (optigate.bench.core.runner).
    received = _received_offsets(result.records, trace)
    errors = _gap_errors_ms(offsets, received)
    assert percentile(errors, 50) < 3.0, errors
    assert percentile(errors, 80) < 10.0, errors
    assert abs(received[-1] - offsets[-1]) < 0.05  # the whole span, not just the gaps
    # The check can tell: the same gaps in another order (same rate, another process) are far off.
    shuffled = offsets[:1]
    for gap in random.Random(1).sample([b - a for a, b in itertools.pairwise(offsets)], len(offsets) - 1):
        shuffled.append(shuffled[-1] + gap)
    assert percentile(_gap_errors_ms(shuffled, received), 50) > 5.0


@pytest.mark.slow
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


@pytest.mark.slow
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
    with pytest.raises(ValueError, match="in order"):
        LoadSpec(concurrency=1, mode="replay", workload=_workload([0.0, 0.2, 0.1]))
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


@pytest.mark.slow
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
        # The same replay without the stall, judged against a bound even a busy host keeps: not refused.
        kept = asyncio.run(run_levels(target, [4], replace(spec, max_lag_ms=500.0), timeout=10))
    run = stalled["runs"][0]
    assert run["schedule"]["client_bound"] is True and run["schedule"]["p99_lag_ms"] > 5.0
    assert run["refused"].startswith("the client fell behind the recorded schedule")
    assert any("refused" in warning for warning in run["warnings"])
    assert kept["runs"][0]["schedule"]["client_bound"] is False and "refused" not in kept["runs"][0]
    assert set(kept["runs"][0]["schedule"]) == {"p50_lag_ms", "p99_lag_ms", "max_lag_ms", "bound_ms", "client_bound"}


@pytest.mark.slow
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


@pytest.mark.slow
def test_workers_shard_a_closed_level_over_processes_and_merge_it():
    with emulator_process({"default": FAST}) as url:
        fetch_trace(url, clear=True)
        data = asyncio.run(
            run_levels(
                Target("x", endpoint_url=url), [4], LoadSpec(concurrency=4, requests=12, max_new_tokens=6), workers=2
            )
        )
        trace = fetch_trace(url)
    run = data["runs"][0]
    assert run["concurrency"] == 4 and run["requests"] == 12 and run["successful_requests"] == 12
    assert len(run["samples"]["outcomes"]) == 12 and data["load"]["workers"] == 2
    assert len(trace) == 12 + 2 * 3  # each shard: its probe and one warm-up per stream (2 streams each)


@pytest.mark.slow
def test_a_shard_result_larger_than_the_pipe_buffer_comes_back_whole():
    # 2 x 12 requests of 2,000 one-token frames: each shard's records pickle to far more than a socket buffer.
    with emulator_process({"default": {"ttft_ms": 1, "itl_ms": 0.01, "output_tokens": 2000}}) as url:
        spec = LoadSpec(concurrency=2, requests=24, max_new_tokens=2000, warmup=False)
        data = asyncio.run(run_levels(Target("x", endpoint_url=url), [2], spec, workers=2, include_samples=False))
    assert "error" not in data, data.get("error")
    run = data["runs"][0]
    assert run["successful_requests"] == 24 and run["output_tokens"] == 24 * 2000


@pytest.mark.slow
def test_workers_replay_one_schedule_from_a_shared_start():
    from optigate.bench.core.shards import run_sharded

    offsets = _known_gaps(40, seed=3)
    with emulator_process({"default": FAST}) as url:
        fetch_trace(url, clear=True)
        spec = LoadSpec(concurrency=2, requests=None, mode="replay", workload=_workload(offsets))
        run, results, error = asyncio.run(run_sharded(Target("x", endpoint_url=url), spec, 2, timeout=10))
        trace = fetch_trace(url)
    assert error is None and [len(result.records) for result in results] == [20, 20]
    assert run.requests == 40 and len(run.completions) == 40 and run.concurrency == 2
    # Two processes, one schedule: the dealt arrivals, merged, sit on the capture's offsets from one start (each
    # process turns the announced epoch start into its own clock: within a millisecond).
    scheduled = sorted(record.scheduled_at for result in results for record in result.records)
    assert [at - scheduled[0] for at in scheduled] == pytest.approx(offsets, abs=1e-3)
    received = sorted(entry["received_at"] for entry in trace.values())
    assert percentile(_gap_errors_ms(offsets, [at - received[0] for at in received]), 50) < 3.0


# --------------------------------------------------------------------------- the CLI on a capture


def _capture_file(path, offsets: list[float], start: float = 1_764_000_000.0) -> None:
    """SageMaker capture records (optigate.bench.core.capture) whose inferenceTime carries milliseconds."""
    from datetime import UTC, datetime

    from optigate.bench.core.capture import capture_record

    lines = []
    for n, offset in enumerate(offsets):
        body = {"inputs": f"secret prompt {n}", "parameters": {"max_new_tokens": 3 + n % 4}}
        record = capture_record(body, start + offset, f"event-{n}")
        stamp = datetime.fromtimestamp(start + offset, UTC).isoformat(timespec="milliseconds")
        record["eventMetadata"]["inferenceTime"] = stamp.replace("+00:00", "Z")
        lines.append(json.dumps(record))
    path.write_text("\n".join(lines) + "\n")


def _bench_cli(url: str, *extra: str) -> int:
    from optigate.cli import main

    return main(["bench", "--endpoint", "replay", "--endpoint-url", url, *extra])


@pytest.mark.slow
def test_bench_replays_a_capture_on_its_schedule_and_records_shape_and_fidelity_never_text(tmp_path, capsys):
    capture, out = tmp_path / "capture.jsonl", tmp_path / "out.json"
    _capture_file(capture, [n * 0.02 for n in range(20)])
    with emulator_process({"default": {"ttft_ms": 10, "itl_ms": 1}}) as url:
        code = _bench_cli(url, "--workload", str(capture), "--speedup", "2", "--max-lag-ms", "50", "--json", str(out))
    assert code == 0, capsys.readouterr().err
    text = out.read_text()
    assert "secret prompt" not in text
    data = json.loads(text)
    run = data["runs"][0]
    assert data["load"]["mode"] == "replay" and data["load"]["workers"] == 1 and run["concurrency"] == 16
    assert data["load"]["workload"]["requests"] == 20 and data["load"]["workload"]["duration_s"] == pytest.approx(0.19)
    assert run["requests"] == 20 and run["successful_requests"] == 20
    assert run["schedule"]["bound_ms"] == 50 and run["schedule"]["client_bound"] is False
    assert "schedule lag p50" in capsys.readouterr().out
    # `bench compare` judges a replay that kept its schedule, and refuses one that did not.
    from optigate.cli import main

    refused = tmp_path / "refused.json"
    data["runs"][0]["refused"] = "the client fell behind the recorded schedule: test"
    refused.write_text(json.dumps(data))
    assert main(["bench", "compare", str(out), str(out)]) == 0
    assert main(["bench", "compare", str(out), str(refused)]) == 3
    assert "cannot judge: the client shaped the load in candidate" in capsys.readouterr().err


@pytest.mark.slow
def test_bench_exits_3_when_the_replay_fell_behind_its_schedule_and_keeps_the_json(tmp_path, capsys):
    capture, out = tmp_path / "capture.jsonl", tmp_path / "out.json"
    _capture_file(capture, [n * 0.01 for n in range(10)])
    with emulator_process({"default": {"ttft_ms": 5, "itl_ms": 1}}) as url:
        # No send leaves within a microsecond of its time: the bound cannot be kept, so the run refuses itself.
        code = _bench_cli(url, "--workload", str(capture), "--max-lag-ms", "0.001", "--json", str(out))
    assert code == 3
    assert "cannot judge: the client shaped the load" in capsys.readouterr().err
    assert json.loads(out.read_text())["runs"][0]["refused"]


@pytest.mark.slow
def test_bench_sends_sampled_sessions_in_the_closed_loop_in_one_or_two_processes(tmp_path):
    capture, out, sharded = tmp_path / "capture.jsonl", tmp_path / "out.json", tmp_path / "sharded.json"
    _capture_file(capture, [n * 0.5 for n in range(6)])
    options = ("--workload", str(capture), "--workload-kind", "sessions", "--concurrency", "2", "--requests", "6")
    with emulator_process({"default": {"ttft_ms": 5, "itl_ms": 1}}) as url:
        code = _bench_cli(url, *options, "--json", str(out))
        sharded_code = _bench_cli(url, *options, "--workers", "2", "--json", str(sharded))
    data = json.loads(out.read_text())
    assert code == 0 and data["load"]["mode"] == "closed" and "schedule" not in data["runs"][0]
    assert data["load"]["workload"]["kind"] == "sessions" and data["load"]["workers"] == 1
    # Each request asked for its captured output length (3..6 tokens), not --max-new-tokens' 256.
    assert data["runs"][0]["output_tokens"] < 6 * 7
    merged = json.loads(sharded.read_text())
    assert sharded_code == 0 and merged["load"]["workers"] == 2
    assert merged["runs"][0]["requests"] == 6 and merged["runs"][0]["concurrency"] == 2


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--mode", "closed"], "sends on the recorded schedule"),
        (["--concurrency", "1,4"], "give one --concurrency"),
        (["--rate", "3"], "--rate applies to --mode open only"),
        (["--speedup", "0"], "--speedup 0.0: must be positive"),
        (["--workers", "0"], "--workers 0: must be at least 1"),
    ],
)
def test_bench_replay_usage_errors(tmp_path, capsys, extra, message):
    capture = tmp_path / "capture.jsonl"
    _capture_file(capture, [0.0, 0.1])
    assert _bench_cli("http://127.0.0.1:9", "--workload", str(capture), *extra) == 2
    assert message in capsys.readouterr().err


def test_workload_options_need_a_workload_and_a_capture_that_reads(tmp_path, capsys):
    assert _bench_cli("http://127.0.0.1:9", "--speedup", "2") == 2
    assert "--speedup applies to --workload only" in capsys.readouterr().err
    assert _bench_cli("http://127.0.0.1:9", "--mode", "replay") == 2
    assert "--mode replay needs --workload" in capsys.readouterr().err
    empty = tmp_path / "empty.jsonl"
    empty.write_text('{"not": "a capture record"}\n')
    assert _bench_cli("http://127.0.0.1:9", "--workload", str(empty)) == 2
    assert f"--workload {empty}" in capsys.readouterr().err


def test_a_replay_longer_than_a_day_is_refused_before_any_request(tmp_path, capsys):
    """A stray timestamp (found by the capture fuzz: one record years away) must not make a replay wait for it."""
    capture = tmp_path / "capture.jsonl"
    _capture_file(capture, [0.0, 0.1, 30 * 3600.0])
    assert _bench_cli("http://127.0.0.1:9", "--workload", str(capture)) == 2
    error = " ".join(capsys.readouterr().err.split())
    assert "span 30 h at speedup 1, over the 24 h a replay may run: raise --speedup to at least 1.25" in error


@pytest.mark.slow
def test_a_replayed_run_records_the_workloads_own_lengths_and_no_warm_up(tmp_path, capsys):
    """Issue 37: a replay's JSON said `prompt_tokens 1024, max_new_tokens 256, warmup true`, none of which was sent.
    It records null beside the workload's shape (what each request carried), and warmup false; a closed loop still
    records its synthetic lengths and its warm-up. Readers accept both, and the older layout still compares."""
    from optigate.bench.compare import workload_difference
    from optigate.bench.html_report import workload_text
    from optigate.bench.result_file import read_result_file

    capture, out, closed, opened = (tmp_path / name for name in ("c.jsonl", "r.json", "closed.json", "open.json"))
    _capture_file(capture, [n * 0.02 for n in range(8)])  # output lengths 3..6, prompts of 3 words
    with emulator_process({"default": {"ttft_ms": 5, "itl_ms": 1}}) as url:
        assert _bench_cli(url, "--workload", str(capture), "--max-lag-ms", "500", "--json", str(out)) == 0
        assert (
            _bench_cli(url, "--concurrency", "2", "--requests", "4", "--max-new-tokens", "6", "--json", str(closed))
            == 0
        )
        assert _bench_cli(url, "--mode", "open", "--rate", "50", "--requests", "4", "--json", str(opened)) == 0
    capsys.readouterr()
    replayed = json.loads(out.read_text())
    load = replayed["load"]
    assert (load["prompt_tokens"], load["max_new_tokens"], load["warmup"]) == (None, None, False)
    assert load["workload"]["max_new_tokens"] == {"p50": 4, "p90": 6, "p99": 6, "max": 6}
    assert load["workload"]["prompt_tokens"]["max"] == 3
    sent = json.loads(closed.read_text())["load"]
    assert (sent["prompt_tokens"], sent["max_new_tokens"], sent["warmup"]) == (1024, 6, True)
    assert json.loads(opened.read_text())["load"]["warmup"] is False  # an open loop sends no warm-up either
    for path in (out, closed, opened):
        read_result_file(path)  # the reader takes the new layout (same format version)
    text = workload_text(replayed)
    assert text.startswith("replay of 8 captured requests: prompt tokens p50/p90/p99 3/3/3 → output tokens 4/6/6")
    assert "open loop on the recorded schedule" in text and "1024" not in text and "closed loop" not in text
    # A replay written before (the synthetic defaults beside its workload) still compares with one written now.
    older = json.loads(out.read_text())
    older["load"].update(prompt_tokens=1024, max_new_tokens=256, warmup=True)
    assert workload_difference([("now", replayed), ("before", older)]) is None
