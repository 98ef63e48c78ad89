"""Mutated config files for the loader's fuzz test and benchmark (issue 14): one strategy, one checker.

`mutants(config_dir)` is a hypothesis strategy of `Mutant`s: one of the example files (environments.yaml or a
team file) changed by one to three steps, at the data level (a value replaced by another type, a huge,
negative or non-finite number, a key deleted, renamed or added, a list item repeated; the file written
back with `yaml.safe_dump`) and then at the text level (characters and lines inserted, deleted, replaced,
swapped or re-indented, a hostile snippet from the issue put in place of a value or a line, an invalid
UTF-8 byte, the file cut short).

`check_mutant(folder, mutant)` writes the mutant into a copy of the project and runs what
`optigate validate` runs: the whole folder (every file, the planner over each team, the cross-file
checks) and the mutated file alone. The outcome is `valid`, `config_error` (every issue has a file and a
line), `issue_without_line`, `traceback` (any other exception) or `slow` (more than `SLOW_SECONDS` of CPU
time: `time.process_time`, which a busy shared machine does not inflate as it does wall time). A
mutant still running after `HANG_SECONDS` of CPU time is stopped (SIGPROF) and counted as `slow`.

hypothesis is a development dependency; this module is imported by tests and benchmarks only.
"""

from __future__ import annotations

import contextlib
import copy
import csv
import functools
import shutil
import signal
import threading
import time
import traceback
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from hypothesis import strategies as st

SLOW_SECONDS = 2.0
HANG_SECONDS = 30.0

EXAMPLE_FILES = ("environments.yaml", "teams/chat.yaml", "teams/research.yaml", "teams/support.yaml")

# The hostile inputs of issue 14 ("Found"), as values or as whole lines.
HOSTILE_VALUES = (
    "&a [*a]",
    "*a",
    "&a x",
    "!!python/name:os.system",
    "!!python/object/apply:os.system ['true']",
    "!secret token",
    "!!bool r",
    "!!int 8k",
    "!!float x",
    "!!null x",
    "!!timestamp 2024-01-01",
    "!!timestamp 2024-99-99",
    "2024-13-45",
    "!!binary aGVsbG8=",
    "!!set {a, b}",
    "!!omap [a: 1]",
    "!<tag:example.com,2000:x> 1",
    "!! x",
    "[" * 2000,
    "[" * 2000 + "]" * 2000,
    "{a: " * 300 + "1" + "}" * 300,
    "9" * 4301,
    "-" + "9" * 5000,
    "0x" + "f" * 5000,
    "1e400",
    "-1e400",
    "1e-400",
    ".inf",
    "-.inf",
    ".nan",
    ".NaN",
    "inf",
    "nan",
    "'inf'",
    "Infinity",
    "1_000_000_000_000_000_000",
    "190:20:30",
    "0o777",
    "0b1010",
    "=",
    "<<",
    "~",
    "",
    "'" + "x" * 100_000 + "'",
    "x" * 300_000,
    '"\\x00"',
    '"\\ud800"',
    "|-\n  text",
    ">\n  folded",
    "? [a, b]",
    "{[a]: 1}",
    "[a, b]: 1",
    "\t1",
    "'unterminated",
    '"unterminated',
    "%",
    "@x",
    "`x",
    "-1",
    "0",
    "2147483648",
    "18446744073709551616",
    "1e300",
    "0.0000001",
    "-0.0",
)
HOSTILE_LINES = (
    "x: &a [*a]",
    'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n'
    "b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\nc: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\n"
    "d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]\ne: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]\n"
    "f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]\ng: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]",
    "<<: {team: x}",
    "? [a, b]\n: 1",
    "? {a: 1}\n: 1",
    "---",
    "...",
    "--- !!set",
    "%YAML 1.1",
    "%TAG ! tag:yaml.org,2002:",
    "!!python/name:os.system : 1",
    "x: 1\x00",
    "x: 1\x7f",
    "x: \x1b[31m",
    "\ufeffx: 1",
    "x: \u2028y",
    "\t- 1",
    "- - - -",
    "[" * 2000,
    "x: " + "[" * 2000,
    "ÄÖ_X: 1",
    "team: " + "x" * 100_000,
)
INVALID_UTF8 = (b"\xff", b"\xfe", b"\xc3", b"\xc3(", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xc0\xaf", b"\x80")
_TEXT = st.text(
    alphabet=st.one_of(
        st.sampled_from(list(" \t\n:-[]{},#&*!|>'\"%@`?.~0123456789eE+_xyzAZ")),
        st.characters(codec="utf-8"),
    ),
    max_size=12,
)
_NUMBERS = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from([0, -1, 1, 2, 3, 7, 2**31, 2**63, 2**64, 10**30, -(10**30), 10**300, 10**4000]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0.0, -0.0, 1e-300, 1e300, -1e300, 0.5, 1.5, 99.99, 100.0001, float("inf"), float("nan")]),
)


