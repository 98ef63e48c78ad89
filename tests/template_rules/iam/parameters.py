"""A Task's `Parameters` evaluated offline, the way the call will be made: a name formatted at run time
(`States.Format('chat-dev-cand-{}', $.run.id)`) is evaluated with a sample run id (the run id is whatever the
definition's Pass states compute, `States.UUID()` evaluating to :data:`SAMPLE_UUID`). A value that cannot be
computed offline (a path into an API result, the context object) is :class:`Unresolved`, never guessed."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from optigate.rehearse.asl import iter_states

#: What `States.UUID()` evaluates to in the check: its first group is a run id (optigate.naming.RUN_ID_LENGTH).
SAMPLE_UUID: Final = "3f9a0c7e-5b1d-4e2a-9c8f-0123456789ab"


@dataclass(frozen=True)
class Unresolved:
    """A value the check cannot compute offline, and why."""

    reason: str

    def __str__(self) -> str:
        return f"<unresolved: {self.reason}>"


_TOKENS = re.compile(
    r"\s*(?:(?P<str>'(?:\\.|[^'\\])*')|(?P<fn>States\.\w+)\s*\(|(?P<num>-?\d+(?:\.\d+)?)"
    r"|(?P<path>\$\$?[^,()\s]*)|(?P<comma>,)|(?P<close>\)))"
)


def _tokens(expression: str) -> list[tuple[str, str]]:
    out, position = [], 0
    while position < len(expression.rstrip()):
        match = _TOKENS.match(expression, position)
        if not match:
            raise ValueError(f"cannot read {expression!r} at {position}")
        kind = match.lastgroup or ""
        out.append((kind, match.group(kind)))
        position = match.end()
    return out


def _lookup_path(path: str, known: Mapping[str, Any]) -> Any:
    if path.startswith("$$"):
        return Unresolved(f"{path} (context object)")
    value: Any = known
    for part in re.findall(r"[^.\[\]]+", path[1:]):
        if isinstance(value, Unresolved):
            return value
        if isinstance(value, dict) and part in value:
            value = value[part]
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            return Unresolved(f"{path} (state input)")
    return value


def _apply(function: str, args: list[Any]) -> Any:
    for arg in args:
        if isinstance(arg, Unresolved):
            return arg
    if function == "States.Format":
        text, parts = str(args[0]), [json.dumps(a) if isinstance(a, dict | list) else str(a) for a in args[1:]]
        pieces = re.split(r"(?<!\\)\{\}", text)
        if len(pieces) != len(parts) + 1:
            return Unresolved(f"States.Format with {len(parts)} arguments for {len(pieces) - 1} fields")
        out = pieces[0]
        for part, piece in zip(parts, pieces[1:], strict=True):
            out += part + piece
        return re.sub(r"\\(.)", r"\1", out)
    if function == "States.UUID":
        return SAMPLE_UUID
    if function == "States.StringSplit":
        return [p for p in re.split("[" + re.escape(str(args[1])) + "]", str(args[0])) if p]
    if function == "States.ArrayGetItem":
        return args[0][int(args[1])]
    if function == "States.Array":
        return list(args)
    if function == "States.MathAdd":
        return args[0] + args[1]
    return Unresolved(f"{function}(...)")


def evaluate(expression: str, known: Mapping[str, Any]) -> Any:
    """A `Key.$` value (a JSONPath or an intrinsic function) evaluated against what is known of the input."""
    tokens = _tokens(expression)
    position = 0

    def parse() -> Any:
        nonlocal position
        kind, text = tokens[position]
        position += 1
        if kind == "str":
            return text[1:-1].replace("\\'", "'")
        if kind == "num":
            return float(text) if "." in text else int(text)
        if kind == "path":
            return _lookup_path(text, known)
        if kind == "fn":
            args = []
            while tokens[position][0] != "close":
                args.append(parse())
                if tokens[position][0] == "comma":
                    position += 1
            position += 1
            return _apply(text, args)
        raise ValueError(f"unexpected {text!r} in {expression!r}")

    try:
        return parse()
    except (ValueError, IndexError, TypeError, KeyError) as exc:
        return Unresolved(f"{expression} ({exc})")


def evaluate_parameters(parameters: Any, known: Mapping[str, Any]) -> Any:
    """Parameters with each `Key.$` evaluated (the key loses its `.$`)."""
    if isinstance(parameters, list):
        return [evaluate_parameters(p, known) for p in parameters]
    if not isinstance(parameters, dict):
        return parameters
    out = {}
    for key, value in parameters.items():
        if key.endswith(".$") and isinstance(value, str):
            out[key[:-2]] = evaluate(value, known)
        else:
            out[key] = evaluate_parameters(value, known)
    return out


def _set_path(known: dict[str, Any], path: str, value: Any) -> None:
    parts = re.findall(r"[^.\[\]]+", path[1:])
    target = known
    for part in parts[:-1]:
        target = target.setdefault(part, {})
        if not isinstance(target, dict):
            return
    previous = target.get(parts[-1])
    if previous is not None and previous != value and isinstance(value, dict) and isinstance(previous, dict):
        merged = dict(previous)
        for k, v in value.items():
            merged[k] = v if k not in previous or previous[k] == v else Unresolved(f"{path}.{k}: set differently")
        target[parts[-1]] = merged
    elif previous is not None and previous != value:
        target[parts[-1]] = Unresolved(f"{path}: set differently on different paths")
    else:
        target[parts[-1]] = value


def known_input(definition: dict[str, Any]) -> dict[str, Any]:
    """What the Pass states of a definition put into the state (path-insensitive: a path two Pass
    states set differently is unresolved); e.g. `{"run": {"id": "3f9a0c7e"}}`."""
    known: dict[str, Any] = {}
    passes = [
        (s["ResultPath"], s["Parameters"])
        for _, s in iter_states(definition)
        if s.get("Type") == "Pass" and "Parameters" in s and isinstance(s.get("ResultPath"), str)
        if s["ResultPath"] != "$"
    ]
    for _ in range(3):  # values that read other Pass states' values settle within a few rounds
        round_known: dict[str, Any] = {}
        for result_path, parameters in passes:
            _set_path(round_known, result_path, evaluate_parameters(parameters, known))
        known = round_known
    return known
