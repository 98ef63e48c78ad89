"""The gate's captured workload as the fleet's workers build it (optigate.bench.core.shard_workload): checked once,
pinned by window end and digest, rebuilt alike by every worker or refused, split across shards; a missing or empty
capture fails with CaptureUnavailable; nothing returned carries prompt text."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from optigate.bench.core.capture import capture_key, capture_record
from optigate.bench.core.shard_workload import (
    SETTLE_SECONDS,
    CaptureUnavailable,
    ReplayTooLong,
    WorkloadChanged,
    check_capture,
    shard_of,
    worker_workload,
)

NOW = 1_780_000_000.0  # the check's clock
START = NOW - 3 * 3600  # the first captured request, well inside the window
SECRET = "my account number is 4242"


def write_capture(folder: Path, times: list[float], *, name: str = "capture.jsonl") -> None:
    """Requests captured at `times`, in SageMaker's layout (one file per hour), with LMI and OpenAI bodies."""
    files: dict[str, list[str]] = {}
    for n, at in enumerate(times):
        body = (
            {"inputs": f"{SECRET} question {n}", "parameters": {"max_new_tokens": 8 + n % 3}}
            if n % 2
            else {"messages": [{"role": "user", "content": f"{SECRET} chat {n}"}], "max_tokens": 16}
        )
        key = capture_key("capture", "chat-dev", "AllTraffic", at, name)
        files.setdefault(key, []).append(json.dumps(capture_record(body, at, str(n))))
    for key, lines in files.items():
        path = folder / key
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a") as out:
            out.write("\n".join(lines) + "\n")


def spec(folder: Path, **changes) -> dict:
    return {
        "source": str(folder / "capture"),
        "kind": "replay",
        "window_days": 1.0,
        "max_requests": 1000,
        "speedup": 1.0,
        **changes,
    }


def test_a_missing_or_empty_capture_fails_with_a_named_reason(tmp_path):
    with pytest.raises(CaptureUnavailable, match="no such file or folder"):
        check_capture(spec(tmp_path), now=NOW)
    (tmp_path / "capture" / "chat-dev").mkdir(parents=True)
    with pytest.raises(CaptureUnavailable, match="no capture files"):
        check_capture(spec(tmp_path), now=NOW)
    (tmp_path / "capture" / "chat-dev" / "x.jsonl").write_text("not json\n{}\n")
    with pytest.raises(CaptureUnavailable, match="no readable capture record"):
        check_capture(spec(tmp_path), now=NOW)


