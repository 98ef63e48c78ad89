"""The gate's synthesized definition: lint-clean, every SDK call valid for botocore, and executed
for real through moto's Step Functions executor (optigate.rehearse.harness) with the project's
Lambda handlers in-process, the benchmark hitting emulator processes and S3/SNS in moto."""

from __future__ import annotations

import json
import time

import pytest

from optigate.rehearse.asl import sdk_calls
from optigate.rehearse.gate_handlers import evaluation_writer
from optigate.rehearse.gate_layout import gate_layout
from optigate.rehearse.gate_run import LIVE_IMAGE, GateRun
from optigate.rehearse.harness import ACCOUNT_ID, REGION, GateHarness
from optigate.rehearse.scenario import Outcome, Scenario
from optigate.rehearse.template import render_definition
from optigate.rehearse.validation import parameter_errors
from tests.conftest import statelint


@pytest.fixture(scope="module")
def templates(gate_templates):
    return gate_templates


# --------------------------------------------------------------------------- static checks


def _definition(template):
    def generic(logical, attribute):
        return f"arn:aws:iam::{ACCOUNT_ID}:role/{logical}" if attribute else logical

    substitutions = {"AWS::Partition": "aws", "AWS::Region": REGION, "AWS::AccountId": ACCOUNT_ID, "*": generic}
    return render_definition(template, gate_layout(template).gate, substitutions)


# A template check: slow, and kept by --fast (tests/tiers.py).
@pytest.mark.slow
@pytest.mark.fast_tier
@pytest.mark.parametrize("optimize", [True, False, "shadow"])
def test_gate_passes_cfn_lint(templates, optimize):
    from cfnlint.api import ManualArgs, lint

    matches = lint(json.dumps(templates[optimize]), config=ManualArgs(regions=[REGION]))
    assert [f"{m.rule.id} {m.message}" for m in matches if m.rule.id.startswith("E")] == []


@pytest.mark.parametrize("optimize", [True, False, "shadow"])
def test_every_sdk_call_validates_against_botocore(templates, optimize):
    definition = _definition(templates[optimize])
    calls = list(sdk_calls(definition))
    operations = {call.operation for call in calls}
    assert {
        "ListModelPackages",
        "DescribeModelPackage",
        "CreateModel",
        "CreateEndpointConfig",
        "CreateEndpoint",
        "DescribeEndpoint",
        "CreateProcessingJob",
        "CreateModelPackage",
        "DeleteEndpoint",
        "DeleteEndpointConfig",
        "DeleteModel",
        "Publish",
        "Invoke",
        "StartExecution",
    } <= operations
    if optimize is True:
        assert {"CreateOptimizationJob", "DescribeOptimizationJob", "StopOptimizationJob"} <= operations
    if optimize == "shadow":
        assert {"UpdateEndpoint", "GetMetricData"} <= operations
    problems = {
        call.state: parameter_errors(call.service, call.operation, call.parameters)
        for call in calls
        if (call.service, call.operation) != ("lambda", "Invoke")
    }
    assert {name: errors for name, errors in problems.items() if errors} == {}


@pytest.mark.parametrize("variant", [True, "shadow"])
def test_every_task_is_caught(templates, variant):
    definition = _definition(templates[variant])
    uncaught = [
        name for name, state in definition["States"].items() if state["Type"] == "Task" and not state.get("Catch")
    ]
    assert uncaught == []


@pytest.mark.parametrize("variant", [True, "shadow"])
def test_definition_passes_statelint(templates, tmp_path, variant):
    definition = _definition(templates[variant])
    path = tmp_path / "gate.json"
    path.write_text(json.dumps(definition))
    result = statelint(path)
    assert result.returncode == 0, result.stdout + result.stderr


# --------------------------------------------------------------------------- executed


