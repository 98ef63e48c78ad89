"""Run, poll and stop SageMaker's managed benchmark jobs for the gate's cross-check.

Step Functions' AWS SDK integration does not list the AI benchmark operations (the developer guide's
supported-services page lists services, not operations, and "recently released" ones may be missing); an
unsupported `aws-sdk:` action makes CloudFormation reject the whole state machine at deploy. So the gate calls
them here, with the boto3 and botocore this function's asset bundles (optigate.constructs.assets.bundled_sdk,
pinned to a botocore whose SageMaker model has these operations), never the Lambda runtime's own.

Event: {"operation": "CreateAIBenchmarkJob" | "DescribeAIBenchmarkJob" | "StopAIBenchmarkJob",
        "request": <the operation's request, as the SageMaker API reference gives it>}
(optigate.lambdas.events.BenchmarkJobEvent, staged beside this handler, which refuses an unknown or missing key or a
value of the wrong type, naming it).
Returns: Create -> {"arn": <AIBenchmarkJobArn>}; Stop -> {}; Describe -> {"status": <AIBenchmarkJobStatus>,
"output": <OutputConfig.S3OutputLocation> or null, "reason": <FailureReason> or null}.

Fail closed: any error (the API's, or an answer without a status, or a Completed job without an output location)
is raised, which the gate's Catch turns into an unavailable cross-check and a stop of the job.
"""

from __future__ import annotations

from typing import Any

import boto3

try:
    from optigate.lambdas.events import BenchmarkJobEvent, EventError
except ImportError:  # the function's code: optigate.lambdas.events staged beside this handler as events.py
    from events import BenchmarkJobEvent, EventError  # type: ignore[no-redef]

OPERATIONS = ("CreateAIBenchmarkJob", "DescribeAIBenchmarkJob", "StopAIBenchmarkJob")


class UnexpectedAnswer(Exception):
    """SageMaker answered without what the gate reads."""


def describe(answer: dict[str, Any]) -> dict[str, Any]:
    """The gate's view of DescribeAIBenchmarkJob's answer (see the module docstring)."""
    status = answer.get("AIBenchmarkJobStatus")
    if not isinstance(status, str) or not status:
        raise UnexpectedAnswer(f"DescribeAIBenchmarkJob answered without AIBenchmarkJobStatus: {sorted(answer)}")
    output = (answer.get("OutputConfig") or {}).get("S3OutputLocation")
    if status == "Completed" and not output:
        raise UnexpectedAnswer("DescribeAIBenchmarkJob: Completed without OutputConfig.S3OutputLocation")
    return {"status": status, "output": output or None, "reason": answer.get("FailureReason") or None}


def handler(event: dict, _context=None) -> dict:
    try:
        job = BenchmarkJobEvent.from_event(event)
    except EventError as refused:
        expected = f"expected an operation of {OPERATIONS} and its request"
        raise EventError(refused.seam, refused.key, f"{refused.problem}; {expected}") from None
    operation, request = job.operation, job.request
    if operation not in OPERATIONS:
        raise ValueError(f"expected an operation of {OPERATIONS} and its request, got {operation!r}")
    sagemaker = boto3.client("sagemaker")
    if operation == "CreateAIBenchmarkJob":
        return {"arn": sagemaker.create_ai_benchmark_job(**request)["AIBenchmarkJobArn"]}
    if operation == "StopAIBenchmarkJob":
        sagemaker.stop_ai_benchmark_job(**request)
        return {}
    return describe(sagemaker.describe_ai_benchmark_job(**request))
