"""The permissions a state needs of its state machine's role.

- The API's own action on each resource type the Service Authorization Reference marks required for it, the
  ARN built from the Task's evaluated `Parameters` (iam.parameters).
- `iam:PassRole` on each `...RoleArn` parameter when the action lists iam:PassRole as a dependent action.
- Run-a-job (`.sync`) integrations, from the Step Functions docs "IAM policies for Amazon SageMaker"
  (https://docs.aws.amazon.com/step-functions/latest/dg/sagemaker-iam.html) and "IAM policies for AWS
  Step Functions" (https://docs.aws.amazon.com/step-functions/latest/dg/stepfunctions-iam.html):
  SageMaker `Describe*`/`Stop*`/`ListTags` on the job and `events:PutTargets/PutRule/DescribeRule` on
  the managed rule `StepFunctionsGetEventsForSageMaker<Kind>sRule`; nested executions
  `states:DescribeExecution/StopExecution` on `execution:<state machine>:*` and the events actions on
  `StepFunctionsGetEventsForStepFunctionsExecutionRule`.
- A Distributed Map: `states:StartExecution` on the state machine itself
  (https://docs.aws.amazon.com/step-functions/latest/dg/iam-policies-eg-dist-map.html).
- `lambda:invoke` and a Task whose Resource is a function ARN: `lambda:InvokeFunction` on the function.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Mapping
from typing import Any, Final

from optigate.rehearse.template import render, resources_of_type
from tests.template_rules.assembly import Stack, token_values
from tests.template_rules.iam.database import dependent_actions, iam_action, privilege, resource_formats
from tests.template_rules.iam.parameters import Unresolved, evaluate_parameters
from tests.template_rules.iam.policies import Need

SAMPLE_EXECUTION: Final = "5e1d2c3b-0a9f-4e8d-b7c6-a5b4c3d2e1f0"


_ARN_VARIABLE = re.compile(r"\$\{(\w+)\}")


def _arn_pattern(arn_format: str) -> str:
    return _ARN_VARIABLE.sub("*", arn_format)


def _build_arns(arn_format: str, parameters: Mapping[str, Any], stack: Stack) -> str | Unresolved | None:
    """The ARN of one resource type from a request: a parameter that already is such an ARN, or the
    format's variables filled from parameters of the same name. None: the request names no such resource."""
    pattern = _arn_pattern(arn_format).replace("${Partition}", "aws")
    for value in parameters.values():
        if isinstance(value, str) and value.startswith("arn:") and fnmatch.fnmatchcase(value, pattern):
            return value
    fixed = {"Partition": "aws", "Region": stack.region, "Account": stack.account}
    values: dict[str, str] = {}
    for variable in _ARN_VARIABLE.findall(arn_format):
        if variable in fixed:
            values[variable] = fixed[variable]
            continue
        candidates = [variable, variable.removesuffix("Name") + "Name", variable + "Name"]
        found = next((parameters[c] for c in candidates if c in parameters), None)
        if found is None:
            return None
        if isinstance(found, Unresolved):
            return found
        if not isinstance(found, str):
            return Unresolved(f"{variable} is {found!r}")
        values[variable] = found.rsplit("/", 1)[-1] if found.startswith("arn:") else found
    return _ARN_VARIABLE.sub(lambda m: values[m.group(1)], arn_format)


def action_needs(action: str, parameters: Mapping[str, Any], stack: Stack, why: str) -> list[Need]:
    """The action on each resource type the reference marks required for it (or on `*`), plus the
    dependent iam:PassRole / sagemaker:AddTags the request's parameters call for."""
    needs: list[Need] = []
    formats = resource_formats(action)
    if not formats:  # no required resource: the request is authorized on a resource it names, if any
        optional = [_build_arns(f, parameters, stack) for f in resource_formats(action, False).values()]
        arns = [a for a in optional if a is not None]
        needs.append(Need(action, arns[0] if arns else "*", why))
    for kind, arn_format in formats.items():
        arn = _build_arns(arn_format, parameters, stack)
        needs.append(Need(action, arn if arn is not None else Unresolved(f"no parameter names its {kind}"), why))
    dependent = dependent_actions(action)
    if "iam:passrole" in dependent:
        for key, value in parameters.items():
            if key.endswith("RoleArn"):
                needs.append(Need("iam:PassRole", value, f"{why} passes {key}"))
    if "sagemaker:addtags" in dependent and parameters.get("Tags"):
        needs += [Need("sagemaker:AddTags", n.resource, f"{why} with Tags") for n in needs if n.action == action]
    return needs