# The fast tier's one executed gate (tests/tiers.py): slow, and kept by --fast.
@pytest.mark.slow
@pytest.mark.fast_tier
def test_happy_path_approves_records_and_cleans_up(templates, emulators, run_gate, nothing_left):
    result = run_gate(emulators)
    assert result["execution"]["status"] == "SUCCEEDED", json.dumps(result["report"], indent=1, default=str)[:3000]
    assert [p["ModelApprovalStatus"] for p in result["packages"]] == ["Approved"]
    nothing_left(result)
    # Baseline and candidate were each benchmarked on the run's own endpoint, InService at the time: the
    # baseline on its twin, which runs the live endpoint's model (CloudFormation's, still there).
    sides = {(b["baseline"], b["endpoint"].split("-")[2], b["status"]) for b in result["benchmarked"]}
    assert sides == {(True, "twin", "InService"), (False, "cand", "InService")}
    live_models = result["live_models"]["chat-dev"]
    assert live_models and all(b["models"] == live_models for b in result["benchmarked"] if b["baseline"])
    # Interleaved blocks: each block runs the twin, then the candidate (A B A B A B); each run is one
    # fleet execution whose shards invoke the worker one after the other run.
    runs = list(dict.fromkeys((b["run_id"], b["baseline"]) for b in result["benchmarked"]))
    assert [baseline for _, baseline in runs] == [True, False] * 3
    assert [run_id.rsplit("-", 3)[1:] for run_id, _ in runs] == [
        [side, "c2", f"b{block}"] for block in range(3) for side in ("baseline", "candidate")
    ]
    # The decision judged three blocks a side (the handler tagged each run with its block).
    throughput = next(c for c in result["report"]["checks"] if c["name"] == "throughput_gain")
    assert throughput["outcome"] == "pass" and "3 and 3 blocks" in throughput["detail"], throughput
    assert "CreateOptimizationJob" in result["states"] and "CandidateApproved" in result["states"]
    assert "CleanupStopOptimizationJob" not in result["states"]  # the job had completed: nothing to stop
    assert result["messages"] and "APPROVED" in result["messages"][-1]["Message"]
    # The proof carries the candidate's fingerprint: the next run of an unchanged candidate is a no-op.
    package = result["package_details"][0]
    assert package["CustomerMetadataProperties"]["fingerprint"] == _fingerprint(templates[True])
    # The report: JSON, HTML and the benchmark plots it shows.
    names = {key.rsplit("/", 1)[1] for key in result["report_files"]}
    assert names == {
        "report.json",
        "report.html",
        "ttft_cdf.png",
        "itl_cdf.png",
        "throughput_vs_concurrency.png",
        "latency_vs_throughput.png",
        "pareto_throughput_vs_p99_ttft.png",  # the latency budgets are an SLO: capacity per side
    }


@pytest.mark.slow
def test_throttled_sagemaker_calls_are_retried_and_the_gate_still_approves(emulators, run_gate, nothing_left):
    """A busy account throttles. The optimized integrations (createEndpoint, createProcessingJob) name that
    SageMaker.AmazonSageMakerException and the SDK ones SageMaker.SageMakerException: a Retry listing
    SageMaker.ThrottlingException (as the gate's did) matches neither, and the first throttle failed the run."""
    throttle = {
        "CreateModel": 1,  # aws-sdk (the optimized one refuses ModelDataSource)
        "CreateEndpointConfig": 1,  # aws-sdk (the optimized one refuses MetricsConfig and the variant's timeouts)
        "CreateEndpoint": 2,  # optimized
        "CreateProcessingJob": 1,  # optimized, .sync
        "CreateOptimizationJob": 1,  # aws-sdk
        "DescribeEndpoint": 2,  # aws-sdk
        "DeleteEndpoint": 1,  # aws-sdk, in the cleanup
    }
    scenario = Scenario(on_processing_job=evaluation_writer("pass"), throttle=dict(throttle))
    result = run_gate(emulators, scenario=scenario)
    assert scenario.throttle == dict.fromkeys(throttle, 0)  # every throttle was served
    assert result["execution"]["status"] == "SUCCEEDED", result["execution"].get("cause")
    assert [p["ModelApprovalStatus"] for p in result["packages"]] == ["Approved"]
    nothing_left(result)


