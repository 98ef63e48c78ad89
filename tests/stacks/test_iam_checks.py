"""The template rules on IAM (tests/template_rules: IAM-ActionExists, IAM-StateMachineCallPermitted,
IAM-LambdaCallPermitted) over every stack of the example app and
of the pipeline (its own stack and every stage's team stacks), and each check shown to catch a seeded
mistake: a misspelled action, a missing grant, a resource pattern that does not match the name the
call will use (wrong environment, untruncated name, upper case that SageMaker lower-cases), a name read
from state input, a Deny, a Lambda handler call its role lacks."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from optigate import naming
from tests.template_rules import registry
from tests.template_rules.assembly import Stack
from tests.template_rules.iam.parameters import SAMPLE_UUID, evaluate, known_input
from tests.template_rules.iam.policies import Finding, permitted, role_grants
from tests.template_rules.rules import iam_actions_exist, lambda_calls_permitted, state_machine_calls_permitted


def unknown_actions(stack: Stack) -> list[Finding]:
    return registry.findings(stack, iam_actions_exist.ID)


def unpermitted_calls(stack: Stack) -> list[Finding]:
    return registry.findings(stack, state_machine_calls_permitted.ID, lambda_calls_permitted.ID)


# A read the check cannot compute, handled here: the gate's last proof is the first ARN ListModelPackages
# returns for the team's own group, `model-package/<group>/<version>`.
LAST_PROOF = ("DescribeLastProof", "sagemaker:DescribeModelPackage")


def _team_and_environment(stack: Stack) -> tuple[str, str]:
    _, environment, team = stack.name.split("-", 2)
    return team, environment


def _open(findings: list[Finding]) -> list[str]:
    """Findings not handled explicitly (the last-proof read is checked on its own below)."""
    return [str(f) for f in findings if not (f.kind == "unresolved" and f.where.endswith(LAST_PROOF[0]))]


# --------------------------------------------------------------------------- every synthesized template


@pytest.mark.slow
def test_the_assemblies_hold_every_stack(app_stacks, pipeline_stacks):
    assert len(app_stacks) == 9
    names = {s.name for s in pipeline_stacks}
    assert {s.name for s in app_stacks} < names and {"optigate-platform", "optigate-pipeline-chat"} <= names


# The pipeline's assembly takes half a minute to synthesize: its variant runs in the full suite only.
@pytest.mark.parametrize("which", ["app_stacks", pytest.param("pipeline_stacks", marks=pytest.mark.slow)])
def test_every_policy_action_exists(which, request):
    stacks = request.getfixturevalue(which)
    findings = [str(f) for stack in stacks for f in unknown_actions(stack)]
    assert findings == []


# A template check: slow; kept by --fast over the example app (tests/tiers.py), over the pipeline's assembly (half a
# minute to synthesize) in the full suite only.
@pytest.mark.parametrize(
    "which",
    [
        pytest.param("app_stacks", marks=[pytest.mark.slow, pytest.mark.fast_tier]),
        pytest.param("pipeline_stacks", marks=pytest.mark.slow),
    ],
)
def test_every_sdk_call_is_permitted(which, request):
    stacks = request.getfixturevalue(which)
    findings = [line for stack in stacks for line in _open(unpermitted_calls(stack))]
    assert findings == []


# A template check: slow, and kept by --fast (tests/tiers.py).
@pytest.mark.slow
@pytest.mark.fast_tier
def test_the_last_proof_read_is_the_only_unresolved_one_and_is_granted(app_stacks):
    unresolved = {
        (f.where.split("/")[-1], f.action)
        for stack in app_stacks
        for f in unpermitted_calls(stack)
        if f.kind == "unresolved"
    }
    assert unresolved <= {LAST_PROOF}
    for stack in app_stacks:
        for finding in unpermitted_calls(stack):
            if finding.kind != "unresolved":
                continue
            team, environment = _team_and_environment(stack)
            group = naming.package_group(team, environment)
            arn = f"arn:aws:sagemaker:{stack.region}:{stack.account}:model-package/{group}/1"
            machine = finding.where.split("/")[0]
            role = stack.template["Resources"][machine]["Properties"]["RoleArn"]["Fn::GetAtt"][0]
            assert permitted(role_grants(stack, role), "sagemaker:DescribeModelPackage", arn), (stack.name, arn)


# --------------------------------------------------------------------------- seeded mistakes: actions


def _policy_stack(*actions: str) -> Stack:
    return Stack(
        "seeded",
        {
            "Resources": {
                "Policy": {
                    "Type": "AWS::IAM::Policy",
                    "Properties": {"PolicyDocument": {"Statement": [{"Effect": "Allow", "Action": list(actions)}]}},
                },
                "Key": {
                    "Type": "AWS::KMS::Key",
                    "Properties": {"KeyPolicy": {"Statement": [{"Effect": "Allow", "Action": "kms:Decrpyt"}]}},
                },
                "Role": {
                    "Type": "AWS::IAM::Role",
                    "Properties": {
                        "Policies": [
                            {"PolicyName": "inline", "PolicyDocument": {"Statement": {"Action": "sns:Pubilsh"}}}
                        ]
                    },
                },
            }
        },
    )


def test_a_misspelled_or_unmatched_action_is_reported_wherever_it_is():
    stack = _policy_stack("sagemaker:CreateModle", "sagemaker:Desribe*", "sagemaker:Describe*", "S3:getobject", "*")
    found = {(f.where, f.action) for f in unknown_actions(stack) if f.kind == "unknown-action"}
    assert found == {
        ("Policy", "sagemaker:CreateModle"),
        ("Policy", "sagemaker:Desribe*"),
        ("Key", "kms:Decrpyt"),
        ("Role/inline", "sns:Pubilsh"),
    }


# --------------------------------------------------------------------------- seeded mistakes: calls

RUN_ID = naming.RUN_ID_EXPRESSION


def _gate_stack(states: dict, statements: list[dict], start: str = "Init", extra: dict | None = None) -> Stack:
    """A template with one state machine whose role has one policy: `Init` computes the run id."""
    definition = {"StartAt": start, "States": states}
    resources = {
        "Role": {"Type": "AWS::IAM::Role", "Properties": {}},
        "Policy": {
            "Type": "AWS::IAM::Policy",
            "Properties": {"Roles": [{"Ref": "Role"}], "PolicyDocument": {"Statement": statements}},
        },
        "Machine": {
            "Type": "AWS::StepFunctions::StateMachine",
            "Properties": {
                "RoleArn": {"Fn::GetAtt": ["Role", "Arn"]},
                "StateMachineName": "seeded-gate",
                "DefinitionString": {"Fn::Sub": json.dumps(definition)},
            },
        },
        **(extra or {}),
    }
    return Stack("seeded", {"Resources": resources}, "111111111111", "us-east-1")


def _create_model(name_expression: str, role: str = "arn:aws:iam::111111111111:role/model") -> dict:
    return {
        "Init": {"Type": "Pass", "ResultPath": "$.run", "Parameters": {"id.$": RUN_ID}, "Next": "Create"},
        "Create": {
            "Type": "Task",
            "Resource": "arn:aws:states:::sagemaker:createModel",
            "Parameters": {"ModelName.$": name_expression, "ExecutionRoleArn": role},
            "End": True,
        },
    }


def _allow(action: str | list[str], resource: Any, effect: str = "Allow") -> dict:
    return {"Effect": effect, "Action": action, "Resource": resource}


MODEL = "arn:aws:sagemaker:us-east-1:111111111111:model/"
PASS_ROLE = _allow("iam:PassRole", "arn:aws:iam::111111111111:role/model")


def _denied(stack: Stack) -> list[tuple[str, str]]:
    return [(f.action, f.detail) for f in unpermitted_calls(stack) if f.kind == "denied"]


def test_the_run_name_is_evaluated_as_the_gate_will_format_it():
    template = naming.run_name_template("chat", "dev", "cand")
    definition = {"States": {"Init": {"Type": "Pass", "ResultPath": "$.run", "Parameters": {"id.$": RUN_ID}}}}
    known = known_input(definition)
    run_id = SAMPLE_UUID.split("-")[0]
    assert known["run"]["id"] == run_id and len(run_id) == naming.RUN_ID_LENGTH
    assert evaluate(f"States.Format('{template}', $.run.id)", known) == naming.run_name("chat", "dev", "cand", run_id)


def test_a_matching_grant_passes():
    pattern = naming.run_name_pattern("chat", "dev", "cand")
    stack = _gate_stack(
        _create_model("States.Format('chat-dev-cand-{}', $.run.id)"),
        [_allow("sagemaker:CreateModel", MODEL + pattern), PASS_ROLE],
    )
    assert unpermitted_calls(stack) == []


def test_a_missing_grant_is_reported():
    stack = _gate_stack(_create_model("States.Format('chat-dev-cand-{}', $.run.id)"), [PASS_ROLE])
    assert [a for a, _ in _denied(stack)] == ["sagemaker:CreateModel"]


def test_a_missing_pass_role_is_reported():
    stack = _gate_stack(
        _create_model("States.Format('chat-dev-cand-{}', $.run.id)"), [_allow("sagemaker:CreateModel", "*")]
    )
    assert [a for a, _ in _denied(stack)] == ["iam:PassRole"]


@pytest.mark.parametrize(
    ("name_format", "pattern"),
    [
        ("chat-dev-cand-{}", "chat-prod-cand-*"),  # another environment's pattern
        ("chat-dev-twin-{}", "chat-dev-cand-*"),  # another kind of run resource
        ("a-very-long-team-na-9f3c2a1b-cand-{}", "a-very-long-team-name-for-the-gate-dev-cand-*"),  # untruncated
        ("Chat-Dev-cand-{}", "Chat-Dev-cand-*"),  # SageMaker lower-cases the name in the ARN
    ],
)
def test_a_pattern_that_misses_the_name_as_formatted_is_reported(name_format, pattern):
    states = _create_model(f"States.Format('{name_format}', $.run.id)")
    stack = _gate_stack(states, [_allow("sagemaker:CreateModel", MODEL + pattern), PASS_ROLE])
    [(action, detail)] = _denied(stack)
    assert action == "sagemaker:CreateModel"
    assert MODEL + name_format.format(SAMPLE_UUID.split("-")[0]) in detail and pattern in detail


def test_an_endpoint_config_with_a_kms_key_needs_create_grant_on_it():
    """Issue 13 item 7: the shadow config repeats the live config's keys; without kms:CreateGrant on them
    the gate's UpdateEndpoint fails."""
    key = "arn:aws:kms:us-east-1:111111111111:key/live"
    config = "arn:aws:sagemaker:us-east-1:111111111111:endpoint-config/"
    states = {
        "Init": {"Type": "Pass", "ResultPath": "$.run", "Parameters": {"id.$": RUN_ID}, "Next": "Create"},
        "Create": {
            "Type": "Task",
            "Resource": "arn:aws:states:::sagemaker:createEndpointConfig",
            "Parameters": {
                "EndpointConfigName.$": "States.Format('chat-dev-shadow-{}', $.run.id)",
                "ProductionVariants": [{"VariantName": "AllTraffic", "ModelName": "m"}],
                "KmsKeyId": key,
                "DataCaptureConfig": {"KmsKeyId": key},
            },
            "End": True,
        },
    }
    create = _allow("sagemaker:CreateEndpointConfig", config + "chat-dev-shadow-*")
    assert [a for a, _ in _denied(_gate_stack(states, [create]))] == ["kms:CreateGrant", "kms:CreateGrant"]
    assert _denied(_gate_stack(states, [create, _allow("kms:CreateGrant", key)])) == []


