"""Pure pieces of the benchmark: event-stream framing, payload parsing, metric definitions."""

from __future__ import annotations

import json
import random

import pytest
from botocore.eventstream import ChecksumMismatch

from optigate.bench.core.client import Exchange, decode_stream
from optigate.bench.core.eventstream import decode_events, payload_part, stream_exception
from optigate.bench.core.metrics import COALESCED_WARN_SHARE, RequestRecord, RunSamples, merge, percentile
from optigate.bench.core.payloads import PayloadParser


def test_payload_part_round_trips_through_botocores_parser():
    frame = payload_part(b'{"token": {"text": "hi"}}\n')
    (event,) = decode_events(frame)
    assert event.kind == "PayloadPart" and event.payload == b'{"token": {"text": "hi"}}\n'


def test_stream_exception_is_an_exception_event():
    (event,) = decode_events(stream_exception("ModelStreamError", "boom"))
    assert event.kind == "exception:ModelStreamError"
    assert json.loads(event.payload)["Message"] == "boom"


def test_a_corrupted_frame_fails_the_message_crc():
    frame = bytearray(payload_part(b'{"token": {"text": "hi"}}\n'))
    frame[-6] ^= 0xFF  # a payload byte
    with pytest.raises(ChecksumMismatch):
        decode_events(bytes(frame))


def test_lmi_line_split_across_payload_parts_counts_once_when_complete():
    parser = PayloadParser("rolling-batch")
    line = b'{"token": {"id": 1, "text": " hello"}}\n'
    assert parser.feed(line[:10]) == 0
    assert parser.feed(line[10:]) == 1


def test_several_lines_in_one_payload_part_count_each():
    parser = PayloadParser("rolling-batch")
    lines = b"".join(b'{"token": {"text": "a"}}\n' for _ in range(3))
    assert parser.feed(lines) == 3


def test_final_lmi_details_give_the_server_reported_count():
    parser = PayloadParser("rolling-batch")
    parser.feed(
        b'{"token": {"text": "a"}}\n{"token": {"text": '
        b'"b"}, "generated_text": "ab", "details": {"generated_tokens": 7}}\n'
    )
    assert parser.reported_total == 7


def test_server_sent_events_are_not_lmis_stream_in_either_mode():
    for mode in ("async", "rolling-batch"):
        parser = PayloadParser(mode)
        parser.feed(b'data: {"token": {"text": "a"}, "details": null}\n\n')
        assert parser.errors == ["StreamFormatMismatch"]


def test_chat_role_only_and_empty_chunks_are_not_tokens():
    parser = PayloadParser("rolling-batch", "messages")
    role = b'{"object": "chat.completion.chunk", "choices": [{"delta": {"role": "assistant"}}]}\n'
    empty = b'{"object": "chat.completion.chunk", "choices": [{"delta": {"content": ""}}]}\n'
    text = b'{"object": "chat.completion.chunk", "choices": [{"delta": {"content": "Hi"}}]}\n'
    assert parser.feed(role) == 0 and parser.feed(empty) == 0 and parser.feed(text) == 1
    assert parser.errors == []


def test_async_continuous_usage_tells_multi_token_chunks():
    parser = PayloadParser("async")

    def chunk(content, total):
        obj = {"object": "chat.completion.chunk", "choices": [{"delta": {"content": content}}]}
        return json.dumps({**obj, "usage": {"completion_tokens": total}}).encode() + b"\n"

    assert parser.feed(chunk("a", 1)) == 1
    assert parser.feed(chunk("bcd", 4)) == 3  # three tokens accepted in one step
    assert parser.reported_total == 4


def test_a_line_without_trailing_newline_is_counted_at_the_end():
    parser = PayloadParser("rolling-batch")
    assert parser.feed(b'{"token": {"text": "a"}}') == 0
    assert parser.finish() == 1


def _decode(exchange, engine_mode="rolling-batch", schema="inputs"):
    """The rolling-batch handler's token lines unless a test says otherwise (tests/bench/test_engine_mode_streams)."""
    return decode_stream(exchange, engine_mode, schema)


def _exchange(segments, status=200, headers=None):
    exchange = Exchange(sent_at=0.0, status=status, headers=headers or {})
    exchange.segments = segments
    return exchange


def test_decode_stream_times_each_chunk_by_the_segment_that_completed_it():
    line = lambda i: b'{"token": {"text": "t%d"}}\n' % i  # noqa: E731
    frames = [payload_part(line(0)), payload_part(line(1) + line(2)), payload_part(line(3))]
    blob = b"".join(frames)
    cut = len(frames[0]) + 5  # the second frame straddles two segments
    result = _decode(
        _exchange([(1.0, blob[:cut]), (1.2, blob[cut : len(frames[0]) + len(frames[1])]), (1.3, frames[2])])
    )
    assert result.chunks == [(1.0, 1), (1.2, 2), (1.3, 1)]
    assert result.output_tokens == 4 and result.error is None


def _token_frame(*indices: int) -> bytes:
    return payload_part(b"".join(b'{"token": {"text": "t%d"}}\n' % i for i in indices))


