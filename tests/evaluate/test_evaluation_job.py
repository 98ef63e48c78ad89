"""EvaluationJob: cfn-lint, cdk-nag, least privilege, and its request against botocore."""

from __future__ import annotations

import json

import pytest

from optigate.rehearse.asl import sdk_calls
from optigate.rehearse.template import placeholder_definition
from optigate.rehearse.validation import parameter_errors as validate


@pytest.fixture(scope="module")
def synthesized(tmp_path_factory):
    from aws_cdk import App, Stack
    from aws_cdk import aws_kms as kms
    from aws_cdk import aws_stepfunctions as sfn

    from optigate.config.models import EvaluationGate
    from optigate.constructs.benchmark_fleet import generated_policy_reason
    from optigate.constructs.evaluation_job import EvaluationJob, results_bucket
    from optigate.constructs.nag import acknowledge_generated_wildcards
    from optigate.stacks.app import FEATURE_FLAGS, enable_nag

    outdir = tmp_path_factory.mktemp("evaluation")
    app = App(outdir=str(outdir), context=FEATURE_FLAGS)
    stack = Stack(app, "Evaluation", env={"account": "111111111111", "region": "us-east-1"})
    key = kms.Key(stack, "Key", enable_key_rotation=True)
    job = EvaluationJob(
        stack,
        "Job",
        endpoints=["chat-dev", "chat-dev-candidate"],
        dataset_uri="s3://acme-eval/chat/",
        output_bucket=results_bucket(stack, "Results", key),
        encryption_key=key,
        thresholds=EvaluationGate(max_metric_drop_abs=0.02),
        image_uri="111111111111.dkr.ecr.us-east-1.amazonaws.com/optigate-evaluate:1",
    )
    task = job.task(
        stack,
        "Evaluate",
        job_name="States.Format('eval-{}', $$.Execution.Name)",
        baseline="chat-dev",
        candidate="chat-dev-candidate",
    )
    machine = sfn.StateMachine(
        stack,
        "Machine",
        definition_body=sfn.DefinitionBody.from_chainable(task),
        tracing_enabled=True,
        logs=sfn.LogOptions(
            destination=__import__("aws_cdk.aws_logs", fromlist=["LogGroup"]).LogGroup(stack, "Logs"),
            level=sfn.LogLevel.ALL,
        ),
    )
    job.grant_run(machine.role)
    acknowledge_generated_wildcards(machine, generated_policy_reason)
    enable_nag(app)
    app.synth()  # fails on any unacknowledged cdk-nag finding
    return json.loads((outdir / "Evaluation.template.json").read_text())


# A template check: slow, and kept by --fast (tests/tiers.py).
@pytest.mark.slow
@pytest.mark.fast_tier
def test_evaluation_stack_passes_cfn_lint(synthesized):
    from cfnlint.api import ManualArgs, lint

    matches = lint(json.dumps(synthesized), config=ManualArgs(regions=["us-east-1"]))
    assert [f"{m.rule.id} {m.message}" for m in matches if m.rule.id.startswith("E")] == []


def test_processing_request_validates_against_botocore(synthesized):
    calls = list(sdk_calls(placeholder_definition(synthesized)))
    assert [(call.service, call.operation) for call in calls] == [("sagemaker", "CreateProcessingJob")]
    parameters = calls[0].parameters
    assert validate("sagemaker", "CreateProcessingJob", parameters) == []
    arguments = parameters["AppSpecification"]["ContainerArguments"]
    assert arguments[arguments.index("--max-metric-drop-abs") + 1] == "0.02"
    # A fail or cannot-resolve verdict is read by the gate's decision, so it must not fail the job.
    assert "--exit-zero-on-verdict" in arguments
    assert parameters["ProcessingOutputConfig"]["KmsKeyId"]


def test_a_broken_request_is_caught_by_the_validator():
    errors = validate(
        "sagemaker",
        "CreateProcessingJob",
        {
            "ProcessingJobName.$": "$.x",
            "RoleArn": "arn:aws:iam::1:role/r",
            "AppSpecification": {"ImageUri": "i", "ContainerEntrypoint": "not-a-list"},
            "ProcessingResources": {
                "ClusterConfig": {"InstanceCount": 1, "InstanceType": "ml.m5.xlarge", "VolumeSizeInGB": 30}
            },
        },
    )
    assert any("AppSpecification.ContainerEntrypoint" in e and "valid types" in e for e in errors)
    assert validate("sagemaker", "CreateProcessingJob", {"ProcessingJobName": "x", "Typo": 1}) != []


