"""The README and the docs say what the code does: every team file they show validates, one team file per kind is
in the README, each metric has one spelling, and the set-up time is stated once."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
import yaml

from optigate.deployment import load_resolved_project, load_resolved_team
from tests.conftest import CONFIG, REPO

PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
YAML_BLOCK = re.compile(r"^```ya?ml\n(.*?)^```", re.S | re.M)


def _team_blocks(page: Path) -> list[tuple[int, str]]:
    """(line, text) of each YAML block of `page` that is a whole team file (it has a top-level `team:`)."""
    text = page.read_text()
    blocks = []
    for match in YAML_BLOCK.finditer(text):
        if re.search(r"^team:", match.group(1), re.M):
            blocks.append((text[: match.start()].count("\n") + 1, match.group(1)))
    return blocks


TEAM_BLOCKS = [(page, line, block) for page in PAGES for line, block in _team_blocks(page)]


def test_the_readme_has_a_complete_team_file_per_kind():
    teams = [yaml.safe_load(block) for page, _, block in TEAM_BLOCKS if page.name == "README.md"]
    kinds = {
        "endpoint": [t for t in teams if not t.get("adapters") and not t["serving"].get("instance_pools")],
        "adapters on inference components": [t for t in teams if t.get("adapters")],
        "instance pools": [t for t in teams if t["serving"].get("instance_pools")],
        "compiled": [t for t in teams if t.get("gate", {}).get("candidate", {}).get("compile")],
    }
    assert {kind: len(found) >= 1 for kind, found in kinds.items()} == dict.fromkeys(kinds, True)


@pytest.mark.parametrize(("page", "line", "block"), TEAM_BLOCKS, ids=[f"{p.name}:{line}" for p, line, _ in TEAM_BLOCKS])
def test_every_team_file_in_the_docs_validates(page, line, block, tmp_path):
    """Alone (load_resolved_team) and in the example project (the suite's own, tests/fixtures/project: its
    environments.yaml's rules apply, e.g. a capture an EAGLE head trains from), in place of the example team of the
    same name if there is one."""
    name = yaml.safe_load(block)["team"]
    alone = tmp_path / f"{name}.yaml"
    alone.write_text(block)
    assert load_resolved_team(alone).team.team == name
    config = tmp_path / "config"
    shutil.copytree(CONFIG, config)
    (config / "teams" / f"{name}.yaml").write_text(block)
    assert list(load_resolved_project(config, teams=[name]).teams) == [name]


def test_a_team_file_shown_for_an_example_team_is_that_file():
    """The README's copy of chat.yaml is the example's chat.yaml itself (as the suite keeps it, tests/fixtures/project),
    so the two cannot drift apart."""
    shown = {yaml.safe_load(block)["team"]: block for page, _, block in TEAM_BLOCKS}
    examples = {path.stem: path.read_text() for path in (CONFIG / "teams").glob("*.yaml")}
    copies = {name: block for name, block in shown.items() if name in examples}
    assert len(copies) >= 2
    assert {name: block == examples[name] for name, block in copies.items()} == dict.fromkeys(copies, True)


#: Spellings of a metric other than the one the docs use: the config keys (`p99_ttft_ms_budget`, ...) in code, and in
#: prose "p99 TTFT", "p99 ITL", "p99 TPOT", "tokens/s" (TTFT, ITL and TPOT defined once, in the guide's table).
OTHER_SPELLINGS = re.compile(
    r"\b(TTFT|ITL|TPOT) p\d\d\b|\bP\d\d (TTFT|ITL|TPOT)|\bp\d\d[-_ ]([Tt]ime to|[Ii]nter-token|[Tt]ime per)"
    r"|\bp\d\d-(TTFT|ITL|TPOT)|\btok/s|[Tt]okens per second|[Tt]ime-to-first-token"
    r"|\d\dth[- ]percentile (TTFT|ITL|TPOT|latency)"
)


def test_each_metric_has_one_spelling_in_the_readme_and_the_docs():
    found = [
        f"{page.name}:{number}: {match.group(0)}"
        for page in PAGES
        for number, line in enumerate(page.read_text().splitlines(), 1)
        for match in OTHER_SPELLINGS.finditer(line)
    ]
    assert found == []


def test_other_spellings_are_caught():
    """The pattern above finds what it is meant to (a test whose pattern matched nothing would pass anyway)."""
    for text in ("TTFT p99", "P99 ITL", "p99 inter-token latency", "p99 time to first token", "580 tok/s"):
        assert OTHER_SPELLINGS.search(text), text
    for text in ("p99 TTFT", "p99 ITL", "p99_ttft_ms_budget", "output tokens/s"):
        assert not OTHER_SPELLINGS.search(text), text


def test_the_set_up_time_is_stated_once():
    """One figure for a first-time setup, in the README and where scripts/setup.sh announces it."""
    stated = {}
    for path in [*PAGES, REPO / "scripts" / "setup.sh"]:
        for match in re.finditer(
            r"(?:first-time )?set-?up[^.\n]{0,60}?about (\d+(?:\.\d+)?) minutes", path.read_text()
        ):
            stated[f"{path.name}: {match.group(0)}"] = match.group(1)
    assert len(stated) >= 2 and len(set(stated.values())) == 1, stated


def test_the_guides_bench_example_sends_enough_requests_for_the_p99_compare_judges():
    """Each synthetic `optigate bench` of the guide's example measures enough requests a level for `bench compare`
    to judge a p99 (optigate.bench.compare: MIN_TAIL_UNITS beyond the percentile), not only a duration."""
    import math

    from optigate.bench.compare import MIN_TAIL_UNITS

    needed = math.ceil(MIN_TAIL_UNITS / 0.01)
    text = (REPO / "docs" / "guide.md").read_text()
    example = text[text.index("## The streaming benchmark") :].split("```bash\n", 1)[1].split("```", 1)[0]
    commands = [c for c in example.replace("\\\n", " ").splitlines() if c.startswith("optigate bench --endpoint")]
    assert len(commands) == 2  # the baseline and the candidate that `bench compare` then compares
    for command in commands:
        match = re.search(r"--requests (\d+)", command)
        assert match and int(match.group(1)) >= needed and "--duration" not in command, command