@functools.cache
def schema_keys() -> list[str]:
    """Every key the config models know (team and environments files), for keys in the wrong place."""
    from optigate.config.models import EnvironmentsFile, TeamConfig

    keys: set[str] = set()

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            keys.update(node.get("properties", {}) if isinstance(node.get("properties"), dict) else {})
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(TeamConfig.model_json_schema())
    walk(EnvironmentsFile.model_json_schema())
    return sorted(keys)


@functools.cache
def domain_values() -> list[Any]:
    """Values that mean something somewhere in a config: every instance type and architecture the planner
    knows (names and their config.json fields), container families, precisions, regions and near misses."""
    data = Path(__file__).resolve().parents[1] / "plan" / "data"
    with open(data / "instances.csv", newline="", encoding="utf-8") as stream:
        instances = sorted(row["instance_type"] for row in csv.DictReader(stream))
    models = yaml.safe_load((data / "models.yaml").read_text(encoding="utf-8"))
    configs = [dict(entry["config"]) for _, entry in sorted(models.items())]
    headless = [{k: v for k, v in config.items() if k != "head_dim"} for config in configs]
    return [
        *instances,
        "ml.g6e.48xlarge",
        "ml.inf2.24xlarge",
        "ml.inf2.xlarge",
        "ml.trn1.32xlarge",
        "ml.g5.2xlarge",
        "ml.p4d.24xlarge",
        "ml.m5.xlarge",
        *sorted(models),
        "llama-3.1-8b-instruct",
        *configs,
        *headless,
        {**configs[0], "hidden_size": 16, "num_attention_heads": 32},
        {**headless[0], "hidden_size": 16, "num_attention_heads": 32},
        {**configs[0], "num_key_value_heads": 6},
        {**configs[0], "num_experts": 8},
        {**configs[0], "num_experts_per_tok": 2},
        "lmi",
        "lmi-trtllm",
        "lmi-neuronx",
        "fp8",
        "awq",
        "gptq",
        "nvfp4",
        "auto",
        "fp8_e4m3",
        "fp8_e5m2",
        *range(1, 13),
        16,
        24,
        32,
        64,
        300,
        3600,
        "us-east-1",
        "us-esat-1",
        "eu-west-1",
        "ap-southeast-7",
        "canary",
        "shadow",
        "none",
        "ngram",
        "draft",
        "eagle3",
        "suffix",
        "ÄÖ_X",
        {"min_capacity": 2, "max_capacity": 1},
        {"autoscaling_max_capacity": 1},
    ]


@functools.cache
def keyed_values() -> dict[str, list[Any]]:
    """Plausible values per key name: a mutant that sets them reaches the planner's corners (TP against heads,
    an architecture's fields, a family on an instance it does not fit, capacities across files)."""
    values = domain_values()
    instances = [v for v in values if isinstance(v, str) and v.startswith("ml.")]
    architectures = [v for v in values if isinstance(v, dict) and "hidden_size" in v]
    data = Path(__file__).resolve().parents[1] / "plan" / "data"
    names = sorted(yaml.safe_load((data / "models.yaml").read_text(encoding="utf-8")))
    capacities = [0, 1, 2, 3, 10, 1000]
    return {
        "instance_type": instances,
        "architecture": [*names, "llama-3.1-8b-instruct", *architectures],
        "family": ["lmi", "lmi-trtllm", "lmi-neuronx"],
        "quantization": ["fp8", "awq", "gptq", "nvfp4", None],
        "kv_cache_dtype": ["auto", "fp8", "fp8_e4m3", "fp8_e5m2"],
        "tensor_parallel_degree": [0, 1, 2, 3, 4, 6, 7, 8, 12, 16, 24, 32],
        "region": ["us-east-1", "us-west-2", "eu-west-1", "us-esat-1", "ap-southeast-7", "US-EAST-1"],
        "min_capacity": capacities,
        "max_capacity": capacities,
        "autoscaling_max_capacity": capacities,
        "instance_count": capacities,
        "model_data_download_timeout_seconds": [1, 60, 300, 600, 3600, 10**9],
        "container_startup_health_check_timeout_seconds": [1, 60, 300, 600, 3600, 10**9],
        "max_model_len": [1, 512, 4096, 131072, 10**6, 10**12],
        "max_batch_size": [1, 8, 256, 10**6],
        "gpu_memory_utilization": [0.01, 0.5, 0.95, 1.0],
        "allow_weight_only_fp8": [True, False],
        "num_experts": [0, 1, 8, 64],
        "num_experts_per_tok": [0, 1, 2, 9],
        "head_dim": [0, 1, 64, 128],
        "num_attention_heads": [0, 1, 6, 28, 32],
        "num_key_value_heads": [0, 1, 4, 6, 7, 8],
        "hidden_size": [0, 16, 4096],
        "method": ["ngram", "suffix", "draft", "eagle3"],
        "strategy": ["none", "canary", "shadow"],
        "prompt_tokens": [1, 1024, 10**6, 10**300],
        "max_new_tokens": [1, 256, 10**6],
        "p99_ttft_ms_budget": [0.001, 1, 800, 10**300],
        "sampling_percentage": [0, 1, 100, 101],
        "traffic_percentage": [0, 1, 100, 101],
    }