def test_job_role_invokes_only_the_two_endpoints(synthesized):
    statements = [
        s
        for r in synthesized["Resources"].values()
        if r["Type"] == "AWS::IAM::Policy"
        for s in r["Properties"]["PolicyDocument"]["Statement"]
    ]
    invoke = [s for s in statements if "sagemaker:InvokeEndpoint" in json.dumps(s["Action"])]
    resources = json.dumps([s["Resource"] for s in invoke])
    assert "endpoint/chat-dev" in resources and "endpoint/chat-dev-candidate" in resources
    assert '"sagemaker:*"' not in json.dumps(statements) and "AmazonSageMakerFullAccess" not in json.dumps(synthesized)


def test_default_image_is_built_from_the_dockerfile_at_deploy_time(tmp_path):
    from aws_cdk import App, Stack
    from aws_cdk import aws_kms as kms

    from optigate.constructs.evaluation_job import EvaluationJob, results_bucket

    app = App(outdir=str(tmp_path))
    stack = Stack(app, "Image", env={"account": "111111111111", "region": "us-east-1"})
    key = kms.Key(stack, "Key", enable_key_rotation=True)
    EvaluationJob(
        stack,
        "Job",
        endpoints=["e"],
        dataset_uri="s3://b/d/",
        output_bucket=results_bucket(stack, "R", key),
        encryption_key=key,
    )
    app.synth()  # no Docker needed: the context is only staged
    assets = json.loads((tmp_path / "Image.assets.json").read_text())
    (image,) = assets["dockerImages"].values()
    assert image["source"]["dockerFile"] == "Dockerfile"
    staged = tmp_path / image["source"]["directory"]
    assert "SageMaker Processing" in (staged / "Dockerfile").read_text()
    assert (staged / "requirements.txt").exists() and (staged / "optigate" / "evaluate" / "job.py").exists()
    assert not (staged / ".venv").exists() and not (staged / "node_modules").exists()


# --------------------------------------------------------------------------- an adapter team's evaluation

RUN = {"run": {"id": "0123abcd"}}
GATE_DATASET = "s3://acme-eval/support/"


def _component(side: str, index: int) -> str:
    return f"States.Format('support-dev-run-{side}{index:02d}-{{}}', $.run.id)"


ADAPTERS = [("base", GATE_DATASET), ("reply", "s3://acme-eval/support-reply/"), ("triage", GATE_DATASET)]


@pytest.fixture(scope="module")
def adapter_team(tmp_path_factory):
    from aws_cdk import App, Stack
    from aws_cdk import aws_kms as kms
    from aws_cdk import aws_stepfunctions as sfn

    from optigate.constructs.benchmark_fleet import generated_policy_reason
    from optigate.constructs.evaluation_job import EvaluatedAdapter, EvaluationJob, results_bucket
    from optigate.constructs.nag import acknowledge_generated_wildcards
    from optigate.stacks.app import FEATURE_FLAGS, enable_nag

    outdir = tmp_path_factory.mktemp("adapters")
    app = App(outdir=str(outdir), context=FEATURE_FLAGS)
    stack = Stack(app, "Adapters", env={"account": "111111111111", "region": "us-east-1"})
    key = kms.Key(stack, "Key", enable_key_rotation=True)
    job = EvaluationJob(
        stack,
        "Job",
        endpoints=["support-dev-run-twin-*", "support-dev-run-cand-*"],
        dataset_uri=GATE_DATASET,
        output_bucket=results_bucket(stack, "Results", key),
        encryption_key=key,
        image_uri="111111111111.dkr.ecr.us-east-1.amazonaws.com/optigate-evaluate:1",
    )
    adapters = [
        EvaluatedAdapter(name, uri, _component("twc", i), _component("cac", i))
        for i, (name, uri) in enumerate(ADAPTERS)
    ]
    task = job.task(
        stack,
        "Evaluate",
        job_name="States.Format('support-dev-run-eval-{}', $.run.id)",
        baseline="States.Format('support-dev-run-twin-{}', $.run.id)",
        candidate="States.Format('support-dev-run-cand-{}', $.run.id)",
        adapters=adapters,
    )
    machine = sfn.StateMachine(
        stack,
        "Machine",
        definition_body=sfn.DefinitionBody.from_chainable(task),
        tracing_enabled=True,
        logs=sfn.LogOptions(
            destination=__import__("aws_cdk.aws_logs", fromlist=["LogGroup"]).LogGroup(stack, "Logs"),
            level=sfn.LogLevel.ALL,
        ),
    )
    job.grant_run(machine.role)
    acknowledge_generated_wildcards(machine, generated_policy_reason)
    enable_nag(app)
    app.synth()  # fails on any unacknowledged cdk-nag finding
    return job, json.loads((outdir / "Adapters.template.json").read_text())


