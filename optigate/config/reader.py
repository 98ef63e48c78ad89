# Over 400 lines: one safe YAML reader; every limit it enforces is checked in one pass over one event stream.
"""Read a config file safely: bounded, core-schema YAML with the line of every key and list item.

A config file is written by hand, by every product team, so the reader takes any bytes and either
returns the data or raises `ConfigError` whose issues name the file and the line; it never raises
anything else and never runs long:

- at most `MAX_BYTES` (256 KiB; the example files are about 2 KiB), refused with the size;
- UTF-8, a bad byte reported with its line and column; characters YAML does not allow (`\\x00`,
  `\\x7f`, other C0/C1 controls) reported with their line;
- YAML's core types only: an explicit tag other than `!!str`, `!!int`, `!!float`, `!!bool`,
  `!!null`, `!!map` and `!!seq` (`!!python/name:…`, `!secret`, `!!binary`, `!!timestamp`, `!!set`)
  is refused, and a core tag must fit its value (`!!int 8k` is refused). A plain date stays text,
  as in the YAML 1.2 core schema;
- no aliases (`*name`): config files do not need them, and refusing them rules out billion-laughs
  expansion and recursive aliases (`x: &a [*a]`);
- nesting at most `MAX_DEPTH` levels and at most `MAX_NODES` values, complex keys (`? [a, b]`)
  refused, integers of more than 4,300 digits and numbers that are not finite (`1e400`, `.inf`,
  `.nan`) refused;
- a value quoted in a message is cut to `SHOWN_CHARS` characters (`shown`).

The tree is built from PyYAML's event stream without recursion, so nothing depends on Python's
recursion limit; duplicate keys are errors, as YAML would silently keep the last one.
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

PathT = tuple[str | int, ...]

MAX_BYTES = 256 * 1024
MAX_DEPTH = 64
MAX_NODES = 10_000  # the example files hold about 60; parsing 10,000 takes about 0.2 s
MAX_INT_DIGITS = 4300  # Python's default int <-> str conversion limit (sys.get_int_max_str_digits)
_INT_LIMIT = 10**MAX_INT_DIGITS  # repr() of a smaller integer works
SHOWN_CHARS = 80
MAX_MESSAGE_CHARS = 1000  # a backstop for messages of any layer


def clip(text: str, limit: int = SHOWN_CHARS) -> str:
    """`text`, cut to about `limit` characters with the number left out."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… ({len(text) - limit:,} more characters)"


def shown(value: Any) -> str:
    """A value as quoted in a message (its repr), cut to about `SHOWN_CHARS` characters."""
    if isinstance(value, str) and len(value) > SHOWN_CHARS:
        return repr(value[:SHOWN_CHARS]) + f"… ({len(value) - SHOWN_CHARS:,} more characters)"
    if isinstance(value, int) and abs(value) >= _INT_LIMIT:  # repr() would raise ValueError
        return f"an integer of about {int(value.bit_length() * 0.30103):,} digits"
    return clip(repr(value))


def format_path(path: PathT) -> str:
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{clip(part)}" if text else clip(part))
    return text


@dataclass(frozen=True)
class ConfigIssue:
    file: str
    line: int | None
    path: str
    message: str
    rule: str | None = None  # the ID of the rule that reports it (optigate.config.rule_registry), if one does

    def __post_init__(self) -> None:
        # Whatever a layer quotes, a message stays readable (a 200 KB value is never echoed whole) and one line (a
        # key or value may hold a line break: `? "a\nb"`), shown escaped.
        for name in ("path", "message"):
            text = getattr(self, name).replace("\r", "\\r").replace("\n", "\\n")
            object.__setattr__(self, name, text)
            if len(text) > MAX_MESSAGE_CHARS:
                cut = f"{text[: MAX_MESSAGE_CHARS - 200]} …({len(text) - MAX_MESSAGE_CHARS:,} characters cut)… "
                object.__setattr__(self, name, cut + text[-200:])

    def __str__(self) -> str:
        return self.text()

    def text(self, *, with_rule: bool = False) -> str:
        """`file:line path: message`; `with_rule` adds the rule's ID before the colon (`... path [OG307]: ...`),
        so that the file and line stay first for editors."""
        where = f"{self.file}:{self.line}" if self.line else self.file
        where += f" {self.path}" if self.path else ""
        return f"{where} [{self.rule}]: {self.message}" if with_rule and self.rule else f"{where}: {self.message}"


class ConfigError(Exception):
    """One or more problems in config files; `str()` lists them one per line. `held_back`: lines (not problems) naming
    the checks a key with a schema problem held back in a file (optigate.config.valid_part), one per file."""

    def __init__(self, issues: list[ConfigIssue], held_back: list[ConfigIssue] | None = None):
        self.issues = issues
        self.held_back = list(held_back or [])
        super().__init__("\n".join(str(issue) for issue in issues))


