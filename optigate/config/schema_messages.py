"""pydantic's validation errors in optigate's words: what is wrong at this key, and what to write instead.

No message of pydantic's own ("Input should be …", "String should match pattern …", "Extra inputs are not
permitted", "Field required") reaches a user: every error type a config model can raise is worded here with the
fix: a did-you-mean for keys and for values of a fixed set, where a key belongs when it is a key of another section
(a serving key dedented to the top level), the form a pattern asks for with an example.
"""

from __future__ import annotations

import difflib
import re
import types
import typing
from collections.abc import Iterator
from typing import Any

from pydantic import BaseModel
from pydantic_core import ErrorDetails

from optigate.config.instance_names import INSTANCE_TYPE_PATTERN, instance_type_problem
from optigate.config.models import KMS_KEY_ARN_PATTERN
from optigate.config.reader import clip, shown

# --------------------------------------------------------------------------- the models behind a location


def model_classes(annotation: Any) -> list[type[BaseModel]]:
    """The pydantic models an annotation can hold (through Optional, unions, Annotated, list, dict)."""
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return model_classes(typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType, list, dict):
        found: list[type[BaseModel]] = []
        for arg in typing.get_args(annotation):
            found += model_classes(arg)
        return found
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return []


def _tags_of(model: type[BaseModel]) -> tuple[Any, ...]:
    """The `method` values that select a member of a discriminated union."""
    method = model.model_fields.get("method")
    return typing.get_args(method.annotation) if method is not None else ()


def models_at(root: type[BaseModel], loc: tuple[Any, ...]) -> list[type[BaseModel]]:
    """The model classes that the location `loc` (a pydantic error loc) points into."""
    current = [root]
    for part in loc:
        if isinstance(part, int):
            continue
        following: list[type[BaseModel]] = []
        for model in current:
            if part in model.model_fields:
                following += model_classes(model.model_fields[part].annotation)
        if following:
            current = following
        else:  # a union tag in the loc (e.g. 'eagle3'): keep the member whose name or tag matches
            tagged = [m for m in current if m.__name__ == part or part in _tags_of(m)]
            current = tagged or current
    return current


def _sections(root: type[BaseModel]) -> Iterator[tuple[str, type[BaseModel]]]:
    """Every section of a file (dotted path, `[]` for a list's items) and the model it holds, breadth first."""
    queue: list[tuple[str, type[BaseModel]]] = [("", root)]
    seen: set[tuple[str, type[BaseModel]]] = set()
    while queue:
        path, model = queue.pop(0)
        if (path, model) in seen or path.count(".") > 6:
            continue
        seen.add((path, model))
        yield path, model
        for name, field in model.model_fields.items():
            origin = typing.get_origin(field.annotation)
            holds_list = origin is list or any(
                typing.get_origin(arg) is list for arg in typing.get_args(field.annotation)
            )
            child = f"{path}.{name}" if path else name
            for member in model_classes(field.annotation):
                queue.append((child + ("[]" if holds_list else ""), member))


def _sections_with_key(root: type[BaseModel], key: str) -> list[str]:
    """The sections (dotted paths) where `key` is a known key, nearest the top first."""
    found: list[str] = []
    for path, model in _sections(root):
        if key in model.model_fields and (path or "the top level") not in found:
            found.append(path or "the top level")
    return found


def _section_name(root: type[BaseModel], loc: tuple[Any, ...]) -> str:
    """A section's location as the reference docs spell it (`serving.autoscaling`, `adapters[]`), with the method
    of a discriminated union's member (`serving.speculative_decoding (method ngram)`)."""
    text, method = "", ""
    current = [root]
    for part in loc:
        if isinstance(part, int):
            text += "[]"
            continue
        following = [
            m
            for model in current
            if part in model.model_fields
            for m in model_classes(model.model_fields[part].annotation)
        ]
        if following:
            text += f".{part}" if text else str(part)
            current, method = following, ""
        elif isinstance(part, str) and not part[:1].isupper():
            method = f" (method {part})"  # a union tag; a class name (a union member) says nothing to a user
    return f"{text}{method}" if text else "the top level"


def _in(section: str) -> str:
    return "at the top level" if section == "the top level" else f"in {section}"


# --------------------------------------------------------------------------- closest spellings


def closest(value: str, options: list[str], cutoff: float = 0.6) -> str | None:
    """The option closest to `value`, ignoring case, hyphens and underscores, if any is close enough."""

    def norm(text: str) -> str:
        return text.lower().replace("-", "_")

    by_norm = {norm(option): option for option in options}
    if norm(value) in by_norm:
        return by_norm[norm(value)]
    close = difflib.get_close_matches(norm(value), list(by_norm), n=1, cutoff=cutoff)
    return by_norm[close[0]] if close else None