def _resolved_request(template: dict) -> dict:
    """The request as Step Functions makes it for run 0123abcd (the intrinsic functions evaluated)."""
    from tests.template_rules.iam.parameters import evaluate_parameters

    (call,) = sdk_calls(placeholder_definition(template))
    return evaluate_parameters(call.parameters, RUN)


def test_an_adapter_teams_request_validates_against_botocore(adapter_team):
    from optigate.rehearse.validation import request_errors

    _, template = adapter_team
    (call,) = sdk_calls(placeholder_definition(template))
    assert validate("sagemaker", "CreateProcessingJob", call.parameters) == []
    resolved = _resolved_request(template)
    # Every intrinsic evaluated: the arguments are the real list botocore checks (count, lengths).
    assert isinstance(resolved["AppSpecification"]["ContainerArguments"], list)
    assert request_errors("sagemaker", "CreateProcessingJob", resolved) == []
    inputs = {i["InputName"]: i["S3Input"] for i in resolved["ProcessingInputs"]}
    assert {name: (i["S3Uri"], i["LocalPath"]) for name, i in inputs.items()} == {
        "dataset": (GATE_DATASET, "/opt/ml/processing/input/dataset"),
        "dataset-reply": ("s3://acme-eval/support-reply/", "/opt/ml/processing/input/dataset-reply"),
    }


def test_the_job_reads_the_adapters_as_the_construct_writes_them(adapter_team):
    """The construct's arguments parsed by the job's own parser: each adapter, its run's components, its dataset."""
    from optigate.evaluate.adapter_verdicts import AdapterSpec, parse_adapters
    from optigate.evaluate.job import build_parser

    _, template = adapter_team
    arguments = _resolved_request(template)["AppSpecification"]["ContainerArguments"]
    args = build_parser().parse_args(arguments)
    assert (args.baseline, args.candidate) == ("support-dev-run-twin-0123abcd", "support-dev-run-cand-0123abcd")
    assert parse_adapters(args.adapter, args.dataset) == [
        AdapterSpec("base", "support-dev-run-twc00-0123abcd", "support-dev-run-cac00-0123abcd", args.dataset),
        AdapterSpec(
            "reply",
            "support-dev-run-twc01-0123abcd",
            "support-dev-run-cac01-0123abcd",
            "/opt/ml/processing/input/dataset-reply",
        ),
        AdapterSpec("triage", "support-dev-run-twc02-0123abcd", "support-dev-run-cac02-0123abcd", args.dataset),
    ]


def test_the_job_role_reads_every_dataset_and_invokes_the_runs_components(adapter_team):
    _, template = adapter_team
    statements = [
        s
        for r in template["Resources"].values()
        if r["Type"] == "AWS::IAM::Policy" and "JobRole" in json.dumps(r["Properties"]["Roles"])
        for s in r["Properties"]["PolicyDocument"]["Statement"]
    ]
    text = json.dumps(statements)
    assert "acme-eval/support/*" in text and "acme-eval/support-reply/*" in text
    invoke = json.dumps([s["Resource"] for s in statements if "sagemaker:InvokeEndpoint" in json.dumps(s["Action"])])
    for side in ("twc", "cac"):
        for index in range(3):
            assert f":inference-component/support-dev-run-{side}{index:02d}-*" in invoke
    assert ":endpoint/support-dev-run-twin-*" in invoke and ":endpoint/support-dev-run-cand-*" in invoke


def test_more_datasets_than_processing_inputs_or_an_unreadable_name_are_refused(adapter_team):
    from optigate.constructs.evaluation_job import EvaluatedAdapter

    job, _ = adapter_team
    many = [EvaluatedAdapter(f"a{i}", f"s3://acme-eval/a{i}/", f"t{i}", f"c{i}") for i in range(10)]
    with pytest.raises(ValueError, match="make 11 processing inputs; CreateProcessingJob takes at most 10"):
        job.request("j", "twin", "cand", adapters=many)
    odd = [EvaluatedAdapter("reply", GATE_DATASET, "$.components.twin", "c")]
    with pytest.raises(ValueError, match=r"cannot grant invoke on '\$\.components\.twin'"):
        job.request("j", "twin", "cand", adapters=odd)


