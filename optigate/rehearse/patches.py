"""What GateHarness changes in moto while it is active, each a ``unittest.mock.patch`` (nothing touches
moto's files), and the one harness they serve.

- Step Functions: the optimized ``sagemaker`` task service (optigate.rehearse.sync_service); the
  ``states:startExecution`` integration's PascalCase parameters and answers, as the service has them.
- Every SDK request a state machine makes is validated against botocore first (a bad one is a
  ValidationException, as the service would answer, not a serializer crash).
- SageMaker: moto's request handler validates each request, then asks the emulator
  (optigate.rehearse.sagemaker); instance types are left to botocore's enum (moto's list is old);
  UpdateModelPackage keeps the metadata a request does not name (moto drops it; AWS adds and removes).
- CloudWatch: percentile statistics, and the scenario's variant traffic published before a read.
- Lambda: invocations run in-process (optigate.rehearse.lambda_runtime).
- Catchers and retriers on ``States.ALL`` do not match ``States.Runtime`` or
  ``States.DataLimitExceeded``, as in the service (moto matched them).
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from contextlib import ExitStack
from typing import Any
from unittest import mock

from botocore.exceptions import ClientError
from moto.awslambda.models import LambdaBackend
from moto.awslambda_simple.models import LambdaSimpleBackend
from moto.cloudwatch import models as cw_models
from moto.sagemaker import models as sm_models
from moto.sagemaker.responses import SageMakerResponse
from moto.stepfunctions.parser.asl.component.common.error_name.error_equals_decl import ErrorEqualsDecl
from moto.stepfunctions.parser.asl.component.common.retry import retrier_decl
from moto.stepfunctions.parser.asl.component.state.exec.state_task import state_task_factory
from moto.stepfunctions.parser.asl.component.state.exec.state_task.service import (
    state_task_service_aws_sdk,
    state_task_service_callback,
    state_task_service_sfn,
)
from moto.stepfunctions.parser.asl.utils.boto_client import boto_client_for

from optigate.rehearse.cloudwatch import percentile_statistics, publish_variant_traffic
from optigate.rehearse.context import Harness
from optigate.rehearse.lambda_runtime import UnknownFunction
from optigate.rehearse.sagemaker import SageMakerError
from optigate.rehearse.sagemaker.state import json_default
from optigate.rehearse.sync_service import StateTaskServiceSageMaker
from optigate.rehearse.validation import validate_request

# --------------------------------------------------------------------------- the active harness

_ACTIVE: Harness | None = None
_ACTIVE_LOCK = threading.Lock()


def active_harness() -> Harness | None:
    """The GateHarness now active (patches and in-process handlers reach it here), if any."""
    return _ACTIVE


def activate(harness: Harness) -> None:
    global _ACTIVE
    with _ACTIVE_LOCK:
        if _ACTIVE is not None:
            raise RuntimeError("another GateHarness is active")
        _ACTIVE = harness


def deactivate() -> None:
    global _ACTIVE
    with _ACTIVE_LOCK:
        _ACTIVE = None


def apply_patches(stack: ExitStack, harness: Harness) -> None:
    """Enter every patch on `stack` (closing the stack undoes them)."""
    sfn_service = state_task_service_sfn.StateTaskServiceSfn
    patch = mock.patch.object
    stack.enter_context(
        patch(
            state_task_factory,
            "state_task_service_for",
            _state_task_service_for(state_task_factory.state_task_service_for, harness),
        )
    )
    stack.enter_context(patch(sfn_service, "_normalise_parameters", _sfn_camel_case(sfn_service._normalise_parameters)))
    stack.enter_context(patch(sfn_service, "_eval_service_task", _sfn_pascal_response(sfn_service._eval_service_task)))
    stack.enter_context(
        patch(sfn_service, "_normalise_response", _sfn_pascal_normalise(sfn_service._normalise_response))
    )
    stack.enter_context(
        patch(
            state_task_service_aws_sdk,
            "boto_client_for",
            validating_client_for(state_task_service_aws_sdk.boto_client_for),
        )
    )
    stack.enter_context(mock.patch.dict(state_task_service_aws_sdk._SERVICE_ERROR_NAMES, {"sagemaker": "SageMaker"}))
    stack.enter_context(
        patch(state_task_service_callback, "_DELAY_SECONDS_SYNC_CONDITION_CHECK", harness.sync_poll_seconds)
    )
    stack.enter_context(patch(SageMakerResponse, "call_action", _sagemaker_call_action(SageMakerResponse.call_action)))
    stack.enter_context(patch(sm_models.FakeEndpointConfig, "validate_instance_type", lambda self, instance_type: None))
    stack.enter_context(
        patch(
            sm_models.SageMakerModelBackend,
            "update_model_package",
            _keep_package_metadata(sm_models.SageMakerModelBackend.update_model_package),
        )
    )
    stack.enter_context(
        patch(
            cw_models.Statistics,
            "get_statistics_for_type",
            percentile_statistics(cw_models.Statistics.get_statistics_for_type),
        )
    )
    # The emulated traffic is published when anyone reads it: the state machine's SDK tasks and, in-process, a
    # Lambda handler's own boto3 client (the gate's CloudWatch adapter mix).
    stack.enter_context(
        patch(
            cw_models.CloudWatchBackend,
            "get_metric_data",
            _publishing_reads(cw_models.CloudWatchBackend.get_metric_data),
        )
    )
    for backend_cls in (LambdaBackend, LambdaSimpleBackend):
        stack.enter_context(patch(backend_cls, "invoke", _lambda_invoke(backend_cls.invoke)))
    # A Retry waits IntervalSeconds x BackoffRate^n for real in moto's executor: scaled down, the same
    # attempts happen in the same order in a fraction of the time.
    stack.enter_context(patch(retrier_decl, "time", _ScaledSleep(harness.retry_time_scale)))
    terminal = _terminal_errors_escape_states_all(ErrorEqualsDecl._eval_body)
    stack.enter_context(patch(ErrorEqualsDecl, "_eval_body", terminal))


class _ScaledSleep:
    def __init__(self, scale: float):
        self.scale = scale

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds * self.scale)


#: Errors a `States.ALL` catcher or retrier does not match ("States.ALL ... cannot catch
#: States.DataLimitExceeded terminal errors or Runtime error types": the Step Functions guide,
#: concepts-error-handling). moto matches them, which hid missing-path reads that fail a real execution.
TERMINAL_ERRORS = frozenset({"States.Runtime", "States.DataLimitExceeded"})


def _terminal_errors_escape_states_all(original):
    def eval_body(self, env) -> None:
        error_name = env.stack[-1] if env.stack else None
        catches_all = any(getattr(name, "error_name", None) == "States.ALL" for name in self.error_names)
        if catches_all and getattr(error_name, "error_name", None) in TERMINAL_ERRORS:
            env.stack.pop()
            env.stack.append(False)
            return
        original(self, env)

    return eval_body


def _keep_package_metadata(original):
    """UpdateModelPackage as AWS does it: CustomerMetadataProperties adds or replaces the keys it names,
    CustomerMetadataPropertiesToRemove removes keys; moto replaces the whole map (None when not named),
    so approving a package in the registry would lose its report and fingerprint."""

    def update_model_package(self, model_package_arn: str, **kwargs: Any) -> str:
        name = self.model_package_name_mapping.get(model_package_arn, model_package_arn)
        package = self.model_packages.get(name)
        kept = dict(getattr(package, "customer_metadata_properties", None) or {}) if package else {}
        merged = {**kept, **(kwargs.get("customer_metadata_properties") or {})}
        return original(self, model_package_arn, **{**kwargs, "customer_metadata_properties": merged or None})

    return update_model_package


# --------------------------------------------------------------------------- Step Functions


def _state_task_service_for(original, harness: Harness):
    def state_task_service_for(service_name: str):
        if service_name == "sagemaker":
            return StateTaskServiceSageMaker(validating_client_for(boto_client_for), strict=harness.strict_integrations)
        return original(service_name=service_name)

    return state_task_service_for


def _sfn_camel_case(original):
    """Step Functions' own integration (states:startExecution) takes PascalCase parameters
    (StateMachineArn, Input, Name) for an API whose members are camelCase; moto's port passes them
    to boto3 unchanged. Rename them to the API's members, as the service does."""

    def normalise(self, parameters: dict, boto_service_name=None, service_action_name=None):
        original(self, parameters, boto_service_name=boto_service_name, service_action_name=service_action_name)
        if service_action_name is None:
            for key in list(parameters):
                if key[:1].isupper():
                    parameters[key[0].lower() + key[1:]] = parameters.pop(key)
            if self._get_boto_service_action() == "start_execution":
                parameters.setdefault("name", str(uuid.uuid4()))  # the service names unnamed executions

    return normalise


