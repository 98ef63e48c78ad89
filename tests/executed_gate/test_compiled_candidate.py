"""A compiled candidate (`gate.candidate: {container: {family: lmi-trtllm}, compile: true}`), executed: the gate's
optimization job gets a ModelCompilationConfig on the pinned TensorRT-LLM image with the TP, maximum length and batch
the candidate serves, the candidate runs the compiled artifacts, and the model package a promotion deploys is that
engine with what it is compiled for; a failed compilation fails closed and leaves nothing behind."""

from __future__ import annotations

from typing import Any

import pytest

from optigate.deployment.gate_parts import Side
from optigate.promote.lock import parse_compiled_for
from optigate.promote.resolve import newest_approved
from optigate.rehearse.gate_handlers import evaluation_writer
from optigate.rehearse.gate_run import BUCKET, GateRun
from optigate.rehearse.harness import REGION, GateHarness
from optigate.rehearse.scenario import Outcome, Scenario

TRTLLM_IMAGE = "763104351884.dkr.ecr.us-east-1.amazonaws.com/djl-inference:0.33.0-tensorrtllm0.21.0-cu128"
ENVIRONMENT = {
    "OPTION_MAX_INPUT_LEN": "8192",
    "OPTION_MAX_ROLLING_BATCH_SIZE": "32",
    "OPTION_ROLLING_BATCH": "trtllm",
    "OPTION_TENSOR_PARALLEL_DEGREE": "1",
}
COMPILATION = {"OverrideEnvironment": dict(ENVIRONMENT)}


@pytest.fixture(scope="module")
def compiled_template(tmp_path_factory, gate_synth) -> dict[str, Any]:
    """The gate stack of a candidate compiled to TensorRT-LLM engines for ml.g6.2xlarge (synthesized with cdk-nag)."""
    return gate_synth(
        True,
        tmp_path_factory.mktemp("gate-compiled"),
        candidate=Side(image=TRTLLM_IMAGE, engine_mode="async"),
        candidate_environment=dict(ENVIRONMENT),
        change={"container": {"family": "lmi-trtllm"}, "compile": True},
        optimization_configs=[{"ModelCompilationConfig": COMPILATION}],
    )


def _run(template, emulators, gate_handlers, scenario: Scenario, *, approve: bool = False, **inputs) -> dict[str, Any]:
    with GateHarness(lambda_handlers=gate_handlers(emulators), scenario=scenario, region=REGION) as harness:
        run = GateRun(template, harness, inputs)
        result = run.execute()
        state = harness.sagemaker.region_state(harness.sagemaker_backend())
        result["optimization_requests"] = list(state.optimization_requests.values())
        result["candidate_objects"] = harness.s3_objects(BUCKET, "optimized/")
        if approve:
            result["served"] = newest_approved(harness.client("sagemaker"), run.group)
    return result


@pytest.mark.slow
def test_a_compiled_candidate_is_proven_and_recorded_with_its_compile_target(
    compiled_template, emulators, gate_handlers, nothing_left
):
    scenario = Scenario(on_processing_job=evaluation_writer("pass"))
    result = _run(compiled_template, emulators, gate_handlers, scenario, approve=True)
    assert result["execution"]["status"] == "SUCCEEDED", result["execution"].get("cause")
    # One job: a compilation on the pinned TensorRT-LLM image, for the instance type, TP, length and batch served.
    (job,) = result["optimization_requests"]
    assert job["DeploymentInstanceType"] == "ml.g6.2xlarge"
    assert job["OptimizationConfigs"] == [{"ModelCompilationConfig": {"Image": TRTLLM_IMAGE, **COMPILATION}}]
    # The job's output holds the engines (one per TP rank) and the serving.properties the candidate runs with.
    output = job["OutputConfig"]["S3OutputLocation"].removeprefix(f"s3://{BUCKET}/")
    written = {key.removeprefix(output) for key in result["candidate_objects"]}
    assert {"tensorrt_llm/1/rank0.engine", "serving.properties"} <= written, written
    # Approved and recorded: the package's container is the compiled engine, with what it is compiled for.
    assert [p["ModelApprovalStatus"] for p in result["packages"]] == ["Approved"]
    (package,) = result["package_details"]
    (container,) = package["InferenceSpecification"]["Containers"]
    assert container["Image"] == TRTLLM_IMAGE
    assert container["ModelDataSource"]["S3DataSource"]["S3Uri"] == job["OutputConfig"]["S3OutputLocation"]
    assert {k: container["Environment"][k] for k in ENVIRONMENT} == ENVIRONMENT
    target = parse_compiled_for(package["CustomerMetadataProperties"]["compiled_for"])
    assert target == {
        "instance_type": "ml.g6.2xlarge",
        "OPTION_MAX_INPUT_LEN": "8192",
        "OPTION_MAX_ROLLING_BATCH_SIZE": "32",
        "OPTION_TENSOR_PARALLEL_DEGREE": "1",
    }
    # `optigate resolve` carries it into the lock, which the summary compares with the team file.
    served = result["served"]
    assert (served.image, served.model_data_uri, served.compiled_for) == (
        TRTLLM_IMAGE,
        job["OutputConfig"]["S3OutputLocation"],
        target,
    )
    nothing_left(result)


