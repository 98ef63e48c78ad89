"""The optimized candidate the gate proves is the model a promotion deploys: the team's pinned LMI image
(never the job's optional RecommendedInferenceImage), the environment it runs with, and every file it
reads (an EAGLE-3 head the job does not write is staged into the job's output). Executed through the
harness: moto S3 holds the baseline's files, the emulated optimization job writes its output."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from optigate.deployment.gate import GatePlan
from optigate.deployment.optimization import job_serving_options
from optigate.promote.resolve import deployable_container, newest_approved
from optigate.rehearse.gate_handlers import evaluation_writer
from optigate.rehearse.gate_run import BUCKET, LIVE_IMAGE, GateRun
from optigate.rehearse.harness import REGION, GateHarness
from optigate.rehearse.scenario import Scenario

MODEL_BUCKET, MODEL_KEY = "acme-models", "llama-3.1-8b/"  # the gate stack's baseline_model_uri
SPECULATIVE = {"method": "eagle3", "model": "/opt/ml/model/eagle3", "num_speculative_tokens": 3}
EAGLE_ENVIRONMENT = {
    "OPTION_QUANTIZE": "fp8",
    "OPTION_MAX_MODEL_LEN": "8192",
    "OPTION_SPECULATIVE_CONFIG": json.dumps(SPECULATIVE, sort_keys=True, separators=(",", ":")),
}
HEAD = {"eagle3/config.json": b'{"architectures": ["LlamaForCausalLMEagle3"]}', "eagle3/model.safetensors": b"head"}
OTHER_IMAGE = "763104351884.dkr.ecr.us-east-1.amazonaws.com/djl-inference:0.29.0-lmi11.0.0-cu124"


@pytest.fixture(scope="module")
def eagle_template(tmp_path_factory, gate_synth) -> dict[str, Any]:
    """The gate stack of a candidate that is an fp8 optimization job's output served with an EAGLE-3 head
    from the baseline's prefix (as research's)."""
    return gate_synth(True, tmp_path_factory.mktemp("gate-eagle"), candidate_environment=EAGLE_ENVIRONMENT)


def _write_job_output(request: dict) -> None:
    """What the LMI quantization job writes: the checkpoint and serving.properties, nothing else."""
    import boto3

    from optigate.config.models import split_s3_uri

    bucket, key = split_s3_uri(request["OutputConfig"]["S3OutputLocation"])
    s3 = boto3.client("s3", region_name=REGION)
    for name, body in {
        "config.json": b"{}",
        "model.safetensors": b"fp8",
        "serving.properties": b"option.quantize=compressed-tensors\n",
    }.items():
        s3.put_object(Bucket=bucket, Key=key + name, Body=body)


def _run(
    template, emulators, gate_handlers, *, recommended: str | None, head: dict[str, bytes], approve: bool = False
) -> dict[str, Any]:
    """One short gate run (the evaluation fails, so the verdict is a quick Rejected, recorded as a package)
    with the baseline's `head` files in moto S3; also the parameters of the SageMaker requests it made.
    `approve`: a person then approves the package, and `optigate resolve` reads what a promotion deploys."""
    scenario = Scenario(
        on_processing_job=evaluation_writer("fail", ["qa_exact_match drops by 4.0%"]),
        on_optimization_job=_write_job_output,
        recommended_inference_image=recommended,
    )
    with GateHarness(lambda_handlers=gate_handlers(emulators), scenario=scenario, region=REGION) as harness:
        s3 = harness.client("s3")
        s3.create_bucket(Bucket=MODEL_BUCKET)
        for name, body in {"config.json": b"{}", "model.safetensors": b"bf16", **head}.items():
            s3.put_object(Bucket=MODEL_BUCKET, Key=MODEL_KEY + name, Body=body)
        run = GateRun(template, harness, {"requests_per_stream": 4})
        result = run.execute()
        history = harness.history(result["execution"]["executionArn"])
        state = harness.sagemaker.region_state(harness.sagemaker_backend())
        result["optimization_requests"] = list(state.optimization_requests.values())
        result["candidate_objects"] = harness.s3_objects(BUCKET, "optimized/")
        if approve:
            sagemaker = harness.client("sagemaker")
            for package in result["packages"]:
                sagemaker.update_model_package(
                    ModelPackageArn=package["ModelPackageArn"], ModelApprovalStatus="Approved"
                )
            result["served"] = newest_approved(sagemaker, run.group)
    result["create_model"] = [
        json.loads(event["taskScheduledEventDetails"]["parameters"])
        for event in history
        if event.get("taskScheduledEventDetails", {}).get("resource") == "createModel"
    ]
    return result


@pytest.mark.slow
@pytest.mark.parametrize("recommended", [OTHER_IMAGE, None], ids=["another-recommended-image", "none-recommended"])
def test_the_candidate_runs_the_pinned_image_whatever_the_job_recommends(
    eagle_template, emulators, gate_handlers, nothing_left, recommended
):
    result = _run(eagle_template, emulators, gate_handlers, recommended=recommended, head=HEAD)
    assert result["execution"]["error"] == "CandidateRejected", result["execution"].get("cause")
    (job,) = result["optimization_requests"]
    assert [config["ModelQuantizationConfig"]["Image"] for config in job["OptimizationConfigs"]] == [LIVE_IMAGE]
    (create_model,) = result["create_model"]
    assert create_model["PrimaryContainer"]["Image"] == LIVE_IMAGE
    nothing_left(result)


@pytest.mark.slow
def test_the_candidate_prefix_holds_the_eagle3_head_before_the_model_is_created(
    eagle_template, emulators, gate_handlers
):
    result = _run(eagle_template, emulators, gate_handlers, recommended=OTHER_IMAGE, head=HEAD)
    (create_model,) = result["create_model"]
    prefix = create_model["PrimaryContainer"]["ModelDataSource"]["S3DataSource"]["S3Uri"]
    run_prefix = prefix.removeprefix(f"s3://{BUCKET}/")
    # The job's output and the baseline's head, nothing else of the baseline (the bf16 weights stay behind).
    assert {key.removeprefix(run_prefix): body for key, body in result["candidate_objects"].items()} == {
        "config.json": b"{}",
        "model.safetensors": b"fp8",
        "serving.properties": b"option.quantize=compressed-tensors\n",
        **HEAD,
    }
    # OPTION_SPECULATIVE_CONFIG names /opt/ml/model/eagle3: the candidate's prefix has it.
    assert json.loads(create_model["PrimaryContainer"]["Environment"]["OPTION_SPECULATIVE_CONFIG"]) == SPECULATIVE
    states = result["states"]
    assert states.index("StageCandidateFiles") < states.index("CreateCandidateModel")


@pytest.mark.slow
def test_the_package_records_the_candidate_models_container_and_a_promotion_deploys_it(
    eagle_template, emulators, gate_handlers
):
    result = _run(eagle_template, emulators, gate_handlers, recommended=None, head=HEAD, approve=True)
    (create_model,) = result["create_model"]
    candidate = create_model["PrimaryContainer"]
    (package,) = result["package_details"]
    (container,) = package["InferenceSpecification"]["Containers"]
    recorded = {key: container[key] for key in ("Image", "Environment", "ModelDataSource")}
    assert recorded == {key: candidate[key] for key in recorded}
    # What serving.properties makes the candidate run, recorded: the fp8 job's checkpoint is compressed-tensors.
    assert container["Environment"]["OPTION_QUANTIZE"] == "compressed-tensors"
    # Approved, the lock names that image, environment and prefix (with the staged head), which LmiModel
    # deploys unchanged (tests/promote/test_lock.py).
    served = result["served"]
    assert (served.image, served.environment, served.model_data_uri) == (
        candidate["Image"],
        candidate["Environment"],
        candidate["ModelDataSource"]["S3DataSource"]["S3Uri"],
    )


@pytest.mark.parametrize(
    ("change", "refusal"),
    [
        ({"ModelDataUrl": "s3://m/model.tar.gz"}, "ModelDataUrl"),
        ({"AdditionalModelDataSources": [{"ChannelName": "draft_model"}]}, "AdditionalModelDataSources"),
        (
            {
                "ModelDataSource": {
                    "S3DataSource": {"S3Uri": "s3://m/a.tar.gz", "S3DataType": "S3Object", "CompressionType": "Gzip"}
                }
            },
            "S3Object/Gzip",
        ),
        ({"ModelDataSource": {}}, "names no model data"),
    ],
)
def test_a_package_a_stack_would_deploy_differently_is_refused(change, refusal):
    data = {"S3DataSource": {"S3Uri": "s3://gate/optimized/r/", "S3DataType": "S3Prefix", "CompressionType": "None"}}
    container = {"Image": LIVE_IMAGE, "Environment": {}, "ModelDataSource": data}
    package = {"ModelPackageArn": "arn:p", "InferenceSpecification": {"Containers": [container]}}
    assert deployable_container(package) == (container, "s3://gate/optimized/r/")
    bad = {**package, "InferenceSpecification": {"Containers": [{**container, **change}]}}
    with pytest.raises(ValueError, match=refusal):
        deployable_container(bad)
    with pytest.raises(ValueError, match="2 containers"):
        deployable_container({**package, "InferenceSpecification": {"Containers": [container, container]}})


@pytest.mark.slow
def test_a_missing_head_fails_closed_before_the_candidate_model(eagle_template, emulators, gate_handlers, nothing_left):
    result = _run(eagle_template, emulators, gate_handlers, recommended=None, head={})
    assert result["execution"]["status"] == "FAILED"
    assert "nothing to stage under" in result["execution"]["cause"] and "eagle3/" in result["execution"]["cause"]
    assert "CreateCandidateModel" not in result["states"] and result["packages"] == []
    nothing_left(result)


# --------------------------------------------------------------------------- the spec, at synth time


@pytest.fixture
def eagle_spec(gate_spec) -> Callable[..., GatePlan]:
    """`eagle_spec(**overrides)`: the spec of an fp8 job's candidate served with the baseline's EAGLE-3 head."""

    def spec(**overrides) -> GatePlan:
        return gate_spec(True, **{"candidate_environment": EAGLE_ENVIRONMENT, **overrides})

    return spec


def test_the_job_options_are_what_lmi_writes_into_serving_properties():
    fp8 = [{"ModelQuantizationConfig": {"OverrideEnvironment": {"OPTION_QUANTIZE": "fp8", "OTHER": "x"}}}]
    assert job_serving_options(fp8, LIVE_IMAGE) == {"OPTION_QUANTIZE": "compressed-tensors"}  # LMI 0.36
    assert job_serving_options(fp8, OTHER_IMAGE) == {"OPTION_QUANTIZE": "fp8"}  # LMI 0.29: AutoFP8
    with pytest.raises(ValueError, match="cannot tell which quantize option"):
        job_serving_options(fp8, "123456789012.dkr.ecr.us-east-1.amazonaws.com/custom:latest")


def test_a_config_naming_another_image_is_refused(eagle_spec):
    other = [{"ModelQuantizationConfig": {"Image": OTHER_IMAGE, "OverrideEnvironment": {"OPTION_QUANTIZE": "fp8"}}}]
    with pytest.raises(ValueError, match="but the candidate serves"):
        eagle_spec(optimization_configs=other).optimization_job_configs()


def test_only_an_optimized_candidate_stages_the_head(eagle_spec):
    assert eagle_spec().staged_paths() == ("eagle3/",)
    assert eagle_spec(optimization_configs=None).staged_paths() == ()  # it reads the baseline's prefix
    assert eagle_spec(candidate_environment={"OPTION_QUANTIZE": "fp8"}).staged_paths() == ()