@dataclass
class YamlDocument:
    file: str
    data: Any
    lines: dict[PathT, int] = field(default_factory=dict)

    def line_of(self, path: PathT) -> int | None:
        """The line of `path`, or of its nearest ancestor that exists in the file."""
        for cut in range(len(path), -1, -1):
            if path[:cut] in self.lines:
                return self.lines[path[:cut]]
        return None


def display_name(path: Path) -> str:
    try:
        return os.path.relpath(path)
    except ValueError:  # a different drive on Windows
        return str(path)


def read_yaml(path: Path) -> YamlDocument:
    """Read and parse a config file (see the module docstring); raise ConfigError on any problem."""
    name = display_name(path)
    try:
        with open(path, "rb") as stream:
            data = stream.read(MAX_BYTES + 1)
            if len(data) > MAX_BYTES:
                size = max(os.fstat(stream.fileno()).st_size, len(data))
                raise ConfigError(
                    [
                        ConfigIssue(
                            name,
                            1,
                            "",
                            f"the file is {size:,} bytes; a config file may be at most {MAX_BYTES:,} bytes "
                            f"({MAX_BYTES // 1024} KiB)",
                        )
                    ]
                )
    except OSError as error:
        raise ConfigError([ConfigIssue(name, None, "", f"cannot read: {error.strerror or error}")]) from None
    return parse_yaml(data, name)


def parse_yaml(data: bytes | str, name: str) -> YamlDocument:
    """Parse config text (bytes are decoded as UTF-8) keeping the line of every key and list item."""
    text = _decode(data, name) if isinstance(data, bytes) else data
    _check_characters(text, name)
    return _Builder(name).build(text)


# --------------------------------------------------------------------------- bytes and characters


def _decode(data: bytes, name: str) -> str:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + 1
        column = error.start - (data.rfind(b"\n", 0, error.start) + 1) + 1
        bad = data[error.start : error.end].hex(" ")
        raise ConfigError(
            [
                ConfigIssue(
                    name,
                    line,
                    "",
                    f"not UTF-8: byte(s) {bad} at column {column} ({error.reason}); save the file as UTF-8",
                )
            ]
        ) from None
    return text.removeprefix("\ufeff")


