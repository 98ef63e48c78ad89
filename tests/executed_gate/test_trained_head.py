"""An EAGLE head the gate's optimization job trains (ModelSpeculativeDecodingConfig), executed through the harness:
the job quantizes and trains in one run, registers its output model (OutputConfig.SageMakerModel), the gate reads
where the head is from that model, serves it from the candidate's own prefix with OPTION_SPECULATIVE_CONFIG, records
exactly that container in the model package, and deletes the registered model on every path.

The emulated job's output layouts (optigate.rehearse.sagemaker.jobs.TRAINED_HEAD_LAYOUTS: optigate's assumption and
the SageMaker Python SDK's) are assumptions: the real one is not documented."""

from __future__ import annotations

import json
from typing import Any

import pytest

from optigate.deployment.optimization import TrainedHead
from optigate.rehearse.gate_handlers import evaluation_writer
from optigate.rehearse.gate_run import BUCKET, LIVE_IMAGE, GateRun
from optigate.rehearse.harness import REGION, GateHarness
from optigate.rehearse.sagemaker.jobs import EAGLE_HEAD_CHANNEL, SDK_DRAFT_CHANNEL, TRAINED_HEAD_LAYOUTS
from optigate.rehearse.scenario import Outcome, Scenario
from optigate.rehearse.template import render_definition
from optigate.rehearse.validation import parameter_errors
from tests.template_rules.rules.sfn_optional_reads_guarded import unguarded_optional_reads

TRAFFIC_BUCKET, TRAFFIC_KEY = "acme-traffic", "chat/"
TRAINING = {"S3Uri": f"s3://{TRAFFIC_BUCKET}/{TRAFFIC_KEY}", "S3DataType": "S3Prefix"}
FP8 = {"ModelQuantizationConfig": {"OverrideEnvironment": {"OPTION_QUANTIZE": "fp8"}}}
EAGLE = {"ModelSpeculativeDecodingConfig": {"Technique": "EAGLE"}}
RECORD = {
    "captureData": {
        "endpointInput": {
            "observedContentType": "application/json",
            "mode": "INPUT",
            "data": json.dumps({"messages": [{"role": "user", "content": "Where is my order?"}]}),
            "encoding": "JSON",
        }
    },
    "eventMetadata": {"eventId": "1", "inferenceTime": "2026-01-01T00:00:00Z"},
    "eventVersion": "0",
}


@pytest.fixture(scope="module")
def head_template(tmp_path_factory, gate_synth) -> dict[str, Any]:
    """A candidate quantized to fp8 and given a trained EAGLE head by one optimization job."""
    return gate_synth(
        True,
        tmp_path_factory.mktemp("gate-trained-head"),
        candidate_environment={"OPTION_QUANTIZE": "fp8", "OPTION_MAX_MODEL_LEN": "8192"},
        change={"quantization": "fp8", "speculative_decoding": {"method": "eagle", "train_from": TRAINING["S3Uri"]}},
        optimization_configs=[FP8, EAGLE],
        trained_head=TrainedHead(train_from=TRAINING["S3Uri"], s3_data_type="S3Prefix", num_speculative_tokens=3),
    )


@pytest.fixture(scope="module")
def eagle_only_template(tmp_path_factory, gate_synth) -> dict[str, Any]:
    """A candidate whose only change is a trained EAGLE head (chat's): the job rewrites no weights."""
    return gate_synth(
        True,
        tmp_path_factory.mktemp("gate-eagle-only"),
        candidate_environment={"OPTION_MAX_MODEL_LEN": "8192"},
        change={"speculative_decoding": {"method": "eagle", "train_from": TRAINING["S3Uri"]}},
        optimization_configs=[EAGLE],
        trained_head=TrainedHead(train_from=TRAINING["S3Uri"], s3_data_type="S3Prefix", num_speculative_tokens=3),
    )


def _run(template, emulators, gate_handlers, *, scenario: Scenario | None = None, traffic: bool = True):
    """One short gate run (the evaluation fails: a quick Rejected verdict, recorded as a package) with captured
    traffic under the training prefix (unless `traffic` is False); also the SageMaker requests it made, the
    candidate's objects, and what is left of the registered optimized model."""
    scenario = scenario or Scenario(on_processing_job=evaluation_writer("fail", ["qa_exact_match drops by 4.0%"]))
    with GateHarness(lambda_handlers=gate_handlers(emulators), scenario=scenario, region=REGION) as harness:
        s3 = harness.client("s3")
        s3.create_bucket(Bucket="acme-models")
        s3.put_object(Bucket="acme-models", Key="llama-3.1-8b/config.json", Body=b"{}")
        s3.put_object(Bucket="acme-models", Key="llama-3.1-8b/model.safetensors", Body=b"base weights")
        s3.create_bucket(Bucket=TRAFFIC_BUCKET)
        if traffic:
            s3.put_object(Bucket=TRAFFIC_BUCKET, Key=f"{TRAFFIC_KEY}2026/01/01/00/a.jsonl", Body=json.dumps(RECORD))
        run = GateRun(template, harness, {"requests_per_stream": 4})
        result = run.execute()
        history = harness.history(result["execution"]["executionArn"])
        state = harness.sagemaker.region_state(harness.sagemaker_backend())
        result["optimization_requests"] = list(state.optimization_requests.values())
        result["candidate_objects"] = harness.s3_objects(BUCKET, "optimized/")
        result["models"] = [m["ModelName"] for m in harness.client("sagemaker").list_models()["Models"]]
    result["calls"] = {
        event["taskScheduledEventDetails"]["resource"]: json.loads(event["taskScheduledEventDetails"]["parameters"])
        for event in history
        if "taskScheduledEventDetails" in event
    }
    return result


