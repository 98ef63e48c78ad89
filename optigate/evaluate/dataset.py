"""The evaluation dataset: JSONL records, read strictly, each problem named by file:line.

A record is one JSON object per line with `model_input` (or `prompt` / `question`) and
`target_output` (or `answer`), optional `id`, `category`, `task` (`qa` or `classification`) and
`prompt_tokens` (estimated from the text when absent). A reference may be a string, a number or
a list of acceptable answers (stored joined by `<OR>`); `0` and `""` are references like any other
(an empty reference expects an empty answer). Blank lines are skipped; anything else that is not
such a record raises `InputError` naming the file and line.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from optigate.evaluate.input_errors import InputError
from optigate.evaluate.scoring import estimate_tokens

PROMPT_KEYS = ("model_input", "prompt", "question")
TARGET_KEYS = ("target_output", "answer")
TASKS = ("qa", "classification")
ALTERNATIVES = "<OR>"


def _first_present(raw: dict[str, Any], keys: tuple[str, ...]) -> tuple[str | None, Any]:
    """The first of `keys` the record has with a non-null value (`0` and `""` count as present)."""
    for key in keys:
        if raw.get(key) is not None:
            return key, raw[key]
    return None, None


def _scalar_text(value: Any) -> str | None:
    """A string, number or boolean as text; None for anything else (objects, lists)."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool | int | float):
        return json.dumps(value)
    return None


def _kind(value: Any) -> str:
    return {dict: "an object", list: "an array", str: "a string", bool: "a boolean", type(None): "null"}.get(
        type(value), "a number"
    )


def parse_record(raw: Any, where: str, number: int) -> dict[str, Any]:
    """One dataset line, already JSON-decoded, as the record the job scores; `where` is file:line."""
    if not isinstance(raw, dict):
        raise InputError(f"{where}: expected a JSON object per line, found {_kind(raw)}")
    prompt_key, model_input = _first_present(raw, PROMPT_KEYS)
    target_key, target = _first_present(raw, TARGET_KEYS)
    missing = [
        name
        for name, key in (("model_input (or prompt/question)", prompt_key), ("target_output (or answer)", target_key))
        if key is None
    ]
    if missing:
        raise InputError(f"{where}: missing {' and '.join(missing)}")
    prompt_text = _scalar_text(model_input)
    if prompt_text is None:
        raise InputError(f"{where}: {prompt_key} must be text, found {_kind(model_input)}")
    if isinstance(target, list):
        answers = [_scalar_text(item) for item in target]
        if not answers or any(a is None for a in answers):
            raise InputError(f"{where}: {target_key} as a list must hold one or more strings or numbers")
        target_text = ALTERNATIVES.join(a for a in answers if a is not None)
    else:
        scalar = _scalar_text(target)
        if scalar is None:
            raise InputError(
                f"{where}: {target_key} must be a string, a number or a list of them, found {_kind(target)}"
            )
        target_text = scalar
    task = raw.get("task", "qa")
    if task not in TASKS:
        raise InputError(f"{where}: task must be one of {', '.join(TASKS)}, found {task!r}")
    tokens = raw.get("prompt_tokens")
    if tokens is not None and (isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 0):
        raise InputError(f"{where}: prompt_tokens must be a whole number of tokens, found {tokens!r}")
    category = raw.get("category")
    if category is not None and _scalar_text(category) is None:
        raise InputError(f"{where}: category must be text, found {_kind(category)}")
    record_id = raw.get("id", number)
    if _scalar_text(record_id) is None:
        raise InputError(f"{where}: id must be text or a number, found {_kind(record_id)}")
    return {
        "id": str(record_id),
        "line": number,
        "model_input": prompt_text,
        "target_output": target_text,
        "category": "" if category is None else str(category),
        "task": task,
        "prompt_tokens": tokens if tokens is not None else estimate_tokens(prompt_text),
    }


def dataset_file(path: str | Path) -> Path:
    """The JSONL file: `path` itself, or the one .jsonl file in a folder (a Processing input channel)."""
    path = Path(path)
    if path.is_dir():
        files = sorted(path.glob("*.jsonl"))
        if len(files) != 1:
            raise InputError(f"{path}: expected exactly one .jsonl file in the folder, found {len(files)}")
        return files[0]
    if not path.exists():
        raise InputError(f"{path}: no such file")
    return path


def load_dataset(path: str | Path) -> list[dict[str, Any]]:
    """The records of a JSONL dataset, in order; raises `InputError` naming file:line on the first problem."""
    path = dataset_file(path)
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as error:
        bad_line = path.read_bytes()[: error.start].count(b"\n") + 1
        raise InputError(f"{path}:{bad_line}: not UTF-8 text ({error.reason})") from None
    except OSError as error:
        raise InputError(f"{path}: cannot read ({error.strerror or error})") from None
    records: list[dict[str, Any]] = []
    first_line_of: dict[str, int] = {}
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        try:
            raw = json.loads(line)
        except json.JSONDecodeError as error:
            raise InputError(f"{where}: not valid JSON ({error.msg} at column {error.colno})") from None
        record = parse_record(raw, where, number)
        if record["id"] in first_line_of:
            raise InputError(f"{where}: id {record['id']!r} already used on line {first_line_of[record['id']]}")
        first_line_of[record["id"]] = number
        records.append(record)
    return records
