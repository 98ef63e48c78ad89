"""One run reports every problem: a hardware problem does not hide what the capacity plan finds."""

from __future__ import annotations

from pathlib import Path

import pytest

from optigate.config.loader import ConfigError
from optigate.deployment import load_resolved_project
from tests.conftest import edited_config


def _problems(config: Path) -> list[str]:
    with pytest.raises(ConfigError) as error:
        load_resolved_project(config)
    return [str(issue) for issue in error.value.issues]


def test_a_precision_problem_and_a_capacity_problem_are_reported_together(tmp_path):
    edited_config(tmp_path, "teams/chat.yaml", "ml.g6.2xlarge", "ml.g5.2xlarge")
    edited_config(tmp_path, "teams/chat.yaml", "max_model_len: 8192", "max_model_len: 131072")
    problems = _problems(edited_config(tmp_path, "teams/chat.yaml", "max_batch_size: 32", "max_batch_size: 256"))
    assert any("serving.quantization: FP8 W8A8 needs compute capability" in p for p in problems)
    assert any("serving.max_batch_size: max_batch_size=256" in p and "KV cache on ml.g5.2xlarge" in p for p in problems)


def test_an_unknown_instance_type_still_stops_the_plan_with_one_problem(tmp_path):
    problems = _problems(edited_config(tmp_path, "teams/chat.yaml", "ml.g6.2xlarge", "ml.g6.2xlarg"))
    assert len(problems) == 1 and "unknown or unsupported instance type 'ml.g6.2xlarg'" in problems[0]


def test_a_serving_problem_is_not_repeated_under_the_shadow_candidate(tmp_path):
    """research's shadow candidate inherits its serving block: the problem is reported once, where it is."""
    from optigate.config.loader import load_team

    environment = "  kv_cache_dtype: auto\n  environment:\n    OPTION_MAX_MODEL_LEN: '1'\n"
    config = edited_config(tmp_path, "teams/research.yaml", "  kv_cache_dtype: auto\n", environment)
    research = config / "teams" / "research.yaml"
    with pytest.raises(ConfigError) as error:
        load_team(research)
    paths = [issue.path for issue in error.value.issues]
    assert paths == ["serving.environment.OPTION_MAX_MODEL_LEN"]


@pytest.mark.parametrize("name", ["ÄÖ_X", "option_x", "1X", "X-Y"])
def test_an_environment_variable_name_outside_ascii_upper_case_is_refused(tmp_path, name):
    from optigate.config.loader import load_team

    config = edited_config(tmp_path, "teams/chat.yaml", "serving:\n", f"serving:\n  environment:\n    {name}: '1'\n")
    with pytest.raises(ConfigError, match="environment variable names are upper-case letters"):
        load_team(config / "teams" / "chat.yaml")


@pytest.mark.parametrize("key", ["QUANTIZATION", "Quantization"])
def test_an_unknown_upper_case_candidate_key_is_an_issue_not_a_traceback(tmp_path, key):
    """Found by `benchmarks/fuzz_inputs.py --format config`: the candidate's error location lost a key that
    starts upper-case."""
    from optigate.config.loader import load_team

    config = edited_config(tmp_path, "teams/research.yaml", "      quantization: fp8\n", f"      {key}: fp8\n")
    research = config / "teams" / "research.yaml"
    with pytest.raises(ConfigError) as error:
        load_team(research)
    (issue,) = error.value.issues
    assert issue.path == f"rollout.shadow.candidate.{key}" and issue.line is not None
    assert "did you mean 'quantization'?" in issue.message


def test_the_guides_example_a_typo_and_a_rule_problem_in_one_run(tmp_path, capsys, monkeypatch):
    """The user guide shows two problems of one file, a schema error and a rule's: both are reported, as shown."""
    from optigate.cli import main
    from tests.conftest import REPO

    readme = (REPO / "docs" / "guide.md").read_text()
    intro = readme.index("all problems at once (a typo does not hide")
    block = readme[readme.index("```\n", intro) + 4 : readme.index("\n```", readme.index("```\n", intro) + 4)]
    expected = block.splitlines()
    assert len(expected) == 2

    edited_config(tmp_path, "teams/chat.yaml", "ml.g6.2xlarge", "ml.g5.2xlarge")
    edited_config(tmp_path, "teams/chat.yaml", "max_model_len: 8192", "max_model_length: 8192")
    monkeypatch.chdir(tmp_path)
    assert main(["validate", "config"]) == 1
    reported = [line.removeprefix("✗ ") for line in capsys.readouterr().err.splitlines() if line.startswith("✗")]
    assert reported == expected


def test_a_candidate_quantized_by_a_job_must_be_on_an_instance_type_the_job_takes(tmp_path):
    """CreateOptimizationJob's DeploymentInstanceType is narrower than the endpoints' types (botocore)."""
    from optigate.config.models import Serving
    from optigate.deployment.team import optimization_job_problems
    from tests.fixtures.config_files import minimal_team

    def team(quantization: str | None):
        from optigate.config.loader import load_team

        folder = tmp_path / (quantization or "none")
        folder.mkdir(exist_ok=True)
        tail = f"gate:\n  candidate:\n    quantization: {quantization}\n" if quantization else ""
        return load_team(minimal_team(folder, "llama-3.1-8b", "ml.g6.2xlarge", tail=tail), rules=False)

    job_outside = Serving(instance_type="ml.p5.4xlarge")
    (problem,) = optimization_job_problems(team("fp8"), job_outside)
    assert problem.path == ("gate", "candidate", "quantization") and "cannot run on ml.p5.4xlarge" in problem.message
    assert optimization_job_problems(team("fp8"), Serving(instance_type="ml.p5.48xlarge")) == []
    assert optimization_job_problems(team(None), job_outside) == []  # no job, nothing to refuse


def test_a_key_or_value_holding_a_line_break_is_still_one_line_per_problem(tmp_path):
    """Found by the calibration file's fuzz: a key `? "a\\nb"` printed its issue over two lines (`validate` too)."""
    config = edited_config(tmp_path, "teams/chat.yaml", "serving:\n", 'serving:\n  ? "max_\\nbatch"\n  : "1\\n2"\n')
    problems = _problems(config)
    assert problems and all("\n" not in problem for problem in problems)
    assert any("max_\\nbatch" in problem for problem in problems), problems