def _no_optimized_model_left(result: dict[str, Any]) -> None:
    assert not [name for name in result["models"] if "-optm-" in name], result["models"]
    assert "DeleteOptimizedModel" in result["states"]


@pytest.mark.slow
def test_one_job_quantizes_and_trains_the_head_from_the_configured_data(head_template, emulators, gate_handlers):
    result = _run(head_template, emulators, gate_handlers)
    assert result["execution"]["error"] == "CandidateRejected", result["execution"].get("cause")
    (job,) = result["optimization_requests"]
    # One item per technique, quantization first, in ONE job; the EAGLE item trains on the configured data.
    assert job["OptimizationConfigs"] == [
        {"ModelQuantizationConfig": {"Image": LIVE_IMAGE, "OverrideEnvironment": {"OPTION_QUANTIZE": "fp8"}}},
        {"ModelSpeculativeDecodingConfig": {"Technique": "EAGLE", "TrainingDataSource": TRAINING}},
    ]
    run_id = job["OptimizationJobName"].rsplit("-", 1)[-1]
    assert job["OutputConfig"]["SageMakerModel"] == {"ModelName": f"chat-dev-optm-{run_id}"}


@pytest.mark.slow
def test_the_trained_head_is_served_from_the_candidates_prefix_and_recorded_in_the_package(
    head_template, emulators, gate_handlers, nothing_left
):
    result = _run(head_template, emulators, gate_handlers)
    candidate = result["calls"]["createModel"]["PrimaryContainer"]
    prefix = candidate["ModelDataSource"]["S3DataSource"]["S3Uri"]
    (job,) = result["optimization_requests"]
    assert prefix == job["OutputConfig"]["S3OutputLocation"]  # one prefix: CloudFormation can deploy it
    # The head the job wrote is under that prefix, and OPTION_SPECULATIVE_CONFIG names it by container path; the
    # method comes from the head (an EAGLE-3 architecture), the token count from the config.
    head = f"{prefix.removeprefix(f's3://{BUCKET}/')}{EAGLE_HEAD_CHANNEL}/config.json"
    assert head in result["candidate_objects"]
    speculative = json.loads(candidate["Environment"]["OPTION_SPECULATIVE_CONFIG"])
    assert speculative == {
        "method": "eagle3",
        "model": f"/opt/ml/model/{EAGLE_HEAD_CHANNEL}",
        "num_speculative_tokens": 3,
    }
    # The rest of the environment is the candidate's, with what the fp8 job writes into serving.properties.
    assert candidate["Environment"]["OPTION_QUANTIZE"] == "compressed-tensors"
    assert candidate["Image"] == LIVE_IMAGE
    # The package a promotion deploys is exactly this container.
    (package,) = result["package_details"]
    (container,) = package["InferenceSpecification"]["Containers"]
    assert {k: container[k] for k in ("Image", "Environment", "ModelDataSource")} == {
        k: candidate[k] for k in ("Image", "Environment", "ModelDataSource")
    }
    states = result["states"]
    assert (
        states.index("DescribeOptimizedModel") < states.index("StageTrainedHead") < states.index("CreateCandidateModel")
    )
    _no_optimized_model_left(result)
    nothing_left(result)


def _served(result: dict[str, Any]) -> tuple[str, dict[str, Any], str]:
    """The recorded package's prefix (relative to the gate bucket), its speculative config, and the run's output.
    The evaluation fails (a quick Rejected verdict): the package records the container all the same, and the
    verdict on these layouts is tests/executed_gate/test_rehearse_teams.py's (APPROVED for chat and research)."""
    assert result["execution"]["error"] == "CandidateRejected", result["execution"].get("cause")
    (package,) = result["package_details"]
    (container,) = package["InferenceSpecification"]["Containers"]
    assert "AdditionalModelDataSources" not in container  # one prefix: CloudFormation deploys it after a promotion
    assert "OPTION_SPECULATIVE_DRAFT_MODEL" not in container["Environment"]
    (job,) = result["optimization_requests"]
    output = job["OutputConfig"]["S3OutputLocation"].removeprefix(f"s3://{BUCKET}/")
    prefix = container["ModelDataSource"]["S3DataSource"]["S3Uri"].removeprefix(f"s3://{BUCKET}/")
    return prefix, json.loads(container["Environment"]["OPTION_SPECULATIVE_CONFIG"]), output