@pytest.mark.slow
def test_a_failed_compilation_fails_closed_and_cleans_up(compiled_template, emulators, gate_handlers, nothing_left):
    scenario = Scenario(
        optimization_job=Outcome(
            "FAILED", after=1, failure_reason="CompilationFatalError: TRT-LLM build ran out of memory"
        ),
        on_processing_job=evaluation_writer("pass"),
    )
    result = _run(compiled_template, emulators, gate_handlers, scenario, requests_per_stream=4)
    assert result["execution"]["status"] == "FAILED"
    cause = result["execution"].get("cause", "")
    assert "OptimizationFailed" in cause and "TRT-LLM build ran out of memory" in cause, cause
    assert result["packages"] == []
    assert "CreateCandidateModel" not in result["states"]
    nothing_left(result)


@pytest.mark.slow
def test_a_compilation_the_container_cannot_run_fails_the_job(tmp_path, gate_synth, emulators, gate_handlers):
    """The emulated job fails a compilation whose image compiles nothing (a vLLM image): the gate then reports the
    job's reason. (optigate never sends one: the config refuses compile: true on family lmi.)"""
    from optigate.rehearse.gate_run import LIVE_IMAGE

    template = gate_synth(
        True,
        tmp_path,
        candidate=Side(image=LIVE_IMAGE, engine_mode="async"),
        candidate_environment={"OPTION_MAX_MODEL_LEN": "8192", "OPTION_TENSOR_PARALLEL_DEGREE": "1"},
        change={"compile": True},
        optimization_configs=[
            {"ModelCompilationConfig": {"OverrideEnvironment": {"OPTION_TENSOR_PARALLEL_DEGREE": "1"}}}
        ],
    )
    result = _run(
        template, emulators, gate_handlers, Scenario(on_processing_job=evaluation_writer("pass")), requests_per_stream=4
    )
    cause = result["execution"].get("cause", "")
    assert "OptimizationFailed" in cause and "compiles nothing" in cause, cause
    assert result["packages"] == []


def test_the_compilation_and_its_record_validate_against_botocore(compiled_template):
    import re

    from optigate.rehearse.asl import sdk_calls
    from optigate.rehearse.gate_layout import gate_layout
    from optigate.rehearse.template import render_definition
    from optigate.rehearse.validation import parameter_errors
    from tests.template_rules.rules.sfn_optional_reads_guarded import unguarded_optional_reads

    def generic(logical, attribute):
        return f"arn:aws:iam::123456789012:role/{logical}" if attribute else logical

    substitutions = {"AWS::Partition": "aws", "AWS::Region": REGION, "AWS::AccountId": "123456789012", "*": generic}
    definition = render_definition(compiled_template, gate_layout(compiled_template).gate, substitutions)
    calls = {call.state: call for call in sdk_calls(definition)}
    for name in ("CreateOptimizationJob", "RecordApproved", "RecordRejected"):
        call = calls[name]
        assert parameter_errors(call.service, call.operation, call.parameters) == [], name
    # botocore's ParamValidator does not check patterns: CustomerMetadataProperties values allow letters, digits,
    # spaces and _.:/=+-@ only (no JSON), at most 256 characters.
    value = calls["RecordApproved"].parameters["CustomerMetadataProperties"]["compiled_for"]
    assert re.fullmatch(r"[A-Za-z0-9 _.:/=+\-@]{1,256}", value), value
    assert unguarded_optional_reads(definition) == []