def _frames_of(segments, schema="inputs"):
    result = _decode(_exchange(segments), schema=schema)
    assert result.error is None
    return result, RunSamples.from_records(1, [_record(0.0, result.chunks, coalesced_frames=result.coalesced_frames)])


def test_two_frames_completed_by_one_read_are_two_frames_the_second_with_a_zero_gap():
    result, run = _frames_of([(1.0, _token_frame(0)), (1.2, _token_frame(1) + _token_frame(2))])
    assert result.chunks == [(1.0, 1), (1.2, 1), (1.2, 1)]
    assert run.tokens_per_chunk == [1, 1, 1]  # not one chunk of 2 tokens
    assert run.itl_ms == pytest.approx([200.0, 0.0])  # the wait stays whole on the first frame of the read
    assert result.coalesced_frames == 2
    assert run.to_result()["coalesced_frame_share"] == pytest.approx(2 / 3)


def test_one_frame_with_k_tokens_gives_k_gaps_of_dt_over_k():
    result, run = _frames_of([(1.0, _token_frame(0)), (1.3, _token_frame(1, 2, 3))])
    assert result.chunks == [(1.0, 1), (1.3, 3)]
    assert run.itl_ms == pytest.approx([100.0, 100.0, 100.0])
    assert run.tokens_per_chunk == [1, 3]
    assert result.coalesced_frames == 0


def test_a_frame_split_across_reads_is_stamped_at_the_read_that_completed_it():
    second = _token_frame(1)
    result, run = _frames_of([(1.0, _token_frame(0)), (1.1, second[:7]), (1.25, second[7:])])
    assert result.chunks == [(1.0, 1), (1.25, 1)]
    assert run.itl_ms == pytest.approx([250.0])
    assert result.coalesced_frames == 0


def test_the_frame_that_completes_a_split_frame_in_the_same_read_is_coalesced_with_it():
    second = _token_frame(1)
    result, _ = _frames_of([(1.0, _token_frame(0) + second[:7]), (1.25, second[7:] + _token_frame(2))])
    assert result.chunks == [(1.0, 1), (1.25, 1), (1.25, 1)]
    assert result.coalesced_frames == 2


def test_frames_without_tokens_are_not_chunks_and_do_not_make_a_read_coalesced():
    role = payload_part(b'{"object": "chat.completion.chunk", "choices": [{"delta": {"role": "assistant"}}]}\n')
    content = b'{"object": "chat.completion.chunk", "choices": [{"delta": {"content": "Hi"}}]}\n'
    result, run = _frames_of([(1.0, role + payload_part(content)), (1.1, payload_part(content))], "messages")
    assert result.chunks == [(1.0, 1), (1.1, 1)]
    assert result.coalesced_frames == 0
    assert run.to_result()["warnings"] == []


def test_a_last_line_without_newline_belongs_to_its_frame_not_a_new_zero_gap():
    last = payload_part(b'{"token": {"text": "a"}}\n{"token": {"text": "b"}}')
    result, run = _frames_of([(1.0, _token_frame(0)), (1.2, last)])
    assert result.chunks == [(1.0, 1), (1.2, 2)]
    assert run.itl_ms == pytest.approx([100.0, 100.0])


def test_a_high_coalesced_share_is_a_warning_in_the_result():
    chunks = [(0.1 * i, 1) for i in range(1, 21)]  # 20 frames
    calm = RunSamples.from_records(3, [_record(0.0, chunks, coalesced_frames=1)]).to_result()  # 5 %: the limit
    behind = RunSamples.from_records(3, [_record(0.0, chunks, coalesced_frames=4)]).to_result()
    assert calm["coalesced_frame_share"] == pytest.approx(COALESCED_WARN_SHARE) and calm["warnings"] == []
    assert behind["coalesced_frame_share"] == pytest.approx(0.2)
    (warning,) = behind["warnings"]
    assert warning.startswith("c=3: 20% of token frames arrived coalesced")


def test_the_coalesced_share_is_unknown_not_zero_for_results_without_the_count():
    result = RunSamples.from_records(1, [_record(0.0, [(0.1, 1), (0.2, 1)], coalesced_frames=2)]).to_result()
    del result["samples"]["coalesced_counts"]  # a shard written before the count existed
    reread = RunSamples.from_result(result).to_result()
    assert reread["coalesced_frame_share"] is None and reread["warnings"] == []
    assert RunSamples(1).to_result()["coalesced_frame_share"] is None  # no frames at all


def test_decode_stream_reports_http_errors_by_type():
    result = _decode(
        _exchange([(1.0, b'{"message": "Rate exceeded"}')], 429, {"x-amzn-errortype": "ThrottlingException:http://x/"})
    )
    assert result.error == "ThrottlingException"