def test_a_deny_wins():
    statements = [_allow("sagemaker:*", "*"), PASS_ROLE, _allow("sagemaker:CreateModel", MODEL + "chat-*", "Deny")]
    stack = _gate_stack(_create_model("States.Format('chat-dev-cand-{}', $.run.id)"), statements)
    assert [a for a, _ in _denied(stack)] == ["sagemaker:CreateModel"]


def test_a_name_read_from_state_input_is_unresolved_not_passed():
    stack = _gate_stack(_create_model("$.model_name"), [_allow("sagemaker:CreateModel", MODEL + "x-*"), PASS_ROLE])
    [finding] = unpermitted_calls(stack)
    assert finding.kind == "unresolved" and "$.model_name" in finding.detail
    stack = _gate_stack(_create_model("$.model_name"), [PASS_ROLE])
    assert {f.kind for f in unpermitted_calls(stack)} == {"unresolved", "denied"}


def _evaluate_job() -> dict:
    return {
        "Init": {"Type": "Pass", "ResultPath": "$.run", "Parameters": {"id.$": RUN_ID}, "Next": "Evaluate"},
        "Evaluate": {
            "Type": "Task",
            "Resource": "arn:aws:states:::sagemaker:createProcessingJob.sync",
            "Parameters": {
                "ProcessingJobName.$": "States.Format('chat-dev-eval-{}', $.run.id)",
                "RoleArn": "arn:aws:iam::111111111111:role/model",
            },
            "End": True,
        },
    }


