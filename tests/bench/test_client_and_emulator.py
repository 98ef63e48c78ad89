"""The client and load models against the emulator on loopback; boto3 as an independent peer."""

from __future__ import annotations

import asyncio
import json
import time

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError, EventStreamError

from optigate.bench.core.client import StreamingClient, Target
from optigate.bench.core.load import LoadSpec, run_load
from optigate.bench.core.metrics import RunSamples
from optigate.emulator.sagemaker_runtime import EmulatorConfig, emulator_of, start

FAST = {"ttft_ms": 20, "itl_ms": 2, "output_tokens": 12}


def _run(coroutine):
    return asyncio.run(coroutine)


async def _with_emulator(config: dict, body):
    runner, port = await start(EmulatorConfig.parse(config))
    try:
        return await body(f"http://127.0.0.1:{port}", emulator_of(runner))
    finally:
        await runner.cleanup()


def _load(url, concurrency=2, requests=6, timeout=5.0, **target):
    client = StreamingClient(Target(target.pop("endpoint", "demo"), endpoint_url=url, **target), timeout=timeout)
    return run_load(client, LoadSpec(concurrency=concurrency, requests=requests, max_new_tokens=12, prompt_tokens=8))


@pytest.mark.slow
def test_closed_loop_measures_the_configured_latencies():
    async def body(url, _):
        return await _load(url, concurrency=3, requests=9)

    result = _run(_with_emulator({"default": {"ttft_ms": 50, "itl_ms": 10, "output_tokens": 10}}, body))
    summary = RunSamples.from_records(3, result.records).to_result()
    assert summary["requests"] == 9 and summary["errors"] == {}
    assert 50 <= summary["ttft_ms"]["p50"] < 75
    assert 9 <= summary["itl_ms"]["p50"] < 16
    assert summary["tokens_per_chunk"]["max"] == 1


@pytest.mark.slow
@pytest.mark.parametrize(
    "fault, expected",
    [
        ({"throttle_rate": 1.0}, "ThrottlingException"),
        ({"model_error_rate": 1.0}, "ModelError"),
        ({"stream_error_rate": 1.0}, "ModelStreamError"),
        ({"reset_rate": 1.0}, "ConnectionError"),
        ({"stall_rate": 1.0, "stall_seconds": 2}, "Timeout"),
    ],
)
def test_each_fault_class_is_counted_and_never_hangs(fault, expected):
    async def body(url, _):
        return await asyncio.wait_for(_load(url, concurrency=2, requests=4, timeout=0.5), 20)

    started = time.monotonic()
    result = _run(_with_emulator({"default": {**FAST, **fault}}, body))
    summary = RunSamples.from_records(2, result.records).to_result()
    assert summary["errors"] == {expected: summary["requests"]}
    assert summary["requests"] == 4
    assert time.monotonic() - started < 15


@pytest.mark.slow
def test_speculative_chunks_show_in_tokens_per_chunk_not_in_itl():
    async def body(url, _):
        return await _load(url, concurrency=1, requests=3)

    # 3 tokens per chunk, 20 ms per token: a chunk every 60 ms, 20 ms per token.
    result = _run(
        _with_emulator({"default": {"ttft_ms": 20, "itl_ms": 20, "output_tokens": 12, "tokens_per_chunk": 3}}, body)
    )
    run = RunSamples.from_records(1, result.records)
    summary = run.to_result()
    assert summary["tokens_per_chunk"]["p50"] == 3
    assert 18 <= summary["itl_ms"]["p50"] <= 28  # per token, not per chunk
    assert 55 <= summary["chunk_gap_ms"]["p50"] <= 80


@pytest.mark.slow
def test_one_token_per_frame_reads_as_one_token_per_chunk_when_reads_coalesce_frames():
    async def body(url, emulator):
        result = await _load(url, concurrency=2, requests=6)
        return result, dict(emulator.trace)

    # The emulator hands 4 one-token frames to the socket in one write: the client's reads hold
    # several frames each, and each frame must still count as one chunk of one token.
    result, trace = _run(_with_emulator({"default": {**FAST, "frames_per_write": 4}}, body))
    summary = RunSamples.from_records(2, result.records).to_result()
    assert summary["errors"] == {} and summary["requests"] == 6
    assert summary["tokens_per_chunk"]["mean"] == 1.0 and summary["tokens_per_chunk"]["max"] == 1
    for record in result.records:
        assert len(record.chunks) == len(trace[record.request_id]["sends"]) == 12  # one chunk per frame sent
    # A busy machine can only bunch frames further; one small write on loopback arrives in one
    # read in practice, so the share stays high whatever the load (it is 1.0 on a quiet machine).
    assert summary["coalesced_frame_share"] >= 0.5
    assert summary["warnings"] and "arrived coalesced" in summary["warnings"][0]