@dataclass(frozen=True)
class Mutant:
    file: str  # relative to the config folder, e.g. "teams/chat.yaml"
    content: bytes
    steps: tuple[str, ...]  # what was done, shortened, for reports

    def __repr__(self) -> str:  # hypothesis prints this for a failing example
        return f"Mutant(file={self.file!r}, steps={self.steps!r}, content={self.content!r})"


def _short(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]}…({len(text)} chars)"


def _paths(data: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield path
    if isinstance(data, dict):
        for key, value in data.items():
            yield from _paths(value, (*path, key))
    elif isinstance(data, list):
        for index, value in enumerate(data):
            yield from _paths(value, (*path, index))


def _get(data: Any, path: tuple[Any, ...]) -> Any:
    for part in path:
        data = data[part]
    return data


def _leaves(data: Any) -> list[Any]:
    return [value for path in _paths(data) if not isinstance(value := _get(data, path), dict | list)]


@st.composite
def _data_step(draw: st.DrawFn, data: Any, others: list[Any]) -> str:
    """Change `data` in place; returns what was done."""
    paths = [path for path in _paths(data) if path]
    if not paths:  # every key deleted already
        return "nothing left to change"
    path = draw(st.sampled_from(paths))
    parent, last = _get(data, path[:-1]), path[-1]
    kind = draw(
        st.sampled_from(
            ["replace", "number", "delete", "unknown_key", "rename_key", "repeat_item", "move_value", "keyed", "keyed"]
        )
    )
    if kind == "keyed":  # a plausible value for a key the planner reads, set or added where such keys live
        table = keyed_values()
        keyed_paths = [p for p in paths if isinstance(p[-1], str) and p[-1] in table]
        if draw(st.booleans()) and keyed_paths:
            chosen = draw(st.sampled_from(keyed_paths))
            where, name = chosen[:-1], str(chosen[-1])
        else:
            dicts = [p for p in _paths(data) if isinstance(_get(data, p), dict)]
            where, name = draw(st.sampled_from(dicts)), draw(st.sampled_from(sorted(table)))
        value = copy.deepcopy(draw(st.sampled_from(table[name])))
        _get(data, where)[name] = value
        return f"{(*where, name)} = {_short(value)}"
    if kind == "replace":
        parent[last] = copy.deepcopy(
            draw(
                st.one_of(
                    st.none(),
                    st.booleans(),
                    _NUMBERS,
                    _TEXT,
                    st.sampled_from(others),
                    st.sampled_from(domain_values()),
                    st.lists(st.one_of(_NUMBERS, _TEXT), max_size=3),
                    st.dictionaries(_TEXT, st.one_of(_NUMBERS, _TEXT), max_size=2),
                )
            )
        )
        return f"{path} = {_short(parent[last])}"
    if kind == "number":
        parent[last] = draw(_NUMBERS)
        return f"{path} = {_short(parent[last])}"
    if kind == "delete":
        del parent[last]
        return f"del {path}"
    if kind == "unknown_key":
        target = parent if isinstance(parent, dict) else data
        if isinstance(_get(data, path), dict):
            target = _get(data, path)
        known = sorted({str(p[-1]) for p in paths if isinstance(p[-1], str)} | set(schema_keys()))
        key = draw(st.one_of(_TEXT, st.sampled_from(known)))
        target[key] = copy.deepcopy(draw(st.one_of(_NUMBERS, _TEXT, st.sampled_from(others + domain_values()))))
        return f"add key {_short(key)}"
    if kind == "rename_key" and isinstance(parent, dict):
        new = draw(st.one_of(_TEXT, st.just(str(last)[:-1]), st.just(str(last) + "s"), st.just(str(last).upper())))
        parent[new] = parent.pop(last)
        return f"rename {path} -> {_short(new)}"
    if kind == "repeat_item" and isinstance(parent, list):
        parent.insert(last, copy.deepcopy(parent[last]))  # a shared object would be dumped as an alias
        return f"repeat {path}"
    value = draw(st.sampled_from(others + domain_values()))
    parent[last] = copy.deepcopy(value)
    return f"{path} = {_short(value)} (from elsewhere)"


@st.composite
def _text_step(draw: st.DrawFn, text: str) -> tuple[str, str]:
    lines = text.split("\n")
    kind = draw(
        st.sampled_from(
            ["insert", "delete", "replace", "delete_line", "repeat_line", "swap_lines", "indent", "value", "line"]
        )
    )
    position = draw(st.integers(0, len(text)))
    row = draw(st.integers(0, max(len(lines) - 1, 0)))
    if kind == "insert":
        inserted = draw(_TEXT)
        return text[:position] + inserted + text[position:], f"insert {_short(inserted)} at {position}"
    if kind == "delete":
        size = draw(st.integers(1, 40))
        return text[:position] + text[position + size :], f"delete {size} at {position}"
    if kind == "replace":
        size, inserted = draw(st.integers(1, 20)), draw(_TEXT)
        return text[:position] + inserted + text[position + size :], f"replace {size} at {position} by {inserted!r}"
    if kind == "delete_line":
        del lines[row]
        return "\n".join(lines), f"delete line {row + 1}"
    if kind == "repeat_line":
        lines.insert(row, lines[row])
        return "\n".join(lines), f"repeat line {row + 1}"
    if kind == "swap_lines":
        other = draw(st.integers(0, len(lines) - 1))
        lines[row], lines[other] = lines[other], lines[row]
        return "\n".join(lines), f"swap lines {row + 1} and {other + 1}"
    if kind == "indent":
        prefix = draw(st.sampled_from([" ", "  ", "\t", "- "]))
        if draw(st.booleans()):
            lines[row] = prefix + lines[row]
        else:
            lines[row] = lines[row][len(prefix) :]
        return "\n".join(lines), f"indent line {row + 1} by {prefix!r}"
    if kind == "value":  # a hostile value after a key
        keyed = [index for index, line in enumerate(lines) if ":" in line and not line.lstrip().startswith("#")]
        row = draw(st.sampled_from(keyed)) if keyed else row
        value = draw(st.sampled_from(HOSTILE_VALUES))
        head = lines[row].split(":", 1)[0]
        lines[row] = f"{head}: {value}"
        return "\n".join(lines), f"line {row + 1}: {head.strip()}: {_short(value)}"
    snippet = draw(st.sampled_from(HOSTILE_LINES))
    indent = lines[row][: len(lines[row]) - len(lines[row].lstrip(" "))]
    lines.insert(row, "\n".join(indent + part for part in snippet.split("\n")))
    return "\n".join(lines), f"line {row + 1}: insert {_short(snippet)}"


@st.composite
def _byte_step(draw: st.DrawFn, content: bytes) -> tuple[bytes, str]:
    position = draw(st.integers(0, len(content)))
    if draw(st.booleans()):
        return content[:position], f"cut at byte {position}"
    bad = draw(st.sampled_from(INVALID_UTF8))
    return content[:position] + bad + content[position:], f"byte(s) {bad!r} at {position}"


_ORIGINALS: dict[Path, dict[str, str]] = {}


def _originals(config_dir: Path) -> dict[str, str]:
    if config_dir not in _ORIGINALS:
        _ORIGINALS[config_dir] = {name: (config_dir / name).read_text(encoding="utf-8") for name in EXAMPLE_FILES}
    return _ORIGINALS[config_dir]


def mutants(config_dir: str | Path) -> st.SearchStrategy[Mutant]:
    """Mutants of the example files under `config_dir` (see the module docstring)."""
    originals = _originals(Path(config_dir).resolve())
    # Every scalar of the example files (instance types, model names, numbers): realistic wrong values.
    leaves = {(type(v).__name__, repr(v)): v for text in originals.values() for v in _leaves(yaml.safe_load(text))}
    others = [leaves[key] for key in sorted(leaves)]

    @st.composite
    def build(draw: st.DrawFn) -> Mutant:
        name = draw(st.sampled_from(EXAMPLE_FILES))
        text = originals[name]
        steps: list[str] = []
        data_steps = draw(st.integers(0, 3))
        if data_steps:
            data = yaml.safe_load(text)
            for _ in range(data_steps):
                steps.append(draw(_data_step(data, others)))
            text = yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=10**9)
        for _ in range(draw(st.integers(0 if data_steps else 1, 2))):
            text, step = draw(_text_step(text))
            steps.append(step)
        content = text.encode("utf-8", "surrogatepass")
        if draw(st.integers(0, 9)) == 0:
            content, step = draw(_byte_step(content))
            steps.append(step)
        return Mutant(name, content, tuple(steps))

    return build()