def test_a_sync_job_needs_polling_and_the_managed_rule():
    job = "arn:aws:sagemaker:us-east-1:111111111111:processing-job/chat-dev-eval-*"
    rule = "arn:aws:events:us-east-1:111111111111:rule/StepFunctionsGetEventsForSageMakerProcessingJobsRule"
    actions = ["sagemaker:CreateProcessingJob", "sagemaker:DescribeProcessingJob", "sagemaker:StopProcessingJob"]
    events = _allow(["events:PutTargets", "events:PutRule", "events:DescribeRule"], rule)
    complete = [_allow([*actions, "sagemaker:ListTags"], job), PASS_ROLE, events]
    assert unpermitted_calls(_gate_stack(_evaluate_job(), complete)) == []
    without_rule = [_allow([*actions, "sagemaker:ListTags"], job), PASS_ROLE]
    assert sorted(a for a, _ in _denied(_gate_stack(_evaluate_job(), without_rule))) == [
        "events:DescribeRule",
        "events:PutRule",
        "events:PutTargets",
    ]
    without_stop = [_allow([*actions[:2], "sagemaker:ListTags"], job), PASS_ROLE, events]
    assert [a for a, _ in _denied(_gate_stack(_evaluate_job(), without_stop))] == ["sagemaker:StopProcessingJob"]


