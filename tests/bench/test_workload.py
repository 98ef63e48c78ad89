"""Workloads from captured requests (replay on the recorded schedule, whole sessions, the captured length
distributions) and synthetic ones (length distributions, a shared-prefix share), and their shape: counts and
lengths, never text."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from optigate.bench.core.capture import CapturedRequest, CaptureRead
from optigate.bench.core.workload import (
    Workload,
    WorkloadRequest,
    from_capture,
    lengths_from_percentiles,
    shape,
    shared_prefix_share,
    synthetic,
)

T0 = 1_796_000_000.0


def _captured(at: float, text: str, requested: int | None, prompt_tokens: int, session: str | None = None):
    return CapturedRequest(at, {"inputs": text}, requested, prompt_tokens, session, f"f.jsonl:{int(at)}")


def _read(*requests: CapturedRequest) -> CaptureRead:
    return CaptureRead(requests=tuple(requests), skipped={}, files=1)


GAPS = [0.0, 0.25, 0.35, 1.35, 1.4, 3.0]
CAPTURE = _read(*(_captured(T0 + g, f"secret prompt {i}", 10 * (i + 1), 5 + i) for i, g in enumerate(GAPS)))


def test_replay_keeps_the_recorded_schedule_and_requested_lengths_divided_by_the_speedup():
    workload = from_capture(CAPTURE, kind="replay", speedup=2.0, source="s3://b/p")
    assert workload.kind == "replay" and workload.scheduled
    assert [r.offset_s for r in workload.requests] == pytest.approx([g / 2 for g in GAPS])
    assert [r.max_new_tokens for r in workload.requests] == [10, 20, 30, 40, 50, 60]
    assert [r.body for r in workload.requests] == [{"inputs": f"secret prompt {i}"} for i in range(6)]
    first_three = from_capture(CAPTURE, kind="replay", max_requests=3)
    assert [r.offset_s for r in first_three.requests] == pytest.approx(GAPS[:3])


def test_replay_order_is_arrival_order_whatever_order_the_read_holds():
    shuffled = _read(*reversed(CAPTURE.requests))
    assert from_capture(shuffled).requests == from_capture(CAPTURE).requests


def test_a_request_without_a_requested_length_gets_the_default():
    read = _read(_captured(T0, "a", None, 3), _captured(T0 + 1, "b", 7, 3))
    assert [r.max_new_tokens for r in from_capture(read, default_max_new_tokens=99).requests] == [99, 7]


def _sessions_capture() -> CaptureRead:
    requests = []
    for session, turns in (("s1", 3), ("s2", 1), ("s3", 2), ("s4", 4), (None, 1), (None, 1)):
        for turn in range(turns):
            at = T0 + len(requests)
            requests.append(_captured(at, f"{session} turn {turn}", 16, 4, session))
    return _read(*reversed(requests))


def test_sessions_are_sampled_whole_in_their_own_order_up_to_max_requests():
    capture = _sessions_capture()
    for seed in range(8):
        workload = from_capture(capture, kind="sessions", max_requests=5, seed=seed)
        assert not workload.scheduled and len(workload.requests) <= 5
        sizes = Counter(r.session for r in workload.requests if r.session)
        assert all(sizes[s] == {"s1": 3, "s2": 1, "s3": 2, "s4": 4}[s] for s in sizes)  # never cut
        for session in sizes:  # each session's turns in their recorded order, one after another
            turns = [r.body["inputs"] for r in workload.requests if r.session == session]
            assert turns == [f"{session} turn {t}" for t in range(sizes[session])]
    orders = {
        tuple(r.body["inputs"] for r in from_capture(capture, kind="sessions", seed=s).requests) for s in range(8)
    }
    assert len(orders) > 1  # the seed draws the order
    same = from_capture(capture, kind="sessions", seed=3).requests
    assert from_capture(capture, kind="sessions", seed=3).requests == same and len(same) == 12
    with pytest.raises(ValueError, match="no whole session fits in 1 requests: the smallest has 3"):
        from_capture(_read(*[_captured(T0 + i, "x", 1, 1, "big") for i in range(3)]), kind="sessions", max_requests=1)


def test_distribution_draws_prompt_and_output_lengths_in_pairs_from_the_capture_and_sends_no_captured_text():
    workload = from_capture(CAPTURE, kind="distribution", max_requests=300, seed=1)
    pairs = {(c.prompt_tokens, c.requested_tokens) for c in CAPTURE.requests}
    assert len(workload.requests) == 300 and not workload.scheduled
    assert {(r.prompt_tokens, r.max_new_tokens) for r in workload.requests} == pairs  # every pair drawn, no other
    assert all("secret" not in r.body["inputs"] for r in workload.requests)
    assert all(len(r.body["inputs"].split()) == r.prompt_tokens for r in workload.requests)
    assert len(from_capture(CAPTURE, kind="distribution").requests) == len(CAPTURE.requests)


def test_from_capture_refuses_what_it_cannot_build():
    for bad in ({"kind": "synthetic"}, {"speedup": 0}, {"speedup": float("inf")}, {"max_requests": 0}):
        with pytest.raises(ValueError):
            from_capture(CAPTURE, **bad)


def test_synthetic_draws_lengths_from_the_given_values_and_one_value_is_a_constant():
    workload = synthetic(400, prompt_tokens=(64, 64, 512), max_new_tokens=(32, 256), seed=5)
    prompts = Counter(r.prompt_tokens for r in workload.requests)
    assert set(prompts) == {64, 512} and 200 < prompts[64] < 330  # 2:1, as the repeated value weights it
    assert {r.max_new_tokens for r in workload.requests} == {32, 256}
    assert all(len(r.body["inputs"].split()) == r.prompt_tokens for r in workload.requests)
    constant = synthetic(3, prompt_tokens=100, max_new_tokens=50)
    assert {(r.prompt_tokens, r.max_new_tokens) for r in constant.requests} == {(100, 50)}
    assert synthetic(10, prompt_tokens=(5, 9), max_new_tokens=4, seed=2) == synthetic(
        10, prompt_tokens=(5, 9), max_new_tokens=4, seed=2
    )


def test_a_synthetic_shared_prefix_opens_exactly_that_share_of_prompts_and_no_other():
    workload = synthetic(50, prompt_tokens=(100, 200), max_new_tokens=64, shared_prefix_share=0.3, prefix_tokens=40)
    openings = Counter(" ".join(r.body["inputs"].split()[:40]) for r in workload.requests)
    count = openings.most_common(1)[0][1]
    assert count == 15 and sum(1 for n in openings.values() if n > 1) == 1  # 30 % share one prefix, the rest own
    assert all(len(r.body["inputs"].split()) == r.prompt_tokens for r in workload.requests)  # prefix included
    assert shared_prefix_share(workload) == pytest.approx(0.3)
    assert shared_prefix_share(synthetic(50, prompt_tokens=100, max_new_tokens=8)) == 0.0


@pytest.mark.parametrize(
    "bad",
    [
        {"count": 0},
        {"prompt_tokens": ()},
        {"prompt_tokens": (0, 5)},
        {"max_new_tokens": True},
        {"shared_prefix_share": 1.5},
        {"shared_prefix_share": 0.5, "prefix_tokens": 0},
        {"shared_prefix_share": 0.5, "prefix_tokens": 100},  # no shorter than the shortest prompt
    ],
)
def test_synthetic_refuses_lengths_and_shares_that_make_no_workload(bad):
    arguments = {"count": 10, "prompt_tokens": (100, 200), "max_new_tokens": 16, **bad}
    with pytest.raises(ValueError):
        synthetic(**arguments)


def test_shape_says_counts_lengths_schedule_and_prefix_share_never_text():
    shaped = shape(from_capture(CAPTURE, kind="replay", source="s3://b/capture/ep"))
    assert shaped == {
        "requests": 6,
        "kind": "replay",
        "source": "s3://b/capture/ep",
        "prompt_tokens": {"p50": 7, "p90": 10, "p99": 10, "max": 10},
        "max_new_tokens": {"p50": 30, "p90": 60, "p99": 60, "max": 60},
        "sessions": 0,
        "duration_s": 3.0,
        "mean_rate_per_s": pytest.approx(5 / 3, abs=1e-3),
        "shared_prefix_share": 0.0,
    }
    assert "secret" not in json.dumps(shaped)
    sessions = shape(from_capture(_sessions_capture(), kind="sessions"))
    assert sessions["sessions"] == 4 and sessions["duration_s"] is None and sessions["mean_rate_per_s"] is None


def test_shared_prefix_share_finds_a_common_system_prompt_in_chat_records():
    system = {
        "role": "system",
        "content": "You answer questions about the store, politely, in short sentences, and never promise a date.",
    }
    requests = [
        WorkloadRequest({"messages": [system, {"role": "user", "content": f"question {i}"}]}, 8, 30) for i in range(3)
    ] + [WorkloadRequest({"messages": [{"role": "user", "content": [{"type": "text", "text": "short"}]}]}, 8, 2)]
    workload = Workload(tuple(requests), "sessions", "capture")
    assert shared_prefix_share(workload) == pytest.approx(0.75)
    assert "store" not in json.dumps(shape(workload))


def test_lengths_from_percentiles_hold_the_median_and_90th_percentile_given():
    lengths = sorted(lengths_from_percentiles(200, 900))
    assert len(lengths) == 100 and lengths[0] >= 1
    assert lengths[49] <= 200 <= lengths[50] and lengths[89] <= 900 <= lengths[90]
    assert max(lengths) > 900  # a tail above the 90th percentile
    assert set(lengths_from_percentiles(64, 64)) == {64}
    workload = synthetic(2000, prompt_tokens=lengths_from_percentiles(200, 900), max_new_tokens=128, seed=3)
    drawn = sorted(r.prompt_tokens for r in workload.requests)
    assert 170 <= drawn[999] <= 230 and 780 <= drawn[1799] <= 1030
    for p50, p90 in ((0, 5), (10, 5), (True, 5)):
        with pytest.raises(ValueError, match="p50 <= p90"):
            lengths_from_percentiles(p50, p90)


def test_distribution_keeps_the_captures_shared_openings_with_synthetic_prefixes_of_their_length():
    system = " ".join(f"rule{i}" for i in range(40))  # a 40-word system prompt, shared by 6 of 10 requests
    requests = [_captured(T0 + i, f"{system} question {i} " + "more words " * i, 64, 60 + i) for i in range(6)]
    requests += [_captured(T0 + 10 + i, " ".join(f"own{i}x{j}" for j in range(30)), 32, 30) for i in range(4)]
    capture = _read(*requests)
    assert shared_prefix_share(from_capture(capture)) == pytest.approx(0.6)

    workload = from_capture(capture, kind="distribution", max_requests=400, seed=4)

    assert 0.5 < shared_prefix_share(workload) < 0.7
    texts = [r.body["inputs"] for r in workload.requests]
    assert not any("rule" in t or "own" in t or "question" in t for t in texts)  # lengths and sharing, no text
    prefixed = [
        t for t in texts if t.split()[:16] == Counter(tuple(t.split()[:16]) for t in texts).most_common(1)[0][0]
    ]
    common = len(system + " question") // 4  # the captured common prefix, in tokens (four characters a token)
    assert all(t.split()[:common] == prefixed[0].split()[:common] for t in prefixed)
    assert all(len(r.body["inputs"].split()) == r.prompt_tokens for r in workload.requests)
