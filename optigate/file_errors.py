"""How the readers of files optigate reads back (bench results, merged fleet results, gate reports, capture records)
say what is wrong: the file, the JSON path, what was expected and what was found, in one line (issue 29)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any


class FileError(ValueError):
    """A file that cannot be read: where (file and JSON path), what was expected and what was found."""

    def __init__(self, file: str, location: str, expected: str, found: str):
        self.file, self.location, self.expected, self.found = file, location, expected, found
        where = f"{file}: {location}: " if location else f"{file}: "
        super().__init__(f"{where}expected {expected}, found {found}")


def shown(value: Any, limit: int = 60) -> str:
    """A value as the file has it (JSON), cut past `limit` characters with its length said."""
    try:
        text = json.dumps(value, allow_nan=True)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text)} characters)"


#: What each pydantic error type expected, in the readers' words.
EXPECTED = {
    "finite_number": "a finite number",
    "float_type": "a number",
    "int_type": "a whole number",
    "bool_type": "true or false",
    "string_type": "a string",
    "list_type": "a list",
    "tuple_type": "a list",
    "dict_type": "an object",
    "model_type": "an object",
}
_BOUNDS = {"greater_than_equal": "≥", "less_than_equal": "≤", "greater_than": ">", "less_than": "<"}


def expected_of(error: Mapping[str, Any], words: Mapping[str, str] | None = None) -> str:
    """What a pydantic error (one of ``ValidationError.errors()``) expected: `words` first (a reader's own), then
    bounds, lengths and literals, then EXPECTED, then pydantic's own message without its "Input should be"."""
    kind = str(error["type"])
    context = error.get("ctx") or {}
    if words and kind in words:
        return words[kind]
    if kind in _BOUNDS:
        limit = next(iter(context.values()), None)
        return f"a number {_BOUNDS[kind]} {limit:g}" if isinstance(limit, int | float) else "a number in range"
    if kind in ("too_long", "unexpected_positional_argument", "missing_positional_argument"):
        return "a list of the documented length"
    if kind == "literal_error":
        return f"one of {context.get('expected', '?')}"
    return EXPECTED.get(kind, str(error.get("msg", kind)).removeprefix("Input should be ").lower())


def load_json(text: str | bytes, file: str, error: type[FileError], what: str = "JSON") -> Any:
    """A file's JSON (any value), or `error` naming how it is not JSON (cut short, edited, not UTF-8, past limits)."""
    try:
        return json.loads(text)
    except UnicodeDecodeError as problem:
        raise error(file, "", f"UTF-8 {what}", f"undecodable bytes ({problem.reason})") from None
    except json.JSONDecodeError as problem:
        found = f"{problem.msg.lower()} (line {problem.lineno} column {problem.colno}: cut short or edited?)"
        raise error(file, "", what, found) from None
    except (ValueError, RecursionError) as problem:  # huge integers, nesting past Python's limit
        raise error(file, "", what, str(problem) or type(problem).__name__) from None


def check_version(data: dict[str, Any], file: str, error: type[FileError], version: int) -> None:
    """A file's `format_version`: absent (written before versioning) or `version`; a newer one named as such."""
    found = data.get("format_version")
    if found is None or (type(found) is int and found == version):  # `type`: true == 1 in Python
        return
    expected = f"format version {version}"
    if type(found) is int and found > version:
        raise error(
            file,
            "format_version",
            expected,
            f"format version {found}, written by a newer optigate (this one reads version {version})",
        )
    raise error(file, "format_version", expected, shown(found))