@pytest.mark.slow
def test_bench_cli_shows_the_coalesced_share_and_warns_when_frames_arrive_in_bursts(tmp_path, capsys):
    from optigate.cli import main
    from optigate.emulator.process import emulator_process

    out = tmp_path / "bursts.json"
    arguments = ["bench", "--endpoint", "x", "--concurrency", "2", "--requests", "4", "--max-new-tokens", "12"]
    with emulator_process({"default": {**FAST, "frames_per_write": 4}}) as url:
        assert main([*arguments, "--endpoint-url", url, "--prompt-tokens", "8", "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    (run,) = json.loads(out.read_text())["runs"]
    assert run["tokens_per_chunk"]["mean"] == 1.0 and run["coalesced_frame_share"] >= 0.5
    assert "coal." in printed and "tok/" in printed
    assert "warning: c=2:" in printed and run["warnings"][0].startswith("c=2:")


@pytest.mark.slow
def test_variants_and_inference_components_are_routed():
    config = {
        "endpoints": {
            "prod": {
                **FAST,
                "variants": {"Shadow": {"ttft_ms": 80}},
                "inference_components": {"prod-sql": {"ttft_ms": 120}},
            }
        }
    }

    async def body(url, emulator):
        base = await _load(url, endpoint="prod", requests=2)
        shadow = await _load(url, endpoint="prod", requests=2, target_variant="Shadow")
        adapter = await _load(url, endpoint="prod", requests=2, inference_component="prod-sql")
        missing = await _load(url, endpoint="other", requests=2)
        return base, shadow, adapter, missing, dict(emulator.trace)

    base, shadow, adapter, missing, trace = _run(_with_emulator(config, body))
    # Where each request went, as the server saw it (not inferred from timing a busy host can blur) ...
    routed = {name: {trace[r.request_id]["variant"] for r in run.records} for name, run in
              (("base", base), ("shadow", shadow), ("adapter", adapter))}  # fmt: skip
    assert routed == {"base": {"AllTraffic"}, "shadow": {"Shadow"}, "adapter": {"prod-sql"}}
    # ... and each answered with its own behaviour: never faster than configured.
    ttft = lambda r: RunSamples.from_records(2, r.records).to_result()["ttft_ms"]["p50"]  # noqa: E731
    assert ttft(base) < 80 <= ttft(shadow) and ttft(adapter) >= 120
    assert RunSamples.from_records(2, missing.records).errors == {"ValidationError": 2}


@pytest.mark.slow
def test_interrupted_run_keeps_what_completed():
    async def body(url, emulator):
        client = StreamingClient(Target("demo", endpoint_url=url), timeout=5)
        task = asyncio.create_task(
            run_load(client, LoadSpec(concurrency=2, requests=None, duration_s=60, max_new_tokens=12))
        )
        # Interrupt once the server has received 12 requests (the warmup, the stagger probe, at most 2
        # in flight: at least 8 measured ones completed), however slowly a busy host gets there.
        deadline = time.monotonic() + 30
        while len(emulator.trace) < 12 and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        task.cancel()
        return await task

    result = _run(_with_emulator({"default": FAST}, body))
    assert result.interrupted
    assert len([r for r in result.records if not r.warmup]) >= 5


@pytest.mark.slow
def test_duration_stops_issuing_after_the_window():
    async def body(url, _):
        client = StreamingClient(Target("demo", endpoint_url=url), timeout=5)
        started = time.monotonic()
        result = await run_load(client, LoadSpec(concurrency=2, requests=None, duration_s=1.0, max_new_tokens=12))
        return result, time.monotonic() - started

    result, elapsed = _run(_with_emulator({"default": FAST}, body))
    assert elapsed >= 1.0 and not result.interrupted
    # Nothing is issued after the window (sends are stamped after an await: a busy host may add a little).
    measured = [r.sent_at for r in result.records if not r.warmup]
    assert measured and max(measured) - min(measured) <= 1.0 + 0.5
    assert elapsed < 30  # it stops: generous, as a shared CI machine may stall it


@pytest.mark.slow
def test_open_loop_arrivals_follow_the_rate():
    async def body(url, _):
        client = StreamingClient(Target("demo", endpoint_url=url), timeout=5)
        return await run_load(
            client, LoadSpec(concurrency=16, requests=40, mode="open", rate=40.0, max_new_tokens=12, seed=3)
        )

    result = _run(_with_emulator({"default": FAST}, body))
    records = sorted(result.records, key=lambda r: r.scheduled_at)
    span = records[-1].scheduled_at - records[0].scheduled_at
    assert len(records) == 40
    assert 0.5 < span < 2.0  # 39 exponential gaps at 40/s: about a second
    assert max(r.sent_at - r.scheduled_at for r in records) < 0.2  # no queueing below the slot limit


@pytest.mark.slow
def test_emulator_records_its_own_send_times_per_request():
    async def body(url, emulator):
        result = await _load(url, concurrency=1, requests=2)
        return result, dict(emulator.trace)

    result, trace = _run(_with_emulator({"default": FAST}, body))
    for record in result.records:
        sends = trace[record.request_id]["sends"]
        assert len(sends) == 12
        assert record.first_token_at >= sends[0][0]  # received after it was sent, same clock


# --------------------------------------------------------------------------- boto3 as the peer


def _runtime(url):
    return boto3.client(
        "sagemaker-runtime",
        region_name="us-east-1",
        endpoint_url=url,
        aws_access_key_id="x",
        aws_secret_access_key="x",
        config=Config(retries={"max_attempts": 0}),
    )


def test_boto3_reads_the_emulators_event_stream(emulator_url):
    """Async mode (the emulator's default, LMI's since v17) answering a chat request: vLLM's chunks as jsonlines."""
    response = _runtime(emulator_url).invoke_endpoint_with_response_stream(
        EndpointName="ok",
        Body=json.dumps(
            {
                "messages": [{"role": "user", "content": "hi"}],
                "max_tokens": 5,
                "stream": True,
                "stream_options": {"include_usage": True, "continuous_usage_stats": True},
            }
        ),
        ContentType="application/json",
    )
    lines = b"".join(event["PayloadPart"]["Bytes"] for event in response["Body"]).split(b"\n")
    chunks = [json.loads(line) for line in lines if line]
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert [c["usage"]["completion_tokens"] for c in chunks] == [0, 1, 2, 3, 4, 5, 5]
    assert chunks[-1]["choices"] == [] and chunks[-2]["choices"][0]["finish_reason"] == "length"
    assert lines[-2:] == [b"", b""]  # the empty line LMI writes for vLLM's [DONE], then the end


def test_boto3_reads_the_rolling_batch_token_lines(emulator_url):
    response = _runtime(emulator_url).invoke_endpoint_with_response_stream(
        EndpointName="ok-rolling-batch",
        Body=json.dumps({"inputs": "hi", "parameters": {"max_new_tokens": 5, "details": True}}),
        ContentType="application/json",
    )
    lines = b"".join(event["PayloadPart"]["Bytes"] for event in response["Body"]).splitlines()
    assert len(lines) == 5 and set(json.loads(lines[0])) == {"token"}
    assert json.loads(lines[-1])["details"]["generated_tokens"] == 5


@pytest.mark.parametrize("endpoint, code", [("throttled", "ThrottlingException"), ("broken", "ModelError")])
def test_boto3_sees_the_emulators_errors_by_type(emulator_url, endpoint, code):
    with pytest.raises(ClientError) as caught:
        _runtime(emulator_url).invoke_endpoint_with_response_stream(
            EndpointName=endpoint, Body=b"{}", ContentType="application/json"
        )
    assert caught.value.response["Error"]["Code"] == code


def test_boto3_raises_the_mid_stream_model_stream_error(emulator_url):
    response = _runtime(emulator_url).invoke_endpoint_with_response_stream(
        EndpointName="midstream", Body=b"{}", ContentType="application/json"
    )
    with pytest.raises(EventStreamError, match="ModelStreamError"):
        for _ in response["Body"]:
            pass


def test_boto3_non_streaming_invocation(emulator_url):
    response = _runtime(emulator_url).invoke_endpoint(
        EndpointName="ok", Body=json.dumps({"inputs": "hi"}), ContentType="application/json"
    )
    assert json.loads(response["Body"].read())["generated_text"].count(" ") == 5


@pytest.mark.slow
def test_answer_mode_is_deterministic_per_record(tmp_path):
    table = tmp_path / "answers.jsonl"
    rows = [
        {
            "id": f"r{i}",
            "category": "a" if i < 50 else "b",
            "model_input": f"Question number {i}?",
            "target_output": f"answer{i}",
        }
        for i in range(100)
    ]
    table.write_text("".join(json.dumps(r) + "\n" for r in rows))
    config = {
        "endpoints": {
            "x": {
                **FAST,
                "answers_file": str(table),
                "wrong_fraction": 0.1,
                "wrong_categories": ["b"],
                "refuse_fraction": 0.04,
            }
        }
    }

    async def body(url, _):
        import aiohttp

        answers = {}
        async with aiohttp.ClientSession() as session:
            for row in rows:
                async with session.post(
                    f"{url}/endpoints/x/invocations", json={"inputs": row["model_input"]}
                ) as response:
                    answers[row["id"]] = (await response.json())["generated_text"]
        return answers

    first = _run(_with_emulator(config, body))
    second = _run(_with_emulator(config, body))
    assert first == second
    refused = [k for k, v in first.items() if v.startswith("I'm sorry")]
    wrong = [k for k, v in first.items() if v.startswith("I believe")]
    assert len(refused) == 4  # 4 % of 100
    assert len(wrong) == 5 and all(int(k[1:]) >= 50 for k in wrong)  # 10 % of category b
    assert sum(first[r["id"]] == r["target_output"] for r in rows) == 91