@pytest.mark.slow
def test_the_sdk_layout_of_a_head_only_job_is_served_with_the_baseline_copied_beside_the_head(
    eagle_only_template, emulators, gate_handlers, nothing_left
):
    """The SDK's layout: the registered model reads the base weights from the team's own prefix (the job's
    ModelSource) and the head from channel `draft_model` in the job's output. The gate copies the baseline's every
    file and the head into `<output>model/`, and measures and records that one prefix."""
    scenario = Scenario(
        on_processing_job=evaluation_writer("fail", ["qa_exact_match drops by 4.0%"]), trained_head_layout="sdk"
    )
    result = _run(eagle_only_template, emulators, gate_handlers, scenario=scenario)
    prefix, speculative, output = _served(result)
    assert prefix == f"{output}model/"
    assert speculative == {"method": "eagle3", "model": "/opt/ml/model/speculative_head", "num_speculative_tokens": 3}
    objects = result["candidate_objects"]
    assert objects[f"{prefix}model.safetensors"] == b"base weights" and f"{prefix}config.json" in objects
    assert f"{prefix}speculative_head/config.json" in objects and f"{output}{SDK_DRAFT_CHANNEL}/config.json" in objects
    _no_optimized_model_left(result)
    nothing_left(result)


@pytest.mark.slow
@pytest.mark.parametrize("layout", TRAINED_HEAD_LAYOUTS)
def test_a_quantizing_and_training_job_is_served_in_place_in_either_layout(
    head_template, emulators, gate_handlers, nothing_left, layout
):
    """With a quantization in the job, the weights are in its output in both layouts; the head is served in place."""
    scenario = Scenario(
        on_processing_job=evaluation_writer("fail", ["qa_exact_match drops by 4.0%"]), trained_head_layout=layout
    )
    prefix, speculative, output = _served(_run(head_template, emulators, gate_handlers, scenario=scenario))
    channel = SDK_DRAFT_CHANNEL if layout == "sdk" else EAGLE_HEAD_CHANNEL
    assert (prefix, speculative["model"]) == (output, f"/opt/ml/model/{channel}")


@pytest.mark.slow
def test_a_failed_training_job_cleans_up_and_records_the_failure(head_template, emulators, gate_handlers, nothing_left):
    scenario = Scenario(
        optimization_job=Outcome("FAILED", after=1, failure_reason="ClientError: EAGLE training diverged"),
        on_processing_job=evaluation_writer("pass"),
    )
    result = _run(head_template, emulators, gate_handlers, scenario=scenario)
    assert (result["execution"]["status"], result["execution"]["error"]) == ("FAILED", "GateFailed")
    assert "EAGLE training diverged" in result["execution"]["cause"]
    assert "CreateCandidateModel" not in result["states"] and result["packages"] == []
    assert result["messages"] and "FAILED" in result["messages"][-1]["Subject"]
    _no_optimized_model_left(result)
    nothing_left(result)


@pytest.mark.slow
def test_no_training_data_fails_the_job_and_the_gate(head_template, emulators, gate_handlers, nothing_left):
    result = _run(head_template, emulators, gate_handlers, traffic=False)
    assert result["execution"]["status"] == "FAILED"
    assert f"no training data found at {TRAINING['S3Uri']}" in result["execution"]["cause"]
    assert result["packages"] == []
    _no_optimized_model_left(result)
    nothing_left(result)


@pytest.mark.slow
def test_kms_encrypted_training_data_fails_the_job(head_template, emulators, gate_handlers, nothing_left):
    """The emulated job reads optigate's interpretation of "unencrypted captured data" (no SSE-KMS)."""

    def kms_capture(request):
        import boto3

        s3 = boto3.client("s3", region_name=REGION)
        s3.put_object(Bucket=TRAFFIC_BUCKET, Key=f"{TRAFFIC_KEY}k.jsonl", Body=b"{}", ServerSideEncryption="aws:kms")

    scenario = Scenario(
        on_processing_job=evaluation_writer("pass"),
        optimization_job=lambda request: (kms_capture(request), Outcome("COMPLETED", after=1))[1],
    )
    result = _run(head_template, emulators, gate_handlers, scenario=scenario, traffic=False)
    assert result["execution"]["status"] == "FAILED"
    assert "is KMS-encrypted" in result["execution"]["cause"]
    _no_optimized_model_left(result)
    nothing_left(result)