def _unknown_key(key: str, here: tuple[Any, ...], root: type[BaseModel]) -> str:
    allowed = sorted({name for model in models_at(root, here) for name in model.model_fields})
    section = _section_name(root, here)
    unknown = f"unknown key '{clip(key)}' {_in(section)}"
    if len(key) > 200:  # no close match is meant for a key this long
        return f"{unknown}; allowed keys: {', '.join(allowed)}"
    near = closest(key, allowed)
    if near is not None:
        return f"{unknown}; did you mean '{near}'?"
    if " (method " in section:  # a key of another method of the same union: name the methods that take it
        members = models_at(root, tuple(part for part in here if part != here[-1]))
        methods = [str(tag) for member in members if key in member.model_fields for tag in _tags_of(member)]
        if methods:
            return f"{unknown}: it is a key of method {', '.join(methods)}; allowed here: {', '.join(allowed)}"
    elsewhere = [path for path in _sections_with_key(root, key) if path != section.split(" (method")[0]]
    if elsewhere:
        where = " or ".join(f"`{path}`" for path in elsewhere[:3])
        return f"{unknown}: it belongs under {where}; move it there (allowed here: {', '.join(allowed)})"
    return f"{unknown}; allowed keys: {', '.join(allowed)}"


# --------------------------------------------------------------------------- patterns

# Each pattern a config model uses, in words with an example (checked complete by tests/config/test_messages.py).
PATTERN_FORMS: dict[str, str] = {
    INSTANCE_TYPE_PATTERN: "a SageMaker instance type, ml.<family>.<size> (e.g. ml.g6e.2xlarge)",
    r"^[a-z0-9]([a-z0-9-]{0,30}[a-z0-9])?$": (
        "a name of lowercase letters, digits and hyphens, 1-32 characters, starting and ending with a letter or digit"
    ),
    r"^[\w.\-]+/[\w.\-]+$": "a Hugging Face model id, owner/name (e.g. meta-llama/Llama-3.1-8B-Instruct)",
    r"^\d+\.\d+\.\d+$": "a version of three numbers (e.g. 0.33.0)",
    r"^\d{12}$": 'an AWS account ID of 12 digits, quoted (e.g. "111111111111")',
    r"^[a-z]{2}(-gov)?-[a-z]+-\d$": "an AWS region (e.g. us-east-1)",
    r"^arn:aws[a-z-]*:(codestar-connections|codeconnections):[a-z0-9-]+:\d{12}:connection/[\w-]+$": (
        "a CodeConnections connection ARN (arn:aws:codeconnections:<region>:<account>:connection/<id>)"
    ),
    r"^[a-zA-Z0-9*.+/-]{1,256}$": "a content type (e.g. application/json)",
    KMS_KEY_ARN_PATTERN: (
        "a KMS key ARN, arn:aws:kms:<region>:<account>:key/<key id> (not an alias; `{region}` as the region only "
        "for a multi-Region key, key/mrk-...)"
    ),
}


def _name_suggestion(value: str) -> str | None:
    """A team or adapter name the name pattern accepts, made from what was written (`Chat Bot` -> `chat-bot`)."""
    slug = re.sub(r"[^a-z0-9]+", "-", value.lower()).strip("-")[:32].strip("-")
    return slug or None


def _pattern_message(error: ErrorDetails) -> str:
    pattern = str(error.get("ctx", {}).get("pattern", ""))
    value = error["input"]
    if "s3://" in pattern:
        return f"not an S3 URI (got {shown(value)}); expected s3://bucket/key"
    if pattern == INSTANCE_TYPE_PATTERN:
        return instance_type_problem(str(value)) or f"not a SageMaker instance type (got {shown(value)})"
    form = PATTERN_FORMS.get(pattern, "another form (see docs/configuration.md)")
    hint = ""
    if pattern.startswith("^[a-z0-9]("):
        suggestion = _name_suggestion(str(value))
        hint = f"; did you mean '{suggestion}'?" if suggestion and suggestion != value else ""
    return f"{shown(value)} is not {form}{hint}"


# --------------------------------------------------------------------------- values of a fixed set

_QUOTED = re.compile(r"'((?:[^'\\]|\\.)*)'|(-?\d+(?:\.\d+)?)|\b(True|False|None)\b")


def _choices(expected: str) -> list[str]:
    """The values pydantic lists in "'a', 'b' or 'c'" (or "8, 16 or 32")."""
    return [quoted or number or word for quoted, number, word in _QUOTED.findall(expected)]


