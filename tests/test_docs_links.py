"""Every relative link in README.md and docs/*.md points to a file that exists, and to a heading of it when
the link names an anchor."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

from optigate.config.reference import github_anchor
from tests.conftest import REPO

LINK = re.compile(r"!?\[(?:[^\]\\]|\\.)*\]\(([^()\s]+)(?:\s+\"[^\"]*\")?\)")
FENCE = re.compile(r"^\s*(```|~~~)")
EXPLICIT_ANCHOR = re.compile(r"<a\s+(?:id|name)=\"([^\"]+)\"")


def _prose_lines(text: str) -> list[str]:
    """The lines outside fenced code blocks, with inline code spans removed."""
    lines, fenced = [], False
    for line in text.splitlines():
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            lines.append(re.sub(r"`[^`]*`", "", line))
    return lines


def anchors(path: Path) -> set[str]:
    """The anchors GitHub makes for a Markdown file's headings (a repeated heading gets -1, -2, ...)."""
    found, seen = set(), Counter()
    text = path.read_text()
    fenced = False
    for line in text.splitlines():
        if FENCE.match(line):
            fenced = not fenced
        elif not fenced and re.match(r"#{1,6} ", line):
            slug = github_anchor(line.lstrip("#"))
            found.add(f"{slug}-{seen[slug]}" if seen[slug] else slug)
            seen[slug] += 1
    found |= set(EXPLICIT_ANCHOR.findall(text))
    return found


def broken_links(files: list[Path], root: Path) -> list[str]:
    problems = []
    for source in files:
        for line in _prose_lines(source.read_text()):
            for target in LINK.findall(line):
                if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto:
                    continue
                file_part, _, anchor = target.partition("#")
                resolved = (source.parent / file_part).resolve() if file_part else source
                where = f"{source.relative_to(root)}: ({target})"
                if not resolved.exists() or not resolved.is_relative_to(root):
                    problems.append(f"{where}: no such file")
                elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
                    problems.append(f"{where}: no heading #{anchor} in {resolved.relative_to(root)}")
    return problems


def test_every_relative_link_of_the_docs_resolves():
    files = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
    assert len(files) >= 5  # README, guide, configuration, design, contributing
    assert broken_links(files, REPO) == []


def test_the_check_finds_a_missing_file_and_a_missing_heading(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text(
        "# A\n\n## Same\n\n## Same\n\nSee [b](b.md#part-two), [gone](gone.md), [no part](b.md#part-three),\n"
        "[here](#same-1), [up](../README.md), [web](https://example.com/x.md) and `[code](nowhere.md)`.\n\n"
        "```\n[fenced](nowhere.md)\n```\n"
    )
    (tmp_path / "docs" / "b.md").write_text("# B\n\n## Part `two`\n")
    (tmp_path / "README.md").write_text("[a](docs/a.md#missing)\n")
    problems = broken_links([tmp_path / "README.md", tmp_path / "docs" / "a.md"], tmp_path)
    assert problems == [
        "README.md: (docs/a.md#missing): no heading #missing in docs/a.md",
        "docs/a.md: (gone.md): no such file",
        "docs/a.md: (b.md#part-three): no heading #part-three in docs/b.md",
    ]


#: The project's own code and docs (config/ is the user's: a doc may name a file the user creates there).
REPO_PATH = re.compile(r"`((?:optigate|tests|benchmarks|scripts|docs|examples)/[A-Za-z0-9_./-]*)`")


def missing_paths(files: list[Path], root: Path) -> list[str]:
    """Paths of the repository the docs name in code spans (`optigate/config/models.py`) that do not exist: a
    moved or renamed module leaves a doc behind. A placeholder is written with <...> or * and is not checked."""
    problems = []
    for source in files:
        for path in REPO_PATH.findall(source.read_text()):
            if not (root / path).exists():
                problems.append(f"{source.relative_to(root)}: `{path}` does not exist")
    return problems


def test_every_path_the_docs_name_exists():
    files = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
    assert missing_paths(files, REPO) == []


def test_the_path_check_finds_a_moved_module(tmp_path):
    (tmp_path / "optigate").mkdir()
    (tmp_path / "optigate" / "here.py").write_text("")
    (tmp_path / "README.md").write_text("`optigate/here.py`, `optigate/gone.py`, `optigate/<area>/x.py`, `tests/`\n")
    assert missing_paths([tmp_path / "README.md"], tmp_path) == [
        "README.md: `optigate/gone.py` does not exist",
        "README.md: `tests/` does not exist",
    ]
