"""docs/design.md's layout: every package and module of optigate, each said by its own docstring, rendered by
`optigate schema --docs docs` into the page's marked section and current."""

from __future__ import annotations

import re

import pytest

from optigate.cli import main
from optigate.layout_reference import (
    DESIGN_PAGE,
    LAYOUT_BEGIN,
    LAYOUT_END,
    NO_DOCSTRING,
    PACKAGE,
    render_layout,
    summary,
    with_layout,
)
from tests.conftest import REPO

DESIGN = REPO / "docs" / DESIGN_PAGE


def test_the_design_layout_is_current():
    committed = DESIGN.read_text()
    assert with_layout(committed, render_layout()) == committed, "run `optigate schema --docs docs` and commit it"


def test_every_package_and_module_has_a_docstring():
    assert NO_DOCSTRING not in render_layout()


def test_the_layout_links_every_module_and_package_once():
    """Walked from the files, independently of the renderer's walk: each module is linked once, each package too."""
    layout = render_layout()
    linked = re.findall(r"\]\(\.\./(optigate/[^)]*)\)", layout)
    modules = [p for p in PACKAGE.rglob("*.py") if p.name != "__init__.py" and "__pycache__" not in p.parts]
    packages = [p.parent for p in PACKAGE.rglob("__init__.py") if "__pycache__" not in p.parts]
    root = PACKAGE.parent
    expected = [p.relative_to(root).as_posix() for p in modules] + [
        f"{p.relative_to(root).as_posix()}/" for p in packages
    ]
    assert sorted(linked) == sorted(expected)
    assert len(packages) > 20 and len(modules) > 200  # the walk reaches every subpackage


def test_the_summary_is_the_first_sentence_of_the_first_paragraph():
    assert summary("One line.") == "One line."
    assert summary("A summary that\nwraps. And more.\n\nDetails.") == "A summary that wraps."
    assert summary("Steps: 1. settings, 2. quantize. Then.") == "Steps: 1. settings, 2. quantize."
    assert summary("Read it (e.g. `x`) as written. More.") == "Read it (e.g. `x`) as written."
    assert summary("No stop at all\n\nDetails.") == "No stop at all"
    assert summary(None) == summary("  ") == NO_DOCSTRING


def test_the_layout_escapes_html_but_not_code(tmp_path):
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text('"""The root: writes `s3://<bucket>/` and s3://<bucket>/."""\n')
    (package / "sub" / "__init__.py").write_text("")
    (package / "sub" / "mod.py").write_text('# a comment first\n"""A module, :data:`X` its constant."""\n')
    layout = render_layout(package)
    assert layout.splitlines()[3:-2] == [
        "- [`pkg/`](../pkg/): The root: writes `s3://<bucket>/` and s3://&lt;bucket&gt;/.",
        f"- [`pkg/sub/`](../pkg/sub/): {NO_DOCSTRING}",
        "  - [`mod.py`](../pkg/sub/mod.py): A module, `X` its constant.",
    ]


@pytest.mark.slow
def test_schema_writes_the_layout_and_check_fails_when_it_is_stale(tmp_path, capsys):
    schemas, docs = tmp_path / "schema", tmp_path / "docs"
    docs.mkdir()
    design = docs / DESIGN_PAGE
    design.write_text(f"# Design\n\nWritten by hand.\n\n{LAYOUT_BEGIN}\nold\n{LAYOUT_END}\n\nMore by hand.\n")
    options = ["--out", str(schemas), "--docs", str(docs)]
    assert main(["schema", *options]) == 0
    assert f"wrote {design}" in capsys.readouterr().out
    assert design.read_text() == f"# Design\n\nWritten by hand.\n\n{render_layout()}\n\nMore by hand.\n"
    assert main(["schema", "--check", *options]) == 0

    design.write_text(design.read_text().replace("More by hand.", "Changed by hand."))  # outside: the writer's own
    assert main(["schema", "--check", *options]) == 0
    capsys.readouterr()
    design.write_text(design.read_text().replace("stats.py", "statistics.py"))  # a module renamed, say
    assert main(["schema", "--check", *options]) == 1
    assert f"{design}'s layout is out of date; run `optigate schema --docs {docs}`" in capsys.readouterr().err

    design.write_text("# Design without the markers\n")
    assert main(["schema", "--check", *options]) == 1
    assert main(["schema", *options]) == 1
    assert f"{design}: no {LAYOUT_BEGIN} ... {LAYOUT_END} section" in capsys.readouterr().err
    design.unlink()
    assert main(["schema", "--check", *options]) == 1
    assert main(["schema", *options]) == 0  # a page that is not there is written as the section alone
    assert design.read_text() == f"{render_layout()}\n"
