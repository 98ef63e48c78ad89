"""Hostile or odd YAML (issue 14, "Found"): each is refused as a ConfigIssue with file and line, fast.

One test per item: a recursive alias, billion laughs, each explicit tag, invalid UTF-8, NUL/DEL,
a complex key, 2,000 nested `[`, a 4,301-digit integer, `1e400`, an `.inf` budget, a 1 MB value.
The reader is `optigate.config.reader`; the team-level tests go through `load_team` as `validate` does.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from optigate.config.loader import ConfigError, ConfigIssue, load_team, read_yaml
from optigate.config.reader import MAX_BYTES, MAX_DEPTH, MAX_NODES, SHOWN_CHARS
from tests.conftest import CONFIG

CHAT = (CONFIG / "teams" / "chat.yaml").read_text()


def _refused(tmp_path: Path, content: str | bytes, name: str = "hostile.yaml") -> list[ConfigIssue]:
    """The issues `read_yaml` raises for `content`; each names the file and a line."""
    path = tmp_path / name
    path.write_bytes(content.encode() if isinstance(content, str) else content)
    started = time.process_time()
    with pytest.raises(ConfigError) as caught:
        read_yaml(path)
    assert time.process_time() - started < 1.0, "the reader must not take long on any input"
    issues = caught.value.issues
    assert issues
    for issue in issues:
        assert issue.file.endswith(name) and issue.line, issue
    return issues


def _team_refused(tmp_path: Path, old: str, new: str) -> tuple[list[ConfigIssue], int]:
    """Issues of the chat example with `old` replaced by `new`, and the line `new` starts on."""
    assert old in CHAT
    text = CHAT.replace(old, new, 1)
    path = tmp_path / "chat.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as caught:
        load_team(path)
    return caught.value.issues, text[: text.index(new)].count("\n") + 1


def _read(tmp_path: Path, content: str):
    path = tmp_path / "ok.yaml"
    path.write_text(content)
    return read_yaml(path)


def test_recursive_alias_is_refused_with_its_line(tmp_path):
    (issue,) = _refused(tmp_path, "team: demo\nx: &a [*a]\n")
    assert issue.line == 2 and issue.path == "x[0]" and "aliases (*a) are not supported" in issue.message


def test_billion_laughs_is_refused_at_the_first_alias_without_expanding(tmp_path):
    lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for name, previous in zip("bcdefghi", "abcdefgh", strict=True):
        lines.append(f"{name}: &{name} [{','.join(['*' + previous] * 9)}]")
    text = "\n".join(lines) + "\n"
    assert len(text) < 700  # the issue's file was 597 bytes; 9**9 strings if expanded
    (issue,) = _refused(tmp_path, text)
    assert issue.line == 2 and issue.path == "b[0]" and "aliases" in issue.message


@pytest.mark.parametrize(
    "value, shown",
    [
        ("!!python/name:os.system", "!!python/name:os.system"),
        ("!!python/object/apply:os.system ['true']", "!!python/object/apply:os.system"),
        ("!secret db-password", "!secret"),
        ("!!timestamp 2024-01-01", "!!timestamp"),
        ("!!binary aGVsbG8=", "!!binary"),
        ("!!set {a, b}", "!!set"),
        ("!!omap [a: 1]", "!!omap"),
        ("!<tag:example.com,2000:app/x> 1", "tag:example.com,2000:app/x"),
    ],
    ids=["python-name", "python-object", "secret", "timestamp", "binary", "set", "omap", "verbatim"],
)
def test_explicit_tag_beyond_the_core_schema_is_refused(tmp_path, value, shown):
    (issue,) = _refused(tmp_path, f"team: demo\ndescription: {value}\n")
    assert issue.line == 2 and issue.path == "description"
    assert "not allowed in config files" in issue.message and "!!str, !!int" in issue.message
    assert f"explicit tag {shown} is not allowed" in issue.message


def test_explicit_tag_on_a_key_is_refused(tmp_path):
    (issue,) = _refused(tmp_path, "team: demo\n!!python/name:os.system : 1\n")
    assert issue.line == 2 and "!!python/name:os.system" in issue.message


@pytest.mark.parametrize(
    "value, tag",
    [
        ("!!bool r", "!!bool"),
        ("!!int 8k", "!!int"),
        ("!!float x", "!!float"),
        ("!!null x", "!!null"),
        ("!!int", "!!int"),
    ],
    ids=["bool-r", "int-8k", "float-x", "null-x", "int-empty"],
)
def test_core_tag_with_a_value_it_cannot_hold_is_refused(tmp_path, value, tag):
    (issue,) = _refused(tmp_path, f"team: demo\nserving:\n  max_batch_size: {value}\n")
    assert issue.line == 3 and issue.path == "serving.max_batch_size"
    assert issue.message.endswith(f"is not a valid {tag}")


def test_core_tags_with_valid_values_are_read_as_their_type(tmp_path):
    document = _read(
        tmp_path, "a: !!int 8\nb: !!float 1\nc: !!str 12\nd: !!bool true\ne: !!null\nf: !!map {x: 1}\ng: !!seq [1]\n"
    )
    assert document.data == {"a": 8, "b": 1.0, "c": "12", "d": True, "e": None, "f": {"x": 1}, "g": [1]}


def test_a_plain_date_is_text_as_in_the_core_schema(tmp_path):
    # YAML 1.1 would construct a date (and raise on 2024-13-45); the core schema has no timestamp.
    assert _read(tmp_path, "a: 2024-01-01\nb: 2024-13-45\n").data == {"a": "2024-01-01", "b": "2024-13-45"}


def test_invalid_utf8_is_refused_with_line_and_column(tmp_path):
    (issue,) = _refused(tmp_path, b"team: demo\ndescription: caf\xe9 au lait\n")
    assert issue.line == 2
    assert "not UTF-8" in issue.message and "e9" in issue.message and "column 17" in issue.message


@pytest.mark.parametrize("character", ["\x00", "\x7f", "\x1b", "\x9f"], ids=["nul", "del", "esc", "c1"])
def test_control_character_is_refused_with_its_line(tmp_path, character):
    (issue,) = _refused(tmp_path, f"team: demo\n\ndescription: a{character}b\n")
    assert issue.line == 3
    assert f"U+{ord(character):04X} at column 15" in issue.message


def test_complex_key_is_refused(tmp_path):
    (issue,) = _refused(tmp_path, "team: demo\n? [a, b]\n: 1\n")
    assert issue.line == 2 and "complex key" in issue.message


def test_flow_complex_key_is_refused(tmp_path):
    (issue,) = _refused(tmp_path, "team: demo\nx: {[a]: 1}\n")
    assert issue.line == 2 and issue.path == "x" and "complex key" in issue.message


def test_2000_nested_brackets_are_refused_at_the_depth_limit(tmp_path):
    (issue,) = _refused(tmp_path, "team: demo\nserving: " + "[" * 2000 + "]" * 2000 + "\n")
    assert issue.line == 2 and f"nested more than {MAX_DEPTH} levels" in issue.message


def test_unclosed_nesting_of_a_whole_file_is_refused_fast(tmp_path):
    (issue,) = _refused(tmp_path, "[" * (MAX_BYTES - 10))
    assert issue.line == 1 and "nested" in issue.message


def test_4301_digit_integer_is_refused_and_4300_is_read(tmp_path):
    (issue,) = _refused(tmp_path, "team: demo\nserving:\n  max_batch_size: " + "9" * 4301 + "\n")
    assert issue.line == 3 and issue.path == "serving.max_batch_size" and "4,301 digits" in issue.message
    assert _read(tmp_path, "a: " + "9" * 4300 + "\n").data == {"a": int("9" * 4300)}


def test_a_hex_integer_too_long_to_print_is_refused(tmp_path):
    # 4,000 hex digits: under the digit count, but about 4,816 decimal digits: repr() of it would raise.
    (issue,) = _refused(tmp_path, "team: demo\nserving:\n  max_batch_size: 0x" + "f" * 4000 + "\n")
    assert issue.line == 3 and "an integer of about 4,81" in issue.message and "4,300 digits" in issue.message


def test_1e400_prompt_tokens_is_refused_at_its_line(tmp_path):
    issues, line = _team_refused(tmp_path, "prompt_tokens: 1024", "prompt_tokens: 1e400")
    assert [(issue.line, issue.path) for issue in issues] == [(line, "gate.benchmark.prompt_tokens")]
    assert "'1e400' overflows" in issues[0].message


@pytest.mark.parametrize("value", [".inf", "-.inf", ".nan", "1e999", "!!float 1e999"])
def test_non_finite_budget_is_refused_at_its_line(tmp_path, value):
    issues, line = _team_refused(tmp_path, "p99_ttft_ms_budget: 800", f"p99_ttft_ms_budget: {value}")
    assert [(issue.line, issue.path) for issue in issues] == [(line, "gate.benchmark.p99_ttft_ms_budget")]
    assert "finite" in issues[0].message


def test_1mb_file_is_refused_with_its_size_and_nothing_of_its_content(tmp_path):
    (issue,) = _refused(tmp_path, "team: demo\ndescription: " + "x" * 1_000_000 + "\n")
    assert issue.line == 1 and "1,000,025 bytes" in issue.message and f"{MAX_BYTES:,} bytes" in issue.message
    assert "xxxx" not in str(issue)


def test_a_long_value_is_not_echoed_back_whole(tmp_path):
    long = "x" * 200_000  # under the size limit, where a number is expected
    issues, line = _team_refused(tmp_path, "max_model_len: 8192", f"max_model_len: {long}")
    (issue,) = issues
    assert issue.line == line and issue.path == "serving.max_model_len"
    assert "x" * SHOWN_CHARS in issue.message and "x" * (SHOWN_CHARS + 1) not in issue.message
    assert len(str(issue)) < 400 and "199,920 more characters" in issue.message


def test_a_long_unknown_key_is_not_echoed_back_whole(tmp_path):
    key = "k" * 1000  # YAML's longest simple key is 1024 characters
    issues, line = _team_refused(tmp_path, "max_model_len: 8192", f"{key}: 1\n  max_model_len: 8192")
    (issue,) = issues
    assert issue.line == line and "unknown key" in issue.message
    assert "k" * (SHOWN_CHARS + 1) not in str(issue) and str(issue).count("k" * SHOWN_CHARS) == 2  # path, message


def test_duplicate_keys_stay_errors_at_every_duplicate(tmp_path):
    issues = _refused(tmp_path, "team: a\nserving:\n  x: 1\n  x: 2\nteam: b\n")
    assert [(issue.line, issue.path) for issue in issues] == [(4, "serving.x"), (5, "team")]


def test_lines_are_kept_for_every_key_and_list_item(tmp_path):
    document = _read(tmp_path, "team: demo\nlist:\n  - a\n  - {b: 1}\nmap:\n  key: [1,\n    2]\n")
    assert document.lines == {
        (): 1,
        ("team",): 1,
        ("list",): 2,
        ("list", 0): 3,
        ("list", 1): 4,
        ("list", 1, "b"): 4,
        ("map",): 5,
        ("map", "key"): 6,
        ("map", "key", 0): 6,
        ("map", "key", 1): 7,
    }


def test_more_values_than_the_budget_are_refused(tmp_path):
    (issue,) = _refused(tmp_path, "x: [" + "1," * MAX_NODES + "1]\n")
    assert issue.line == 1 and f"more than {MAX_NODES:,} values" in issue.message


def test_a_second_document_is_refused(tmp_path):
    (issue,) = _refused(tmp_path, "team: a\n---\nteam: b\n")
    assert issue.line == 2 and "more than one YAML document" in issue.message


def test_syntax_error_keeps_its_line(tmp_path):
    (issue,) = _refused(tmp_path, "team: demo\nserving: [unclosed\nrollout: x\n")
    assert issue.line in (2, 3) and issue.message.startswith("not valid YAML")


def test_the_example_files_read_as_before(tmp_path):
    import yaml

    for path in [CONFIG / "environments.yaml", *(CONFIG / "teams").glob("*.yaml")]:
        assert read_yaml(path).data == yaml.safe_load(path.read_text()), path