@pytest.mark.slow
def test_optimization_failed_fails_closed(emulators, run_gate, nothing_left):
    scenario = Scenario(
        optimization_job=Outcome("FAILED", after=1, failure_reason="quantization diverged"),
        on_processing_job=evaluation_writer("pass"),
    )
    result = run_gate(emulators, scenario=scenario)
    assert result["execution"]["status"] == "FAILED"
    assert "quantization diverged" in result["execution"].get("cause", "")
    assert result["packages"] == []
    nothing_left(result)
    assert result["messages"] and "FAILED" in result["messages"][-1]["Subject"]


@pytest.mark.slow
def test_optimization_that_never_finishes_times_out(emulators, run_gate, nothing_left):
    scenario = Scenario(optimization_job=Outcome.never(), on_processing_job=evaluation_writer("pass"))
    result = run_gate(emulators, scenario=scenario)
    assert result["execution"]["status"] == "FAILED"
    assert "OptimizationTimedOut" in result["execution"].get("cause", "") + result["execution"].get("error", "")
    assert "StopOptimizationJob" in result["states"]
    nothing_left(result)


def test_a_stop_that_fails_is_recorded_as_the_failure_before_the_cleanup(templates):
    """StopOptimizationJob failing used to enter the cleanup without `$.failure`: the run then took
    the verdict's path and its notification read `$.decision.summary`, which a timed-out run lacks."""
    states = _definition(templates[True])["States"]
    (catch,) = states["StopOptimizationJob"]["Catch"]
    recorded = states[catch["Next"]]
    assert recorded["Type"] == "Pass" and recorded["ResultPath"] == "$.failure"
    assert recorded["Parameters"]["Error"] == "OptimizationTimedOut" and "stop it by hand" in json.dumps(recorded)


@pytest.mark.slow
def test_an_optimization_job_stopped_by_hand_ends_through_the_cleanup(emulators, run_gate, nothing_left):
    """STOPPED carries no FailureReason (optional in DescribeOptimizationJob's output): reading it
    anyway is a States.Runtime error that no Catch handles, and the gate would die without cleaning up."""
    scenario = Scenario(optimization_job=Outcome("STOPPED", after=1), on_processing_job=evaluation_writer("pass"))
    result = run_gate(emulators, scenario=scenario)
    assert (result["execution"]["status"], result["execution"].get("error")) == ("FAILED", "GateFailed")
    assert "OptimizationFailed" in result["execution"].get("cause", "") and "STOPPED" in result["execution"]["cause"]
    nothing_left(result)


@pytest.mark.slow
def test_candidate_endpoint_failed_fails_and_cleans_up(emulators, run_gate, nothing_left):
    scenario = Scenario(
        endpoint=Outcome("Failed", after=1, failure_reason="CUDA out of memory"),
        on_processing_job=evaluation_writer("pass"),
    )
    result = run_gate(emulators, optimize=False, scenario=scenario)
    assert result["execution"]["status"] == "FAILED"
    assert "CUDA out of memory" in result["execution"].get("cause", "")
    nothing_left(result)


@pytest.mark.slow
def test_quality_drop_rejects_the_candidate(emulators, run_gate, nothing_left):
    scenario = Scenario(
        on_processing_job=evaluation_writer("fail", ["qa_exact_match on category=multi_step: drops by 4.0%"])
    )
    result = run_gate(emulators, optimize=False, scenario=scenario, short=True)
    assert result["execution"]["status"] == "FAILED"
    assert [p["ModelApprovalStatus"] for p in result["packages"]] == ["Rejected"]
    assert "quality" in result["execution"].get("cause", "")
    nothing_left(result)


@pytest.mark.slow
def test_a_lambda_crash_fails_closed(emulators, run_gate, nothing_left):
    result = run_gate(emulators, optimize=False, crash_decide=True, short=True)
    assert result["execution"]["status"] == "FAILED"
    assert "decide crashed" in result["execution"].get("cause", "")
    assert result["packages"] == []
    nothing_left(result)