# The characters YAML 1.1/1.2 allows in a stream (PyYAML's Reader refuses the others).
_NOT_PRINTABLE = re.compile("[^\x09\x0a\x0d\x20-\x7e\x85\xa0-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
_MAX_CHARACTER_ISSUES = 10


def _check_characters(text: str, name: str) -> None:
    issues: list[ConfigIssue] = []
    for match in _NOT_PRINTABLE.finditer(text):
        start = match.start()
        line = text.count("\n", 0, start) + 1
        column = start - (text.rfind("\n", 0, start) + 1) + 1
        code = ord(match.group())
        issues.append(
            ConfigIssue(
                name,
                line,
                "",
                f"control character U+{code:04X} at column {column} is not allowed in YAML; remove it "
                "(write it as an escape such as \\x00 inside a double-quoted string if it is meant)",
            )
        )
        if len(issues) == _MAX_CHARACTER_ISSUES:
            break
    if issues:
        raise ConfigError(issues)


# --------------------------------------------------------------------------- tags and scalars

_CORE = "tag:yaml.org,2002:"
_STR, _INT, _FLOAT, _BOOL, _NULL = (f"{_CORE}{kind}" for kind in ("str", "int", "float", "bool", "null"))
_MAP, _SEQ = f"{_CORE}map", f"{_CORE}seq"
_SCALAR_TAGS = {_STR, _INT, _FLOAT, _BOOL, _NULL}
_ALLOWED = "!!str, !!int, !!float, !!bool, !!null, !!map, !!seq"


def _implicit_patterns() -> dict[str, list[re.Pattern[str]]]:
    """The plain-scalar patterns of each core tag, as PyYAML's SafeLoader resolves them."""
    patterns: dict[str, list[re.Pattern[str]]] = {}
    for resolvers in yaml.SafeLoader.yaml_implicit_resolvers.values():
        for tag, pattern in resolvers:
            if pattern not in patterns.setdefault(tag, []):
                patterns[tag].append(pattern)
    return patterns


_PATTERNS = _implicit_patterns()
# YAML 1.2 core schema floats; YAML 1.1 (PyYAML) needs a dot, so `1e400` is text there but a number to
# pydantic and YAML 1.2 tools: such a plain scalar is checked as a number (it stays text if finite).
_NUMBER_1_2 = re.compile(r"[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)[eE][-+]?[0-9]+")
_RESOLVER = yaml.resolver.Resolver()
_CONSTRUCTOR = yaml.constructor.SafeConstructor()


def _short_tag(tag: str) -> str:
    return clip("!!" + tag.removeprefix(_CORE) if tag.startswith(_CORE) else tag)


def _fits(tag: str, value: str) -> bool:
    """Whether an explicitly tagged scalar is valid for its core tag (the forms the plain scalar takes)."""
    if tag == _STR:
        return True
    if tag == _FLOAT and _NUMBER_1_2.fullmatch(value):  # 1e3 (YAML 1.2); 1 and 1.5 match below
        return True
    candidates = _PATTERNS.get(tag, []) + (_PATTERNS.get(_INT, []) if tag == _FLOAT else [])  # 1 is a float
    if tag == _NULL and value == "":
        return True
    return any(pattern.fullmatch(value) for pattern in candidates)


def _line(event: yaml.Event) -> int:
    return event.start_mark.line + 1 if event.start_mark is not None else 1


class _Refused(Exception):
    """A problem after which the rest of the file cannot be read."""

    def __init__(self, issue: ConfigIssue):
        self.issue = issue


@dataclass
class _Frame:
    container: dict[str, Any] | list[Any]
    path: PathT
    key: str | None = None  # a mapping's key waiting for its value
    key_line: int = 0


class _Builder:
    """Builds the data and its lines from PyYAML's events with an explicit stack (no recursion)."""

    def __init__(self, name: str):
        self.name = name
        self.document = YamlDocument(name, None, {(): 1})
        self.stack: list[_Frame] = []
        self.issues: list[ConfigIssue] = []  # problems after which reading goes on
        self.nodes = 0
        self.documents = 0

    def build(self, text: str) -> YamlDocument:
        try:
            for event in yaml.parse(text, Loader=yaml.SafeLoader):
                self._event(event)
        except _Refused as refused:
            raise ConfigError([*self.issues, refused.issue]) from None
        except yaml.MarkedYAMLError as error:
            mark = error.problem_mark or error.context_mark
            line = mark.line + 1 if mark else 1
            problem = clip(str(error.problem or error.context or "cannot be parsed"), 200)
            raise ConfigError(
                [*self.issues, ConfigIssue(self.name, line, self._path(), f"not valid YAML: {problem}")]
            ) from None
        except yaml.YAMLError as error:  # e.g. a ReaderError; the characters are checked before
            line = text.count("\n", 0, getattr(error, "position", 0) or 0) + 1
            message = clip(str(error), 200)
            raise ConfigError(
                [*self.issues, ConfigIssue(self.name, line, self._path(), f"not valid YAML: {message}")]
            ) from None
        if self.issues:
            raise ConfigError(self.issues)
        return self.document

    # ---- helpers

    def _path(self) -> str:
        if not self.stack:
            return ""
        top = self.stack[-1]
        if isinstance(top.container, list):
            return format_path((*top.path, len(top.container)))
        return format_path((*top.path, top.key) if top.key is not None else top.path)

    def _issue(self, line: int, message: str, path: PathT | None = None) -> ConfigIssue:
        return ConfigIssue(self.name, line, format_path(path) if path is not None else self._path(), message)

    def _refuse(self, event: yaml.Event, message: str) -> _Refused:
        return _Refused(self._issue(_line(event), message))

    # ---- events

    def _event(self, event: yaml.Event) -> None:
        if isinstance(event, yaml.DocumentStartEvent):
            self.documents += 1
            if self.documents > 1:
                raise self._refuse(event, "more than one YAML document (a second '---'); a config file holds one")
        elif isinstance(event, yaml.AliasEvent):
            raise self._refuse(
                event,
                f"aliases (*{clip(str(event.anchor))}) are not supported in config files; write the value out",
            )
        elif isinstance(event, yaml.ScalarEvent):
            if self._awaiting_key():
                self._check_key(event)
                self._place(event.value, event)
            else:
                self._place(self._scalar(event), event)
        elif isinstance(event, yaml.MappingStartEvent | yaml.SequenceStartEvent):
            self._start(event)
        elif isinstance(event, yaml.MappingEndEvent | yaml.SequenceEndEvent):
            frame = self.stack.pop()
            if frame.key is not None:  # cannot happen with PyYAML's parser; kept for safety
                self._value(frame, None)

    def _awaiting_key(self) -> bool:
        return bool(self.stack) and isinstance(self.stack[-1].container, dict) and self.stack[-1].key is None

    def _count(self, event: yaml.Event) -> None:
        self.nodes += 1
        if self.nodes > MAX_NODES:
            raise self._refuse(event, f"more than {MAX_NODES:,} values; a config file holds far fewer")

    def _start(self, event: yaml.MappingStartEvent | yaml.SequenceStartEvent) -> None:
        self._count(event)
        is_mapping = isinstance(event, yaml.MappingStartEvent)
        if event.tag not in (None, "!", _MAP if is_mapping else _SEQ):
            raise self._refuse(event, self._tag_message(event.tag))
        if self._awaiting_key():
            raise self._refuse(
                event,
                "a complex key (a list or mapping used as a key, `? [a, b]`) is not supported; keys are plain text",
            )
        if len(self.stack) >= MAX_DEPTH:
            raise self._refuse(event, f"nested more than {MAX_DEPTH} levels deep; config files are far flatter")
        container: dict[str, Any] | list[Any] = {} if is_mapping else []
        path = self._place(container, event)
        self.stack.append(_Frame(container, path))

    def _place(self, value: Any, event: yaml.Event) -> PathT:
        """Put a value where the stack says; returns its path."""
        line = _line(event)
        if not self.stack:
            self.document.data = value
            return ()
        frame = self.stack[-1]
        if isinstance(frame.container, list):
            path = (*frame.path, len(frame.container))
            self.document.lines[path] = line
            frame.container.append(value)
            return path
        if frame.key is None:  # a key (a scalar; complex keys are refused in _start)
            frame.key, frame.key_line = str(value), line
            return frame.path
        return self._value(frame, value)

    def _value(self, frame: _Frame, value: Any) -> PathT:
        assert isinstance(frame.container, dict) and frame.key is not None
        key, frame.key = frame.key, None
        path = (*frame.path, key)
        if key in frame.container:
            self.issues.append(
                self._issue(frame.key_line, "duplicate key; YAML would silently keep the last one", path)
            )
        self.document.lines[path] = frame.key_line
        frame.container[key] = value
        return path

    def _tag_message(self, tag: str) -> str:
        return (
            f"explicit tag {_short_tag(tag)} is not allowed in config files; only YAML's core types ({_ALLOWED})"
            if tag
            else "an empty tag is not allowed"
        )

    def _check_key(self, event: yaml.ScalarEvent) -> None:
        """Check a key's tag; a key is kept as its text, as written."""
        self._count(event)
        if event.tag not in (None, "!") and event.tag not in _SCALAR_TAGS:
            raise self._refuse(event, self._tag_message(event.tag))

    def _scalar(self, event: yaml.ScalarEvent) -> Any:
        self._count(event)
        value: str = event.value
        line = _line(event)
        tag = event.tag
        if tag in (None, "!"):
            tag = _RESOLVER.resolve(yaml.ScalarNode, value, event.implicit)
            if tag == _STR and event.implicit[0] and _NUMBER_1_2.fullmatch(value) and not math.isfinite(float(value)):
                self.issues.append(self._issue(line, f"{shown(value)} overflows; a number must be finite"))
                return None
            if tag not in _SCALAR_TAGS:  # timestamp, merge (<<), value (=): text in the core schema
                return value
        elif tag not in _SCALAR_TAGS:
            raise self._refuse(event, self._tag_message(tag))
        elif not _fits(tag, value):
            self.issues.append(self._issue(line, f"{shown(value)} is not a valid {_short_tag(tag)}"))
            return value
        if tag == _STR:
            return value
        if tag == _INT:
            digits = sum(character.isalnum() for character in value)
            if digits > MAX_INT_DIGITS:
                self.issues.append(
                    self._issue(line, f"an integer of {digits:,} digits; at most {MAX_INT_DIGITS:,} can be read")
                )
                return None
        node = yaml.ScalarNode(tag, value, style=event.style)
        try:
            result = _CONSTRUCTOR.yaml_constructors[tag](_CONSTRUCTOR, node)
        except (ValueError, OverflowError, KeyError, IndexError, TypeError, yaml.YAMLError):
            self.issues.append(self._issue(line, f"{shown(value)} is not a valid {_short_tag(tag)}"))
            return value
        if isinstance(result, int) and abs(result) >= _INT_LIMIT:  # 0x and 0b forms of fewer digits
            self.issues.append(self._issue(line, f"{shown(result)}; at most {MAX_INT_DIGITS:,} digits can be read"))
            return None
        if isinstance(result, float) and not math.isfinite(result):
            what = "not a number" if math.isnan(result) else "infinite"
            self.issues.append(
                self._issue(line, f"{shown(value)} is {what}; a config value must be a finite number (or quoted text)")
            )
            return None
        return result
