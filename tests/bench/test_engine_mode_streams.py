"""The benchmark speaks the stream of LMI's engine mode: async mode's chat chunks, the rolling batch's token lines,
each read strictly (a stream of the other mode fails loudly, never as zero tokens)."""

from __future__ import annotations

import asyncio

import pytest

from optigate.bench.core import payloads
from optigate.bench.core.client import StreamingClient, Target
from optigate.bench.core.load import LoadSpec, run_load
from optigate.bench.core.payloads import PayloadParser
from optigate.emulator.sagemaker_runtime import EmulatorConfig, start
from optigate.serving import engine_mode

#: What LMI's async mode (djl-serving 0.35.0, vllm_async_service) streams for a chat request with
#: stream_options {include_usage, continuous_usage_stats} under speculative decoding: vLLM's chunks, `data: ` stripped
#: (vllm_stream_output_formatter), one per line (create_stream_chunk_output adds the newline), the role chunk first,
#: a step that accepted three tokens, the usage-only chunk and the empty line written for `[DONE]`.
ASYNC_CHAT_STREAM = (
    b'{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"lmi","choices":[{"index":0,'
    b'"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}],'
    b'"usage":{"prompt_tokens":9,"total_tokens":9,"completion_tokens":0}}\n'
    b'{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"lmi","choices":[{"index":0,'
    b'"delta":{"content":" Paris"},"logprobs":null,"finish_reason":null}],'
    b'"usage":{"prompt_tokens":9,"total_tokens":10,"completion_tokens":1}}\n'
    b'{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"lmi","choices":[{"index":0,'
    b'"delta":{"content":" is the capital"},"logprobs":null,"finish_reason":"length","stop_reason":null}],'
    b'"usage":{"prompt_tokens":9,"total_tokens":13,"completion_tokens":4}}\n'
    b'{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"lmi","choices":[],'
    b'"usage":{"prompt_tokens":9,"total_tokens":13,"completion_tokens":4}}\n'
    b"\n"
)
#: The rolling-batch handler's answer to LMI's schema with details (output_formatter._jsonlines_output_formatter).
ROLLING_BATCH_STREAM = (
    b'{"token": {"id": 3681, "text": " Paris", "log_prob": -0.1}}\n'
    b'{"token": {"id": 374, "text": " is", "log_prob": -0.2}, "generated_text": " Paris is", '
    b'"details": {"finish_reason": "length", "generated_tokens": 2, "inputs": "Capital?"}}\n'
)
#: Async mode's answer to LMI's schema: a TGI-style line per step whose `token` holds every accepted token's text
#: (request_response_utils.convert_completion_chunk_response_to_lmi_schema), then empty lines.
ASYNC_INPUTS_STREAM = (
    b'{"index": 0, "token": {"id": 3681, "text": " Paris is the", "logprob": -0.1}, "generated_text": null, '
    b'"details": null}\n\n\n'
)
#: The rolling-batch handler's chat chunks: one token each, never a usage (_jsonlines_chat_output_formatter).
ROLLING_BATCH_CHAT_STREAM = (
    b'{"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "choices": [{"index": 0, '
    b'"delta": {"content": " Paris", "role": "assistant"}, "logprobs": null, "finish_reason": null}]}\n'
)


def _read(parser: PayloadParser, stream: bytes) -> int:
    return parser.feed(stream) + parser.finish()


def test_async_modes_chat_stream_counts_every_accepted_token():
    parser = PayloadParser("async")
    assert _read(parser, ASYNC_CHAT_STREAM) == 4
    assert parser.reported_total == 4 and parser.errors == []


def test_the_rolling_batch_token_lines_count_a_token_each():
    parser = PayloadParser("rolling-batch")
    assert _read(parser, ROLLING_BATCH_STREAM) == 2
    assert parser.reported_total == 2 and parser.errors == []


@pytest.mark.parametrize(
    ("mode", "schema", "stream"),
    [
        ("async", "messages", ROLLING_BATCH_STREAM),  # the rolling batch's lines to an async reader
        ("async", "messages", ROLLING_BATCH_CHAT_STREAM),  # chat chunks without usage: the rolling batch's
        ("rolling-batch", "inputs", ASYNC_INPUTS_STREAM),  # async mode's TGI-style line: it hides tokens
        ("rolling-batch", "inputs", ASYNC_CHAT_STREAM),
        ("rolling-batch", "messages", ASYNC_CHAT_STREAM),  # usage on a chunk: async mode's
    ],
)
def test_the_other_modes_stream_fails_loudly_not_as_zero_tokens(mode, schema, stream):
    parser = PayloadParser(mode, schema)
    _read(parser, stream)
    assert parser.errors and parser.errors[0] == "StreamFormatMismatch"


def test_a_stream_without_a_token_line_is_an_error():
    parser = PayloadParser("async")
    assert _read(parser, b"\n\n") == 0
    assert parser.errors == ["EmptyStream"]


def test_async_mode_is_never_measured_through_lmis_inputs_schema():
    with pytest.raises(ValueError, match="messages"):
        LoadSpec(concurrency=1, engine_mode="async", schema="inputs")
    with pytest.raises(ValueError, match="engine mode"):
        LoadSpec(concurrency=1, engine_mode="vllm")
    assert LoadSpec(concurrency=1, engine_mode="async").schema == "messages"
    assert LoadSpec(concurrency=1, engine_mode="rolling-batch").schema == "inputs"


def test_the_bench_speaks_the_modes_the_renderer_resolves():
    """optigate.bench.core.payloads names the modes itself (the benchmark Lambda ships without optigate.serving)."""
    assert set(payloads.ENGINE_MODES) == set(engine_mode.ENGINE_MODES)
    assert (payloads.ASYNC, payloads.ROLLING_BATCH) == (engine_mode.ASYNC, engine_mode.ROLLING_BATCH)
    assert payloads.DEFAULT_SCHEMA == {"async": "messages", "rolling-batch": "inputs"}


@pytest.mark.parametrize("mode", ["async", "rolling-batch"])
def test_the_emulator_and_the_client_agree_on_each_modes_stream_under_speculative_decoding(mode):
    """Chunks of 1 and 3 tokens: every token counted, in frames of the size the emulator sent."""

    async def body():
        config = {"default": {"ttft_ms": 5, "itl_ms": 1, "output_tokens": 9, "tokens_per_chunk": [1, 3]}}
        runner, port = await start(
            EmulatorConfig.parse({**config, "default": {**config["default"], "engine_mode": mode}})
        )
        try:
            client = StreamingClient(Target("demo", endpoint_url=f"http://127.0.0.1:{port}"), timeout=5)
            spec = LoadSpec(concurrency=1, requests=2, max_new_tokens=9, prompt_tokens=4, engine_mode=mode)
            return await run_load(client, spec)
        finally:
            await runner.cleanup()

    records = [r for r in asyncio.run(body()).records if not r.warmup]
    assert records and all(r.error is None and r.output_tokens == 9 for r in records)
    if mode == "async":  # one frame per step: its chunk carries the step's tokens
        assert [tokens for _, tokens in records[0].chunks] == [1, 3, 1, 3, 1]
    else:  # a line per token; a step's lines share a frame
        assert sum(tokens for _, tokens in records[0].chunks) == 9