def test_lambda_invoke_sns_publish_and_a_distributed_map_need_their_grants():
    states = {
        "Fan": {
            "Type": "Map",
            "ItemProcessor": {
                "ProcessorConfig": {"Mode": "DISTRIBUTED", "ExecutionType": "STANDARD"},
                "StartAt": "Work",
                "States": {"Work": {"Type": "Task", "Resource": "${Fn.Arn}", "End": True}},
            },
            "Next": "Decide",
        },
        "Decide": {
            "Type": "Task",
            "Resource": "arn:aws:states:::lambda:invoke",
            "Parameters": {"FunctionName": "${Fn.Arn}", "Payload": {}},
            "Next": "Notify",
        },
        "Notify": {
            "Type": "Task",
            "Resource": "arn:aws:states:::sns:publish",
            "Parameters": {"TopicArn": "${Topic}", "Message": "done"},
            "End": True,
        },
    }
    extra = {
        "Fn": {"Type": "AWS::Lambda::Function", "Properties": {"FunctionName": "seeded-fn"}},
        "Key": {"Type": "AWS::KMS::Key", "Properties": {}},
        "Topic": {"Type": "AWS::SNS::Topic", "Properties": {"KmsMasterKeyId": {"Fn::GetAtt": ["Key", "Arn"]}}},
    }
    stack = _gate_stack(states, [], start="Fan", extra=extra)
    assert sorted(a for a, _ in _denied(stack)) == [
        "kms:Decrypt",
        "kms:GenerateDataKey",
        "lambda:InvokeFunction",
        "lambda:InvokeFunction",
        "sns:Publish",
        "states:StartExecution",
    ]
    grants = [
        _allow("lambda:InvokeFunction", "arn:aws:lambda:us-east-1:111111111111:function:seeded-fn"),
        _allow("sns:Publish", {"Ref": "Topic"}),
        _allow(["kms:Decrypt", "kms:GenerateDataKey"], {"Fn::GetAtt": ["Key", "Arn"]}),
        _allow("states:StartExecution", {"Ref": "Machine"}),
    ]
    stack = _gate_stack(states, grants, start="Fan", extra=extra)
    assert [f for f in unpermitted_calls(stack) if f.where.startswith("Machine/")] == []


