"""`optigate validate` reports in one pass (issue 37, item 6): a file's schema problems do not hide what the rules find
in the rest of it, nor one file's problems another's; the checks that read a key with a schema problem are held back,
said in one line. The files are written here, not read from the project's config/."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from optigate.cli import main
from optigate.config.loader import ConfigError, load_team
from optigate.config.models import TeamConfig
from optigate.config.reader import read_yaml
from optigate.config.valid_part import ValidPart, judge

ENVIRONMENTS = """\
environments:
  - name: dev
    account: "111111111111"
    region: us-east-1
"""

#: The onboarding team of the issue: Mistral on one A10G, three adapters, a new redline version as the candidate,
#: served in FP8 (which an A10G cannot do as W8A8).
LEGAL = """\
team: legal
model:
  source:
    s3_uri: s3://acme-ml-models-{region}/mistral-7b/
  architecture: mistral-7b-v0.3
  weights: bf16
serving:
  instance_type: ml.g5.2xlarge
  max_model_len: 32768
  max_batch_size: 16
  lora:
    max_loras: 3
    max_lora_rank: 16
  autoscaling:
    min_capacity: 1
    max_capacity: 1  # one one-GPU copy on the one one-GPU instance (more would stay pending: OG533)
adapters:
  - name: review
    s3_uri: s3://acme-ml-adapters-{region}/legal/review-v1.tar.gz
  - name: clauses
    s3_uri: s3://acme-ml-adapters-{region}/legal/clauses-v1.tar.gz
  - name: redline
    s3_uri: s3://acme-ml-adapters-{region}/legal/redline-v1.tar.gz
rollout:
  strategy: canary
  canary:
    traffic_percentage: 20
gate:
  candidate:
    adapters:
      redline: s3://acme-ml-adapters-{region}/legal/redline-v2.tar.gz
  benchmark:
    concurrency: [1, 16]
    p99_ttft_ms_budget: 2000
    p99_itl_ms_budget: 100
  evaluation:
    dataset_s3_uri: s3://acme-ml-eval-{region}/legal/
"""

#: What the issue's session fixed over three runs: a schema problem, then OG323 and OG452, then OG307.
BROKEN = (
    ("    traffic_percentage: 20", "    traffic_percentage: 80"),  # schema: at most 50
    ("  max_batch_size: 16", "  max_batch_size: 256"),  # OG323: the KV cache holds fewer sequences
    ("      redline: s3", "      redlin: s3"),  # OG452: not an adapter of the team
    ("  candidate:\n", "  candidate:\n    quantization: fp8\n"),  # OG307: no FP8 W8A8 on an A10G
)


@pytest.fixture(autouse=True)
def _in_tmp_path(tmp_path, monkeypatch):
    """Files are named relative to the working directory: config/teams/legal.yaml."""
    monkeypatch.chdir(tmp_path)


def _project(tmp_path: Path, teams: dict[str, str], environments: str = ENVIRONMENTS) -> Path:
    config = tmp_path / "config"
    (config / "teams").mkdir(parents=True)
    (config / "environments.yaml").write_text(environments)
    for name, text in teams.items():
        (config / "teams" / f"{name}.yaml").write_text(text)
    return config


def _edited(text: str, edits) -> str:
    for old, new in edits:
        assert old in text, old
        text = text.replace(old, new, 1)
    return text


def _validate(config: Path, capsys) -> tuple[int, list[str], list[str]]:
    """Exit code, the problem lines (without ✗) and the held-back lines."""
    code = main(["validate", str(config)])
    err = capsys.readouterr().err.splitlines()
    problems = [line.removeprefix("✗ ") for line in err if line.startswith("✗ ")]
    return code, problems, [line for line in err if line.startswith("held back ")]


def test_the_legal_team_is_valid_as_written(tmp_path, capsys):
    assert main(["validate", str(_project(tmp_path, {"legal": LEGAL}))]) == 0, capsys.readouterr().err


def test_a_schema_problem_and_the_rule_problems_elsewhere_come_in_one_run(tmp_path, capsys):
    """The issue's three rounds (schema → OG323 + OG452 → OG307) in one run, each at its line with its rule."""
    config = _project(tmp_path, {"legal": _edited(LEGAL, BROKEN)})
    code, problems, held = _validate(config, capsys)
    assert code == 1
    where = [problem.split(": ", 1)[0] for problem in problems]
    assert where == [
        "config/teams/legal.yaml:10 serving.max_batch_size [OG323]",
        "config/teams/legal.yaml:27 rollout.canary.traffic_percentage",
        "config/teams/legal.yaml:30 gate.candidate.quantization [OG307]",
        "config/teams/legal.yaml:32 gate.candidate.adapters.redlin [OG452]",
    ], problems
    assert "must be at most 50 (got 80)" in problems[1]
    # The rollout rules read the broken key: they wait for its fix, said once, at its line.
    assert held == [
        "held back config/teams/legal.yaml:27 rollout.canary.traffic_percentage: the rollout rules read it: they run "
        "once the problems above are fixed"
    ]


def test_the_checks_that_read_a_broken_key_are_held_back_and_the_others_report(tmp_path, capsys):
    """max_model_len sizes the KV cache: the capacity check (OG323) cannot judge a length the file does not give, so
    it waits; the adapter candidate's names do not read it and report now."""
    edits = [*BROKEN[1:3], ("  max_model_len: 32768", "  max_model_len: 32k")]
    code, problems, held = _validate(_project(tmp_path, {"legal": _edited(LEGAL, edits)}), capsys)
    assert code == 1
    assert [problem.split(": ", 1)[0] for problem in problems] == [
        "config/teams/legal.yaml:9 serving.max_model_len",
        "config/teams/legal.yaml:31 gate.candidate.adapters.redlin [OG452]",
    ]
    [line] = held
    assert line.startswith("held back config/teams/legal.yaml:9 serving.max_model_len: the ")
    assert "deployment checks (catalog, images, capacity plan)" in line and "[" not in line