def _pascal(mapping: dict) -> dict:
    return {key[0].upper() + key[1:]: value for key, value in mapping.items()}


def _sfn_pascal_response(original):
    """...and answers the state machine in PascalCase (ExecutionArn, StartDate)."""

    def evaluate(self, env, resource_runtime_part, normalised_parameters, state_credentials):
        original(self, env, resource_runtime_part, normalised_parameters, state_credentials)
        env.stack.append(_pascal(env.stack.pop()))

    return evaluate


def _sfn_pascal_normalise(original):
    """The .sync / .sync:2 result (DescribeExecution) reaches the state machine as Output, Status, ..."""

    def normalise(self, response, boto_service_name=None, service_action_name=None):
        original(self, response, boto_service_name=boto_service_name, service_action_name=service_action_name)
        if isinstance(response, dict) and service_action_name == "describe_execution":
            renamed = _pascal(response)
            response.clear()
            response.update(renamed)

    return normalise


def validating_client_for(original):
    """boto_client_for as moto's executor uses it (parameter_validation=False), plus our validation: a bad
    request becomes a ValidationException ClientError, as the service would answer, not a serializer crash."""

    def boto_client_for(region: str, service: str, state_credentials: Any = None):
        client = original(region=region, service=service, state_credentials=state_credentials)
        service_name = client.meta.service_model.service_name

        def validate(params, model, **_):
            problem = validate_request(service_name, model.name, params)
            if problem:
                harness = _ACTIVE
                if harness is not None:
                    harness.rejected_requests.append((service_name, model.name, problem))
                metadata = {"HTTPStatusCode": 400, "RequestId": str(uuid.uuid4())}
                raise ClientError(
                    {"Error": {"Code": "ValidationException", "Message": problem}, "ResponseMetadata": metadata},
                    model.name,
                )

        client.meta.events.register_first(
            f"before-parameter-build.{client.meta.service_model.service_id.hyphenize()}", validate
        )
        return client

    return boto_client_for