@pytest.mark.slow
def test_an_inconclusive_verdict_waits_for_a_person_and_promotes_nothing(
    templates, emulators, gate_handlers, nothing_left
):
    """Quality that cannot be resolved: the verdict is INCONCLUSIVE, recorded as a PendingManualApproval
    package with the report, the execution fails with `Inconclusive`, nothing is approved. Re-run unchanged,
    the gate fails at once; once a person approves the package in the registry, it passes as proven."""
    unresolved = ["f1 on the whole dataset: cannot resolve 1.0% with 40 records; at least 100 records are needed"]
    scenario = Scenario(on_processing_job=evaluation_writer("unresolved", unresolved))
    with GateHarness(lambda_handlers=gate_handlers(emulators), scenario=scenario, region=REGION) as harness:
        run = GateRun(templates[False], harness)
        result = run.execute()
        execution = result["execution"]
        assert execution["status"] == "FAILED" and execution["error"] == "Inconclusive", execution
        assert execution["cause"].startswith("INCONCLUSIVE chat/dev: 1 of ")
        assert "RecordInconclusive" in result["states"] and "VerdictInconclusive" in result["states"]
        assert [p["ModelApprovalStatus"] for p in result["packages"]] == ["PendingManualApproval"]
        [package] = result["package_details"]
        assert package["CustomerMetadataProperties"]["report"].endswith("/report.json")
        assert package["ModelPackageDescription"] == execution["cause"]
        report = result["report"]
        assert report["outcome"] == "INCONCLUSIVE" and {c["name"]: c["outcome"] for c in report["checks"]} == {
            "p99_ttft": "pass",
            "p99_itl": "pass",
            "throughput_gain": "pass",
            "error_rate": "pass",
            "goodput": "pass",
            "capacity": "pass",
            "quality": "inconclusive",
        }
        nothing_left(result)
        assert "INCONCLUSIVE" in result["messages"][-1]["Message"]

        undecided = run.execute()
        assert undecided["execution"]["error"] == "Inconclusive" and "CreateCandidateModel" not in undecided["states"]
        assert "Approve or reject that model package" in undecided["execution"]["cause"]

        harness.client("sagemaker").update_model_package(
            ModelPackageArn=package["ModelPackageArn"], ModelApprovalStatus="Approved"
        )
        approved = run.execute()
        assert approved["execution"]["status"] == "SUCCEEDED", (approved["states"], approved["execution"])
        assert "AlreadyProven" in approved["states"]
        assert approved["execution"]["output"]["model_package_arn"] == package["ModelPackageArn"]


@pytest.mark.slow
def test_benchmark_regression_rejects_on_the_ttft_budget(slow_candidate, run_gate, nothing_left):
    result = run_gate(slow_candidate, optimize=False, short=True)
    assert result["execution"]["status"] == "FAILED"
    assert "p99_ttft" in result["execution"].get("cause", "")
    ttft = [c for c in result["report"]["checks"] if c["name"] == "p99_ttft"]
    assert ttft and not ttft[0]["passed"] and ttft[0]["measured"] > 400
    assert [p["ModelApprovalStatus"] for p in result["packages"]] == ["Rejected"]
    nothing_left(result)


# --------------------------------------------------------------------------- unchanged candidates


def _passing_harness(emulators, gate_handlers) -> GateHarness:
    """A harness whose evaluation passes, with the gate's handlers on the emulators."""
    scenario = Scenario(on_processing_job=evaluation_writer("pass"))
    return GateHarness(lambda_handlers=gate_handlers(emulators), scenario=scenario, region=REGION)


def _entered_until_it_stages(harness, run, execution_input, name) -> list[str]:
    """Start the gate and stop it once it stages a candidate (it is proving, not skipping): the states entered."""
    arn = harness.start(run.gate_arn, execution_input, name=name)
    deadline = time.monotonic() + 60
    while "CreateCandidateModel" not in harness.states_entered(arn) and time.monotonic() < deadline:
        time.sleep(0.05)
    harness.client("stepfunctions").stop_execution(executionArn=arn, error="Test.Stop", cause="it proves")
    return harness.states_entered(arn)


