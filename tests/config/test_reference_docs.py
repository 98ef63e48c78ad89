"""docs/configuration.md: rendered from the config models, current, complete, and written by `optigate schema`."""

from __future__ import annotations

import typing

import pytest
from pydantic import BaseModel, Field

from optigate.cli import main
from optigate.config.models import Serving, TeamConfig
from optigate.config.reference import REFERENCE_FILES, REFERENCE_PATH, github_anchor, render_reference
from tests.conftest import REPO


def test_the_configuration_reference_is_current():
    committed = (REPO / REFERENCE_PATH).read_text()
    assert committed == render_reference(), "run `optigate schema --docs docs` and commit docs/configuration.md"


def _models_in(annotation) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [model for argument in typing.get_args(annotation) for model in _models_in(argument)]


def _fields_of(model: type[BaseModel], seen: set[type[BaseModel]]) -> list[tuple[str, str | None]]:
    """(name, description) of every field of `model` and of every model it holds, walked from model_fields."""
    if model in seen:
        return []
    seen.add(model)
    found = []
    for name, info in model.model_fields.items():
        found.append((name, info.description))
        for inner in _models_in(info.annotation):
            found += _fields_of(inner, seen)
    return found


def _unescaped(markdown: str) -> str:
    return markdown.replace("&lt;", "<").replace("&gt;", ">").replace(r"\*", "*").replace(r"\|", "|").replace("\n", " ")


def test_every_key_and_description_of_the_models_is_in_the_reference():
    """Walked from model_fields, independently of the renderer's walk of the JSON schema."""
    page = _unescaped(render_reference())
    fields = [pair for _, model in REFERENCE_FILES for pair in _fields_of(model, set())]
    assert len(fields) > 100  # the walk reaches the nested models
    missing_keys = [name for name, _ in fields if f"`{name}`" not in page]
    missing_descriptions = [name for name, text in fields if text and " ".join(text.split()) not in page]
    assert missing_keys == []
    assert missing_descriptions == []


class _ChangedServing(Serving):
    enforce_eager: bool = Field(False, description="A description changed after the page was written.")


class _ChangedTeam(TeamConfig):
    serving: _ChangedServing  # type: ignore[assignment]
    new_key: int = Field(3, ge=1, description="A key added after the page was written.")


def test_a_changed_model_makes_the_committed_reference_stale():
    """The currency test compares with a fresh rendering, so a changed or added field fails it."""
    files = tuple((label, _ChangedTeam if model is TeamConfig else model) for label, model in REFERENCE_FILES)
    changed = render_reference(files)
    committed = (REPO / REFERENCE_PATH).read_text()
    assert changed != committed
    assert "| `new_key` | integer, ≥ 1 | `3` | A key added after the page was written. |" in changed
    assert "| `enforce_eager` | boolean | `false` | A description changed after the page was written. |" in changed
    assert "A description changed after the page was written." not in committed


@pytest.mark.slow
def test_schema_writes_the_reference_and_check_fails_when_it_is_stale(tmp_path, capsys):
    schemas, reference = tmp_path / "schema", tmp_path / "docs" / "configuration.md"
    options = ["--out", str(schemas), "--docs", str(reference.parent)]
    assert main(["schema", *options]) == 0
    assert f"wrote {reference}" in capsys.readouterr().out
    assert reference.read_text() == render_reference()

    assert main(["schema", "--check", *options]) == 0
    assert capsys.readouterr().out == f"✓ schemas in {schemas} match the models\n"  # as before the reference existed

    reference.write_text(reference.read_text().replace("Bake time", "Baking time"))
    assert main(["schema", "--check", *options]) == 1
    assert f"{reference} is out of date; run `optigate schema --docs {reference.parent}`" in capsys.readouterr().err
    reference.unlink()
    assert main(["schema", "--check", *options]) == 1


def test_anchors_are_the_ones_github_gives():
    assert github_anchor("`serving.speculative_decoding`, method `ngram` or `suffix`") == (
        "servingspeculative_decoding-method-ngram-or-suffix"
    )
    assert github_anchor("Promotion: only what the gate proved, dev → staging → prod") == (
        "promotion-only-what-the-gate-proved-dev--staging--prod"
    )
    assert github_anchor("`config/teams/<team>.yaml`") == "configteamsteamyaml"


def test_schema_writes_no_docs_into_a_users_project(tmp_path, capsys, monkeypatch):
    """In a user's project `optigate schema` writes and checks the JSON schema only: the reference pages are
    optigate's own docs (--docs)."""
    monkeypatch.chdir(tmp_path)
    assert main(["schema"]) == 0
    assert sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*") if p.is_file()) == [
        "config/schema/calibration.schema.json",
        "config/schema/environments.schema.json",
        "config/schema/team.schema.json",
    ]
    assert main(["schema", "--check"]) == 0


def _tables(markdown: str) -> dict[str, set[str]]:
    """Each section's heading -> the keys of its table's rows (the first column, link or not)."""
    import re

    tables: dict[str, set[str]] = {}
    heading = ""
    for line in markdown.splitlines():
        if line.startswith("#"):
            heading = line
            tables.setdefault(heading, set())
        match = re.match(r"\| \[?`([^`]+)`", line)
        if match and heading:
            tables[heading].add(match.group(1))
    return tables


def test_every_model_of_the_config_has_a_table_with_all_its_keys():
    """Every pydantic model defined in optigate/config/models.py, reachable from a file's root or not: its keys
    (aliases as a file spells them) are the rows of one table of the reference; a mixin's are within its user's."""
    import inspect

    from optigate.config import models

    defined = [
        model
        for _, model in inspect.getmembers(models, inspect.isclass)
        if issubclass(model, BaseModel) and model.__module__ == models.__name__ and model.model_fields
    ]
    assert len(defined) > 40
    tables = _tables(render_reference())
    uncovered = {}
    for model in defined:
        keys = {info.alias or name for name, info in model.model_fields.items()}
        if not any(keys <= rows for rows in tables.values()):
            best = max(tables.values(), key=lambda rows: len(keys & rows))
            uncovered[model.__name__] = sorted(keys - best)
    assert uncovered == {}
