"""Token accounting for the stream LMI emits in each engine mode, read strictly: a line the expected stream never
carries is an error (`StreamFormatMismatch`), never a line of zero tokens, so a benchmark that talks to a container
in the wrong mode fails instead of measuring nothing.

The modes (optigate.serving.engine_mode says which one a container runs; its name is passed down as data) and what
each streams, one JSON object per line (`application/jsonlines`), as djl-serving writes it (deepjavalibrary/
djl-serving 0.35.0-dlc, engines/python/setup/djl_python/):

- `async` (`lmi_vllm/vllm_async_service.py`), asked with a chat request (`messages`): vLLM's
  `chat.completion.chunk` objects with the SSE `data: ` prefix stripped (request_response_utils.py,
  vllm_stream_output_formatter), `usage` on each because optigate asks for `stream_options.continuous_usage_stats`
  (the cumulative completion tokens tell how many tokens a chunk carried: several under speculative decoding),
  a last usage-only chunk (`choices: []`), and an empty line where vLLM sent `[DONE]`. A chunk without `usage` is
  the rolling-batch handler's chat stream, not this one.
- `rolling-batch` (`huggingface.py` with a rolling batch), asked with LMI's schema (`inputs`): one
  `{"token": {"id", "text", "log_prob"}}` line per token, the last with `generated_text` and, when `details` is
  asked, `details.generated_tokens` (output_formatter.py, _jsonlines_output_formatter). Asked with `messages`
  (a `--prompts` file of chat records): `chat.completion.chunk` lines of one token each and no `usage`
  (_jsonlines_chat_output_formatter).

A JSON line may be split across PayloadPart events and one event may carry several lines: the parser buffers
bytes and counts a line when its newline arrives.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

ASYNC = "async"
ROLLING_BATCH = "rolling-batch"
#: The engine modes a benchmark speaks (the names of optigate.serving.engine_mode, which the Lambda cannot import).
ENGINE_MODES = (ASYNC, ROLLING_BATCH)
#: The request schema sent to each mode by default: the one whose stream tells the tokens of every chunk.
DEFAULT_SCHEMA = {ASYNC: "messages", ROLLING_BATCH: "inputs"}
#: The request schemas each mode is measured with. Async mode maps LMI's `inputs` to a completion and streams a
#: TGI-style line per chunk without the tokens it carried (request_response_utils.py,
#: convert_completion_chunk_response_to_lmi_schema): under speculative decoding that undercounts, so it is not used.
SCHEMAS = {ASYNC: ("messages",), ROLLING_BATCH: ("inputs", "messages")}

MISMATCH = "StreamFormatMismatch"


def check_stream(engine_mode: str, schema: str) -> None:
    """Refuse a mode or a mode/schema pair the parser cannot read exactly."""
    if engine_mode not in ENGINE_MODES:
        raise ValueError(f"engine mode {engine_mode!r}: expected one of {', '.join(ENGINE_MODES)}")
    if schema not in SCHEMAS[engine_mode]:
        raise ValueError(
            f"LMI's {engine_mode} mode is measured with {' or '.join(SCHEMAS[engine_mode])} requests, not {schema}"
        )


@dataclass
class LineResult:
    tokens: int = 0  # tokens this line carried
    reported_total: int | None = None  # a server-reported total, when the line states one
    error: str | None = None
    carried_tokens: bool = False  # the line is of a kind that carries tokens (whether or not it had text)


def _streamed_error(obj: dict) -> bool:
    """LMI's error line (`{"code": 424, "error": ...}`: Request.java addResponse) or vLLM's ErrorResponse."""
    return "error" in obj or obj.get("object") == "error" or ("code" in obj and "choices" not in obj)


def _token_line(obj: dict) -> LineResult:
    """The rolling-batch handler's line for LMI's schema: a token, the last one with the text and details."""
    if set(obj) - {"token", "generated_text", "details"} or not isinstance(obj.get("token"), dict):
        return LineResult(error=MISMATCH)  # e.g. async mode's TGI-style line, which has `index`
    details = obj.get("details")
    if isinstance(details, dict) and details.get("finish_reason") == "error":
        return LineResult(error="StreamedError")
    reported = details.get("generated_tokens") if isinstance(details, dict) else None
    return LineResult(tokens=1, reported_total=reported, carried_tokens=True)


def _content(obj: dict) -> bool:
    for choice in obj.get("choices") or []:
        delta = choice.get("delta") if isinstance(choice, dict) else None
        if isinstance(delta, dict) and any(delta.get(key) for key in ("content", "reasoning_content", "tool_calls")):
            return True
    return False


def _chat_chunk(obj: dict, state: dict, with_usage: bool) -> LineResult:
    if obj.get("object") != "chat.completion.chunk" or not isinstance(obj.get("choices"), list):
        return LineResult(error=MISMATCH)
    usage = obj.get("usage")
    has_content = _content(obj)
    if not with_usage:  # the rolling-batch handler: a token per chunk, never a usage
        return LineResult(error=MISMATCH) if usage else LineResult(tokens=int(has_content), carried_tokens=True)
    if not isinstance(usage, dict) or not isinstance(usage.get("completion_tokens"), int):
        # async mode was asked for continuous usage (vLLM serving_chat.py puts it on every chunk, the role chunk's
        # at 0): a chunk with text and without it is the rolling batch's, whose tokens per chunk this cannot tell
        return LineResult(error=MISMATCH) if has_content else LineResult(carried_tokens=True)
    cumulative = usage["completion_tokens"]
    carried = cumulative - state.get("usage_seen", 0)
    state["usage_seen"] = cumulative
    if carried < 0:
        return LineResult(error="UsageWentBack")
    if has_content and carried == 0:
        carried = 1  # a chunk that shows text carries a token, whatever its usage says
    return LineResult(tokens=carried if has_content else 0, reported_total=cumulative, carried_tokens=True)


def parse_line(line: str, state: dict, engine_mode: str, schema: str) -> LineResult:
    """Tokens in one line of the stream of `engine_mode` answering a `schema` request. `state` keeps the running
    usage count across lines of a stream."""
    text = line.strip()
    if not text:
        return LineResult()  # async mode's line for vLLM's [DONE] (and the usage chunk it drops for `inputs`)
    try:
        obj = json.loads(text)
    except json.JSONDecodeError:
        # `data: ...` is a server-sent event: LMI's async mode strips the prefix, so it is another server's stream
        return LineResult(error=MISMATCH if text.startswith(("data:", "event:")) else "UnparsableLine")
    if not isinstance(obj, dict):
        return LineResult(error="UnparsableLine")
    if _streamed_error(obj) and "token" not in obj:
        return LineResult(error="StreamedError")
    if schema == "inputs":
        return _token_line(obj)
    return _chat_chunk(obj, state, with_usage=engine_mode == ASYNC)


class PayloadParser:
    """Feed PayloadPart payloads in order; `feed` returns the tokens completed by that payload.

    :param engine_mode: the container's engine mode, `async` or `rolling-batch`, as resolved for it.
    :param schema: the request schema sent (`messages` or `inputs`; the mode's default when None).
    """

    def __init__(self, engine_mode: str, schema: str | None = None) -> None:
        schema = schema or DEFAULT_SCHEMA.get(engine_mode, "")
        check_stream(engine_mode, schema)
        self.engine_mode, self.schema = engine_mode, schema
        self._pending = b""
        self._state: dict = {}
        self._token_lines = 0
        self.reported_total: int | None = None
        self.errors: list[str] = []

    def _consume(self, line: bytes) -> int:
        result = parse_line(line.decode("utf-8", errors="replace"), self._state, self.engine_mode, self.schema)
        if result.reported_total is not None:
            self.reported_total = result.reported_total
        if result.error:
            self.errors.append(result.error)
        self._token_lines += result.carried_tokens
        return result.tokens

    def feed(self, payload: bytes) -> int:
        data = self._pending + payload
        *complete, self._pending = data.split(b"\n")
        return sum(self._consume(line) for line in complete)

    def finish(self) -> int:
        """Count a last line that had no trailing newline; a stream without a line of the expected kind is an
        error (`EmptyStream`), never a response of zero tokens."""
        remainder, self._pending = self._pending, b""
        tokens = self._consume(remainder) if remainder.strip() else 0
        if not self._token_lines and not self.errors:
            self.errors.append("EmptyStream")
        return tokens