# --------------------------------------------------------------------------- the rehearsal's processing job


def _rehearsed(request: dict, hook) -> dict[str, bytes]:
    """Run a rehearsal's processing-job hook on `request` against moto's S3; every object it wrote, by key."""
    import boto3
    from moto import mock_aws

    from optigate.rehearse.harness import REGION

    with mock_aws():
        s3 = boto3.client("s3", region_name=REGION)
        s3.create_bucket(Bucket="rehearsal-results")
        output = request["ProcessingOutputConfig"]["Outputs"][0]["S3Output"]
        output["S3Uri"] = "s3://rehearsal-results/evaluations/run-0123abcd/"
        hook(request)
        listed = s3.list_objects_v2(Bucket="rehearsal-results").get("Contents", [])
        prefix = "evaluations/run-0123abcd/"
        return {
            o["Key"].removeprefix(prefix): s3.get_object(Bucket="rehearsal-results", Key=o["Key"])["Body"].read()
            for o in listed
        }


def test_the_rehearsal_writes_what_the_job_writes_when_one_adapter_loses_quality(adapter_team):
    from optigate.gate.decision.checks import quality_check
    from optigate.rehearse.gate_handlers import evaluation_writer

    _, template = adapter_team
    written = _rehearsed(_resolved_request(template), evaluation_writer("pass", adapters={"reply": "fail"}))
    assert {"verdict.json", "spotcheck.jsonl", "spotcheck.html", "adapters/reply/verdict.json"} <= set(written)
    verdict = json.loads(written["verdict.json"])
    assert verdict["status"] == "fail" and verdict["passed"] is False
    assert {name: v["status"] for name, v in verdict["adapters"].items()} == {
        "base": "pass",
        "reply": "fail",
        "triage": "pass",
    }
    assert verdict["reasons"] and all(r.startswith("adapter reply: ") for r in verdict["reasons"])
    rows = [json.loads(line) for line in written["spotcheck.jsonl"].decode().splitlines()[1:]]
    assert rows and {row["adapter"] for row in rows} == {"reply"}
    summary = json.loads(written["spotcheck.jsonl"].decode().splitlines()[0])
    assert summary["adapters"][0]["sides"] == [
        "support-dev-run-twin-0123abcd#support-dev-run-twc01-0123abcd",
        "support-dev-run-cand-0123abcd#support-dev-run-cac01-0123abcd",
    ]
    # What the gate's decision makes of it: a failed quality check naming the adapter.
    check = quality_check(verdict)
    assert check.outcome.name == "FAIL" and "adapter reply: " in check.detail


def test_the_rehearsal_writes_unresolved_for_an_adapter_and_refuses_what_the_job_cannot_write(adapter_team):
    from optigate.rehearse.gate_handlers import evaluation_writer

    _, template = adapter_team
    written = _rehearsed(_resolved_request(template), evaluation_writer("pass", adapters={"triage": "unresolved"}))
    verdict = json.loads(written["verdict.json"])
    assert verdict["status"] == "unresolved" and verdict["adapters"]["triage"]["status"] == "unresolved"
    assert all(r.startswith("adapter triage: ") for r in verdict["reasons"])
    everything_passes = _rehearsed(_resolved_request(template), evaluation_writer("pass", adapters={}))
    assert json.loads(everything_passes["verdict.json"])["status"] == "pass"
    with pytest.raises(ValueError, match=r"evaluates adapters \['base', 'reply', 'triage'\], not \['summary'\]"):
        _rehearsed(_resolved_request(template), evaluation_writer("pass", adapters={"summary": "fail"}))
    request_without_adapters = evaluate_parameters_of_single(template)
    with pytest.raises(ValueError, match="evaluates no adapters"):
        _rehearsed(request_without_adapters, evaluation_writer("pass", adapters={"reply": "fail"}))


def evaluate_parameters_of_single(template: dict) -> dict:
    """The adapter team's request with its --adapter arguments removed (a model-backed endpoint's request)."""
    request = _resolved_request(template)
    arguments = request["AppSpecification"]["ContainerArguments"]
    first = arguments.index("--adapter")
    request["AppSpecification"]["ContainerArguments"] = arguments[:first]
    return request