def _fingerprint(template) -> str:
    definition = _definition(template)
    return definition["States"]["RecordApproved"]["Parameters"]["CustomerMetadataProperties"]["fingerprint"]


@pytest.mark.slow
def test_an_unchanged_candidate_passes_as_a_no_op_and_force_proves_it_again(templates, emulators, gate_handlers):
    """The pipeline runs every team's gate after each deploy: a candidate proven before must not be
    benchmarked again (once promoted, it would be compared with itself). The happy path test shows
    the gate records this fingerprint; here the registry holds such a proof already."""
    with _passing_harness(emulators, gate_handlers) as harness:
        run = GateRun(templates[False], harness)
        sagemaker = harness.client("sagemaker")
        proof = sagemaker.create_model_package(
            ModelPackageGroupName=run.group,
            ModelApprovalStatus="Approved",
            ModelPackageDescription="APPROVED chat/dev: all 6 checks pass",
            CustomerMetadataProperties={"fingerprint": _fingerprint(templates[False])},
            InferenceSpecification={
                "Containers": [{"Image": LIVE_IMAGE}],
                "SupportedContentTypes": ["application/json"],
                "SupportedResponseMIMETypes": ["application/json"],
            },
        )["ModelPackageArn"]
        again = run.execute()
        assert again["execution"]["status"] == "SUCCEEDED"
        assert again["states"] == [
            "Init",
            "FindLastProof",
            "ProvenBefore?",
            "DescribeLastProof",
            "SameCandidateAsLastProof?",
            "AlreadyProven",
            "CandidateAlreadyProven",
        ]
        assert (
            again["execution"]["output"]["unchanged"] is True
            and again["execution"]["output"]["model_package_arn"] == proof
        )
        assert len(again["packages"]) == 1 and again["left"] == {k: [] for k in again["left"]}
        # A different candidate (another fingerprint) is proven as usual: stopped once it stages.
        sagemaker.update_model_package(
            ModelPackageArn=proof, CustomerMetadataProperties={"fingerprint": "another candidate"}
        )
        for name, execution_input in (("changed", {}), ("forced", None)):
            if execution_input is None:  # the same candidate again, but forced
                sagemaker.update_model_package(
                    ModelPackageArn=proof, CustomerMetadataProperties={"fingerprint": _fingerprint(templates[False])}
                )
                execution_input = {"force": True}
            assert "CreateCandidateModel" in _entered_until_it_stages(harness, run, execution_input, name), name


@pytest.mark.slow
def test_a_package_registered_by_hand_is_no_proof_and_does_not_break_the_gate(templates, emulators, gate_handlers):
    """A package without description, metadata or approval status (all optional in DescribeModelPackage's
    output) is the newest in the group: the gate proves the candidate instead of dying on a missing path."""
    with _passing_harness(emulators, gate_handlers) as harness:
        run = GateRun(templates[False], harness)
        harness.client("sagemaker").create_model_package(
            ModelPackageGroupName=run.group,
            InferenceSpecification={
                "Containers": [{"Image": LIVE_IMAGE}],
                "SupportedContentTypes": ["application/json"],
                "SupportedResponseMIMETypes": ["application/json"],
            },
        )
        entered = _entered_until_it_stages(harness, run, {}, "by-hand")
        assert "DescribeLastProof" in entered and "CreateCandidateModel" in entered, entered


@pytest.mark.slow
def test_an_unchanged_rejected_candidate_fails_at_once(templates, emulators, gate_handlers):
    scenario = Scenario(on_processing_job=evaluation_writer("fail", ["qa_exact_match drops by 4.0%"]))
    with GateHarness(lambda_handlers=gate_handlers(emulators), scenario=scenario, region=REGION) as harness:
        run = GateRun(templates[False], harness, {"requests_per_stream": 4})
        assert run.execute()["execution"]["status"] == "FAILED"
        again = run.execute()
    assert again["execution"]["error"] == "CandidateRejectedBefore"
    assert "qa_exact_match" in again["execution"]["cause"] or "REJECTED" in again["execution"]["cause"]
    assert "CreateCandidateModel" not in again["states"] and len(again["packages"]) == 1
