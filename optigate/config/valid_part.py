"""A config file's valid part: its model validated with the keys its schema problems name left out, and which checks
read those keys.

`optigate validate` reports every problem of a file in one run: a schema problem (a wrong type, a value out of range)
does not hide what the rules find in the rest of the file. Each key a schema problem names is left out (its parent
too when the model requires it; a list item when one of its required keys is broken), so the model takes its default
there, and the rules run on the rest (`ValidPart.judge`). A check that reads a left-out key would judge a value the
user did not write: each model object holding one records the reads of it, and of its whole content (a dump, a copy, a
comparison), and the problems a check made after its first such read are dropped (`Problem.made`). What is reported
is only what the file itself says; the checks held back are named in one line (`held_back_issue`).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Collection, Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ValidationError

from optigate.config.reader import ConfigIssue, PathT, YamlDocument, format_path
from optigate.config.rule_registry import Problem, problems_made

ModelT = TypeVar("ModelT", bound=BaseModel)

#: Each round leaves out what the last validation named, or the parent of a required key it left out.
MAX_ROUNDS = 12


# --------------------------------------------------------------------------- pydantic locations


def data_path(data: Any, loc: tuple[Any, ...]) -> tuple[PathT, bool]:
    """Map a pydantic loc to the YAML path, dropping union-branch names pydantic inserts.

    Returns the path and whether the error belongs to a union branch the data did not take
    (e.g. the `str` branch of `architecture` when the user gave a mapping), which is noise.
    """
    path: list[str | int] = []
    node = data
    for index, part in enumerate(loc):
        if (isinstance(node, dict) and part in node) or (
            isinstance(node, list) and isinstance(part, int) and part < len(node)
        ):
            path.append(part)
            node = node[part]
        elif isinstance(node, dict) and node.get("method") == part:
            continue  # discriminated-union tag
        elif part in ("str", "int", "float", "bool"):
            return tuple(path), not isinstance(node, (str, int, float, bool)) or isinstance(node, dict)
        elif isinstance(part, str) and part[:1].isupper():
            if index == len(loc) - 1:
                continue  # the model member of a union a scalar did not fit: reported at the value's own path
            if not isinstance(node, dict):
                return tuple(path), True  # a model branch for a scalar value
            continue
        else:
            path.append(part)
            node = None
    return tuple(path), False


# --------------------------------------------------------------------------- leaving keys out


def _order(path: PathT) -> tuple[tuple[int, int, str], ...]:
    return tuple((0, part, "") if isinstance(part, int) else (1, 0, str(part)) for part in path)


def _outermost(paths: Iterable[PathT]) -> list[PathT]:
    """The paths not under another of them."""
    kept: list[PathT] = []
    for path in sorted(set(paths), key=len):
        if not any(path[: len(outer)] == outer for outer in kept):
            kept.append(path)
    return kept


def _without(data: Any, left_out: Collection[PathT]) -> Any:
    """A copy of `data` without the paths (in `data`'s own indices); a list's later items first, so each index holds."""
    pruned = copy.deepcopy(data)
    for path in sorted(left_out, key=_order, reverse=True):
        parent = pruned
        for part in path[:-1]:
            parent = parent[part]
        if isinstance(parent, list):
            del parent[path[-1]]  # type: ignore[arg-type]
        else:
            parent.pop(path[-1], None)
    return pruned


def _in_file(data: Any, left_out: Collection[PathT], path: PathT) -> PathT:
    """A path in the pruned data, in the file's own indices (a list item after one left out moved up)."""
    node: Any = data
    found: list[str | int] = []
    for part in path:
        if isinstance(node, list) and isinstance(part, int):
            kept = [index for index in range(len(node)) if (*found, index) not in left_out]
            index = kept[part] if 0 <= part < len(kept) else part
            found.append(index)
            node = node[index] if 0 <= index < len(node) else None
        elif isinstance(node, dict) and part in node:
            found.append(part)
            node = node[part]
        else:
            found.append(part)
            node = None
    return tuple(found)


def _left_out(data: Any, model: type[ModelT]) -> tuple[ModelT | None, list[PathT], PathT | None]:
    """The model without the keys its validation refuses: (model, the paths left out, None), or (None, ..., the
    top-level key it cannot be made without)."""
    left_out: list[PathT] = []
    for _ in range(MAX_ROUNDS):
        pruned = _without(data, left_out)
        try:
            return model.model_validate(pruned), left_out, None
        except ValidationError as error:
            found = []
            for item in error.errors(include_url=False):
                where, _ = data_path(pruned, item["loc"])
                where = _in_file(data, set(left_out), where)
                path = where[:-1] if item["type"] == "missing" else where  # a required key: its parent goes
                if not path:
                    return None, left_out, where[:1]
                found.append(path)
        new = [path for path in found if not any(path[: len(done)] == done for done in left_out)]
        if not new:
            return None, left_out, (found or [()])[0][:1]
        left_out = _outermost([*left_out, *new])
    return None, left_out, (left_out or [()])[0][:1]


# --------------------------------------------------------------------------- reads of what was left out


#: A key left out: its file and its path there.
Key = tuple[str, PathT]


@dataclass
class _Watch:
    """What reading one model object's attributes touches of the keys left out."""

    fields: dict[str, set[Key]] = field(default_factory=dict)
    content: set[Key] = field(default_factory=set)  # under this object: a dump, copy or comparison reads them


@dataclass
class _Run:
    cut: int | None = None  # Problem.made at the first read of a key left out
    read: set[Key] = field(default_factory=set)


_WATCHED: dict[int, _Watch] = {}  # by id() of an object a ValidPart holds while it judges
_RUN: ContextVar[_Run | None] = ContextVar("optigate_valid_part_run", default=None)
_TRACED: dict[type, type] = {}


def _read(keys: set[Key]) -> None:
    run = _RUN.get()
    if run is not None and keys:
        if run.cut is None:
            run.cut = problems_made()
        run.read |= keys


def _traced(cls: type[BaseModel]) -> type[BaseModel]:
    """`cls` recording the reads of the watched objects' left-out keys (one subclass per model, made once)."""
    if cls not in _TRACED:

        def __getattribute__(self: BaseModel, name: str) -> Any:
            watch = _WATCHED.get(id(self))
            if watch is not None:
                if name in watch.fields:
                    _read(watch.fields[name])
                elif name == "__dict__":
                    _read(watch.content)
            return cls.__getattribute__(self, name)

        namespace = {
            "__getattribute__": __getattribute__,
            "__module__": cls.__module__,
            "__qualname__": cls.__qualname__,
        }
        metaclass: Any = type(cls)  # pydantic's: the subclass is a model like its parent
        _TRACED[cls] = metaclass(cls.__name__, (cls,), namespace)
    return _TRACED[cls]


def _field_name(model: BaseModel, key: str | int) -> str | None:
    for name, info in type(model).model_fields.items():
        if key in (name, info.alias):
            return name
    return None


def _watches(value: BaseModel, left_out: list[PathT], file: str) -> dict[int, tuple[BaseModel, _Watch]]:
    """Where each left-out key is read: the model field holding it (or holding the list or mapping it was in), and its
    content from every model object above it."""
    watches: dict[int, tuple[BaseModel, _Watch]] = {}
    for path in left_out:
        node: Any = value
        holder: tuple[BaseModel, str] | None = None
        above: list[BaseModel] = []
        prefix: PathT = ()
        for index, part in enumerate(path):
            if isinstance(node, BaseModel):
                name = _field_name(node, part)
                if name is None:  # an unknown key: the model reads nothing of it
                    holder = None if index == len(path) - 1 else holder
                    break
                above.append(node)
                holder, node = (node, name), node.__dict__.get(name)
            elif isinstance(node, list) and isinstance(part, int) and (*prefix, part) not in left_out:
                moved = sum(
                    1 for other in left_out if other[:-1] == prefix and isinstance(other[-1], int) and other[-1] < part
                )
                node = node[part - moved] if 0 <= part - moved < len(node) else None
            else:  # a mapping's entry or a list item left out: the field holding them is what is read
                break
            prefix = (*prefix, part)
        if holder is None:
            continue
        for model in above:
            watches.setdefault(id(model), (model, _Watch()))[1].content.add((file, path))
        owner, name = holder
        watches.setdefault(id(owner), (owner, _Watch()))[1].fields.setdefault(name, set()).add((file, path))
    return watches


@dataclass
class ValidPart(Generic[ModelT]):
    """A file's model without the keys its schema problems name (`left_out`, in the file's paths)."""

    value: ModelT
    left_out: list[PathT]
    file: str
    _watches: dict[int, tuple[BaseModel, _Watch]] = field(default_factory=dict, repr=False)

    @classmethod
    def of(cls, document: YamlDocument, model: type[ModelT]) -> ValidPart[ModelT] | PathT:
        """The valid part of a document, or the top-level key it cannot be made without (a required key that is
        broken; () for a file without keys)."""
        if not isinstance(document.data, dict):
            return ()
        value, left_out, blocking = _left_out(document.data, model)
        if value is None:
            return blocking or ()
        part = cls(value, left_out, document.file, _watches(value, left_out, document.file))
        for obj, _ in part._watches.values():
            obj.__class__ = _traced(type(obj))
        return part

    @contextmanager
    def watched(self) -> Iterator[None]:
        """While open, reads of the keys left out are recorded by `judge` (several parts may be open at once)."""
        _WATCHED.update({key: watch for key, (_, watch) in self._watches.items()})
        try:
            yield
        finally:
            for key in self._watches:
                _WATCHED.pop(key, None)


def judge(check: Callable[[], list[Problem]]) -> tuple[list[Problem], set[Key]]:
    """Run `check` over watched valid parts: the problems it made before it first read a key left out, and the keys
    it read (none: it ran on what the files say alone)."""
    run = _Run()
    token = _RUN.set(run)
    try:
        problems = check()
    finally:
        _RUN.reset(token)
    if run.cut is None:
        return problems, set()
    cut = run.cut
    return [problem for problem in problems if problem.made < cut], run.read


def held_back_issue(document: YamlDocument, held: dict[str, set[Key]]) -> ConfigIssue | None:
    """One line naming the checks that read a key of `document` left out (`held`: the keys each check read), at the
    first such key; None when none did."""
    by_key: dict[PathT, list[str]] = {}
    for check, keys in held.items():
        for file, path in keys:
            if file == document.file and check not in by_key.setdefault(path, []):
                by_key[path].append(check)
    if not by_key:
        return None
    paths = sorted(by_key, key=lambda path: (document.line_of(path) or 0, _order(path)))
    said = [f"the {_listed(by_key[paths[0]])} read it"]
    said += [f"the {_listed(by_key[path])} read {format_path(path)}" for path in paths[1:]]
    message = f"{'; '.join(said)}: they run once the problems above are fixed"
    return ConfigIssue(document.file, document.line_of(paths[0]), format_path(paths[0]), message)


def _listed(names: list[str]) -> str:
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def blocked_issue(document: YamlDocument, key: PathT) -> ConfigIssue:
    """One line saying no rule ran: the file's valid part cannot be made without `key`."""
    where = format_path(key)
    message = f"no rule checked this file: {where or 'its top level'} has a problem above and every rule needs it"
    return ConfigIssue(document.file, document.line_of(key) if key else 1, where, message)
