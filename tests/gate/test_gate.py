"""The gate's synthesized definition: lint-clean, every SDK call valid for botocore, and executed
for real through moto's Step Functions executor (tests/gate/moto_sagemaker.py) with the project's
Lambda handlers in-process, the benchmark hitting emulator processes and S3/SNS in moto."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from tests.conftest import REPO
from optigate.gate.rehearse import ACCOUNT, REGION, GateRun, evaluation_writer, lambda_handlers, render, state_machines
from optigate.testing.moto_gate import GateHarness, Outcome, Scenario
from tests.sdk_validation import sdk_calls, validate

THRESHOLDS = {"concurrency": [4], "p99_ttft_ms_budget": 400.0, "p99_itl_ms_budget": 60.0, "min_throughput_gain_pct": 10.0, "max_error_rate": 0.01}


LIVE_IMAGE = "763104351884.dkr.ecr.us-east-1.amazonaws.com/djl-inference:0.36.0-lmi27.0.0-cu130"


def _spec(optimize: bool, shadow=None):
    from optigate.constructs.gate import GateSpec

    return GateSpec(
        team="chat", environment="dev", live_endpoint="chat-dev",
        model_role_arn=f"arn:aws:iam::{ACCOUNT}:role/chat-dev-model",
        instance_type="ml.g6.2xlarge", baseline_model_uri="s3://acme-models/llama-3.1-8b/",
        candidate_image="763104351884.dkr.ecr.us-east-1.amazonaws.com/djl-inference:0.36.0-lmi27.0.0-cu130",
        candidate_environment={"OPTION_QUANTIZE": "fp8", "OPTION_MAX_MODEL_LEN": "8192"},
        change={"quantization": "fp8"}, thresholds=THRESHOLDS,
        optimization_configs=[{"ModelQuantizationConfig": {"OverrideEnvironment": {"OPTION_QUANTIZE": "fp8"}}}] if optimize else None,
        # Long enough for a throughput interval: the decision needs >= 5 one-second buckets.
        levels=(2,), requests_per_slot=60, prompt_tokens=16, max_new_tokens=16,
        price_per_hour_usd=0.98, poll_seconds=0, max_polls=5, shadow=shadow,
    )


def _synth(optimize: bool, outdir, shadow: bool = False):
    from aws_cdk import App, Stack
    from aws_cdk import aws_kms as kms

    from optigate.constructs.benchmark_fleet import BenchmarkFleet, FleetTarget
    from optigate.constructs.common import secure_bucket
    from optigate.constructs.evaluation_job import EvaluationJob
    from optigate.constructs.gate import OptimizationGate, ShadowStage
    from optigate.constructs.lmi_model import LmiModel
    from optigate.constructs.tuned_endpoint import TunedEndpoint, VariantSettings
    from optigate.stacks.app import FEATURE_FLAGS, enable_nag

    app = App(outdir=str(outdir), context=FEATURE_FLAGS)
    stack = Stack(app, "Gate", env={"account": ACCOUNT, "region": REGION})
    # The live endpoint CloudFormation owns; the gate must leave it on this config.
    model = LmiModel(stack, "LiveModel", image_uri=LIVE_IMAGE, environment={"OPTION_MAX_MODEL_LEN": "8192"}, model_data_uri="s3://acme-models/llama-3.1-8b/", name_prefix="chat-dev")
    live = TunedEndpoint(stack, "Live", model=model, variant=VariantSettings("ml.g6.2xlarge"), endpoint_name="chat-dev")
    stage = ShadowStage(live.config.attr_endpoint_config_name, live.config.ref, live.config_request(), sampling_percentage=20, window_minutes=60) if shadow else None
    key = kms.Key(stack, "Key", enable_key_rotation=True)
    bucket = secure_bucket(stack, "Results", key, purpose="optigate's gate")
    fleet = BenchmarkFleet(stack, "Fleet", target=FleetTarget("chat-dev"), shards=2, results_bucket=bucket, encryption_key=key)
    evaluation = EvaluationJob(stack, "Evaluation", endpoints=["chat-dev"], dataset_uri="s3://acme-eval/chat/", output_bucket=bucket, encryption_key=key, image_uri=f"{ACCOUNT}.dkr.ecr.us-east-1.amazonaws.com/optigate-evaluate:1")
    OptimizationGate(stack, "Gate", spec=_spec(optimize, stage), fleet=fleet, evaluation=evaluation, bucket=bucket, encryption_key=key)
    enable_nag(app)
    app.synth()  # raises on any unacknowledged cdk-nag finding
    return json.loads((outdir / "Gate.template.json").read_text())


@pytest.fixture(scope="module")
def templates(tmp_path_factory):
    out = {optimize: _synth(optimize, tmp_path_factory.mktemp(f"gate-{optimize}")) for optimize in (True, False)}
    out["shadow"] = _synth(False, tmp_path_factory.mktemp("gate-shadow"), shadow=True)
    return out


# --------------------------------------------------------------------------- static checks


def _definition(template):
    gate_id = next(k for k, r in state_machines(template).items() if r["Properties"].get("StateMachineName", "").endswith("-gate"))
    return render(template, gate_id, {"AWS::Partition": "aws", "AWS::Region": REGION, "AWS::AccountId": ACCOUNT, "*": lambda logical, attribute: f"arn:aws:iam::{ACCOUNT}:role/{logical}" if attribute else logical})


@pytest.mark.parametrize("optimize", [True, False, "shadow"])
def test_gate_passes_cfn_lint(templates, optimize):
    from cfnlint.api import ManualArgs, lint

    matches = lint(json.dumps(templates[optimize]), config=ManualArgs(regions=[REGION]))
    assert [f"{m.rule.id} {m.message}" for m in matches if m.rule.id.startswith("E")] == []


@pytest.mark.parametrize("optimize", [True, False, "shadow"])
def test_every_sdk_call_validates_against_botocore(templates, optimize):
    definition = _definition(templates[optimize])
    calls = list(sdk_calls(definition))
    operations = {operation for _, _, operation, _ in calls}
    assert {"ListModelPackages", "DescribeModelPackage", "CreateModel", "CreateEndpointConfig", "CreateEndpoint", "DescribeEndpoint", "CreateProcessingJob", "CreateModelPackage", "DeleteEndpoint", "DeleteEndpointConfig", "DeleteModel", "Publish", "Invoke", "StartExecution"} <= operations
    if optimize is True:
        assert {"CreateOptimizationJob", "DescribeOptimizationJob", "StopOptimizationJob"} <= operations
    if optimize == "shadow":
        assert {"UpdateEndpoint", "GetMetricData"} <= operations
    problems = {name: validate(service, operation, parameters) for name, service, operation, parameters in calls if service != "lambda" or operation != "Invoke"}
    assert {name: errors for name, errors in problems.items() if errors} == {}


@pytest.mark.parametrize("variant", [True, "shadow"])
def test_every_task_retries_throttling_and_is_caught(templates, variant):
    definition = _definition(templates[variant])
    for name, state in definition["States"].items():
        if state["Type"] != "Task":
            continue
        assert any("ThrottlingException" in " ".join(r["ErrorEquals"]) for r in state.get("Retry", [])), name
        assert state.get("Catch"), f"{name} has no Catch"


@pytest.mark.parametrize("variant", [True, "shadow"])
def test_definition_passes_statelint(templates, tmp_path, variant):
    definition = _definition(templates[variant])
    path = tmp_path / "gate.json"
    path.write_text(json.dumps(definition))
    result = subprocess.run([sys.executable, "-m", "statelint", str(path)], capture_output=True, text=True)
    if "No module named statelint.__main__" in result.stderr:
        result = subprocess.run([str(REPO / ".venv" / "bin" / "statelint"), str(path)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


# --------------------------------------------------------------------------- executed


def _handlers(emulators, crash_decide=False):
    def crashing(event, context):
        raise RuntimeError("decide crashed")

    return lambda_handlers(*emulators, decide=crashing if crash_decide else None)


def _run(templates, emulators, *, optimize: bool | str = True, scenario=None, crash_decide=False, short=False):
    """Execute the gate. `short`: four requests per stream, for paths whose verdict cannot be an
    approval anyway (the throughput interval needs >= 5 one-second buckets, i.e. the full run)."""
    scenario = scenario or Scenario(on_processing_job=evaluation_writer("pass"))
    with GateHarness(lambda_handlers=_handlers(emulators, crash_decide), scenario=scenario, region=REGION) as harness:
        return GateRun(templates[optimize], harness, {"rounds": 4} if short else {}).execute(timeout=120)


def _nothing_left(result):
    """No temporary resource left, and the live endpoint InService on the config CloudFormation made."""
    left = result["left"]
    assert not any(name for names in left.values() for name in names if "-cand-" in name or "-shadow-" in name), left
    assert result["live"] == {"chat-dev": {"status": "InService", "config": result["live"]["chat-dev"]["original_config"], "original_config": result["live"]["chat-dev"]["original_config"]}}


def test_happy_path_approves_records_and_cleans_up(templates, emulators):
    result = _run(templates, emulators)
    assert result["execution"]["status"] == "SUCCEEDED", json.dumps(result["report"], indent=1, default=str)[:3000]
    assert [p["ModelApprovalStatus"] for p in result["packages"]] == ["Approved"]
    _nothing_left(result)
    assert "CreateOptimizationJob" in result["states"] and "CandidateApproved" in result["states"]
    assert result["messages"] and "APPROVED" in result["messages"][-1]["Message"]
    # The proof carries the candidate's fingerprint: the next run of an unchanged candidate is a no-op.
    package = result["package_details"][0]
    assert package["CustomerMetadataProperties"]["fingerprint"] == _fingerprint(templates[True])
    # The report: JSON, HTML and the benchmark plots it shows.
    names = {key.rsplit("/", 1)[1] for key in result["report_files"]}
    assert names == {"report.json", "report.html", "ttft_cdf.png", "itl_cdf.png", "throughput_vs_concurrency.png", "latency_vs_throughput.png"}


def test_optimization_failed_fails_closed(templates, emulators):
    scenario = Scenario(optimization_job=Outcome("FAILED", after=1, failure_reason="quantization diverged"), on_processing_job=evaluation_writer("pass"))
    result = _run(templates, emulators, scenario=scenario)
    assert result["execution"]["status"] == "FAILED"
    assert "quantization diverged" in result["execution"].get("cause", "")
    assert result["packages"] == []
    _nothing_left(result)
    assert result["messages"] and "FAILED" in result["messages"][-1]["Subject"]


def test_optimization_that_never_finishes_times_out(templates, emulators):
    scenario = Scenario(optimization_job=Outcome.never(), on_processing_job=evaluation_writer("pass"))
    result = _run(templates, emulators, scenario=scenario)
    assert result["execution"]["status"] == "FAILED"
    assert "OptimizationTimedOut" in result["execution"].get("cause", "") + result["execution"].get("error", "")
    assert "StopOptimizationJob" in result["states"]
    _nothing_left(result)


def test_candidate_endpoint_failed_fails_and_cleans_up(templates, emulators):
    scenario = Scenario(endpoint=Outcome("Failed", after=1, failure_reason="CUDA out of memory"), on_processing_job=evaluation_writer("pass"))
    result = _run(templates, emulators, optimize=False, scenario=scenario)
    assert result["execution"]["status"] == "FAILED"
    assert "CUDA out of memory" in result["execution"].get("cause", "")
    _nothing_left(result)


def test_quality_drop_rejects_the_candidate(templates, emulators):
    scenario = Scenario(on_processing_job=evaluation_writer("fail", ["qa_exact_match on category=multi_step: drops by 4.0%"]))
    result = _run(templates, emulators, optimize=False, scenario=scenario, short=True)
    assert result["execution"]["status"] == "FAILED"
    assert [p["ModelApprovalStatus"] for p in result["packages"]] == ["Rejected"]
    assert "quality" in result["execution"].get("cause", "")
    _nothing_left(result)


def test_a_lambda_crash_fails_closed(templates, emulators):
    result = _run(templates, emulators, optimize=False, crash_decide=True, short=True)
    assert result["execution"]["status"] == "FAILED"
    assert "decide crashed" in result["execution"].get("cause", "")
    assert result["packages"] == []
    _nothing_left(result)


def test_benchmark_regression_rejects_on_the_ttft_budget(templates, slow_candidate):
    result = _run(templates, slow_candidate, optimize=False, short=True)
    assert result["execution"]["status"] == "FAILED"
    assert "p99_ttft" in result["execution"].get("cause", "")
    ttft = [c for c in result["report"]["checks"] if c["name"] == "p99_ttft"]
    assert ttft and not ttft[0]["passed"] and ttft[0]["measured"] > 400
    assert [p["ModelApprovalStatus"] for p in result["packages"]] == ["Rejected"]
    _nothing_left(result)


# --------------------------------------------------------------------------- unchanged candidates


def _fingerprint(template) -> str:
    definition = _definition(template)
    return definition["States"]["RecordApproved"]["Parameters"]["CustomerMetadataProperties"]["fingerprint"]


def test_an_unchanged_candidate_passes_as_a_no_op_and_force_proves_it_again(templates, emulators):
    """The pipeline runs every team's gate after each deploy: a candidate proven before must not be
    benchmarked again (once promoted, it would be compared with itself). The happy path test shows
    the gate records this fingerprint; here the registry holds such a proof already."""
    with GateHarness(lambda_handlers=_handlers(emulators), scenario=Scenario(on_processing_job=evaluation_writer("pass")), region=REGION) as harness:
        run = GateRun(templates[False], harness)
        sagemaker = harness.client("sagemaker")
        proof = sagemaker.create_model_package(
            ModelPackageGroupName=run.group, ModelApprovalStatus="Approved", ModelPackageDescription="APPROVED chat/dev: all 6 checks pass",
            CustomerMetadataProperties={"fingerprint": _fingerprint(templates[False])},
            InferenceSpecification={"Containers": [{"Image": LIVE_IMAGE}], "SupportedContentTypes": ["application/json"], "SupportedResponseMIMETypes": ["application/json"]},
        )["ModelPackageArn"]
        again = run.execute(timeout=60)
        assert again["execution"]["status"] == "SUCCEEDED"
        assert again["states"] == ["Init", "FindLastProof", "ProvenBefore?", "DescribeLastProof", "SameCandidateAsLastProof?", "AlreadyProven", "CandidateAlreadyProven"]
        assert again["execution"]["output"]["unchanged"] is True and again["execution"]["output"]["model_package_arn"] == proof
        assert len(again["packages"]) == 1 and again["left"] == {k: [] for k in again["left"]}
        # A different candidate (another fingerprint) is proven as usual: stopped once it stages.
        sagemaker.update_model_package(ModelPackageArn=proof, CustomerMetadataProperties={"fingerprint": "another candidate"})
        for name, execution_input in (("changed", {}), ("forced", None)):
            if execution_input is None:  # the same candidate again, but forced
                sagemaker.update_model_package(ModelPackageArn=proof, CustomerMetadataProperties={"fingerprint": _fingerprint(templates[False])})
                execution_input = {"force": True}
            arn = harness.start(run.gate_arn, execution_input, name=name)
            deadline = time.monotonic() + 60
            while "CreateCandidateModel" not in harness.states_entered(arn) and time.monotonic() < deadline:
                time.sleep(0.05)
            harness.client("stepfunctions").stop_execution(executionArn=arn, error="Test.Stop", cause="it proves again")
            assert "CreateCandidateModel" in harness.states_entered(arn), name


def test_an_unchanged_rejected_candidate_fails_at_once(templates, emulators):
    scenario = Scenario(on_processing_job=evaluation_writer("fail", ["qa_exact_match drops by 4.0%"]))
    with GateHarness(lambda_handlers=_handlers(emulators), scenario=scenario, region=REGION) as harness:
        run = GateRun(templates[False], harness, {"rounds": 4})
        assert run.execute(timeout=120)["execution"]["status"] == "FAILED"
        again = run.execute(timeout=120)
    assert again["execution"]["error"] == "CandidateRejectedBefore"
    assert "qa_exact_match" in again["execution"]["cause"] or "REJECTED" in again["execution"]["cause"]
    assert "CreateCandidateModel" not in again["states"] and len(again["packages"]) == 1