def test_two_files_one_broken_by_its_schema_the_other_by_rules_and_an_environment_both_reported(tmp_path, capsys):
    """Every file is judged in the run: one file's schema problem, another's rule problem, and the cross-file check of
    that other team against environments.yaml (which a team with a problem used to skip)."""
    other = _edited(LEGAL, [("team: legal", "team: other"), ("    min_capacity: 1", "    min_capacity: 2"), BROKEN[1]])
    environments = ENVIRONMENTS + "    teams:\n      other:\n        autoscaling_max_capacity: 1\n"
    legal = _edited(LEGAL, [BROKEN[0]])
    code, problems, _ = _validate(_project(tmp_path, {"legal": legal, "other": other}, environments), capsys)
    assert code == 1
    assert any(p.startswith("config/teams/legal.yaml:27 rollout.canary.traffic_percentage: ") for p in problems)
    assert any(p.startswith("config/teams/other.yaml:10 serving.max_batch_size [OG323]: ") for p in problems)
    assert any(
        p.startswith("config/environments.yaml:7 environments[0].teams.other.autoscaling_max_capacity [OG605]")
        and "below team 'other's serving.autoscaling.min_capacity (2)" in p
        for p in problems
    ), problems


def test_an_environment_naming_a_team_without_a_file_is_reported_beside_a_broken_team(tmp_path, capsys):
    environments = ENVIRONMENTS + "    teams:\n      legl:\n        instance_count: 1\n"
    _, problems, _ = _validate(_project(tmp_path, {"legal": _edited(LEGAL, [BROKEN[0]])}, environments), capsys)
    assert any("[OG608]: no team file defines team 'legl'; did you mean 'legal'?" in p for p in problems), problems


def test_a_file_whose_required_key_is_broken_says_no_rule_checked_it(tmp_path, capsys):
    code, problems, held = _validate(
        _project(tmp_path, {"legal": _edited(LEGAL, [("team: legal", "team: Legal")])}), capsys
    )
    assert code == 1 and len(problems) == 1 and problems[0].startswith("config/teams/legal.yaml:1 team: ")
    assert held == [
        "held back config/teams/legal.yaml:1 team: no rule checked this file: team has a problem above "
        "and every rule needs it"
    ]


def test_an_unknown_key_holds_nothing_back(tmp_path):
    path = _project(tmp_path, {"legal": _edited(LEGAL, [*BROKEN[1:2], ("  max_batch_size:", "  max_batch:")])})
    with pytest.raises(ConfigError) as error:
        load_team(path / "teams" / "legal.yaml")
    assert [issue.path for issue in error.value.issues] == ["serving.max_batch"] and not error.value.held_back


# --------------------------------------------------------------------------- the valid part


def _part(tmp_path: Path, text: str) -> ValidPart[TeamConfig]:
    path = tmp_path / "team.yaml"
    path.write_text(text)
    part = ValidPart.of(read_yaml(path), TeamConfig)
    assert isinstance(part, ValidPart)
    return part


def test_a_broken_key_is_left_out_and_a_required_one_takes_its_parent(tmp_path):
    text = _edited(LEGAL, [("  max_model_len: 32768", "  max_model_len: 32k"), ("  - name: clauses\n", "  - nme: x\n")])
    part = _part(tmp_path, text)
    # `name` is required: the second adapter goes, the first and third stay (the third moved up in the model).
    assert sorted(part.left_out, key=str) == [("adapters", 1), ("serving", "max_model_len")]
    assert [adapter.name for adapter in part.value.adapters] == ["review", "redline"]
    assert part.value.serving.max_model_len is None


def test_a_check_keeps_what_it_found_before_it_read_a_key_left_out(tmp_path):
    from optigate.config.rule_registry import Problem

    part = _part(tmp_path, _edited(LEGAL, [("  max_model_len: 32768", "  max_model_len: 32k")]))
    team = part.value

    def check() -> list[Problem]:
        before = Problem(("serving", "instance_type"), f"on {team.serving.instance_type}")
        length = team.serving.max_model_len  # the key left out: what follows may depend on it
        return [before, Problem(("serving", "max_model_len"), f"length {length}")]

    with part.watched():
        kept, read = judge(check)
        untouched, nothing = judge(lambda: [Problem(("team",), team.team)])
    assert [problem.message for problem in kept] == ["on ml.g5.2xlarge"]
    assert read == {(part.file, ("serving", "max_model_len"))}
    assert len(untouched) == 1 and nothing == set()
    # A dump of the block holding it reads it too (a candidate is merged from one).
    with part.watched():
        _, read = judge(lambda: [Problem((), str(len(team.serving.model_dump())))])
    assert read == {(part.file, ("serving", "max_model_len"))}
    # Outside `watched`, reading it is not recorded.
    assert judge(lambda: [Problem((), str(team.serving.max_model_len))])[1] == set()


def test_the_part_of_a_file_whose_top_level_key_is_broken_cannot_be_made(tmp_path):
    path = tmp_path / "team.yaml"
    path.write_text(textwrap.dedent(LEGAL).replace("  architecture: mistral-7b-v0.3\n", ""))
    assert ValidPart.of(read_yaml(path), TeamConfig) == ("model",)
