"""Lambda functions run in-process: moto would invoke them in Docker. A raised exception becomes an
``Unhandled`` function error with the ``errorType``/``errorMessage`` payload Lambda's Python runtime
returns."""

from __future__ import annotations

import json
import traceback
import uuid
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

Handler = Callable[[dict, Any], Any]


class UnknownFunction(Exception):
    """Invoked a function that has no in-process handler."""

    def __init__(self, name: str):
        super().__init__(name)
        self.name = name


def function_name(name_or_arn: str) -> str:
    """FunctionName as Invoke accepts it (name, name:qualifier, full or partial ARN) -> bare name."""
    if name_or_arn.startswith("arn:"):
        return name_or_arn.split(":")[6]
    if ":function:" in name_or_arn or name_or_arn.count(":") >= 2:  # partial ARN 123456789012:function:name
        return name_or_arn.split(":")[2]
    return name_or_arn.split(":")[0]


class InProcessLambdas:
    """Handlers by function name (or by the Handler string a function created in moto is configured with),
    and every invocation in order."""

    def __init__(self, handlers: dict[str, Handler] | None = None):
        self.handlers: dict[str, Handler] = dict(handlers or {})
        self.invocations: list[tuple[str, Any]] = []  # (function name, event)

    def _handler_for(self, backend, name_or_arn: str) -> tuple[str, Handler | None]:
        name = function_name(name_or_arn)
        if name in self.handlers:
            return name, self.handlers[name]
        try:
            fn = backend.get_function(name_or_arn)
        except Exception:  # unknown to moto too
            return name, None
        return name, self.handlers.get(fn.handler)

    def invoke(self, backend, name_or_arn: str, body: Any, response_headers: dict) -> bytes:
        """Run the handler as Lambda's Python runtime would; the response payload. Raises UnknownFunction."""
        name, handler = self._handler_for(backend, name_or_arn)
        event = json.loads(body) if body else {}
        self.invocations.append((name, event))
        request_id = str(uuid.uuid4())
        response_headers["x-amzn-requestid"] = request_id
        if handler is None:
            raise UnknownFunction(name)
        context = SimpleNamespace(
            function_name=name,
            function_version="$LATEST",
            invoked_function_arn=f"arn:aws:lambda:{backend.region_name}:{backend.account_id}:function:{name}",
            memory_limit_in_mb=1024,
            aws_request_id=request_id,
            log_group_name=f"/aws/lambda/{name}",
            log_stream_name="harness",
            get_remaining_time_in_millis=lambda: 60_000,
        )
        try:
            payload = json.dumps(handler(event, context))
        except Exception as exc:  # any exception becomes the function error, as in Lambda's Python runtime
            is_marshal = isinstance(exc, TypeError) and "JSON serializable" in str(exc)
            response_headers["x-amz-function-error"] = "Unhandled"
            error = {
                "errorMessage": str(exc),
                "errorType": "Runtime.MarshalError" if is_marshal else type(exc).__name__,
                "requestId": request_id,
                "stackTrace": traceback.format_tb(exc.__traceback__),
            }
            payload = json.dumps(error)
        return payload.encode("utf-8")