def test_http_chunked_framing_survives_byte_by_byte_delivery():
    body = payload_part(b'{"token": {"text": "a"}}\n') + payload_part(b'{"token": {"text": "b"}}\n')
    wire = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Type: application/vnd.amazon.eventstream\r\n\r\n"
    wire += b"%x\r\n%s\r\n" % (len(body[:30]), body[:30]) + b"%x\r\n%s\r\n" % (len(body[30:]), body[30:]) + b"0\r\n\r\n"
    exchange = Exchange()

    class Done:
        def __init__(self):
            self.value = None

        def done(self):
            return self.value is not None

        def set_result(self, value):
            self.value = value

    exchange.done = Done()
    for index in range(len(wire)):
        exchange.on_data(float(index), wire[index : index + 1])
    assert exchange.done.done() and exchange.status == 200
    assert b"".join(segment for _, segment in exchange.segments) == body


# --------------------------------------------------------------------------- metrics


def _record(sent, chunks, tokens=None, scheduled=None, **kwargs):
    return RequestRecord(
        scheduled_at=sent if scheduled is None else scheduled,
        sent_at=sent,
        first_token_at=chunks[0][0] if chunks else None,
        completed_at=chunks[-1][0] if chunks else None,
        chunks=chunks,
        output_tokens=tokens if tokens is not None else sum(k for _, k in chunks),
        **kwargs,
    )


def test_a_chunk_of_k_tokens_counts_as_k_gaps_of_dt_over_k():
    run = RunSamples.from_records(1, [_record(0.0, [(0.100, 1), (0.130, 3), (0.140, 1)])])
    assert run.itl_ms == pytest.approx([10.0, 10.0, 10.0, 10.0])
    assert run.chunk_gap_ms == pytest.approx([30.0, 10.0])
    assert run.tokens_per_chunk == [1, 3, 1]


def test_ttft_excludes_queue_time_and_tpot_follows_its_definition():
    record = _record(1.0, [(1.2, 1), (1.3, 1), (1.4, 1)], scheduled=0.5)
    run = RunSamples.from_records(1, [record])
    assert run.queue_ms == pytest.approx([500.0])
    assert run.ttft_ms == pytest.approx([200.0])
    assert run.tpot_ms == pytest.approx([(400.0 - 200.0) / 2])
    assert run.e2e_ms == pytest.approx([400.0])


def test_server_reported_count_wins_for_tpot():
    run = RunSamples.from_records(1, [_record(0.0, [(0.1, 1), (0.5, 1)], tokens=9)])
    assert run.tpot_ms == pytest.approx([(500 - 100) / 8])


def test_warmup_requests_are_excluded_but_count_as_load():
    records = [
        _record(0.0, [(0.1, 1), (0.2, 1)], warmup=True),
        _record(0.15, [(0.3, 1), (0.4, 1)]),
        _record(0.35, [(0.5, 1)]),
    ]
    run = RunSamples.from_records(2, records)
    assert run.requests == 2 and len(run.ttft_ms) == 2
    result = run.to_result()
    # window: 0.15 .. 0.35; in flight: warm-up 0.15-0.2 (0.05), second 0.15-0.35 (0.2), third starts at 0.35
    assert result["achieved_concurrency"] == pytest.approx((0.05 + 0.2) / 0.2)


def test_errors_are_counted_by_class_and_never_become_latency_samples():
    records = [
        _record(0.0, [(0.1, 1)]),
        RequestRecord(0.0, 0.0, error="ThrottlingException"),
        RequestRecord(0.0, 0.1, error="ThrottlingException"),
        RequestRecord(0.0, 0.2, error="Timeout"),
    ]
    result = RunSamples.from_records(4, records).to_result()
    assert result["errors"] == {"ThrottlingException": 2, "Timeout": 1}
    assert result["requests"] == 4 and result["successful_requests"] == 1


def test_percentile_matches_numpy_linear():
    numpy = pytest.importorskip("numpy")
    values = sorted(random.Random(1).random() for _ in range(101))
    for q in (50, 90, 95, 99):
        assert percentile(values, q) == pytest.approx(float(numpy.percentile(values, q)))


def test_shard_merge_equals_a_single_runs_percentiles():
    rng = random.Random(7)
    records = []
    for i in range(200):
        sent = i * 0.05
        ttft = rng.uniform(0.1, 0.3)
        chunks = [(sent + ttft + j * rng.uniform(0.01, 0.02), rng.choice([1, 1, 2])) for j in range(20)]
        chunks.sort()
        records.append(
            _record(sent, chunks, scheduled=sent - rng.uniform(0, 0.01), coalesced_frames=rng.choice([0, 2]))
        )
    single = RunSamples.from_records(8, records).to_result()
    shards = [RunSamples.from_records(4, records[0::2]), RunSamples.from_records(4, records[1::2])]
    via_json = [RunSamples.from_result(json.loads(json.dumps(shard.to_result()))) for shard in shards]
    merged = merge(via_json).to_result()
    for key in ("ttft_ms", "itl_ms", "tpot_ms", "e2e_ms", "queue_ms", "tokens_per_chunk"):
        assert merged[key] == pytest.approx(single[key]), key
    for key in ("output_tokens_per_s", "requests_per_s", "achieved_concurrency", "requests", "coalesced_frame_share"):
        assert merged[key] == pytest.approx(single[key]), key
