"""One SageMaker data capture record as optigate reads it, as a pydantic model (issue 29), and its JSON schema.

The service writes the records (optigate.bench.core.capture's docstring cites the documentation and the readers whose
variants are accepted); optigate reads them with a standard-library parser, :func:`optigate.bench.core.capture.
parse_capture_line`, because the benchmark Lambda ships optigate.bench without pydantic. This model says the same
in a schema: a record it accepts is one the parser reads as a request, a record it refuses is one the parser
skips with a reason (tests/bench/test_capture_file.py checks they agree on generated and mutated records).

Only what makes a request is checked: ``eventMetadata.inferenceTime`` and ``captureData.endpointInput`` (its
``data`` holds the request body, JSON text or BASE64 of it, one of three body kinds). Everything else the service
writes (``eventId``, ``inferenceId``, ``eventVersion``, ``observedContentType``, ``mode``, ``endpointOutput``) is
described but not required: a record of another ``eventVersion`` is read when those fields are there.
"""

from __future__ import annotations

import base64
import binascii
import json
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    PlainValidator,
    TypeAdapter,
    ValidationError,
    ValidationInfo,
    WithJsonSchema,
    field_validator,
    model_validator,
)

from optigate.bench.core.capture import MAX_REQUESTED_TOKENS
from optigate.jsonsafe import json_path


class _Open(BaseModel):
    # Strict types (true is not a count, "3" not a number); other keys are allowed: the service and clients add some.
    model_config = ConfigDict(strict=True, allow_inf_nan=False, extra="allow")


def _requested_tokens(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"a number of tokens, found {_found(value)}")
    if not 1 <= value <= MAX_REQUESTED_TOKENS or value != int(value):  # NaN fails the range, infinity too
        raise ValueError(f"a whole number of tokens in 1..{MAX_REQUESTED_TOKENS}, found {_found(value)}")
    return int(value)


#: An output length a body asks for: a whole number of tokens (64, or 64.0 as some clients write it).
RequestedTokens = Annotated[
    int,
    PlainValidator(_requested_tokens),
    WithJsonSchema({"type": "number", "minimum": 1, "maximum": MAX_REQUESTED_TOKENS, "multipleOf": 1}),
]


def _found(value: Any, limit: int = 40) -> str:
    text = json.dumps(value) if isinstance(value, int | float | str | bool) or value is None else type(value).__name__
    return text if len(text) <= limit else f"{text[:limit]}…"


def _sendable(text: str) -> str:
    """Text sent on as UTF-8: JSON allows a lone surrogate (``"\\ud800"``), UTF-8 cannot carry one."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("text that is valid Unicode (no lone surrogate)") from None
    return text


Prompt = Annotated[str, Field(min_length=1), AfterValidator(_sendable)]


class TextPart(_Open):
    type: Literal["text"]
    text: str


class ChatMessage(_Open):
    """An OpenAI chat message: its text content, or none for an assistant's tool-calling turn."""

    role: str
    content: str | list[TextPart] | None = None

    @model_validator(mode="after")
    def _content_for_role(self) -> ChatMessage:
        if self.content is None and self.role != "assistant":
            raise ValueError("content (only an assistant's turn may have none)")
        return self


class ChatBody(_Open):
    """OpenAI chat completions: ``messages`` and the output length (``max_completion_tokens``, then the older
    ``max_tokens``)."""

    messages: Annotated[list[ChatMessage], Field(min_length=1)]
    max_completion_tokens: RequestedTokens | None = None
    max_tokens: RequestedTokens | None = None

    @field_validator("messages", mode="before")
    @classmethod
    def _messages_sendable(cls, messages: Any) -> Any:
        # The messages are replayed whole (other keys too), so every string in them must be sendable.
        if isinstance(messages, list):
            try:
                json.dumps(messages, ensure_ascii=False).encode("utf-8")
            except UnicodeEncodeError:
                raise ValueError("messages whose text is valid Unicode (no lone surrogate)") from None
        return messages


class LmiParameters(_Open):
    max_new_tokens: RequestedTokens | None = None


class LmiBody(_Open):
    """LMI (and TGI): ``{"inputs": prompt, "parameters": {"max_new_tokens": n}}``."""

    inputs: Prompt
    parameters: LmiParameters = Field(default_factory=LmiParameters)


class CompletionBody(_Open):
    """OpenAI completions: ``{"prompt": prompt, "max_tokens": n}``."""

    prompt: Prompt
    max_tokens: RequestedTokens | None = None


RequestBody = ChatBody | LmiBody | CompletionBody
#: Which body kind a body is, by the first of these keys it has (a body with ``messages`` is a chat, whatever else).
BODY_KINDS: tuple[tuple[str, type[BaseModel]], ...] = (
    ("messages", ChatBody),
    ("inputs", LmiBody),
    ("prompt", CompletionBody),
)


def request_body(body: Any) -> RequestBody:
    """The request `body` (parsed JSON) as its kind's model; ValueError or ValidationError when it is none."""
    if not isinstance(body, dict):
        raise ValueError("a JSON object (the request body)")
    for key, model in BODY_KINDS:
        if key in body:
            validated: RequestBody = model.model_validate(body)  # type: ignore[assignment]
            return validated
    raise ValueError("a body with messages (chat), inputs (LMI) or prompt (completions)")


