"""Token accounting for the streamed payload formats SageMaker LLM containers emit.

- LMI jsonlines: one `{"token": {...}}` line per token; the last line may carry `details`
  with `generated_tokens` (and `generated_text`).
- TGI-style server-sent events: `data: {"token": {...}, "details": ...}` lines.
- OpenAI chunks (LMI's messages API): `chat.completion.chunk` / `text_completion` objects,
  with or without a `data: ` prefix. A chunk whose delta carries only a role, or empty text, is
  not a token. With `stream_options.continuous_usage_stats`, each chunk's `usage` tells how
  many tokens it carried (several per chunk under speculative decoding); a final usage-only
  chunk reports the total.

A JSON line may be split across PayloadPart events and one event may carry several lines: the
parser buffers bytes and counts a line when its newline arrives.
"""

from __future__ import annotations

import json
from dataclasses import dataclass


@dataclass
class LineResult:
    tokens: int = 0  # tokens this line carried
    reported_total: int | None = None  # a server-reported total, when the line states one
    error: str | None = None


def parse_line(line: str, state: dict) -> LineResult:
    """Tokens in one line. `state` keeps the running usage count across lines of a stream."""
    text = line.strip()
    if not text or text.startswith((":", "event:", "id:", "retry:")):
        return LineResult()
    if text.startswith("data:"):
        text = text[5:].strip()
    if text == "[DONE]":
        return LineResult()
    try:
        obj = json.loads(text)
    except json.JSONDecodeError:
        return LineResult(error="UnparsableLine")
    if not isinstance(obj, dict):
        return LineResult(error="UnparsableLine")
    if "error" in obj and "token" not in obj and "choices" not in obj:
        return LineResult(error="StreamedError")

    if "token" in obj:  # LMI jsonlines or TGI
        details = obj.get("details") or {}
        reported = details.get("generated_tokens") if isinstance(details, dict) else None
        return LineResult(tokens=1, reported_total=reported)

    if "choices" in obj:  # OpenAI chunk
        usage = obj.get("usage") or None
        choices = obj.get("choices") or []
        has_content = False
        for choice in choices:
            delta = choice.get("delta")
            content = delta.get("content") if isinstance(delta, dict) else choice.get("text")
            if content:
                has_content = True
        result = LineResult()
        if usage and usage.get("completion_tokens") is not None:
            cumulative = int(usage["completion_tokens"])
            carried = cumulative - state.get("usage_seen", 0)
            state["usage_seen"] = cumulative
            result.reported_total = cumulative
            result.tokens = carried if has_content else 0
            if has_content and carried <= 0:
                result.tokens = 1
        elif has_content:
            result.tokens = 1
        return result
    return LineResult()


class PayloadParser:
    """Feed PayloadPart payloads in order; `feed` returns the tokens completed by that payload."""

    def __init__(self) -> None:
        self._pending = b""
        self._state: dict = {}
        self.reported_total: int | None = None
        self.errors: list[str] = []

    def _consume(self, line: bytes) -> int:
        result = parse_line(line.decode("utf-8", errors="replace"), self._state)
        if result.reported_total is not None:
            self.reported_total = result.reported_total
        if result.error:
            self.errors.append(result.error)
        return result.tokens

    def feed(self, payload: bytes) -> int:
        data = self._pending + payload
        *complete, self._pending = data.split(b"\n")
        return sum(self._consume(line) for line in complete)

    def finish(self) -> int:
        """Count a last line that had no trailing newline."""
        remainder, self._pending = self._pending, b""
        return self._consume(remainder) if remainder.strip() else 0
