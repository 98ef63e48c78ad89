"""Each template rule on a compliant and a non-compliant template fragment (cdk-nag's layout: one pair per
rule). Every rule of the registry must have its pair here; the synthesized templates are checked in
tests/stacks/test_iam_checks.py and tests/stacks/test_optional_reads.py."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.template_rules import registry
from tests.template_rules.assembly import Stack
from tests.template_rules.rules import (
    iam_actions_exist,
    inference_component_rollout,
    lambda_calls_permitted,
    optimization_stopping_condition,
    sfn_optimized_parameters_known,
    sfn_optional_reads_guarded,
    sfn_sdk_actions_supported,
    state_machine_calls_permitted,
)

ENDPOINT = "arn:aws:sagemaker:us-east-1:111111111111:endpoint/"


def _allow(action: str, resource: str) -> dict[str, Any]:
    return {"Effect": "Allow", "Action": action, "Resource": resource}


def _role(name: str, statements: list[dict[str, Any]]) -> dict[str, Any]:
    """A role and the policy attached to it."""
    return {
        name: {"Type": "AWS::IAM::Role", "Properties": {}},
        f"{name}Policy": {
            "Type": "AWS::IAM::Policy",
            "Properties": {"Roles": [{"Ref": name}], "PolicyDocument": {"Statement": statements}},
        },
    }


def _machine(states: dict[str, Any], statements: list[dict[str, Any]]) -> Stack:
    """One state machine, starting at `Describe`, whose role holds `statements`."""
    definition = {"StartAt": "Describe", "States": states}
    machine = {
        "Type": "AWS::StepFunctions::StateMachine",
        "Properties": {"RoleArn": {"Fn::GetAtt": ["Role", "Arn"]}, "DefinitionString": json.dumps(definition)},
    }
    return Stack("fragment", {"Resources": {**_role("Role", statements), "Machine": machine}})


def _describe_endpoint(then: dict[str, Any] | None = None) -> dict[str, Any]:
    task = {
        "Type": "Task",
        "Resource": "arn:aws:states:::aws-sdk:sagemaker:describeEndpoint",
        "Parameters": {"EndpointName": "chat"},
        "ResultPath": "$.endpoint",
    }
    return {"Describe": {**task, "Next": "Then"}, "Then": then} if then else {"Describe": {**task, "End": True}}


def _describe_benchmark_job() -> dict[str, Any]:
    """DescribeAIBenchmarkJob through the SDK integration (not on the list of supported actions)."""
    resource = "arn:aws:states:::aws-sdk:sagemaker:describeAIBenchmarkJob"
    task = {"Type": "Task", "Resource": resource, "Parameters": {"AIBenchmarkJobName": "chat"}, "End": True}
    return {"Describe": task}


def _create_endpoint_config(resource: str, **extra: Any) -> dict[str, Any]:
    """CreateEndpointConfig through `resource`, its one variant carrying `extra` (a member newer than the list's)."""
    variant = {
        "VariantName": "AllTraffic",
        "ModelName": "chat",
        "InstanceType": "ml.g6.2xlarge",
        "InitialInstanceCount": 1,
    }
    parameters = {"EndpointConfigName": "chat", "ProductionVariants": [{**variant, **extra}]}
    return {
        "Describe": {"Type": "Task", "Resource": resource, "Parameters": parameters, "ResultPath": None, "End": True}
    }


def _policy_naming(action: str) -> Stack:
    return Stack("fragment", {"Resources": _role("Role", [_allow(action, "*")])})


def _lambda(statements: list[dict[str, Any]], folder: Path) -> Stack:
    """One zip function whose handler writes to S3, with its asset in `folder`."""
    asset = folder / "asset.abc123"
    asset.mkdir(exist_ok=True)
    (asset / "handler.py").write_text(
        "import boto3\n\n\ndef handler(event, context):\n"
        '    boto3.client("s3").put_object(Bucket=event["bucket"], Key="k", Body=b"")\n'
    )
    function = {
        "Type": "AWS::Lambda::Function",
        "Properties": {
            "Handler": "handler.handler",
            "Role": {"Fn::GetAtt": ["FnRole", "Arn"]},
            "Code": {"S3Bucket": "assets", "S3Key": "abc123.zip"},
        },
    }
    return Stack("fragment", {"Resources": {**_role("FnRole", statements), "Fn": function}}, assets={"abc123": asset})


def _reads(path: str) -> dict[str, Any]:
    """DescribeEndpoint, then a Pass that reads `path` of its answer."""
    return _describe_endpoint({"Type": "Pass", "Parameters": {"read.$": path}, "End": True})


def _create_optimization_job(bounds: dict[str, Any]) -> dict[str, Any]:
    """CreateOptimizationJob with `bounds` as its StoppingCondition, permitted to the machine's role."""
    task = {
        "Type": "Task",
        "Resource": "arn:aws:states:::aws-sdk:sagemaker:createOptimizationJob",
        "Parameters": {"OptimizationJobName": "job", "StoppingCondition": bounds},
        "ResultPath": None,
        "End": True,
    }
    return {"Describe": task}


def _components(deployment_config: dict[str, Any] | None) -> Stack:
    """A base component with compute (carrying `deployment_config`), an adapter on it, and one rollback alarm."""
    base: dict[str, Any] = {
        "EndpointName": "support",
        "Specification": {"ModelName": "m", "ComputeResourceRequirements": {"NumberOfAcceleratorDevicesRequired": 1}},
        "RuntimeConfig": {"CopyCount": 2},
    }
    if deployment_config is not None:
        base["DeploymentConfig"] = deployment_config
    adapter = {"EndpointName": "support", "Specification": {"BaseInferenceComponentName": "support-base"}}
    resources = {
        "Base": {"Type": "AWS::SageMaker::InferenceComponent", "Properties": base},
        "Adapter": {"Type": "AWS::SageMaker::InferenceComponent", "Properties": adapter},
        "Errors": {"Type": "AWS::CloudWatch::Alarm", "Properties": {"Threshold": 1}},
    }
    return Stack("fragment", {"Resources": resources})


def _rolling(batch: dict[str, Any], alarm: Any = None) -> dict[str, Any]:
    return {
        "RollingUpdatePolicy": {"MaximumBatchSize": batch, "WaitIntervalInSeconds": 600},
        "AutoRollbackConfiguration": {"Alarms": [{"AlarmName": alarm or {"Ref": "Errors"}}]},
    }


PERCENT_10 = {"Type": "CAPACITY_PERCENT", "Value": 10}
CREATE_JOB = _allow("sagemaker:CreateOptimizationJob", "arn:aws:sagemaker:us-east-1:111111111111:optimization-job/job")
DESCRIBE = _allow("sagemaker:DescribeEndpoint", ENDPOINT + "chat")
DESCRIBE_JOB = _allow(
    "sagemaker:DescribeAIBenchmarkJob", "arn:aws:sagemaker:us-east-1:111111111111:ai-benchmark-job/chat"
)
CREATE_CONFIG = _allow(
    "sagemaker:CreateEndpointConfig", "arn:aws:sagemaker:us-east-1:111111111111:endpoint-config/chat"
)
OPTIMIZED_CONFIG = "arn:aws:states:::sagemaker:createEndpointConfig"
DESCRIBE_ANOTHER = _allow("sagemaker:DescribeEndpoint", ENDPOINT + "code")

#: rule id -> (a compliant fragment, a non-compliant one, what the finding must say), each built in a folder.
EXAMPLES: dict[str, tuple[Callable[[Path], Stack], Callable[[Path], Stack], str]] = {
    iam_actions_exist.ID: (
        lambda _: _policy_naming("s3:GetObject"),
        lambda _: _policy_naming("s3:GetObjekt"),
        "s3:GetObjekt is no IAM action",
    ),
    state_machine_calls_permitted.ID: (
        lambda _: _machine(_describe_endpoint(), [DESCRIBE]),
        lambda _: _machine(_describe_endpoint(), [DESCRIBE_ANOTHER]),
        f"sagemaker:DescribeEndpoint on {ENDPOINT}chat",
    ),
    lambda_calls_permitted.ID: (
        lambda folder: _lambda([_allow("s3:PutObject", "arn:aws:s3:::bucket/*")], folder),
        lambda folder: _lambda([_allow("s3:GetObject", "arn:aws:s3:::bucket/*")], folder),
        "s3:PutObject",
    ),
    sfn_optional_reads_guarded.ID: (
        lambda _: _machine(_reads("$.endpoint.EndpointStatus"), [DESCRIBE]),
        lambda _: _machine(_reads("$.endpoint.FailureReason"), [DESCRIBE]),
        "FailureReason is optional in DescribeEndpointOutput",
    ),
    optimization_stopping_condition.ID: (
        lambda _: _machine(_create_optimization_job({"MaxRuntimeInSeconds": 3600}), [CREATE_JOB]),
        lambda _: _machine(
            _create_optimization_job({"MaxRuntimeInSeconds": 3600, "MaxPendingTimeInSeconds": 7200}), [CREATE_JOB]
        ),
        "sends StoppingCondition keys ['MaxPendingTimeInSeconds', 'MaxRuntimeInSeconds']",
    ),
    sfn_sdk_actions_supported.ID: (
        lambda _: _machine(_describe_endpoint(), [DESCRIBE]),
        lambda _: _machine(_describe_benchmark_job(), [DESCRIBE_JOB]),
        "calls aws-sdk:sagemaker:describeAIBenchmarkJob, which is not on the list of supported actions",
    ),
    sfn_optimized_parameters_known.ID: (
        lambda _: _machine(_create_endpoint_config(OPTIMIZED_CONFIG), [CREATE_CONFIG]),
        lambda _: _machine(
            _create_endpoint_config(OPTIMIZED_CONFIG, InferenceAmiVersion="al2-ami-sagemaker-inference-gpu-3-1"),
            [CREATE_CONFIG],
        ),
        "Describe sends ProductionVariants[0].InferenceAmiVersion to the optimized sagemaker:createEndpointConfig",
    ),
    inference_component_rollout.ID: (
        lambda _: _components(_rolling(PERCENT_10)),
        lambda _: _components(None),
        "fragment/Base: has compute but no DeploymentConfig",
    ),
}


def test_every_rule_has_a_compliant_and_a_non_compliant_example():
    assert sorted(EXAMPLES) == sorted(rule.id for rule in registry.RULES)
    assert len({rule.id for rule in registry.RULES}) == len(registry.RULES)


@pytest.mark.parametrize("rule_id", sorted(EXAMPLES))
def test_the_compliant_fragment_passes_every_rule(rule_id, tmp_path):
    compliant, _, _ = EXAMPLES[rule_id]
    assert [str(f) for f in registry.findings(compliant(tmp_path))] == []


@pytest.mark.parametrize("rule_id", sorted(EXAMPLES))
def test_the_non_compliant_fragment_is_reported_by_its_rule_alone(rule_id, tmp_path):
    _, non_compliant, said = EXAMPLES[rule_id]
    stack = non_compliant(tmp_path)
    found = [str(f) for f in registry.findings(stack, rule_id)]
    assert found and all(said in line for line in found), found
    others = [rule.id for rule in registry.RULES if rule.id != rule_id and registry.findings(stack, rule.id)]
    assert others == []


# --------------------------------------------------------------------------- the list of supported SDK actions


def test_every_listed_sdk_action_is_a_real_operation_with_a_known_basis():
    """The checked list (SFN-SdkActionSupported): each entry names an operation of botocore's model of its service
    (Step Functions' action is the operation in camel case) and a basis the file explains; the guide it rests on is
    the developer guide's supported-services page; nothing is both supported and not listed."""
    import botocore.session

    listed = sfn_sdk_actions_supported.supported_list()
    assert (
        listed["guide"]["url"] == "https://docs.aws.amazon.com/step-functions/latest/dg/supported-services-awssdk.html"
    )
    session = botocore.session.get_session()
    problems = []
    for entry, basis in listed["supported"].items():
        service, action = entry.split(":")
        operation = action[0].upper() + action[1:]
        if action[0] != action[0].lower() or operation not in session.get_service_model(service).operation_names:
            problems.append(f"{entry}: no operation {operation} of {service}")
        if basis not in listed["bases"]:
            problems.append(f"{entry}: basis {basis!r} is not explained")
    assert problems == []
    assert set(listed["supported"]).isdisjoint(listed["not_listed"])
    assert {"sagemaker:createAIBenchmarkJob", "sagemaker:describeAIBenchmarkJob"} <= set(listed["not_listed"])


@pytest.mark.parametrize(
    ("resource", "expected"),
    [
        ("arn:aws:states:::aws-sdk:sagemaker:describeEndpoint", None),
        ("arn:aws:states:::aws-sdk:sagemaker:createAIBenchmarkJob", "sagemaker:createAIBenchmarkJob"),
        ("arn:aws:states:::aws-sdk:sagemaker:stopAIBenchmarkJob.waitForTaskToken", "sagemaker:stopAIBenchmarkJob"),
        ("arn:aws:states:::aws-sdk:sagemaker:describeendpoint", "sagemaker:describeendpoint"),  # case matters
        ("arn:aws:states:::sagemaker:createEndpoint", None),  # an optimized integration: not this rule's
        ("arn:aws:states:::lambda:invoke", None),
    ],
)
def test_an_sdk_resource_is_refused_unless_listed(resource, expected):
    definition = {"StartAt": "T", "States": {"T": {"Type": "Task", "Resource": resource, "End": True}}}
    assert sfn_sdk_actions_supported.unsupported_calls(definition) == ([("T", expected)] if expected else [])


def test_an_unlisted_action_inside_a_map_or_parallel_is_found():
    inner = {
        "StartAt": "T",
        "States": {
            "T": {"Type": "Task", "Resource": "arn:aws:states:::aws-sdk:sagemaker:stopAIBenchmarkJob", "End": True}
        },
    }
    definition = {
        "StartAt": "P",
        "States": {
            "P": {"Type": "Parallel", "Branches": [inner], "Next": "M"},
            "M": {"Type": "Map", "ItemProcessor": inner, "End": True},
        },
    }
    assert [a for _, a in sfn_sdk_actions_supported.unsupported_calls(definition)] == [
        "sagemaker:stopAIBenchmarkJob"
    ] * 2


# --------------------------------------------------------------------------- the optimized SageMaker parameters

#: "Supported parameters:" entries per API of awsdocs/aws-step-functions-developer-guide@de67ba0a (2021-10-15)
#: doc_source/connect-sagemaker.md, counted by hand (the names were lost to the export, the counts were not).
GUIDE_2021_COUNTS = {
    "createEndpoint": 3,
    "createEndpointConfig": 4,
    "createHyperParameterTuningJob": 5,
    "createLabelingJob": 10,
    "createModel": 7,
    "createProcessingJob": 11,
    "createTrainingJob": 10,
    "createTransformJob": 10,
    "updateEndpoint": 2,
}


def test_the_optimized_list_knows_each_optimized_api_and_agrees_with_the_guides_counts():
    """Every optimized SageMaker API (the harness's table) is on the list with the 2021 guide's count; where the list
    claims the guide, its top-level names are exactly that many; every other basis says why not."""
    from optigate.rehearse import optimized_parameters
    from optigate.rehearse.sync_service import OPTIMIZED_SAGEMAKER_ACTIONS

    listed = optimized_parameters.optimized_list()["actions"]
    assert set(listed) == set(OPTIMIZED_SAGEMAKER_ACTIONS) == set(GUIDE_2021_COUNTS)
    for action, entry in listed.items():
        assert entry["guide_count"] == GUIDE_2021_COUNTS[action], action
        assert entry["source"], action
        if entry["basis"] == "guide":
            assert len(entry["parameters"]) == GUIDE_2021_COUNTS[action], action
        elif entry["basis"] == "cdk":
            assert entry["note"] and "aws/aws-cdk" in entry["source"], action
        else:
            assert entry["basis"] == "none" and entry["parameters"] is None, action


def test_every_name_on_the_optimized_list_is_a_member_of_the_api_of_its_kind():
    """No typo on the list (aws-cdk#10014 was one): each name is a member of botocore's shape at its place, a structure
    where the list gives members or says `unlisted`, a map where it says `map`, no structure where it says `value`."""
    from botocore.model import ListShape, MapShape, StructureShape

    from optigate.rehearse import optimized_parameters
    from optigate.rehearse.validation import service_model

    def problems(spec, shape, path):
        while isinstance(shape, ListShape):
            shape = shape.member
        if spec == optimized_parameters.MAP:
            return [] if isinstance(shape, MapShape) else [f"{path} is no map"]
        if spec == optimized_parameters.VALUE:
            return [] if not isinstance(shape, (StructureShape, MapShape)) else [f"{path} is a {shape.type_name}"]
        if not isinstance(shape, StructureShape):
            return [f"{path} is no structure"]
        if spec == optimized_parameters.UNLISTED:
            return []
        found = [f"{path}.{name} is no member" for name in spec if name not in shape.members]
        return found + [
            problem
            for name, sub in spec.items()
            if name in shape.members
            for problem in problems(sub, shape.members[name], f"{path}.{name}")
        ]

    model = service_model("sagemaker")
    found = []
    for action, entry in optimized_parameters.optimized_list()["actions"].items():
        if entry["parameters"] is not None:
            shape = model.operation_model(action[0].upper() + action[1:]).input_shape
            found += problems(entry["parameters"], shape, action)
    assert found == []


@pytest.mark.parametrize(
    ("action", "parameters", "unknown"),
    [
        ("createEndpoint", {"EndpointName.$": "$.name", "EndpointConfigName": "c"}, []),
        (
            "createEndpointConfig",
            {"EndpointConfigName": "c", "MetricsConfig": {"EnableEnhancedMetrics": True}},
            ["MetricsConfig"],
        ),
        ("createEndpointConfig", {"ProductionVariants.$": "$.variants"}, []),  # filled at run time: checked then
        (
            "createEndpointConfig",
            {"ProductionVariants": [{"VariantName": "a"}, {"ModelDataDownloadTimeoutInSeconds": 600}]},
            ["ProductionVariants[1].ModelDataDownloadTimeoutInSeconds"],
        ),
        (
            "createEndpointConfig",
            {"Tags": [{"key": "team", "Value": "chat"}]},
            ["Tags[0].key"],
        ),  # amazon-sagemaker-examples#4492
        (
            "createModel",
            {"PrimaryContainer": {"Image": "i", "Environment": {"ANY_NAME": "1"}, "ModelDataSource": {}}},
            ["PrimaryContainer.ModelDataSource"],
        ),
        (
            "createTrainingJob",
            {"InputDataConfig": [{"DataSource": {"S3DataSource": {"AtttributeNames": []}}}]},
            ["InputDataConfig[0].DataSource.S3DataSource.AtttributeNames"],
        ),  # aws-cdk#10014
        (
            "createLabelingJob",
            {"InputConfig.$": "$.input", "OutputConfig": {"S3OutputPath": "s3://b/"}},
            ["OutputConfig.S3OutputPath"],
        ),
        ("createHyperParameterTuningJob", {"HyperParameterTuningJobName": "h"}, ["HyperParameterTuningJobName"]),
        ("deleteEndpoint", {"EndpointName": "e"}, ["EndpointName"]),  # no optimized integration
    ],
)
def test_a_field_off_the_optimized_list_is_found_at_its_path(action, parameters, unknown):
    from optigate.rehearse.optimized_parameters import unknown_fields

    assert unknown_fields(action, parameters) == unknown


def test_an_unlisted_optimized_parameter_inside_a_map_or_parallel_is_found_and_aws_sdk_is_not_this_rules():
    inner = {"StartAt": "C", "States": _create_endpoint_config(OPTIMIZED_CONFIG, InferenceAmiVersion="x")}
    inner["States"]["C"] = inner["States"].pop("Describe")
    sdk = _create_endpoint_config("arn:aws:states:::aws-sdk:sagemaker:createEndpointConfig", InferenceAmiVersion="x")
    definition = {
        "StartAt": "P",
        "States": {
            "P": {"Type": "Parallel", "Branches": [inner], "Next": "M"},
            "M": {"Type": "Map", "ItemProcessor": inner, "Next": "Describe"},
            **sdk,
        },
    }
    unknown = ("ProductionVariants[0].InferenceAmiVersion",)
    assert sfn_optimized_parameters_known.unknown_calls(definition) == [("C", "createEndpointConfig", unknown)] * 2


# --------------------------------------------------------------------------- inference component roll-outs


@pytest.mark.parametrize(
    ("deployment_config", "said"),
    [
        (_rolling({"Type": "CAPACITY_PERCENT", "Value": 4}), "MaximumBatchSize (CAPACITY_PERCENT) 4 is outside 5-50"),
        (_rolling({"Type": "CAPACITY_PERCENT", "Value": 51}), "MaximumBatchSize (CAPACITY_PERCENT) 51 is outside 5-50"),
        (_rolling({"Type": "COPY_COUNT", "Value": 2}), "MaximumBatchSize of 2 copies is 100% of 2, outside 5-50%"),
        (_rolling({"Type": "INSTANCE_COUNT", "Value": 1}), "MaximumBatchSize is {'Type': 'INSTANCE_COUNT'"),
        (_rolling(PERCENT_10, alarm={"Ref": "Adapter"}), "rolls back on {'Ref': 'Adapter'}, which is no AWS::"),
        (_rolling(PERCENT_10, alarm="someone-elses-alarm"), "rolls back on 'someone-elses-alarm', which is no AWS::"),
        (
            {"RollingUpdatePolicy": _rolling(PERCENT_10)["RollingUpdatePolicy"]},
            "AutoRollbackConfiguration names no 1-10",
        ),
        (
            {"AutoRollbackConfiguration": _rolling(PERCENT_10)["AutoRollbackConfiguration"]},
            "has no RollingUpdatePolicy",
        ),
        (
            {**_rolling(PERCENT_10), "RollingUpdatePolicy": {"MaximumBatchSize": PERCENT_10}},
            "RollingUpdatePolicy lacks ['WaitIntervalInSeconds']",
        ),
        (
            {
                **_rolling(PERCENT_10),
                "RollingUpdatePolicy": {"MaximumBatchSize": PERCENT_10, "WaitIntervalInSeconds": {"Ref": "W"}},
            },
            "WaitIntervalInSeconds is {'Ref': 'W'}, not a number the rule can check",
        ),
    ],
)
def test_a_component_policy_outside_the_apis_ranges_or_alarms_is_reported(deployment_config, said):
    found = [str(f) for f in registry.findings(_components(deployment_config), inference_component_rollout.ID)]
    assert found and all(line.startswith("fragment/Base: ") for line in found), found  # adapters are not checked
    assert any(said in line for line in found), found


def test_a_copy_count_batch_within_the_share_and_a_named_alarm_pass():
    stack = _components(_rolling({"Type": "COPY_COUNT", "Value": 1}, alarm="support-errors"))
    stack.template["Resources"]["Errors"]["Properties"]["AlarmName"] = "support-errors"
    assert registry.findings(stack, inference_component_rollout.ID) == []


def test_the_rollback_batch_wait_and_timeout_ranges_are_each_reported():
    config = {
        **_rolling(PERCENT_10),
        "RollingUpdatePolicy": {
            "MaximumBatchSize": PERCENT_10,
            "WaitIntervalInSeconds": 3601,
            "MaximumExecutionTimeoutInSeconds": 599,
            "RollbackMaximumBatchSize": {"Type": "CAPACITY_PERCENT", "Value": 101},
        },
    }
    found = [f.why for f in registry.findings(_components(config), inference_component_rollout.ID)]
    assert found == [
        "RollbackMaximumBatchSize (CAPACITY_PERCENT) 101 is outside 1-100",
        "WaitIntervalInSeconds 3601 is outside 0-3600",
        "MaximumExecutionTimeoutInSeconds 599 is outside 600-28800",
    ]