# --------------------------------------------------------------------------- seeded mistakes: Lambda handlers

HANDLER = """
import boto3

def handler(event, context):
    s3 = boto3.client("s3")
    s3.put_object(Bucket=event["bucket"], Key="k", Body=b"{}")
    boto3.client("cloudwatch").put_metric_data(Namespace="optigate/gate", MetricData=[])
"""


def _lambda_stack(tmp_path: Path, statements: list[dict]) -> Stack:
    asset = tmp_path / "asset.abc123"
    asset.mkdir(exist_ok=True)
    (asset / "handler.py").write_text(HANDLER)
    resources = {
        "FnRole": {"Type": "AWS::IAM::Role", "Properties": {}},
        "FnPolicy": {
            "Type": "AWS::IAM::Policy",
            "Properties": {"Roles": [{"Ref": "FnRole"}], "PolicyDocument": {"Statement": statements}},
        },
        "Fn": {
            "Type": "AWS::Lambda::Function",
            "Properties": {
                "Handler": "handler.handler",
                "Role": {"Fn::GetAtt": ["FnRole", "Arn"]},
                "Code": {"S3Bucket": "assets", "S3Key": "abc123.zip"},
            },
        },
    }
    return Stack("seeded", {"Resources": resources}, assets={"abc123": asset})


def test_a_handler_call_its_role_does_not_grant_is_reported(tmp_path):
    stack = _lambda_stack(tmp_path, [_allow("s3:PutObject", "arn:aws:s3:::bucket/*")])
    assert [a for a, _ in _denied(stack)] == ["cloudwatch:PutMetricData"]
    complete = [_allow("s3:PutObject", "arn:aws:s3:::bucket/*"), _allow("cloudwatch:PutMetricData", "*")]
    assert unpermitted_calls(_lambda_stack(tmp_path, complete)) == []


def test_the_benchmark_worker_needs_both_invoke_actions(app_stacks):
    """The worker signs InvokeEndpointWithResponseStream by hand (optigate.bench.core.client); its API
    reference says the caller also needs sagemaker:InvokeEndpoint: both are looked for."""
    from tests.template_rules.iam.handlers import handler_calls, handler_source

    stack = app_stacks[0]
    worker = next(
        r
        for k, r in stack.template["Resources"].items()
        if k.startswith("BenchmarkWorker") and r["Type"] == "AWS::Lambda::Function"
    )
    source = handler_source(stack, worker)
    assert source is not None
    root = next(p for p in source.parents if (p / "optigate").is_dir())
    calls = handler_calls(source, root)
    assert {
        ("sagemaker", "InvokeEndpointWithResponseStream"),
        ("sagemaker", "InvokeEndpoint"),
        ("s3", "PutObject"),
    } <= calls
