"""The gate's benchmark speaks each side's LMI engine mode, resolved once and passed down (GatePlan), never guessed."""

from __future__ import annotations

from optigate.config.models import Environment
from optigate.deployment import load_resolved_team
from optigate.deployment.gate import resolve_gate
from optigate.promote.lock import ServedPackage
from tests.fixtures.config_files import minimal_team

GATE = """\
gate:
  candidate:
    quantization: fp8
  evaluation:
    dataset_s3_uri: s3://acme-eval/demo/
"""
DEV = Environment(name="dev", account="123456789012", region="us-east-1")
IMAGE = "763104351884.dkr.ecr.us-east-1.amazonaws.com/djl-inference:0.38.0-lmi29.0.0-cu130"


def test_both_sides_of_a_gate_on_the_newest_lmi_are_benchmarked_in_async_mode(tmp_path):
    resolved = load_resolved_team(minimal_team(tmp_path, "llama-3.1-8b", "ml.g6e.2xlarge", tail=GATE))
    plan = resolve_gate(resolved, DEV)
    assert (plan.candidate.engine_mode, plan.twin.engine_mode) == ("async", "async")
    assert plan.candidate_environment["OPTION_ASYNC_MODE"] == "true"


def test_a_live_package_an_earlier_optigate_rendered_is_benchmarked_in_its_rolling_batch(tmp_path):
    resolved = load_resolved_team(minimal_team(tmp_path, "llama-3.1-8b", "ml.g6e.2xlarge", tail=GATE))
    served = ServedPackage(
        model_package_arn="arn:aws:sagemaker:us-east-1:123456789012:model-package/demo/1",
        image=IMAGE,
        model_data_uri="s3://acme-models/m/",
        environment={"OPTION_ROLLING_BATCH": "vllm", "OPTION_TENSOR_PARALLEL_DEGREE": "1"},
    )
    plan = resolve_gate(resolved, DEV, served=served)
    assert (plan.candidate.engine_mode, plan.twin.engine_mode) == ("async", "rolling-batch")


def test_a_candidate_pinned_before_lmi_v17_is_benchmarked_in_the_rolling_batch(tmp_path):
    path = minimal_team(tmp_path, "llama-3.1-8b", "ml.g6e.2xlarge", "container: {version: 0.34.0}\n", tail=GATE)
    plan = resolve_gate(load_resolved_team(path), DEV)
    assert (plan.candidate.engine_mode, plan.twin.engine_mode) == ("rolling-batch", "rolling-batch")