def decoded_body(data: str, encoding: str) -> Any:
    """The JSON an ``endpointInput.data`` holds (text, or BASE64 of UTF-8 text); ValueError saying what is wrong."""
    if encoding == "BASE64":
        try:
            data = base64.b64decode(data, validate=True).decode("utf-8")
        except (binascii.Error, ValueError):
            raise ValueError("BASE64 of UTF-8 text") from None
    try:
        return json.loads(data)
    except (ValueError, RecursionError):
        raise ValueError("a JSON request body") from None


class EndpointInput(_Open):
    """The request as captured: its body in ``data``, as JSON text or BASE64 (the default when none is named)."""

    # Before `data`: the body is decoded by its encoding.
    encoding: Literal["JSON", "BASE64"] = Field(
        "BASE64", description="How `data` holds the body (the service's default, when none is named: BASE64)."
    )
    data: str = Field(
        description="The request body: an LMI, OpenAI chat or OpenAI completions JSON object, as text or BASE64 "
        "(its schema: contentSchema).",
    )
    observedContentType: Any = Field(None, description="The request's content type (not read).")
    mode: Any = Field(None, description="INPUT (not read).")

    @field_validator("data")
    @classmethod
    def _body_is_a_request(cls, data: str, info: ValidationInfo) -> str:
        if "encoding" not in info.data:
            return data  # the encoding is wrong: reported there
        body = decoded_body(data, info.data["encoding"])
        try:
            request_body(body)
        except ValidationError as error:
            raise ValueError(f"a request body ({_first(error)})") from None
        return data


class CaptureData(_Open):
    endpointInput: EndpointInput = Field(description="The request, as captured.")
    endpointOutput: Any = Field(
        None,
        description="The response, when captured (not for streamed responses). Read only for an OpenAI response's "
        "usage.prompt_tokens (the server's own count); never a reason to skip a record.",
    )


def _inference_time(value: str) -> str:
    try:
        stamp = datetime.fromisoformat(value)
        (stamp if stamp.tzinfo else stamp.replace(tzinfo=UTC)).timestamp()
    except (OverflowError, ValueError, OSError):
        raise ValueError("an ISO 8601 time (no zone: UTC)") from None
    return value


class EventMetadata(_Open):
    inferenceTime: Annotated[str, Field(min_length=10, max_length=64), AfterValidator(_inference_time)] = Field(
        description="When the request arrived: ISO 8601, UTC when no zone is written (the service stamps whole "
        "seconds, e.g. 2026-11-30T09:15:02Z; fractions are kept)."
    )
    eventId: Any = Field(None, description="The service's ID of the invocation (not read).")
    inferenceId: Any = Field(None, description="The caller's InvokeEndpoint InferenceId, when given (not read).")


class CaptureRecord(_Open):
    """One line of a SageMaker data capture file (JSON Lines), as optigate reads it: a request to replay."""

    captureData: CaptureData
    eventMetadata: EventMetadata
    eventVersion: Any = Field(None, description='"0" as the service writes it today; not read.')


_UNION_BRANCHES = frozenset({"str", "int", "float", "bool", "none"})


def _first(error: ValidationError) -> str:
    """The first problem as "json.path: expected …" (list items as [i], pydantic's own wording trimmed)."""
    first = error.errors(include_url=False)[0]
    # A part naming the member of a union pydantic tried is not a key of the record.
    path = json_path(p for p in first["loc"] if not (isinstance(p, str) and ("[" in p or p in _UNION_BRANCHES)))
    expected = str(first["msg"]).removeprefix("Value error, ").removeprefix("Input should be ")
    if first["type"] == "missing":
        expected = "this key (it is missing)"
    return f"{path or 'the record'}: {expected}"


class CaptureRecordError(ValueError):
    """A capture line that is not a request: where (``file:line`` and the JSON path), expected and found."""

    def __init__(self, where: str, location: str, expected: str):
        self.where, self.location, self.expected = where, location, expected
        super().__init__(f"{where}: {location + ': ' if location else ''}expected {expected}")


def read_record(line: bytes, where: str) -> CaptureRecord:
    """One capture line checked against :class:`CaptureRecord`; CaptureRecordError naming where and what."""
    try:
        data = json.loads(line.decode("utf-8"))
    except UnicodeDecodeError:
        raise CaptureRecordError(where, "", "UTF-8 text") from None
    except (ValueError, RecursionError):
        raise CaptureRecordError(where, "", "one JSON object per line") from None
    try:
        return CaptureRecord.model_validate(data)
    except ValidationError as error:
        location, _, expected = _first(error).partition(": ")
        raise CaptureRecordError(where, location, expected) from None


#: The capture record's JSON schema, in optigate's docs (`optigate schema --docs docs` writes it; --check compares).
CAPTURE_SCHEMA_NAME = "capture-record.schema.json"


def render_capture_schema() -> str:
    """The JSON schema of :class:`CaptureRecord`, the request body's kinds under ``$defs.RequestBody``."""
    schema = CaptureRecord.model_json_schema(mode="validation")
    body = TypeAdapter(RequestBody).json_schema(mode="validation", ref_template="#/$defs/{model}")
    schema["$defs"].update(body.pop("$defs", {}))
    schema["$defs"]["RequestBody"] = body
    data = schema["$defs"]["EndpointInput"]["properties"]["data"]
    data.update(contentMediaType="application/json", contentSchema={"$ref": "#/$defs/RequestBody"})
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = f"https://optigate.dev/schema/{CAPTURE_SCHEMA_NAME}"
    return json.dumps(schema, indent=2, sort_keys=True) + "\n"
