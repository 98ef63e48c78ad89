"""What a Task state retries, per kind of integration: one table, each entry with its source.

Step Functions names an error by the integration that raised it, and the names differ by kind:

* AWS SDK integrations (`arn:aws:states:::aws-sdk:sagemaker:describeEndpoint`) raise
  `<Service>.<ErrorName>Exception` for the errors the service's API model declares, and, for the ones it
  does not (throttling, validation), the SDK's base exception: `SageMaker.SageMakerException` (the Step
  Functions guide, "Learning to use AWS service SDK integrations", supported-services-awssdk.html, and its
  S3 tutorial's `S3.S3Exception`; moto's executor, from LocalStack's, names them the same way).
* Optimized integrations (`arn:aws:states:::sagemaker:createEndpoint`) raise the Java SDK's exception
  name: `SageMaker.AmazonSageMakerException` for throttling *and* for validation errors alike (the guide's
  "Create and manage Amazon SageMaker AI jobs", connect-sagemaker.html; aws-step-functions-data-science-sdk
  -python pull 162), `Lambda.ServiceException` and friends for `lambda:invoke`.

Retrying a whole exception class also retries a request that is simply wrong; the attempts are bounded
(about half a minute), and CreateEndpoint right after CreateEndpointConfig needs exactly that: the API
reference of CreateEndpoint says the read-after-write ValidationException calls for retry logic.

BackoffRate is 1.5, not the docs' 2: CDK writes a whole number without a decimal point and statelint
(run on every state machine by the tests) requires a float.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Transient:
    """The errors one kind of integration raises for a call worth repeating, and where that is written."""

    errors: tuple[str, ...]
    source: str


#: Integration kind (see :func:`integration_kind`) -> what to retry.
TRANSIENT: dict[str, Transient] = {
    "lambda": Transient(
        (
            "Lambda.ClientExecutionTimeoutException",
            "Lambda.ServiceException",
            "Lambda.AWSLambdaException",
            "Lambda.SdkClientException",
            "Lambda.TooManyRequestsException",
        ),
        "docs.aws.amazon.com/step-functions/latest/dg/bp-lambda-serviceexception.html (the first four); "
        "Lambda.TooManyRequestsException for the invocation quota: the same guide, connect-lambda.html",
    ),
    "sagemaker": Transient(
        ("SageMaker.AmazonSageMakerException",),
        "docs.aws.amazon.com/step-functions/latest/dg/connect-sagemaker.html; "
        "github.com/aws/aws-step-functions-data-science-sdk-python/pull/162 (throttling of the optimized "
        "integration arrives as SageMaker.AmazonSageMakerException, not SageMaker.ThrottlingException)",
    ),
    "aws-sdk:sagemaker": Transient(
        ("SageMaker.SageMakerException", "SageMaker.ThrottlingException"),
        "docs.aws.amazon.com/step-functions/latest/dg/supported-services-awssdk.html: <Service>.<Error>Exception; "
        "throttling is not in SageMaker's API model, so it arrives as the SDK's base SageMakerException",
    ),
    "aws-sdk:cloudwatch": Transient(
        ("CloudWatch.CloudWatchException", "CloudWatch.ThrottlingException"),
        "docs.aws.amazon.com/step-functions/latest/dg/supported-services-awssdk.html (as for aws-sdk:sagemaker)",
    ),
    "sns": Transient(
        ("SNS.AmazonSNSException", "SNS.ThrottledException"),
        "no page lists them: the optimized integrations raise the Java SDK's names (as SageMaker's "
        "AmazonSageMakerException above); SNS's throttling error is Throttled (ThrottledException)",
    ),
    "states": Transient(
        ("StepFunctions.ExecutionLimitExceeded", "StepFunctions.AWSStepFunctionsException"),
        "docs.aws.amazon.com/step-functions/latest/dg/concepts-nested-workflows.html (ExecutionLimitExceeded); "
        "the Java SDK's base exception for throttling of StartExecution. A child execution that fails is "
        "States.TaskFailed, not retried.",
    ),
}

BACKOFF_RATE = 1.5
INTERVAL_SECONDS = 2
MAX_ATTEMPTS = 5  # 2 + 3 + 4.5 + 6.75 + 10.1 s: about half a minute before the error stands


def integration_kind(resource: str) -> str:
    """The key of :data:`TRANSIENT` for a Task's Resource ARN (a Lambda function's ARN counts as `lambda`)."""
    if ":states:::" not in resource:
        if ":lambda:" in resource or resource.startswith("arn:aws:lambda"):
            return "lambda"
        raise ValueError(f"not a Step Functions service integration nor a Lambda function: {resource}")
    integration = resource.split(":states:::", 1)[1]
    if integration.startswith("aws-sdk:"):
        return ":".join(integration.split(":")[:2])
    return integration.split(":", 1)[0]


def retry_for(resource: str) -> dict[str, Any]:
    """The Retry entry (ASL, as a state's JSON) of a Task calling `resource`."""
    return {
        "ErrorEquals": list(TRANSIENT[integration_kind(resource)].errors),
        "IntervalSeconds": INTERVAL_SECONDS,
        "MaxAttempts": MAX_ATTEMPTS,
        "BackoffRate": BACKOFF_RATE,
    }


def lambda_retry() -> dict[str, Any]:
    """The Retry entry of a `lambda:invoke` Task."""
    return retry_for("arn:aws:states:::lambda:invoke")