def _publishing_reads(original):
    def get_metric_data(self, queries, start_time, end_time, scan_by="TimestampAscending"):
        harness = _ACTIVE
        if harness is not None:
            publish_variant_traffic(harness, {"StartTime": start_time.isoformat(), "EndTime": end_time.isoformat()})
        return original(self, queries, start_time, end_time, scan_by)

    return get_metric_data


# --------------------------------------------------------------------------- Lambda and SageMaker


def _lambda_invoke(original):
    def invoke(self, function_name, qualifier, body, headers, response_headers):
        harness = _ACTIVE
        if harness is None:
            return original(self, function_name, qualifier, body, headers, response_headers)
        try:
            payload = harness.lambdas.invoke(self, function_name, body, response_headers)
        except UnknownFunction as unknown:
            from moto.awslambda.exceptions import UnknownFunctionException

            arn = f"arn:aws:lambda:{self.region_name}:{self.account_id}:function:{unknown.name}"
            registered = sorted(harness.lambda_handlers)
            raise UnknownFunctionException(
                f"{arn} (GateHarness has no in-process handler for it; registered: {registered})"
            ) from None
        response_headers["Content-Length"] = str(len(payload))
        return payload

    return invoke


def _sagemaker_call_action(original):
    def call_action(self):
        harness = _ACTIVE
        if harness is None:
            return original(self)
        action = self._get_action()
        try:
            params = json.loads(self.body) if self.body else {}
        except (TypeError, ValueError):
            params = {}
        request_id = str(uuid.uuid4())
        with harness.lock:
            if harness.started and harness.scenario.throttle.get(action, 0) > 0:
                harness.scenario.throttle[action] -= 1
                harness.throttled.append(action)
                return _error_response(request_id, SageMakerError("ThrottlingException", "Rate exceeded"))
            problem = validate_request("sagemaker", action, params)
            if problem:
                harness.rejected_requests.append(("sagemaker", action, problem))
                return _error_response(request_id, SageMakerError("ValidationException", problem))
            try:
                result = harness.sagemaker.handle(self.sagemaker_backend, action, params)
            except SageMakerError as err:
                return _error_response(request_id, err)
            if result is None:
                return original(self)
        headers = {"x-amzn-requestid": request_id, "content-type": "application/x-amz-json-1.1"}
        return 200, headers, json.dumps(result, default=json_default)

    return call_action


def _error_response(request_id: str, err: SageMakerError):
    body = json.dumps({"__type": err.code, "message": err.message})
    return err.status, {"x-amzn-requestid": request_id, "content-type": "application/x-amz-json-1.1"}, body