def _choice_message(value: Any, choices: list[str], what: str = "value") -> str:
    listed = ", ".join(choices)
    if value is None:
        return f"has no value; write one of {listed}"
    if isinstance(value, dict | list):
        return f"expected one of {listed} (got {_got(value)})"
    near = closest(value, choices) if isinstance(value, str) else None  # a number near another is no typo
    hint = f"did you mean '{near}'? " if near is not None and near != str(value) else ""
    return f"{shown(value)} is not a known {what}; {hint}expected one of {listed}"


# --------------------------------------------------------------------------- types and bounds

_EXPECTED_TYPES = {
    "int": "a whole number",
    "float": "a number",
    "bool": "true or false",
    "string": "text",
    "list": "a list (`[a, b]` or one `- item` per line)",
    "dict": "a mapping (keys indented under it)",
    "set": "a list",
    "tuple": "a list",
}


def expected_type(error: ErrorDetails, root: type[BaseModel]) -> str | None:
    """What a type error asked for, in words (None when the error is not about the value's type)."""
    kind = error["type"]
    if kind in ("model_type", "model_attributes_type", "dataclass_type") or (
        kind == "dict_type" and error["loc"] and isinstance(error["loc"][-1], str) and error["loc"][-1][:1].isupper()
    ):
        keys = sorted({name for model in models_at(root, error["loc"]) for name in model.model_fields})
        shown_keys = ", ".join(keys[:6]) + (", …" if len(keys) > 6 else "")
        return f"a section of keys indented under it ({shown_keys})" if keys else _EXPECTED_TYPES["dict"]
    if kind == "int_from_float":
        return "a whole number"
    if kind.startswith("string_") and kind != "string_type":
        return None
    for prefix, words in _EXPECTED_TYPES.items():
        if kind.startswith(prefix + "_") and kind.endswith(("_type", "_parsing", "_parsing_size")):
            return words
    return None


def _got(value: Any) -> str:
    if value is None:
        return "nothing (the key has no value)"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return shown(value)


def _bound_message(kind: str, error: ErrorDetails) -> str:
    ctx = error.get("ctx", {})
    words = {
        "greater_than": ("more than", "gt"),
        "greater_than_equal": ("at least", "ge"),
        "less_than": ("less than", "lt"),
        "less_than_equal": ("at most", "le"),
    }[kind]
    return f"must be {words[0]} {ctx.get(words[1])} (got {shown(error['input'])})"


def _length_message(kind: str, error: ErrorDetails) -> str:
    ctx = error.get("ctx", {})
    unit = "character(s)" if kind.startswith("string") else "item(s)"
    if kind.endswith("too_short"):
        return f"needs at least {ctx.get('min_length')} {unit}"
    return f"allows at most {ctx.get('max_length')} {unit}"


# --------------------------------------------------------------------------- one error


def message(error: ErrorDetails, root: type[BaseModel]) -> str:
    """One pydantic error in optigate's words, with what to do."""
    kind = error["type"]
    loc = tuple(error["loc"])
    ctx = error.get("ctx", {})
    if kind == "extra_forbidden":
        return _unknown_key(str(loc[-1]), loc[:-1], root)
    if kind == "missing":
        owners = models_at(root, loc[:-1])
        field = next((m.model_fields[loc[-1]] for m in owners if loc[-1] in m.model_fields), None)
        about = f" ({clip(field.description, 120)})" if field is not None and field.description else ""
        return f"required key '{loc[-1]}' is missing; add it{about}"
    if kind == "union_tag_invalid":
        return _choice_message(ctx.get("tag"), _choices(str(ctx.get("expected_tags", ""))), "method")
    if kind == "union_tag_not_found":
        return f"needs a '{ctx.get('discriminator', 'method').strip(chr(39))}' key saying which kind it is"
    if kind in ("literal_error", "enum"):
        return _choice_message(error["input"], _choices(str(ctx.get("expected", ""))))
    if kind == "string_pattern_mismatch":
        return _pattern_message(error)
    if kind in ("greater_than", "greater_than_equal", "less_than", "less_than_equal"):
        return _bound_message(kind, error)
    if kind in ("too_short", "too_long", "string_too_short", "string_too_long"):
        return _length_message(kind, error)
    if kind in ("value_error", "assertion_error"):
        text = str(ctx.get("error", "")) or error["msg"]
        return text.removeprefix("Value error, ").removeprefix("Assertion failed, ")
    if kind == "finite_number":
        return f"{shown(error['input'])} is not a finite number; write a number"
    expected = expected_type(error, root)
    if expected is not None:
        if error["input"] is None:
            return f"has no value; write {expected}, or remove the key"
        quote = "; quote it to make it text" if expected == "text" and isinstance(error["input"], int | float) else ""
        return f"expected {expected} (got {_got(error['input'])}){quote}"
    # An error type no config model raises today: still no pydantic phrasing, and where to look.
    return f"not a valid value here (got {_got(error['input'])}); see docs/configuration.md for this key"