def _topic_key_needs(action: str, parameters: Mapping[str, Any], stack: Stack) -> list[Need]:
    """Publishing to a topic of the template encrypted with a KMS key needs kms:GenerateDataKey and
    kms:Decrypt on that key (https://docs.aws.amazon.com/sns/latest/dg/sns-key-management.html)."""
    if action != "sns:Publish":
        return []
    lookup = token_values(stack)
    needs = []
    for logical, topic in resources_of_type(stack.template, "AWS::SNS::Topic").items():
        key = topic.get("Properties", {}).get("KmsMasterKeyId")
        if key is None or parameters.get("TopicArn") != lookup(logical, None):
            continue
        key_arn = str(render(key, lookup))
        if not key_arn.startswith("arn:"):  # a key id or an alias
            key_arn = f"arn:aws:kms:{stack.region}:{stack.account}:" + (key_arn if "/" in key_arn else f"key/{key_arn}")
        needs += [
            Need(a, key_arn, "publishing to a KMS-encrypted topic") for a in ("kms:GenerateDataKey", "kms:Decrypt")
        ]
    return needs


def _kms_keys_in(value: Any) -> list[str]:
    """Every `KmsKeyId` / `*KmsKeyId` member of a request, at any depth."""
    if isinstance(value, dict):
        keys = [v for k, v in value.items() if k.endswith("KmsKeyId") and isinstance(v, str)]
        return keys + [key for v in value.values() for key in _kms_keys_in(v)]
    if isinstance(value, list):
        return [key for item in value for key in _kms_keys_in(item)]
    return []


def _endpoint_key_needs(action: str, parameters: Mapping[str, Any]) -> list[Need]:
    """An endpoint config naming KMS keys (volume, data capture) makes SageMaker create grants on them for the
    caller of CreateEndpoint/UpdateEndpoint, which is the role that made the config here: kms:CreateGrant
    (the API reference of CreateEndpointConfig's KmsKeyId; SageMaker's API permissions reference)."""
    if action != "sagemaker:CreateEndpointConfig":
        return []
    return [Need("kms:CreateGrant", key, "an endpoint config with this KMS key") for key in _kms_keys_in(parameters)]


def task_needs(state: dict[str, Any], known: Mapping[str, Any], stack: Stack, own_arn: str) -> list[Need]:
    """What one state needs of its state machine's role."""
    if state.get("Type") == "Map" and state.get("ItemProcessor", {}).get("ProcessorConfig", {}).get("Mode") == (
        "DISTRIBUTED"
    ):
        return [Need("states:StartExecution", own_arn, "Distributed Map child executions")]
    resource = state.get("Resource", "") if state.get("Type") == "Task" else ""
    if not resource:
        return []
    if ":lambda:" in resource and ":function:" in resource:
        return [Need("lambda:InvokeFunction", resource, "Task invokes the function")]
    if ":states:::" not in resource:
        return [Need("?", Unresolved(f"Task resource {resource}"))]
    integration = resource.split(":states:::", 1)[1]
    sdk = integration.startswith("aws-sdk:")
    parts = integration.split(":", 2)[1:] if sdk else integration.split(":", 1)
    service, action_and_pattern = parts
    action_name, _, pattern = action_and_pattern.partition(".")
    operation = action_name[0].upper() + action_name[1:]
    action = iam_action(service, operation)
    parameters = evaluate_parameters(state.get("Parameters", {}), known)
    if privilege(action) is None:
        return [Need(action, Unresolved(f"no IAM action {action} for {integration}"))]
    needs = [
        *action_needs(action, parameters, stack, integration),
        *_topic_key_needs(action, parameters, stack),
        *_endpoint_key_needs(action, parameters),
    ]
    if pattern.startswith("sync"):
        prefix = action.partition(":")[0]
        if prefix == "sagemaker" and operation.startswith("Create"):
            kind = operation.removeprefix("Create")
            job = next((n.resource for n in needs if n.action == action), Unresolved("no job"))
            for extra in (f"sagemaker:Describe{kind}", f"sagemaker:Stop{kind}", "sagemaker:ListTags"):
                needs.append(Need(extra, job, f"{integration} polls and stops the job"))
            rule = f"StepFunctionsGetEventsForSageMaker{kind}sRule"
        elif action == "states:StartExecution":
            machine = next((n.resource for n in needs if n.action == action), Unresolved("no state machine"))
            execution: str | Unresolved = machine
            if isinstance(machine, str):
                execution = machine.replace(":stateMachine:", ":execution:") + f":{SAMPLE_EXECUTION}"
            for extra in ("states:DescribeExecution", "states:StopExecution"):
                needs.append(Need(extra, execution, f"{integration} follows the execution"))
            rule = "StepFunctionsGetEventsForStepFunctionsExecutionRule"
        else:
            return [*needs, Need("?", Unresolved(f"no known permissions for {integration}"))]
        arn = f"arn:aws:events:{stack.region}:{stack.account}:rule/{rule}"
        needs += [Need(a, arn, f"{integration} (managed rule)") for a in ("events:PutTargets", "events:PutRule")]
        needs.append(Need("events:DescribeRule", arn, f"{integration} (managed rule)"))
    return needs
