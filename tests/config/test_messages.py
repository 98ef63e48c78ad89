"""Every schema problem in optigate's words with the fix (issue 28): no pydantic phrasing reaches a user, unknown keys
and values of a fixed set get a did-you-mean, a key of another section says where it belongs, and an instance type
without `ml.` is refused with the name meant."""

from __future__ import annotations

import json
import re
import tempfile
from pathlib import Path

import pytest
from hypothesis import given

from optigate.config.loader import ConfigError, load_environments, load_team
from optigate.config.models import EnvironmentsFile, TeamConfig
from optigate.config.schema_messages import PATTERN_FORMS
from tests.conftest import CONFIG
from tests.fixtures.config_mutants import Mutant, mutants, prepare_project
from tests.tiers import fuzz_settings

# What pydantic writes (pydantic_core's messages), none of which a ConfigIssue may carry.
PYDANTIC_PHRASES = re.compile(
    r"Input should|String should|should match pattern|Extra inputs are not permitted|Field required|Value error,"
    r"|Assertion failed,|should be a valid|Unable to parse|should have at least|should have at most|instance of "
    r"|Input tag|Object has no attribute"
)

_WORKDIR = tempfile.TemporaryDirectory(prefix="optigate-messages-")
_PROJECT = prepare_project(CONFIG, _WORKDIR.name)
_ORIGINALS = {path.relative_to(_PROJECT).as_posix(): path.read_bytes() for path in _PROJECT.rglob("*.yaml")}


def _issues(mutant: Mutant) -> list[str]:
    target = _PROJECT / mutant.file
    target.write_bytes(mutant.content)
    try:
        if mutant.file == "environments.yaml":
            load_environments(target)
        else:
            load_team(target, rules=False)  # the schema's messages; the rules' are optigate's own text already
    except ConfigError as error:
        return [issue.message for issue in error.issues]
    finally:
        target.write_bytes(_ORIGINALS[mutant.file])
    return []


@pytest.mark.fuzz
@fuzz_settings(full=400, fast=40)
@given(mutants(CONFIG))
def test_no_pydantic_phrasing_reaches_a_config_issue(mutant):
    raw = [message for message in _issues(mutant) if PYDANTIC_PHRASES.search(message)]
    assert not raw, f"{mutant.file} after {'; '.join(mutant.steps)}: {raw}"


def test_the_phrase_check_catches_pydantics_own_message(tmp_path):
    """The property above can fail: pydantic's message for the same input carries the phrasing it looks for."""
    from pydantic import ValidationError

    data = {"team": "x", "model": {}, "serving": {"instance_type": "g5.2xlarge"}}
    with pytest.raises(ValidationError) as raw:
        TeamConfig.model_validate(data)
    assert PYDANTIC_PHRASES.search(str(raw.value))


def _patterns(schema) -> set[str]:
    found = set()
    if isinstance(schema, dict):
        if isinstance(schema.get("pattern"), str):
            found.add(schema["pattern"])
        for value in schema.values():
            found |= _patterns(value)
    elif isinstance(schema, list):
        for value in schema:
            found |= _patterns(value)
    return found


def test_every_pattern_of_the_config_models_is_worded():
    patterns = _patterns(TeamConfig.model_json_schema()) | _patterns(EnvironmentsFile.model_json_schema())
    unworded = {pattern for pattern in patterns if pattern not in PATTERN_FORMS and "s3://" not in pattern}
    assert patterns and not unworded, json.dumps(sorted(unworded))


# --------------------------------------------------------------------------- the new user's cases


def _edited(tmp_path: Path, file: str, old: str, new: str) -> Path:
    text = (CONFIG / file).read_text()
    assert old in text, f"{file} has no {old!r}"
    path = tmp_path / Path(file).name
    path.write_text(text.replace(old, new, 1))
    return path


