"""What a Task state retries, per kind of integration: one table, each entry with its source.

BackoffRate is 1.5, not the docs' 2: CDK writes a whole number without a decimal point and
statelint (run on every state machine by the tests) requires a float.
"""

from __future__ import annotations

from typing import Any

#: Transient Lambda service errors and throttling of `lambda:invoke`: the Step Functions guide's
#: "Handle Lambda service exceptions" (docs.aws.amazon.com/step-functions/latest/dg/bp-lambda-serviceexception.html)
#: lists the first four for a Retry and names Lambda.TooManyRequestsException for "the maximum number of invocations".
LAMBDA_TRANSIENT = (
    "Lambda.ClientExecutionTimeoutException",
    "Lambda.ServiceException",
    "Lambda.AWSLambdaException",
    "Lambda.SdkClientException",
    "Lambda.TooManyRequestsException",
)
BACKOFF_RATE = 1.5
INTERVAL_SECONDS = 2
MAX_ATTEMPTS = 6


def lambda_retry() -> dict[str, Any]:
    """The Retry entry of a `lambda:invoke` Task (ASL, as a state's JSON)."""
    return {
        "ErrorEquals": list(LAMBDA_TRANSIENT),
        "IntervalSeconds": INTERVAL_SECONDS,
        "MaxAttempts": MAX_ATTEMPTS,
        "BackoffRate": BACKOFF_RATE,
    }