@pytest.mark.slow
def test_a_registered_model_that_does_not_say_where_the_head_is_fails_before_any_candidate(
    head_template, emulators, gate_handlers, nothing_left
):
    scenario = Scenario(on_processing_job=evaluation_writer("pass"), eagle_model_environment={"OPTION_QUANTIZE": "fp8"})
    result = _run(head_template, emulators, gate_handlers, scenario=scenario)
    assert result["execution"]["status"] == "FAILED"
    assert "does not say where its EAGLE head is" in result["execution"]["cause"]
    assert "CreateCandidateModel" not in result["states"] and result["packages"] == []
    _no_optimized_model_left(result)
    nothing_left(result)


# --------------------------------------------------------------------------- synthesized


def test_the_new_calls_validate_against_botocore_and_read_optional_members_safely(head_template):
    from optigate.rehearse.asl import sdk_calls
    from optigate.rehearse.gate_layout import gate_layout

    def generic(logical, attribute):
        return f"arn:aws:iam::123456789012:role/{logical}" if attribute else logical

    substitutions = {"AWS::Partition": "aws", "AWS::Region": REGION, "AWS::AccountId": "123456789012", "*": generic}
    definition = render_definition(head_template, gate_layout(head_template).gate, substitutions)
    calls = {call.state: call for call in sdk_calls(definition)}
    assert calls["DescribeOptimizedModel"].operation == "DescribeModel"
    assert calls["DeleteOptimizedModel"].operation == "DeleteModel"
    for name in ("CreateOptimizationJob", "DescribeOptimizedModel", "DeleteOptimizedModel"):
        call = calls[name]
        assert parameter_errors(call.service, call.operation, call.parameters) == [], name
    assert unguarded_optional_reads(definition) == []


def test_the_fingerprint_names_the_training_data_and_method(gate_spec):
    def spec(**head) -> Any:
        trained = TrainedHead(**{"train_from": "data_capture", "s3_data_type": "S3Prefix", **head})
        return gate_spec(True, optimization_configs=[FP8, EAGLE], trained_head=trained)

    base = spec().fingerprint
    assert spec(train_from="s3://acme-traffic/other/").fingerprint != base
    assert spec(s3_data_type="ManifestFile").fingerprint != base
    assert spec(method="eagle-other").fingerprint != base
    assert spec(num_speculative_tokens=5).fingerprint != base
    # The capture bucket's name is a CloudFormation token: not part of the plan, so not of the proof (train_from says
    # data_capture); the constructs give it to the job.
    token = "s3://${Token[TOKEN.1]}/capture/chat-dev/"
    job = spec().optimization_job_configs(token)
    assert job is not None and job[1]["ModelSpeculativeDecodingConfig"]["TrainingDataSource"]["S3Uri"] == token
    assert spec().fingerprint == base


def test_an_eagle_item_needs_a_trained_head_and_back(gate_spec):
    with pytest.raises(ValueError, match="needs a trained_head"):
        gate_spec(True, optimization_configs=[FP8, EAGLE])
    with pytest.raises(ValueError, match="needs a trained_head"):
        gate_spec(True, trained_head=TrainedHead(train_from="data_capture"))


def test_the_stager_may_read_the_baselines_prefix_and_nothing_else_of_its_bucket(head_template):
    """The SDK's layout leaves the base weights at the team's prefix: the staging function copies them, so its role
    reads that prefix (objects and listing), no other key of the model bucket, and writes none of it."""
    resources = head_template["Resources"]
    (function,) = [
        r for k, r in resources.items() if "StageCandidateFunction" in k and r["Type"] == "AWS::Lambda::Function"
    ]
    role = function["Properties"]["Role"]["Fn::GetAtt"][0]
    statements = [
        statement
        for r in resources.values()
        if r["Type"] == "AWS::IAM::Policy" and {"Ref": role} in r["Properties"]["Roles"]
        for statement in r["Properties"]["PolicyDocument"]["Statement"]
    ]

    def on_model_bucket(statement) -> bool:
        return "acme-models" in json.dumps(statement["Resource"])

    reads = sorted(
        (
            statement["Action"] if isinstance(statement["Action"], str) else tuple(statement["Action"]),
            json.dumps(statement.get("Condition")),
        )
        for statement in statements
        if on_model_bucket(statement)
    )
    assert reads == [
        ("s3:GetObject", "null"),
        ("s3:ListBucket", json.dumps({"StringLike": {"s3:prefix": ["llama-3.1-8b/*"]}})),
    ]
    for statement in statements:
        if on_model_bucket(statement) and statement["Action"] == "s3:GetObject":
            assert json.dumps(statement["Resource"]).endswith('s3:::acme-models/llama-3.1-8b/*"]]}'), statement