# --------------------------------------------------------------------------- running a mutant


@dataclass(frozen=True)
class Outcome:
    kind: str  # valid | config_error | issue_without_line | traceback | slow
    seconds: float  # CPU seconds (time.process_time)
    detail: str = ""  # the exception and where it was raised, or the issue without a line
    signature: str = ""  # exception type and the innermost optigate frame: groups the same traceback


class _CpuTimeout(BaseException):
    """Raised by SIGPROF in a mutant that runs past HANG_SECONDS of CPU time (not an Exception: never caught)."""


@contextlib.contextmanager
def _cpu_limit(seconds: float) -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "setitimer"):
        yield
        return

    def stop(signum: int, frame: Any) -> None:
        raise _CpuTimeout

    previous = signal.signal(signal.SIGPROF, stop)
    signal.setitimer(signal.ITIMER_PROF, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.signal(signal.SIGPROF, previous)


def prepare_project(config_dir: str | Path, workdir: str | Path) -> Path:
    """A copy of the example project's config files in `workdir` (the folder `check_mutant` writes into)."""
    target = Path(workdir, "config")
    for name in EXAMPLE_FILES:
        (target / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(Path(config_dir, name), target / name)
    return target


def _where(error: BaseException) -> str:
    frames = traceback.extract_tb(error.__traceback__)
    ours = [frame for frame in frames if "/optigate/" in frame.filename.replace("\\", "/")] or frames
    if not ours:
        return "?"
    frame = ours[-1]
    path = frame.filename.replace("\\", "/")
    path = path[path.rfind("/optigate/") + 1 :] if "/optigate/" in path else path
    return f"{path}:{frame.lineno} in {frame.name}"


def check_mutant(project: Path, mutant: Mutant, originals: dict[str, bytes] | None = None) -> Outcome:
    """Run what `optigate validate` runs on the project with `mutant` written in; restores the file after."""
    from optigate.config.loader import ConfigError, load_environments
    from optigate.deployment import load_resolved_project, load_resolved_team

    target = project / mutant.file
    original = originals[mutant.file] if originals else target.read_bytes()
    target.write_bytes(mutant.content)
    start = time.process_time()
    try:
        with _cpu_limit(HANG_SECONDS):
            errors: list[ConfigError] = []
            try:
                load_resolved_project(project)
            except ConfigError as error:
                errors.append(error)
            try:
                if mutant.file == "environments.yaml":
                    load_environments(target)
                else:
                    load_resolved_team(target)
            except ConfigError as error:
                errors.append(error)
    except _CpuTimeout:
        return Outcome("slow", time.process_time() - start, f"stopped after {HANG_SECONDS:.0f} s of CPU time")
    except Exception as error:
        where = _where(error)
        return Outcome(
            "traceback",
            time.process_time() - start,
            f"{type(error).__name__} at {where}: {_short(str(error), 200)}",
            f"{type(error).__name__} at {where}",
        )
    finally:
        target.write_bytes(original)
    seconds = time.process_time() - start
    if seconds > SLOW_SECONDS:
        return Outcome("slow", seconds, f"{seconds:.2f} s of CPU time")
    for config_error in errors:
        for issue in config_error.issues:
            if not issue.file or not issue.line:
                return Outcome("issue_without_line", seconds, _short(str(issue), 300))
    return Outcome("config_error" if errors else "valid", seconds)
