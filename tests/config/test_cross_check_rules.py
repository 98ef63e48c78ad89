"""`gate.benchmark.cross_check: sagemaker` is refused, at its YAML path with the reason and what to change, where
SageMaker's managed benchmark cannot target the gate's endpoints; otherwise it is accepted with its defaults."""

from __future__ import annotations

import pytest

from optigate.config.loader import ConfigError
from optigate.config.models import CrossCheckTolerance
from optigate.deployment import load_resolved_team
from tests.fixtures.config_files import minimal_team

GATE = """\
gate:
  candidate:
    quantization: fp8
  evaluation:
    dataset_s3_uri: s3://acme-eval/demo/
  benchmark:
    concurrency: [4, 16]
    cross_check: sagemaker
"""


def _issues(path) -> list:
    with pytest.raises(ConfigError) as caught:
        load_resolved_team(path)
    return caught.value.issues


def test_a_cross_check_with_a_tokenizer_on_lmi_is_accepted_with_the_stated_tolerance(tmp_path):
    path = minimal_team(tmp_path, "llama-3.1-8b", "ml.g6e.2xlarge", tail=GATE + "    cross_check_tokenizer: a/b\n")
    team = load_resolved_team(path).team
    assert team.gate.benchmark.cross_check == "sagemaker"
    assert team.gate.benchmark.cross_check_tolerance == CrossCheckTolerance()
    assert CrossCheckTolerance().model_dump() == {
        "ttft_p99_ms": 500.0,
        "ttft_p99_pct": 50.0,
        "itl_p99_ms": 5.0,
        "itl_p99_pct": 25.0,
        "throughput_pct": 20.0,
    }


def test_a_model_from_s3_without_a_tokenizer_is_refused_with_what_to_set(tmp_path):
    (issue,) = _issues(minimal_team(tmp_path, "llama-3.1-8b", "ml.g6e.2xlarge", tail=GATE))
    assert issue.path == "gate.benchmark.cross_check_tokenizer"
    assert "AIPerf downloads a Hugging Face tokenizer" in issue.message
    assert "set gate.benchmark.cross_check_tokenizer" in issue.message


def test_a_hugging_face_source_names_its_own_tokenizer(tmp_path):
    path = minimal_team(tmp_path, "llama-3.1-8b", "ml.g6e.2xlarge", tail=GATE)
    text = path.read_text().replace(
        "    s3_uri: s3://acme-models/m/\n",
        "    hugging_face:\n      model_id: acme/llama-8b\n      s3_uri: s3://acme-models/m/\n",
    )
    path.write_text(text)
    assert load_resolved_team(path).team.gate.benchmark.cross_check_tokenizer is None  # derived, not required


def test_a_tensorrt_llm_endpoint_is_refused_naming_the_api_the_job_sends(tmp_path):
    serving = "container:\n  family: lmi-trtllm\n  version: 0.33.0\n"
    path = minimal_team(
        tmp_path, "llama-3.1-8b", "ml.g6e.2xlarge", serving, tail=GATE + "    cross_check_tokenizer: a/b\n"
    )
    issues = [i for i in _issues(path) if i.path == "gate.benchmark.cross_check"]
    assert issues, _issues(path)
    assert "sends OpenAI chat completions (`messages`)" in issues[0].message
    assert "runs lmi-trtllm" in issues[0].message and "set cross_check: none" in issues[0].message


def test_a_cross_check_without_a_gate_is_refused(tmp_path):
    tail = "gate:\n  benchmark:\n    cross_check: sagemaker\n    cross_check_tokenizer: a/b\n"
    (issue,) = _issues(minimal_team(tmp_path, "llama-3.1-8b", "ml.g6e.2xlarge", tail=tail))
    assert issue.path == "gate.benchmark.cross_check" and "without gate.candidate there is no gate" in issue.message


def test_an_unknown_engine_and_a_negative_tolerance_are_refused(tmp_path):
    tail = (
        GATE.replace("cross_check: sagemaker", "cross_check: aiperf") + "    cross_check_tolerance: {ttft_p99_ms: -1}\n"
    )
    paths = {i.path for i in _issues(minimal_team(tmp_path, "llama-3.1-8b", "ml.g6e.2xlarge", tail=tail))}
    assert {"gate.benchmark.cross_check", "gate.benchmark.cross_check_tolerance.ttft_p99_ms"} <= paths
