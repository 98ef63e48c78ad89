"""What LMI streams in each engine mode, written as djl-serving writes it: the emulator's payloads
(optigate.emulator.sagemaker_runtime). optigate.bench.core.payloads reads the same streams; the sources are cited there
(deepjavalibrary/djl-serving 0.35.0-dlc, engines/python/setup/djl_python/).

- async, chat request: vLLM's `chat.completion.chunk` JSON (compact, as pydantic's model_dump_json writes it) per
  line: a first chunk with the assistant role, one per decode step with the step's text (several tokens under
  speculative decoding), the last with its finish reason; with `stream_options.include_usage` a usage-only chunk,
  with `continuous_usage_stats` the cumulative usage on every chunk; then an empty line for `[DONE]`.
- async, LMI's `inputs`: one TGI-style line per step (`index`, `token` with the step's whole text, `generated_text`
  and `details` on the last, `generated_tokens` being vLLM's completion tokens + 1 as LMI writes it), then empty
  lines for the dropped usage chunk and `[DONE]`.
- rolling-batch, `inputs`: `{"token": {"id", "text", "log_prob"}}` per token; the last with `generated_text`, and
  `details` when asked.
- rolling-batch, chat request: `chat.completion.chunk` per token, without `model` or `usage`; as server-sent events
  (`data: {...}` lines, then `data: [DONE]`) from LMI 26 on (`sse`, optigate.serving.surfaces says which container).
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

ASYNC_SERVED_MODEL = "lmi"  # vllm_async_service: served_model_name, else "lmi"
WORDS = ("the", "model", "is", "fast", "and", "good", "at", "this", "task", "today")


def _compact(obj: dict[str, Any]) -> bytes:
    return (json.dumps(obj, separators=(",", ":"), ensure_ascii=False) + "\n").encode()


def _line(obj: dict[str, Any]) -> bytes:
    return (json.dumps(obj, ensure_ascii=False) + "\n").encode()


@dataclass
class LmiStream:
    """The payloads of one streamed response: `chunk(start, count)` is the payload of one decode step that produced
    tokens `start` to `start + count - 1` of `total`."""

    engine_mode: str
    body: dict[str, Any]
    total: int
    words: list[str] | None = None
    sse: bool = False  # the rolling batch's chat stream as server-sent events (LMI 26 on)
    created: int = field(default_factory=lambda: int(time.time()))
    request_id: str = field(default_factory=lambda: uuid.uuid4().hex)

    @property
    def chat(self) -> bool:
        return "messages" in self.body

    def _text(self, start: int, count: int) -> str:
        indexes = range(start, start + count)
        return "".join(" " + (self.words[i] if self.words else WORDS[i % len(WORDS)]) for i in indexes)

    def _prompt_tokens(self) -> int:
        if self.chat:
            return sum(len(str(m.get("content", "")).split()) for m in self.body["messages"] if isinstance(m, dict))
        return len(str(self.body.get("inputs") or "").split())

    def _details_asked(self) -> bool:
        parameters = self.body.get("parameters") or {}
        return bool(parameters.get("details"))

    def chunk(self, start: int, count: int) -> bytes:
        last = start + count >= self.total
        if self.engine_mode == "async":
            return self._async_chat(start, count, last) if self.chat else self._async_inputs(start, count, last)
        if self.chat:
            lines = [self._sync_chat(i, i == self.total - 1) for i in range(start, start + count)]
            if self.sse:  # djl-serving's sse_chat: each chunk an event, and [DONE] after the last
                lines = [b"data: " + line.rstrip(b"\n") + b"\n\n" for line in lines] + [b"data: [DONE]\n\n"] * last
            return b"".join(lines)
        return b"".join(self._sync_token(i, i == self.total - 1) for i in range(start, start + count))

    # ------------------------------------------------------------------ async mode (vllm_async_service)

    def _usage(self, completion: int) -> dict[str, int]:
        prompt = self._prompt_tokens()
        return {"prompt_tokens": prompt, "total_tokens": prompt + completion, "completion_tokens": completion}

    def _async_chat(self, start: int, count: int, last: bool) -> bytes:
        options = self.body.get("stream_options") or {}
        include_usage = bool(options.get("include_usage"))
        continuous = include_usage and bool(options.get("continuous_usage_stats"))
        head = {"id": f"chatcmpl-{self.request_id}", "object": "chat.completion.chunk", "created": self.created}
        head["model"] = self.body.get("model") or ASYNC_SERVED_MODEL

        def chunk(delta: dict[str, Any], completion: int, finish: str | None = None) -> bytes:
            choice: dict[str, Any] = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
            if finish is not None:
                choice["stop_reason"] = None
            obj: dict[str, Any] = {**head, "choices": [choice]}
            if continuous:
                obj["usage"] = self._usage(completion)
            return _compact(obj)

        out = b""
        if start == 0:
            out += chunk({"role": "assistant", "content": ""}, 0)
        out += chunk({"content": self._text(start, count)}, start + count, "length" if last else None)
        if last:
            if include_usage:
                out += _compact({**head, "choices": [], "usage": self._usage(self.total)})
            out += b"\n"  # [DONE]
        return out

    def _async_inputs(self, start: int, count: int, last: bool) -> bytes:
        token = {"id": 1000 + start % len(WORDS), "text": self._text(start, count), "logprob": -0.1}
        line: dict[str, Any] = {"index": 0, "token": token, "generated_text": None, "details": None}
        if last:
            line["generated_text"] = self._text(0, self.total)
            if self._details_asked():
                line["details"] = {
                    "finish_reason": "length",
                    "seed": None,
                    "generated_tokens": self.total + 1,  # usage["completion_tokens"] + 1, as LMI writes it
                    "input_length": self._prompt_tokens(),
                }
        return _line(line) + (b"\n\n" if last else b"")  # the usage chunk and [DONE], both written as empty lines

    # ------------------------------------------------------------------ rolling-batch handler

    def _sync_token(self, index: int, last: bool) -> bytes:
        token = {"id": 1000 + index % len(WORDS), "text": self._text(index, 1), "log_prob": -0.1}
        line: dict[str, Any] = {"token": token}
        if last:
            line["generated_text"] = self._text(0, self.total)
            if self._details_asked():
                inputs = str(self.body.get("inputs") or "")
                line["details"] = {"finish_reason": "length", "generated_tokens": self.total, "inputs": inputs}
        return _line(line)

    def _sync_chat(self, index: int, last: bool) -> bytes:
        delta: dict[str, Any] = {"content": self._text(index, 1)}
        if index == 0:
            delta["role"] = "assistant"
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": "length" if last else None}
        obj = {"id": f"chatcmpl-{self.request_id}", "object": "chat.completion.chunk", "created": self.created}
        return _line({**obj, "choices": [choice]})
