"""Problems with the evaluation's inputs (the dataset, the endpoints): one line each, exit code 2.

A quality verdict (exit 0 pass, 1 fail, 3 cannot resolve) needs inputs that can be read and
endpoints that answer; anything else is the user's to fix and is said in one line, with the
dataset's file:line or the endpoint's name, never as a traceback.
"""

from __future__ import annotations

from typing import Any

#: The job's exit code for an input or usage problem (argparse's own code for bad arguments).
INPUT_ERROR_EXIT = 2


class InputError(ValueError):
    """An input the evaluation cannot use; `str(error)` is the one line to print."""


def endpoint_problem(error: BaseException, side: str, endpoint: str, endpoint_url: str | None = None) -> InputError:
    """One line for a failed call to the `side` ("baseline"/"candidate") endpoint: what and what to do."""
    from botocore.exceptions import (
        ClientError,
        EndpointConnectionError,
        NoCredentialsError,
        NoRegionError,
        ReadTimeoutError,
    )

    where = f"{side} endpoint {endpoint!r}"
    if isinstance(error, EndpointConnectionError):
        url = endpoint_url or getattr(error, "kwargs", {}).get("endpoint_url", "the SageMaker runtime")
        return InputError(
            f"{where}: cannot connect to {url} (connection refused or unreachable); "
            "start the endpoint (or `optigate emulate`) or fix --endpoint-url / --region"
        )
    if isinstance(error, ReadTimeoutError):
        return InputError(f"{where}: no answer before the read timeout; check that the endpoint is InService")
    if isinstance(error, NoCredentialsError):
        return InputError(f"{where}: no AWS credentials found; configure a profile or set AWS_ACCESS_KEY_ID")
    if isinstance(error, NoRegionError):
        return InputError(f"{where}: no AWS region; pass --region or set AWS_REGION")
    if isinstance(error, ClientError):
        details: dict[str, Any] = error.response.get("Error", {})
        code, message = details.get("Code", "Error"), str(details.get("Message", "")).strip()
        hint = {
            "ValidationError": "check the name (endpoint, endpoint@variant or endpoint#inference-component) "
            "with `aws sagemaker describe-endpoint`",
            "ValidationException": "check the name (endpoint, endpoint@variant or endpoint#inference-component) "
            "with `aws sagemaker describe-endpoint`",
            "AccessDeniedException": "the role needs sagemaker:InvokeEndpoint on this endpoint",
            "ModelError": "the model rejected the request; check --schema (inputs or messages) and --stream",
        }.get(code, "check the endpoint and retry")
        return InputError(f"{where}: {code}: {message or 'no message'}; {hint}")
    return InputError(f"{where}: {type(error).__name__}: {str(error).strip() or 'no message'}")