def _problems(path: Path) -> list[str]:
    loader = load_environments if path.name == "environments.yaml" else load_team
    with pytest.raises(ConfigError) as error:
        loader(path)
    return [str(issue) for issue in error.value.issues]


def test_an_instance_type_without_ml_gets_the_name_meant(tmp_path):
    path = _edited(tmp_path, "teams/chat.yaml", "instance_type: ml.g6.2xlarge", "instance_type: g5.2xlarge")
    (problem,) = _problems(path)
    assert "serving.instance_type: 'g5.2xlarge' is not a SageMaker instance type name" in problem
    assert "did you mean 'ml.g5.2xlarge'?" in problem


def test_a_serving_key_dedented_to_the_top_level_says_it_belongs_under_serving(tmp_path):
    path = _edited(tmp_path, "teams/chat.yaml", "  max_model_len: 8192\n", "")
    path.write_text(path.read_text() + "max_model_len: 8192\n")
    (problem,) = _problems(path)
    assert "unknown key 'max_model_len' at the top level: it belongs under `serving`; move it there" in problem


def test_a_key_of_another_section_names_every_section_it_belongs_to(tmp_path):
    path = _edited(tmp_path, "teams/chat.yaml", "gate:\n", "gate:\n  dataset_s3_uri: s3://b/k.jsonl\n")
    (problem,) = _problems(path)
    assert "it belongs under `adapters[].evaluation` or `gate.evaluation`" in problem


@pytest.mark.parametrize(
    ("file", "old", "new", "expected"),
    [
        ("teams/chat.yaml", "    concurrency:", "    concurency:", "in gate.benchmark; did you mean 'concurrency'?"),
        ("teams/chat.yaml", "  benchmark:\n", "  benchmarks:\n", "in gate; did you mean 'benchmark'?"),
        (
            "teams/chat.yaml",
            "quantization: fp8",
            "quantization: FP8",
            "'FP8' is not a known value; did you mean 'fp8'?",
        ),
        ("teams/chat.yaml", "strategy: canary", "strategy: canery", "did you mean 'canary'? expected one of none"),
        ("environments.yaml", '    account: "111111111111"', '    acount: "111111111111"', "did you mean 'account'?"),
        ("environments.yaml", "region: us-east-1", "region: US-EAST-1", "is not an AWS region (e.g. us-east-1)"),
        (
            "environments.yaml",
            'account: "111111111111"',
            "account: 111111111111",
            "expected text (got 111111111111); quote it to make it text",
        ),
        ("environments.yaml", "encryption: s3_managed", "encryption: s3-managed", "did you mean 's3_managed'?"),
    ],
)
def test_keys_and_values_of_every_section_get_a_did_you_mean(tmp_path, file, old, new, expected):
    problems = _problems(_edited(tmp_path, file, old, new))
    assert any(expected in problem for problem in problems), problems


def test_a_value_that_fits_no_form_of_a_union_is_one_problem_naming_every_form(tmp_path):
    """`model.architecture` is a known model's name or a mapping of config.json fields: a number is neither."""
    path = tmp_path / "team.yaml"
    text = (CONFIG / "teams" / "chat.yaml").read_text()
    path.write_text(re.sub(r"(?m)^  architecture: .*$", "  architecture: 42", text, count=1))
    assert "  architecture: 42" in path.read_text()
    problems = _problems(path)
    assert len(problems) == 1 and "model.architecture: expected text or a section of keys" in problems[0], problems


def test_a_key_of_another_method_names_the_methods_that_take_it(tmp_path):
    path = _edited(
        tmp_path,
        "teams/chat.yaml",
        "  kv_cache_dtype: fp8\n",
        "  kv_cache_dtype: fp8\n  speculative_decoding:\n    method: ngram\n    model_s3_uri: s3://b/draft/\n",
    )
    problems = _problems(path)
    assert any(
        "unknown key 'model_s3_uri' in serving.speculative_decoding (method ngram): it is a key of method draft" in p
        for p in problems
    ), problems
