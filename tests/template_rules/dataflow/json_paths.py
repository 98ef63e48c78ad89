"""JSONPaths as Step Functions reads them: parsed into segments, shown, and found inside intrinsic functions."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

WILDCARD = object()  # [*], .*, filters, slices, recursive descent, functions: the path is indefinite here
_TOKEN = re.compile(
    r"\.\.|\.\*|\[\*\]|\.([A-Za-z_][\w\-]*)(\(\))?|\[(\d+)\]|\['([^']*)'\]|\[\"([^\"]*)\"\]|\[[^\]]*\]|\.([^.\[]+)"
)


def parse_path(text: str) -> list[Any] | None:
    """`$.a.b[0]['c d'][*]` -> ["a", "b", 0, "c d", WILDCARD]; None for context-object (`$$`) paths."""
    if text.startswith("$$") or not text.startswith("$"):
        return None
    segments: list[Any] = []
    position = 1
    while position < len(text):
        match = _TOKEN.match(text, position)
        if match is None:
            segments.append(WILDCARD)  # something this parser does not know: stop checking there
            break
        position = match.end()
        name, call, index, quoted, double, other = match.groups()
        if call:
            segments.append(WILDCARD)
            break
        if name is not None:
            segments.append(name)
        elif index is not None:
            segments.append(int(index))
        elif quoted is not None or double is not None:
            segments.append(quoted if quoted is not None else double)
        elif other is not None:
            segments.append(other)
        else:
            segments.append(WILDCARD)
            break
    return segments


def show(path: Iterable[Any]) -> str:
    text = "$"
    for segment in path:
        text += f"[{segment}]" if isinstance(segment, int) else ("[*]" if segment is WILDCARD else f".{segment}")
    return text


_QUOTED = re.compile(r"'(?:[^'\\]|\\.)*'")
_PATH_ARGUMENT = re.compile(r"\$\$?(?:\.[A-Za-z0-9_\-]+|\.\*|\[[^\]]*\])*")


_ARRAY_GET_ITEM = re.compile(r"States\.ArrayGetItem\(\s*(\$[^,()\s]*)\s*,\s*(\d+)\s*\)")


def paths_in(value: str) -> list[str]:
    """The JSONPaths a `.$` value reads: itself, or every path argument of an intrinsic function
    (`States.ArrayGetItem($.a, 0)` counts as reading `$.a[0]`: an index past the end is taken to fail the state
    like a missing member; not verified against the service)."""
    if not value.startswith("States."):
        return [value]
    text = _ARRAY_GET_ITEM.sub(lambda m: f"{m.group(1)}[{m.group(2)}]", _QUOTED.sub("''", value))
    return [p for p in _PATH_ARGUMENT.findall(text) if p]