def test_a_capture_mostly_cut_short_fails_closed_before_anything_is_paid_for(tmp_path):
    """The gate reads captures as `optigate bench --workload` does: a few bad records are skipped, but when most
    records cannot be read (files cut short, another body format) the check fails with the reason."""
    write_capture(tmp_path, [START + i for i in range(4)])
    (capture_file,) = (tmp_path / "capture").rglob("*.jsonl")
    lines = capture_file.read_text().splitlines()
    capture_file.write_text("\n".join([*lines[:3], *(line[: len(line) // 2] for line in lines * 2)]) + "\n")
    with pytest.raises(CaptureUnavailable, match=r"only 3 of 11 capture records are readable requests \(8 not JSON"):
        check_capture(spec(tmp_path), now=NOW)
    capture_file.write_text("\n".join([*lines, lines[0][:40]]) + "\n")  # one record cut short: skipped
    assert check_capture(spec(tmp_path), now=NOW)["shape"]["requests"] == 4


def test_records_older_than_the_window_are_no_workload(tmp_path):
    write_capture(tmp_path, [NOW - 3 * 86400 + i for i in range(5)])
    with pytest.raises(CaptureUnavailable):
        check_capture(spec(tmp_path), now=NOW)


def test_every_worker_rebuilds_the_checked_requests_and_the_shards_split_them(tmp_path):
    times = [START + i for i in range(41)]  # whole seconds, as SageMaker stamps inferenceTime
    write_capture(tmp_path, times)
    checked = check_capture(spec(tmp_path), now=NOW)
    assert checked["until"] == NOW - SETTLE_SECONDS
    assert checked["shape"]["requests"] == 41 and checked["shape"]["kind"] == "replay"
    pinned = {**spec(tmp_path), "until": checked["until"], "digest": checked["digest"]}
    shards = [worker_workload({"workload": pinned, "shard": s, "shards": 3}) for s in range(3)]
    sent = sorted(
        (request.offset_s, json.dumps(request.body, sort_keys=True)) for share in shards for request in share.requests
    )
    assert len(sent) == 41 and len(set(sent)) == 41  # every request once, none twice
    # The shards keep the shared schedule: offsets from the whole capture's first request.
    assert [r.offset_s for r in shards[1].requests][:2] == pytest.approx([1.0, 4.0])
    # The baseline's and the candidate's worker of a block send the same requests.
    again = worker_workload({"workload": pinned, "shard": 1, "shards": 3})
    assert again == shards[1]


def test_records_arriving_after_the_check_do_not_change_the_workload(tmp_path):
    write_capture(tmp_path, [START + i for i in range(10)])
    checked = check_capture(spec(tmp_path), now=NOW)
    pinned = {**spec(tmp_path), "until": checked["until"], "digest": checked["digest"]}
    write_capture(tmp_path, [NOW - 60, NOW + 30], name="later.jsonl")  # newer than the pinned window end
    assert len(worker_workload({"workload": pinned}).requests) == 10


def test_a_capture_that_changed_inside_the_window_refuses_the_worker(tmp_path):
    write_capture(tmp_path, [START + i for i in range(10)])
    checked = check_capture(spec(tmp_path), now=NOW)
    pinned = {**spec(tmp_path), "until": checked["until"], "digest": checked["digest"]}
    write_capture(tmp_path, [START + 100], name="late-delivery.jsonl")  # delivered late, inside the window
    with pytest.raises(WorkloadChanged, match="differ"):
        worker_workload({"workload": pinned})
    with pytest.raises(WorkloadChanged, match="without the gate check"):
        worker_workload({"workload": spec(tmp_path)})


def test_a_replay_longer_than_a_worker_may_run_is_refused_with_the_speedup_it_needs(tmp_path):
    write_capture(tmp_path, [START + 60 * i for i in range(25)])  # 24 minutes
    with pytest.raises(ReplayTooLong, match=r"raise speedup to at least 2\.0"):
        check_capture(spec(tmp_path), now=NOW)
    assert check_capture(spec(tmp_path, speedup=2.0), now=NOW)["shape"]["duration_s"] == pytest.approx(720)
    # Sessions and distributions have no schedule: the level's closed loop sends them.
    assert check_capture(spec(tmp_path, kind="sessions"), now=NOW)["shape"]["requests"] == 25


def test_the_check_and_the_shapes_carry_no_prompt_text(tmp_path):
    write_capture(tmp_path, [START + i for i in range(6)])
    checked = check_capture(spec(tmp_path, kind="distribution"), now=NOW)
    assert SECRET not in json.dumps(checked) and "question" not in json.dumps(checked)


def test_more_shards_than_requests_is_refused_rather_than_an_empty_worker(tmp_path):
    write_capture(tmp_path, [START, START + 1])
    checked = check_capture(spec(tmp_path), now=NOW)
    pinned = {**spec(tmp_path), "until": checked["until"], "digest": checked["digest"]}
    whole = worker_workload({"workload": pinned})
    with pytest.raises(CaptureUnavailable, match="cannot feed 3 workers"):
        shard_of(whole, 2, 3)


def test_synthetic_lengths_are_drawn_from_the_events_values_alike_for_both_sides():
    event = {
        "requests": 200,
        "shard": 1,
        "synthetic": {
            "prompt_tokens": [64, 512],
            "max_new_tokens": [8, 32],
            "shared_prefix_share": 0.5,
            "prefix_tokens": 32,
        },
    }
    first, second = worker_workload(event), worker_workload(event)
    assert first == second and first is not None and len(first.requests) == 200
    assert {r.prompt_tokens for r in first.requests} <= {64, 512} and len(
        {r.prompt_tokens for r in first.requests}
    ) == 2
    assert {r.max_new_tokens for r in first.requests} == {8, 32}
    assert worker_workload({"requests": 4}) is None  # neither: the load's own synthetic prompts
