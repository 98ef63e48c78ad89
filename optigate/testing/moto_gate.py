"""Run real Step Functions definitions in-process on moto, SageMaker and Lambda included (tests only).

moto 5.x can execute an ASL definition (``mock_aws(config={"stepfunctions": {"execute_state_machine": True}})``)
but three gaps stop optigate's gate machine from running there:

* Lambda functions are invoked in Docker. :class:`GateHarness` routes ``lambda:Invoke`` to Python
  callables instead (``lambda_handlers``); a raised exception becomes an ``Unhandled`` function error
  with the ``errorType``/``errorMessage`` payload Lambda's Python runtime returns.
* The optimized ``arn:aws:states:::sagemaker:*`` integration is unsupported by moto's executor. The
  harness registers its own task service for ``sagemaker``: request-response for the optimized APIs
  and ``.sync`` (create, then poll Describe until terminal) for the job APIs.
* moto's SageMaker backend lacks UpdateEndpoint, optimization jobs and inference components, drops
  fields such as ``ShadowProductionVariants``, rejects current instance types and reports endpoints
  InService / processing jobs Completed at once. The harness wraps moto's SageMaker request handler:
  every request is validated against botocore's service model, the missing APIs are emulated, and
  the status of endpoints and jobs advances as a :class:`Scenario` says, one step per Describe call.

Usage::

    with GateHarness(lambda_handlers={"pick": pick}, scenario=Scenario(endpoint=Outcome("Failed", after=2))) as h:
        result = h.run(definition, {"input": 1})
        assert result["status"] == "FAILED"
        assert h.sagemaker_resources()["endpoints"] == {}

Nothing here touches moto's files: everything is ``unittest.mock.patch`` applied in ``__enter__`` and
undone in ``__exit__``. Only one harness may be active at a time.
"""

from __future__ import annotations

import datetime as _dt
import json
import re
import threading
import time
import traceback
import uuid
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any, Final, Self
from unittest import mock

import boto3
import botocore.session
from botocore.exceptions import ClientError
from botocore.model import ListShape, MapShape, Shape, StringShape, StructureShape
from botocore.validate import ParamValidator
from moto import mock_aws

from optigate.testing.asl import sdk_calls
from moto.awslambda.models import LambdaBackend
from moto.awslambda_simple.models import LambdaSimpleBackend
from moto.cloudwatch import models as cw_models
from moto.sagemaker import models as sm_models
from moto.sagemaker.responses import SageMakerResponse
from moto.stepfunctions.parser.api import HistoryEventType, TaskFailedEventDetails
from moto.stepfunctions.parser.asl.component.common.error_name.custom_error_name import (
    CustomErrorName,
)
from moto.stepfunctions.parser.asl.component.common.error_name.failure_event import (
    FailureEvent,
    FailureEventException,
)
from moto.stepfunctions.parser.asl.component.common.error_name.states_error_name import (
    StatesErrorName,
)
from moto.stepfunctions.parser.asl.component.common.error_name.states_error_name_type import (
    StatesErrorNameType,
)
from moto.stepfunctions.parser.asl.component.state.exec.state_task import (
    state_task_factory,
)
from moto.stepfunctions.parser.asl.component.state.exec.state_task.service import state_task_service_sfn  # noqa: E402
from moto.stepfunctions.parser.asl.component.state.exec.state_task.service import (
    state_task_service_aws_sdk,
    state_task_service_callback,
)
from moto.stepfunctions.parser.asl.component.state.exec.state_task.service.resource import (
    ResourceCondition,
)
from moto.stepfunctions.parser.asl.component.state.exec.state_task.service.state_task_service_callback import (
    StateTaskServiceCallback,
)
from moto.stepfunctions.parser.asl.eval.event.event_detail import EventDetails
from moto.stepfunctions.parser.asl.utils.boto_client import boto_client_for
from moto.stepfunctions.parser.asl.utils.encoding import to_json_str

ACCOUNT_ID: Final = "123456789012"
REGION: Final = "us-east-1"
ROLE_ARN: Final = f"arn:aws:iam::{ACCOUNT_ID}:role/optigate-test"
DEFAULT_IMAGE: Final = "763104351884.dkr.ecr.us-east-1.amazonaws.com/djl-inference:0.31.0-lmi13.0.0-cu124"

# Step Functions' optimized SageMaker integrations (docs: connect-sagemaker.html), and which take `.sync`.
# Everything else must go through `arn:aws:states:::aws-sdk:sagemaker:<action>`; Step Functions rejects an
# unknown optimized resource when the state machine is created.
OPTIMIZED_SAGEMAKER_ACTIONS: Final[dict[str, str | None]] = {
    # action -> Describe operation polled by `.sync` (None: request-response only)
    "createEndpoint": None,
    "createEndpointConfig": None,
    "createModel": None,
    "updateEndpoint": None,
    "createProcessingJob": "DescribeProcessingJob",
    "createTrainingJob": "DescribeTrainingJob",
    "createTransformJob": "DescribeTransformJob",
    "createHyperParameterTuningJob": "DescribeHyperParameterTuningJob",
    "createLabelingJob": "DescribeLabelingJob",
}
# Not optimized integrations in AWS; accepted only with GateHarness(strict_integrations=False).
LENIENT_SAGEMAKER_ACTIONS: Final[dict[str, str | None]] = {
    "deleteEndpoint": None,
    "deleteEndpointConfig": None,
    "deleteModel": None,
    "createModelPackage": None,
}
_SYNC_JOBS: Final[dict[str, tuple[str, str, set[str], set[str]]]] = {
    # action -> (name parameter, status field, success statuses, failure statuses)
    "createProcessingJob": ("ProcessingJobName", "ProcessingJobStatus", {"Completed"}, {"Failed", "Stopped"}),
    "createTrainingJob": ("TrainingJobName", "TrainingJobStatus", {"Completed"}, {"Failed", "Stopped"}),
    "createTransformJob": ("TransformJobName", "TransformJobStatus", {"Completed"}, {"Failed", "Stopped"}),
    "createHyperParameterTuningJob": ("HyperParameterTuningJobName", "HyperParameterTuningJobStatus", {"Completed"}, {"Failed", "Stopped"}),
    "createLabelingJob": ("LabelingJobName", "LabelingJobStatus", {"Completed"}, {"Failed", "Stopped"}),
}


# --------------------------------------------------------------------------------------------- scenario


@dataclass(frozen=True)
class Outcome:
    """How a resource's status progresses.

    ``after`` Describe calls report the in-progress status (Creating / Updating / InProgress / INPROGRESS);
    the next Describe reports ``status``. ``after=0`` means the first Describe already sees ``status``;
    ``after=None`` means the resource never leaves the in-progress status.
    """

    status: str
    after: int | None = 1
    failure_reason: str | None = None

    @classmethod
    def never(cls) -> Outcome:
        return cls(status="", after=None)


OutcomeSpec = Outcome | Callable[[dict], Outcome]


@dataclass
class Scenario:
    """What the emulated SageMaker does. Each field is an :class:`Outcome` or ``f(request) -> Outcome``
    (``request`` is the Create/Update request, so a test can vary the outcome by name)."""

    endpoint: OutcomeSpec = field(default_factory=lambda: Outcome("InService", after=1))  # CreateEndpoint
    endpoint_update: OutcomeSpec = field(default_factory=lambda: Outcome("InService", after=1))  # UpdateEndpoint; "Failed" or "RolledBack"
    processing_job: OutcomeSpec = field(default_factory=lambda: Outcome("Completed", after=0))
    optimization_job: OutcomeSpec = field(default_factory=lambda: Outcome("COMPLETED", after=1))
    inference_component: OutcomeSpec = field(default_factory=lambda: Outcome("InService", after=0))
    # DescribeOptimizationJob's OptimizationOutput.RecommendedInferenceImage once COMPLETED.
    recommended_inference_image: str = DEFAULT_IMAGE
    # Called when a processing job "runs" (on the Describe that makes it terminal), with the
    # CreateProcessingJob request; may write results to moto S3. It may return a dict of Describe fields
    # to override (e.g. {"ProcessingJobStatus": "Failed", "FailureReason": "..."}); raising fails the job.
    on_processing_job: Callable[[dict], dict | None] | None = None
    # Same, for an optimization job reaching COMPLETED (e.g. to write artifacts under S3OutputLocation).
    on_optimization_job: Callable[[dict], dict | None] | None = None
    # CloudWatch traffic of endpoint variants (AWS/SageMaker, dimensions EndpointName and VariantName):
    # variant name -> {"Invocations": count, "Invocation5XXErrors": count, "ModelLatency": [microseconds, ...]}.
    # Published for a variant that is on an InService endpoint when GetMetricData reads it, timestamped
    # inside the requested window, as if the traffic had happened during it.
    variant_traffic: dict[str, dict[str, Any]] = field(default_factory=dict)


def _resolve(spec: OutcomeSpec, request: dict) -> Outcome:
    return spec(request) if callable(spec) and not isinstance(spec, Outcome) else spec


# ------------------------------------------------------------------------------------------- validation

_SESSION = botocore.session.get_session()
_MODELS: dict[str, Any] = {}


def service_model(service: str):
    if service not in _MODELS:
        _MODELS[service] = _SESSION.get_service_model(service)
    return _MODELS[service]


def _enum_errors(value: Any, shape: Shape, path: str) -> list[str]:
    """ParamValidator does not check enums; the services do. Walk the request and report bad values."""
    errors: list[str] = []
    if isinstance(shape, StructureShape) and isinstance(value, dict):
        for key, member in shape.members.items():
            if key in value:
                errors += _enum_errors(value[key], member, f"{path}.{key}")
    elif isinstance(shape, ListShape) and isinstance(value, list):
        for i, item in enumerate(value):
            errors += _enum_errors(item, shape.member, f"{path}[{i}]")
    elif isinstance(shape, MapShape) and isinstance(value, dict):
        for key, item in value.items():
            errors += _enum_errors(item, shape.value, f"{path}.{key}")
    elif isinstance(shape, StringShape) and shape.enum and isinstance(value, str) and value not in shape.enum:
        errors.append(f"Value '{value}' at '{path}' failed to satisfy constraint: Member must satisfy enum value set: {shape.enum}")
    return errors


def validate_request(service: str, operation: str, params: dict) -> str | None:
    """botocore's ParamValidator (types, required members, unknown keys, min/max) plus enums.

    Returns the error text, or None if the request is well formed (or the operation is unknown)."""
    model = service_model(service)
    if operation not in model.operation_names:
        return None
    shape = model.operation_model(operation).input_shape
    if shape is None:
        return None if not params else f"{operation} takes no parameters, got {sorted(params)}"
    report = ParamValidator().validate(params, shape)
    errors = [report.generate_report()] if report.has_errors() else []
    errors += _enum_errors(params, shape, operation)
    return "\n".join(errors) or None


def check_definition(definition: dict | str) -> list[str]:
    """Static check Step Functions does at CreateStateMachine: Parameters of SDK and optimized SageMaker tasks
    may only name members of the API's request shape (``Key.$`` counts as ``Key``)."""
    definition = json.loads(definition) if isinstance(definition, str) else definition
    problems: list[str] = []

    def keys(value: Any, shape: Shape, path: str) -> None:
        if isinstance(shape, StructureShape) and isinstance(value, dict):
            for key, item in value.items():
                member = key.removesuffix(".$")
                if member not in shape.members:
                    problems.append(f"{path}: the field '{member}' is not supported by Step Functions (not in {shape.name})")
                elif not key.endswith(".$"):
                    keys(item, shape.members[member], f"{path}.{member}")
        elif isinstance(shape, ListShape) and isinstance(value, list):
            for i, item in enumerate(value):
                keys(item, shape.member, f"{path}[{i}]")

    for call in sdk_calls(definition):
        if not (call.sdk_integration or call.service == "sagemaker"):
            continue
        model = service_model(call.service)
        if call.operation not in model.operation_names:
            problems.append(f"{call.state}: {call.service} has no operation {call.operation}")
            continue
        shape = model.operation_model(call.operation).input_shape
        if shape is not None:
            keys(call.parameters, shape, f"{call.state}.Parameters")

    return problems


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


def _validating_client_for(original):
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
                error = {"Error": {"Code": "ValidationException", "Message": problem}, "ResponseMetadata": {"HTTPStatusCode": 400, "RequestId": str(uuid.uuid4())}}
                raise ClientError(error, model.name)

        client.meta.events.register_first(f"before-parameter-build.{client.meta.service_model.service_id.hyphenize()}", validate)
        if service_name == "cloudwatch":
            client.meta.events.register("before-parameter-build.cloudwatch.GetMetricData", _publish_variant_traffic)
        return client

    return boto_client_for


def _publish_variant_traffic(params: dict, **_) -> None:
    """Scenario.variant_traffic of the variants on InService endpoints, inside the window being read."""
    harness = _ACTIVE
    if harness is None or not harness.scenario.variant_traffic:
        return
    start, end = (_dt.datetime.fromisoformat(str(params[k]).replace("Z", "+00:00")) for k in ("StartTime", "EndTime"))
    # Whole seconds, as CloudWatch (and moto) align the window.
    at = start.replace(microsecond=0) + min(end - start, _dt.timedelta(seconds=1)) / 2
    backend = harness._sm_backend()
    data = []
    for endpoint in backend.endpoints.values():
        if endpoint.endpoint_status != "InService":
            continue
        for variant in (endpoint.production_variants or []) + (getattr(endpoint, "shadow_production_variants", None) or []):
            traffic = harness.scenario.variant_traffic.get(variant["VariantName"])
            key = (endpoint.endpoint_name, variant["VariantName"])
            if not traffic or key in harness._published_traffic:
                continue
            harness._published_traffic.add(key)
            dims = [{"Name": "EndpointName", "Value": endpoint.endpoint_name}, {"Name": "VariantName", "Value": variant["VariantName"]}]
            for name, value in traffic.items():
                values = value if isinstance(value, list) else [value]
                data += [{"MetricName": name, "Dimensions": dims, "Timestamp": at, "Value": float(v)} for v in values]
    cloudwatch = harness.client("cloudwatch")
    for index in range(0, len(data), 500):
        cloudwatch.put_metric_data(Namespace="AWS/SageMaker", MetricData=data[index : index + 500])


def _percentile_statistics(original):
    """moto's CloudWatch knows Sum/Average/Minimum/Maximum/SampleCount; SageMaker alarms and the gate
    read percentiles (p99) too."""

    def get_statistics_for_type(self, stat: str):
        match = re.fullmatch(r"p(\d+(?:\.\d+)?)", stat)
        if match is None:
            return original(self, stat)
        import numpy as np

        values = self.metric_single_values_list
        return float(np.percentile(values, float(match.group(1)))) if values else None

    return get_statistics_for_type


# --------------------------------------------------------------------------------- SageMaker emulation


def _now() -> _dt.datetime:
    return _dt.datetime.now(_dt.UTC)


def _snake(key: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", key).lower()


def _json_default(value: Any) -> Any:
    if isinstance(value, _dt.datetime):
        return value.timestamp()
    raise TypeError(f"not JSON serializable: {value!r}")


class SageMakerError(Exception):
    def __init__(self, code: str, message: str, status: int = 400):
        super().__init__(message)
        self.code, self.message, self.status = code, message, status


def _not_found(kind: str, arn: str) -> SageMakerError:
    return SageMakerError("ValidationException", f"Could not find {kind} \"{arn}\".")


@dataclass
class _Progress:
    outcome: Outcome
    remaining: int | None
    kind: str  # "create" | "update"
    new_config: str | None = None
    previous_config: str | None = None


@dataclass
class _RegionState:
    endpoints: dict[str, _Progress] = field(default_factory=dict)
    processing_jobs: dict[str, _Progress] = field(default_factory=dict)
    processing_requests: dict[str, dict] = field(default_factory=dict)
    optimization_jobs: dict[str, dict] = field(default_factory=dict)
    optimization_progress: dict[str, _Progress] = field(default_factory=dict)
    optimization_requests: dict[str, dict] = field(default_factory=dict)
    optimization_seen: set[str] = field(default_factory=set)
    inference_components: dict[str, dict] = field(default_factory=dict)
    inference_component_progress: dict[str, _Progress] = field(default_factory=dict)


class SageMakerEmulator:
    """Sits in front of moto's SageMakerResponse. ``handle`` returns a result dict for emulated operations,
    or None to let moto answer (after any state bookkeeping)."""

    # Describe-before hooks advance status; the rest are emulated or adjusted.
    def __init__(self, harness: GateHarness):
        self.harness = harness
        self.calls: list[tuple[str, dict]] = []
        self._regions: dict[tuple[str, str], _RegionState] = {}

    def region_state(self, backend) -> _RegionState:
        return self._regions.setdefault((backend.account_id, backend.region_name), _RegionState())

    @property
    def scenario(self) -> Scenario:
        return self.harness.scenario

    def handle(self, backend, action: str, params: dict) -> dict | None:
        self.calls.append((action, params))
        method = getattr(self, f"_op_{_snake(action)}", None)
        return method(backend, self.region_state(backend), params) if method else None

    # -- progress ------------------------------------------------------------------------------------

    @staticmethod
    def _tick(progress: _Progress) -> bool:
        """One Describe call. True when the resource has just reached its terminal status."""
        if progress.remaining is None:
            return False
        if progress.remaining > 0:
            progress.remaining -= 1
            return False
        return True

    # -- models and endpoint configs -----------------------------------------------------------------

    def _op_create_model(self, backend, state, params):
        if params["ModelName"] in backend._models:
            arn = sm_models.arn_formatter("model", params["ModelName"], backend.account_id, backend.region_name)
            raise SageMakerError("ValidationException", f"Cannot create already existing model \"{arn}\".")

    def _op_create_endpoint_config(self, backend, state, params):
        name = params["EndpointConfigName"]
        arn = sm_models.FakeEndpointConfig.arn_formatter(name, backend.account_id, backend.region_name)
        if name in backend.endpoint_configs:
            raise SageMakerError("ValidationException", f"Cannot create already existing endpoint configuration \"{arn}\".")
        variants = params["ProductionVariants"] + params.get("ShadowProductionVariants", [])
        for variant in variants:
            model = variant.get("ModelName")
            if model is not None and model not in backend._models:
                raise _not_found("model", sm_models.arn_formatter("model", model, backend.account_id, backend.region_name))
            if model is None and "ExecutionRoleArn" not in params:
                raise SageMakerError("ValidationException", "ExecutionRoleArn is required for an endpoint configuration with inference components (no ModelName).")
        config = sm_models.FakeEndpointConfig(
            account_id=backend.account_id,
            region_name=backend.region_name,
            endpoint_config_name=name,
            production_variants=params["ProductionVariants"],
            async_inference_config=params.get("AsyncInferenceConfig"),
            data_capture_config=params.get("DataCaptureConfig"),
            tags=params.get("Tags"),
            kms_key_id=params.get("KmsKeyId"),
        )
        del config.arn  # moto stores a tuple here; DescribeEndpointConfig has no "Arn"
        self._stash(config, params)
        backend.endpoint_configs[name] = config
        return {"EndpointConfigArn": config.endpoint_config_arn}

    @staticmethod
    def _stash(obj, params: dict) -> None:
        """Keep request members moto drops, so Describe returns them (moto turns attributes into fields)."""
        present = obj.response_object
        for key, value in params.items():
            if key not in present and key != "Tags":
                setattr(obj, _snake(key), value)

    # -- endpoints -----------------------------------------------------------------------------------

    def _endpoint(self, backend, name: str):
        if name not in backend.endpoints:
            raise _not_found("endpoint", sm_models.FakeEndpoint.arn_formatter(name, backend.account_id, backend.region_name))
        return backend.endpoints[name]

    @staticmethod
    def _variants_of(config) -> tuple[list, list | None]:
        def runtime(variants):
            out = []
            for v in variants or []:
                item = {"VariantName": v["VariantName"]}
                if "InitialInstanceCount" in v:
                    item["CurrentInstanceCount"] = item["DesiredInstanceCount"] = v["InitialInstanceCount"]
                if "InitialVariantWeight" in v:
                    item["CurrentWeight"] = item["DesiredWeight"] = v["InitialVariantWeight"]
                out.append(item)
            return out

        shadow = getattr(config, "shadow_production_variants", None)
        return runtime(config.production_variants), (runtime(shadow) if shadow else None)

    def _op_create_endpoint(self, backend, state, params):
        name = params["EndpointName"]
        if name in backend.endpoints:
            arn = sm_models.FakeEndpoint.arn_formatter(name, backend.account_id, backend.region_name)
            raise SageMakerError("ValidationException", f"Cannot create already existing endpoint \"{arn}\".")
        config_name = params["EndpointConfigName"]
        if config_name not in backend.endpoint_configs:
            arn = sm_models.FakeEndpointConfig.arn_formatter(config_name, backend.account_id, backend.region_name)
            raise _not_found("endpoint configuration", arn)
        config = backend.endpoint_configs[config_name]
        endpoint = sm_models.FakeEndpoint(
            account_id=backend.account_id,
            region_name=backend.region_name,
            endpoint_name=name,
            endpoint_config_name=config_name,
            production_variants=[],
            data_capture_config=config.data_capture_config,
            tags=params.get("Tags"),
        )
        endpoint.production_variants, endpoint.shadow_production_variants = self._variants_of(config)
        endpoint.pending_deployment_summary = None
        backend.endpoints[name] = endpoint
        outcome = _resolve(self.scenario.endpoint, params)
        progress = _Progress(outcome, outcome.after, "create")
        state.endpoints[name] = progress
        endpoint.endpoint_status = "Creating"
        if progress.remaining == 0:
            self._finish_endpoint(backend, endpoint, progress)
        return {"EndpointArn": endpoint.arn}

    def _finish_endpoint(self, backend, endpoint, progress: _Progress) -> None:
        outcome = progress.outcome
        endpoint.last_modified_time = _now()
        endpoint.pending_deployment_summary = None
        if progress.kind == "update" and outcome.status == "InService":
            config = backend.endpoint_configs.get(progress.new_config)
            endpoint.endpoint_config_name = progress.new_config
            if config is not None:
                endpoint.production_variants, endpoint.shadow_production_variants = self._variants_of(config)
            endpoint.endpoint_status, endpoint.failure_reason = "InService", None
        elif progress.kind == "update" and outcome.status == "RolledBack":
            endpoint.endpoint_status = "InService"
            endpoint.failure_reason = outcome.failure_reason or "Update rolled back."
        else:
            endpoint.endpoint_status = outcome.status
            endpoint.failure_reason = outcome.failure_reason if outcome.status == "Failed" else None
            if outcome.status == "Failed" and not endpoint.failure_reason:
                endpoint.failure_reason = "The primary container for production variant AllTraffic did not pass the ping health check."
        progress.remaining = None
        progress.outcome = Outcome(endpoint.endpoint_status, after=None)

    def _op_describe_endpoint(self, backend, state, params):
        endpoint = self._endpoint(backend, params["EndpointName"])
        progress = state.endpoints.get(endpoint.endpoint_name)
        if progress is not None and progress.remaining is not None and self._tick(progress):
            self._finish_endpoint(backend, endpoint, progress)

    def _op_update_endpoint(self, backend, state, params):
        endpoint = self._endpoint(backend, params["EndpointName"])
        config_name = params["EndpointConfigName"]
        if config_name not in backend.endpoint_configs:
            raise _not_found("endpoint configuration", sm_models.FakeEndpointConfig.arn_formatter(config_name, backend.account_id, backend.region_name))
        if endpoint.endpoint_status != "InService":
            raise SageMakerError("ValidationException", f"Cannot update in-progress endpoint \"{endpoint.arn}\".")
        outcome = _resolve(self.scenario.endpoint_update, params)
        progress = _Progress(outcome, outcome.after, "update", new_config=config_name, previous_config=endpoint.endpoint_config_name)
        state.endpoints[endpoint.endpoint_name] = progress
        config = backend.endpoint_configs[config_name]
        variants, shadow = self._variants_of(config)
        endpoint.endpoint_status = "Updating"
        endpoint.failure_reason = None
        endpoint.pending_deployment_summary = {"EndpointConfigName": config_name, "StartTime": _now(), "ProductionVariants": variants, **({"ShadowProductionVariants": shadow} if shadow else {})}
        if progress.remaining == 0:
            self._finish_endpoint(backend, endpoint, progress)
        return {"EndpointArn": endpoint.arn}

    def _op_delete_endpoint(self, backend, state, params):
        self._endpoint(backend, params["EndpointName"])
        state.endpoints.pop(params["EndpointName"], None)

    # -- processing jobs -----------------------------------------------------------------------------

    def _op_create_processing_job(self, backend, state, params):
        name = params["ProcessingJobName"]
        if name in backend.processing_jobs:
            raise SageMakerError("ValidationException", f"Job name must be unique within an AWS account and region, and a job with this name already exists ({backend.processing_jobs[name].arn})")
        job = backend.create_processing_job(
            app_specification=params["AppSpecification"],
            experiment_config=params.get("ExperimentConfig"),
            network_config=params.get("NetworkConfig"),
            processing_inputs=params.get("ProcessingInputs"),
            processing_job_name=name,
            processing_output_config=params.get("ProcessingOutputConfig"),
            role_arn=params["RoleArn"],
            tags=params.get("Tags"),
            stopping_condition=params.get("StoppingCondition"),
        )
        self._stash(job, params)
        job.processing_job_status = "InProgress"
        job.processing_end_time = None
        job.processing_start_time = _now()
        outcome = _resolve(self.scenario.processing_job, params)
        state.processing_jobs[name] = _Progress(outcome, outcome.after, "create")
        state.processing_requests[name] = params
        return {"ProcessingJobArn": job.arn}

    def _op_describe_processing_job(self, backend, state, params):
        name = params["ProcessingJobName"]
        progress = state.processing_jobs.get(name)
        if name in backend.processing_jobs and progress is not None and progress.remaining is not None and self._tick(progress):
            job = backend.processing_jobs[name]
            fields = {"ProcessingJobStatus": progress.outcome.status}
            if progress.outcome.failure_reason:
                fields["FailureReason"] = progress.outcome.failure_reason
            if self.scenario.on_processing_job is not None:
                fields.update(self._run_hook(self.scenario.on_processing_job, state.processing_requests[name], "ProcessingJobStatus", "Failed"))
            if fields["ProcessingJobStatus"] == "Failed" and "FailureReason" not in fields:
                fields["FailureReason"] = "AlgorithmError: the processing container exited with a non-zero code"
            for key, value in fields.items():
                setattr(job, _snake(key), value)
            job.processing_end_time = job.last_modified_time = _now()
            progress.remaining = None

    def _run_hook(self, hook, request: dict, status_field: str, failed: str) -> dict:
        # The hook runs inside moto's request handling, i.e. while the state machine thread waits for this
        # Describe call; boto3 calls to moto from the hook are fine. An exception fails the job.
        try:
            return hook(json.loads(json.dumps(request, default=str))) or {}
        except Exception as exc:  # noqa: BLE001 - a failing hook is a failing job
            self.harness.hook_errors.append(exc)
            return {status_field: failed, "FailureReason": f"AlgorithmError: {type(exc).__name__}: {exc}"}

    def _op_stop_processing_job(self, backend, state, params):
        state.processing_jobs.pop(params["ProcessingJobName"], None)

    # -- optimization jobs (not in moto) -------------------------------------------------------------

    def _optimization_job(self, backend, state, name: str) -> dict:
        if name not in state.optimization_jobs:
            arn = sm_models.arn_formatter("optimization-job", name, backend.account_id, backend.region_name)
            raise SageMakerError("ResourceNotFound", f"Could not find optimization job \"{arn}\".")
        return state.optimization_jobs[name]

    def _op_create_optimization_job(self, backend, state, params):
        name = params["OptimizationJobName"]
        arn = sm_models.arn_formatter("optimization-job", name, backend.account_id, backend.region_name)
        if name in state.optimization_jobs:
            raise SageMakerError("ResourceInUse", f"Optimization job \"{arn}\" already exists.")
        source_model = params["ModelSource"].get("SageMakerModel", {}).get("ModelName")
        if source_model is not None and source_model not in backend._models:
            raise _not_found("model", sm_models.arn_formatter("model", source_model, backend.account_id, backend.region_name))
        if not params["ModelSource"].get("S3") and source_model is None:
            raise SageMakerError("ValidationException", "ModelSource must specify S3 or SageMakerModel.")
        now = _now()
        job = {k: v for k, v in params.items() if k != "Tags"}
        job.update(OptimizationJobArn=arn, OptimizationJobStatus="STARTING", CreationTime=now, LastModifiedTime=now)
        state.optimization_jobs[name] = job
        outcome = _resolve(self.scenario.optimization_job, params)
        state.optimization_progress[name] = _Progress(outcome, outcome.after, "create")
        state.optimization_requests[name] = params
        return {"OptimizationJobArn": arn}

    def _op_describe_optimization_job(self, backend, state, params):
        name = params["OptimizationJobName"]
        job = self._optimization_job(backend, state, name)
        progress = state.optimization_progress[name]
        if progress.remaining is None:
            if job["OptimizationJobStatus"] == "STARTING":  # never finishes: STARTING, then INPROGRESS
                self._optimization_running(job)
        elif self._tick(progress):
            self._finish_optimization_job(backend, state, job, progress)
        elif job["OptimizationJobStatus"] != "STOPPING":
            # The first Describe may still see STARTING when more in-progress Describes follow.
            if job["OptimizationJobStatus"] == "STARTING" and name not in state.optimization_seen and progress.remaining > 0:
                state.optimization_seen.add(name)
            else:
                self._optimization_running(job)
        return dict(job)

    @staticmethod
    def _optimization_running(job: dict) -> None:
        job["OptimizationJobStatus"] = "INPROGRESS"
        job.setdefault("OptimizationStartTime", _now())

    def _finish_optimization_job(self, backend, state, job: dict, progress: _Progress) -> None:
        outcome, now = progress.outcome, _now()
        progress.remaining = None
        job.setdefault("OptimizationStartTime", now)
        job["LastModifiedTime"] = job["OptimizationEndTime"] = now
        if job["OptimizationJobStatus"] == "STOPPING":
            job["OptimizationJobStatus"] = "STOPPED"
            return
        fields = {"OptimizationJobStatus": outcome.status}
        if outcome.failure_reason:
            fields["FailureReason"] = outcome.failure_reason
        if outcome.status == "COMPLETED" and self.scenario.on_optimization_job is not None:
            fields.update(self._run_hook(self.scenario.on_optimization_job, state.optimization_requests[job["OptimizationJobName"]], "OptimizationJobStatus", "FAILED"))
        job.update(fields)
        if job["OptimizationJobStatus"] == "FAILED":
            job.setdefault("FailureReason", "ClientError: optimization failed")
        if job["OptimizationJobStatus"] == "COMPLETED":
            job["OptimizationOutput"] = {"RecommendedInferenceImage": self.scenario.recommended_inference_image}
            output_model = job["OutputConfig"].get("SageMakerModel", {}).get("ModelName")
            if output_model and output_model not in backend._models:
                # The real job registers the optimized model under that name.
                backend.create_model(
                    model_name=output_model,
                    execution_role_arn=job["RoleArn"],
                    primary_container={"Image": self.scenario.recommended_inference_image, "ModelDataUrl": job["OutputConfig"]["S3OutputLocation"]},
                    vpc_config=None,
                    containers=None,
                    tags=None,
                )

    def _op_stop_optimization_job(self, backend, state, params):
        job = self._optimization_job(backend, state, params["OptimizationJobName"])
        if job["OptimizationJobStatus"] in ("COMPLETED", "FAILED", "STOPPED"):
            raise SageMakerError("ValidationException", f"Optimization job is already {job['OptimizationJobStatus']}.")
        job["OptimizationJobStatus"] = "STOPPING"
        progress = state.optimization_progress[params["OptimizationJobName"]]
        progress.remaining = 0  # STOPPED on the next Describe
        return {}

    def _op_delete_optimization_job(self, backend, state, params):
        name = params["OptimizationJobName"]
        job = self._optimization_job(backend, state, name)
        if job["OptimizationJobStatus"] in ("STARTING", "INPROGRESS", "STOPPING"):
            raise SageMakerError("ValidationException", "Cannot delete an optimization job that is in progress; stop it first.")
        del state.optimization_jobs[name]
        state.optimization_progress.pop(name, None)
        return {}

    def _op_list_optimization_jobs(self, backend, state, params):
        jobs = [j for j in state.optimization_jobs.values() if params.get("NameContains", "") in j["OptimizationJobName"]]
        if "StatusEquals" in params:
            jobs = [j for j in jobs if j["OptimizationJobStatus"] == params["StatusEquals"]]
        keys = ("OptimizationJobName", "OptimizationJobArn", "CreationTime", "OptimizationJobStatus", "OptimizationStartTime", "OptimizationEndTime", "LastModifiedTime", "DeploymentInstanceType")
        summaries = [{k: j[k] for k in keys if k in j} | {"OptimizationTypes": [next(iter(c)) for c in j["OptimizationConfigs"]]} for j in jobs]
        return {"OptimizationJobSummaries": summaries}

    # -- inference components (not in moto) ----------------------------------------------------------

    def _component(self, backend, state, name: str) -> dict:
        if name not in state.inference_components:
            raise _not_found("inference component", sm_models.arn_formatter("inference-component", name, backend.account_id, backend.region_name))
        return state.inference_components[name]

    def _op_create_inference_component(self, backend, state, params):
        name = params["InferenceComponentName"]
        arn = sm_models.arn_formatter("inference-component", name, backend.account_id, backend.region_name)
        if name in state.inference_components:
            raise SageMakerError("ValidationException", f"Cannot create already existing inference component \"{arn}\".")
        endpoint = self._endpoint(backend, params["EndpointName"])
        model = params.get("Specification", {}).get("ModelName")
        if model is not None and model not in backend._models:
            raise _not_found("model", sm_models.arn_formatter("model", model, backend.account_id, backend.region_name))
        now = _now()
        component = {k: v for k, v in params.items() if k != "Tags"}
        component.update(InferenceComponentArn=arn, EndpointArn=endpoint.arn, InferenceComponentStatus="Creating", CreationTime=now, LastModifiedTime=now)
        state.inference_components[name] = component
        outcome = _resolve(self.scenario.inference_component, params)
        state.inference_component_progress[name] = progress = _Progress(outcome, outcome.after, "create")
        if progress.remaining == 0:
            self._finish_component(component, progress)
        return {"InferenceComponentArn": arn}

    @staticmethod
    def _finish_component(component: dict, progress: _Progress) -> None:
        component["InferenceComponentStatus"] = progress.outcome.status
        if progress.outcome.status == "Failed":
            component["FailureReason"] = progress.outcome.failure_reason or "The inference component failed to start."
        component["LastModifiedTime"] = _now()
        progress.remaining = None

    def _op_describe_inference_component(self, backend, state, params):
        component = self._component(backend, state, params["InferenceComponentName"])
        progress = state.inference_component_progress[params["InferenceComponentName"]]
        if progress.remaining is not None and self._tick(progress):
            self._finish_component(component, progress)
        return dict(component)

    def _op_delete_inference_component(self, backend, state, params):
        self._component(backend, state, params["InferenceComponentName"])
        del state.inference_components[params["InferenceComponentName"]]
        return {}

    def _op_list_inference_components(self, backend, state, params):
        items = list(state.inference_components.values())
        if "EndpointNameEquals" in params:
            items = [c for c in items if c["EndpointName"] == params["EndpointNameEquals"]]
        if "StatusEquals" in params:
            items = [c for c in items if c["InferenceComponentStatus"] == params["StatusEquals"]]
        keys = ("CreationTime", "InferenceComponentArn", "InferenceComponentName", "EndpointArn", "EndpointName", "VariantName", "InferenceComponentStatus", "LastModifiedTime")
        return {"InferenceComponents": [{k: c[k] for k in keys if k in c} for c in items]}


# --------------------------------------------------------------------- Step Functions task for SageMaker


class StateTaskServiceSageMaker(StateTaskServiceCallback):
    """``arn:aws:states:::sagemaker:<action>[.sync]`` for moto's executor."""

    strict: bool = True

    def __init__(self):
        # WaitForTaskToken is listed only so the base class sets up its callback endpoint for `.sync`;
        # `.waitForTaskToken` itself is refused below, as Step Functions refuses it for SageMaker.
        super().__init__(supported_integration_patterns={ResourceCondition.Sync, ResourceCondition.WaitForTaskToken})

    def _allowed(self) -> dict[str, str | None]:
        return OPTIMIZED_SAGEMAKER_ACTIONS if self.strict else {**OPTIMIZED_SAGEMAKER_ACTIONS, **LENIENT_SAGEMAKER_ACTIONS}

    def _operation(self) -> str:
        action = self.resource.api_action
        return action[0].upper() + action[1:]

    def _get_supported_parameters(self) -> set[str] | None:
        if self.resource.api_action not in self._allowed():
            return None
        return set(service_model("sagemaker").operation_model(self._operation()).input_shape.members)

    def _validate_service_integration_is_supported(self):
        action, condition = self.resource.api_action, self.resource.condition
        if action not in self._allowed():
            hint = f" Use arn:aws:states:::aws-sdk:sagemaker:{action} instead." if action in LENIENT_SAGEMAKER_ACTIONS else ""
            raise ValueError(f"The resource provided {self.resource.resource_arn} not recognized. The value is not a valid resource ARN, or the resource is not available in this region.{hint}")
        if condition == ResourceCondition.WaitForTaskToken or (condition == ResourceCondition.Sync and action not in _SYNC_JOBS) or condition == ResourceCondition.Sync2:
            raise ValueError(f"The resource provided {self.resource.resource_arn} not recognized: SageMaker {action} does not support .{condition}.")

    def _get_sfn_resource_type(self) -> str:
        return "sagemaker"

    def _from_error(self, env, ex: Exception) -> FailureEvent:
        if isinstance(ex, ClientError):
            error = "SageMaker.AmazonSageMakerException"
            meta = ex.response.get("ResponseMetadata", {})
            cause = (
                f"{ex.response['Error'].get('Message', '')} (Service: AmazonSageMaker; Status Code: {meta.get('HTTPStatusCode', 400)}; "
                f"Error Code: {ex.response['Error'].get('Code')}; Request ID: {meta.get('RequestId', '')}; Proxy: null)"
            )
            return FailureEvent(
                env=env,
                error_name=CustomErrorName(error),
                event_type=HistoryEventType.TaskFailed,
                event_details=EventDetails(taskFailedEventDetails=TaskFailedEventDetails(error=error, cause=cause, resource=self._get_sfn_resource(), resourceType="sagemaker")),
            )
        return super()._from_error(env=env, ex=ex)

    def _client(self, resource_runtime_part, state_credentials):
        return _validating_client_for(boto_client_for)(region=resource_runtime_part.region, service="sagemaker", state_credentials=state_credentials)

    def _eval_service_task(self, env, resource_runtime_part, normalised_parameters, state_credentials):
        client = self._client(resource_runtime_part, state_credentials)
        response = getattr(client, _snake(self.resource.api_action))(**normalised_parameters) or {}
        response.pop("ResponseMetadata", None)
        env.stack.append(response)

    def _build_sync_resolver(self, env, resource_runtime_part, normalised_parameters, state_credentials):
        env.stack.pop()  # the Create response; `.sync` outputs the final Describe instead
        name_key, status_key, succeeded, failed = _SYNC_JOBS[self.resource.api_action]
        describe = _snake(OPTIMIZED_SAGEMAKER_ACTIONS[self.resource.api_action])
        client = self._client(resource_runtime_part, state_credentials)
        name = normalised_parameters[name_key]

        def resolve():
            response = getattr(client, describe)(**{name_key: name})
            response.pop("ResponseMetadata", None)
            status = response.get(status_key)
            if status in succeeded:
                return json.loads(to_json_str(response))
            if status in failed:
                raise FailureEventException(
                    FailureEvent(
                        env=env,
                        error_name=StatesErrorName(typ=StatesErrorNameType.StatesTaskFailed),
                        event_type=HistoryEventType.TaskFailed,
                        event_details=EventDetails(
                            taskFailedEventDetails=TaskFailedEventDetails(
                                resource=self._get_sfn_resource(),
                                resourceType="sagemaker",
                                error=StatesErrorNameType.StatesTaskFailed.to_name(),
                                cause=to_json_str(response),
                            )
                        ),
                    )
                )
            return None

        return resolve


# ------------------------------------------------------------------------------------------- the harness

_ACTIVE: GateHarness | None = None
_ACTIVE_LOCK = threading.Lock()


class LambdaHandlerError(Exception):
    pass


def _function_name(name_or_arn: str) -> str:
    """FunctionName as Invoke accepts it (name, name:qualifier, full or partial ARN) -> bare name."""
    if name_or_arn.startswith("arn:"):
        parts = name_or_arn.split(":")
        return parts[6]
    if ":function:" in name_or_arn or name_or_arn.count(":") >= 2:  # partial ARN 123456789012:function:name
        return name_or_arn.split(":")[2]
    return name_or_arn.split(":")[0]


class GateHarness:
    """moto with an executing Step Functions, in-process Lambda handlers and a scripted SageMaker.

    Args:
        lambda_handlers: function name (or the function's configured Handler string, if the function was
            created in moto) -> ``handler(event, context)``. Invoking a name without a handler fails the task
            with a ``Lambda.ResourceNotFoundException``-style error unless moto knows the function.
        scenario: how SageMaker resources progress (see :class:`Scenario`).
        strict_integrations: refuse ``arn:aws:states:::sagemaker:<action>`` for actions Step Functions does not
            optimize (e.g. deleteEndpoint), as AWS does at CreateStateMachine. False accepts them.
        sync_poll_seconds: how often ``.sync`` tasks call Describe (moto's executor uses 0.5 s).
    """

    def __init__(
        self,
        lambda_handlers: dict[str, Callable[[dict, Any], Any]] | None = None,
        scenario: Scenario | None = None,
        *,
        region: str = REGION,
        strict_integrations: bool = True,
        sync_poll_seconds: float = 0.05,
    ):
        self.lambda_handlers = dict(lambda_handlers or {})
        self.scenario = scenario or Scenario()
        self.region = region
        self.strict_integrations = strict_integrations
        self.sync_poll_seconds = sync_poll_seconds
        self.sagemaker = SageMakerEmulator(self)
        self.lambda_invocations: list[tuple[str, Any]] = []
        self.rejected_requests: list[tuple[str, str, str]] = []  # (service, operation, error)
        self.hook_errors: list[Exception] = []
        self._published_traffic: set[tuple[str, str]] = set()
        self._lock = threading.RLock()
        self._stack: ExitStack | None = None
        self._state_machines: dict[str, str] = {}

    # -- lifecycle -----------------------------------------------------------------------------------

    def __enter__(self) -> Self:
        global _ACTIVE
        with _ACTIVE_LOCK:
            if _ACTIVE is not None:
                raise RuntimeError("another GateHarness is active")
            _ACTIVE = self
        stack = ExitStack()
        try:
            stack.enter_context(mock_aws(config={"stepfunctions": {"execute_state_machine": True}, "lambda": {"use_docker": False}}))
            stack.enter_context(mock.patch.object(state_task_factory, "state_task_service_for", _state_task_service_for(state_task_factory.state_task_service_for, self)))
            stack.enter_context(mock.patch.object(state_task_service_sfn.StateTaskServiceSfn, "_normalise_parameters", _sfn_camel_case(state_task_service_sfn.StateTaskServiceSfn._normalise_parameters)))
            stack.enter_context(mock.patch.object(state_task_service_sfn.StateTaskServiceSfn, "_eval_service_task", _sfn_pascal_response(state_task_service_sfn.StateTaskServiceSfn._eval_service_task)))
            stack.enter_context(mock.patch.object(state_task_service_sfn.StateTaskServiceSfn, "_normalise_response", _sfn_pascal_normalise(state_task_service_sfn.StateTaskServiceSfn._normalise_response)))
            stack.enter_context(mock.patch.object(state_task_service_aws_sdk, "boto_client_for", _validating_client_for(state_task_service_aws_sdk.boto_client_for)))
            stack.enter_context(mock.patch.dict(state_task_service_aws_sdk._SERVICE_ERROR_NAMES, {"sagemaker": "SageMaker"}))
            stack.enter_context(mock.patch.object(state_task_service_callback, "_DELAY_SECONDS_SYNC_CONDITION_CHECK", self.sync_poll_seconds))
            stack.enter_context(mock.patch.object(SageMakerResponse, "call_action", _sagemaker_call_action(SageMakerResponse.call_action)))
            # Instance types are checked against botocore's enum by validate_request; moto's own list is old.
            stack.enter_context(mock.patch.object(sm_models.FakeEndpointConfig, "validate_instance_type", lambda self, instance_type: None))
            stack.enter_context(mock.patch.object(cw_models.Statistics, "get_statistics_for_type", _percentile_statistics(cw_models.Statistics.get_statistics_for_type)))
            for backend_cls in (LambdaBackend, LambdaSimpleBackend):
                stack.enter_context(mock.patch.object(backend_cls, "invoke", _lambda_invoke(backend_cls.invoke)))
        except BaseException:
            stack.close()
            with _ACTIVE_LOCK:
                _ACTIVE = None
            raise
        self._stack = stack
        return self

    def __exit__(self, *exc) -> None:
        global _ACTIVE
        try:
            self._stop_running_executions()
        finally:
            assert self._stack is not None
            self._stack.close()
            self._stack = None
            with _ACTIVE_LOCK:
                _ACTIVE = None

    def _stop_running_executions(self) -> None:
        sfn = self.client("stepfunctions")
        for arn in self._state_machines.values():
            for execution in sfn.list_executions(stateMachineArn=arn, statusFilter="RUNNING").get("executions", []):
                try:
                    sfn.stop_execution(executionArn=execution["executionArn"], error="Harness.Exit", cause="GateHarness exited")
                except ClientError:
                    pass
        # Give executor threads a moment to notice, so none calls into un-patched moto afterwards.
        time.sleep(0.05)

    # -- clients and running -------------------------------------------------------------------------

    def client(self, service: str):
        return boto3.client(service, region_name=self.region)

    def create_state_machine(self, definition: dict | str, name: str | None = None) -> str:
        """Create a STANDARD state machine; Parameters are checked against the API shapes first (ValueError)."""
        problems = check_definition(definition)
        if problems:
            raise ValueError("invalid state machine definition:\n" + "\n".join(problems))
        name = name or f"sm-{uuid.uuid4().hex[:12]}"
        body = definition if isinstance(definition, str) else json.dumps(definition)
        arn = self.client("stepfunctions").create_state_machine(name=name, definition=body, roleArn=ROLE_ARN, type="STANDARD")["stateMachineArn"]
        self._state_machines[name] = arn
        return arn

    def start(self, state_machine_arn: str, execution_input: Any = None, name: str | None = None) -> str:
        kwargs = {"stateMachineArn": state_machine_arn, "input": json.dumps({} if execution_input is None else execution_input)}
        if name:
            kwargs["name"] = name
        return self.client("stepfunctions").start_execution(**kwargs)["executionArn"]

    def wait(self, execution_arn: str, timeout: float = 10.0, poll: float = 0.02) -> dict:
        """describe_execution once the execution is no longer RUNNING, with ``output`` parsed."""
        sfn = self.client("stepfunctions")
        deadline = time.monotonic() + timeout
        while True:
            described = sfn.describe_execution(executionArn=execution_arn)
            if described["status"] != "RUNNING":
                break
            if time.monotonic() > deadline:
                history = self.history(execution_arn)
                sfn.stop_execution(executionArn=execution_arn, error="Harness.Timeout", cause=f"still RUNNING after {timeout}s")
                raise TimeoutError(f"{execution_arn} still RUNNING after {timeout}s; last events: {json.dumps(history[-5:], default=str)}")
            time.sleep(poll)
        described.pop("ResponseMetadata", None)
        if described.get("output") is not None:
            described["output"] = json.loads(described["output"])
        return described

    def run(self, definition: dict | str, execution_input: Any = None, timeout: float = 10.0) -> dict:
        """Create the state machine, start it with ``execution_input`` and wait for it to finish."""
        return self.wait(self.start(self.create_state_machine(definition), execution_input), timeout=timeout)

    def history(self, execution_arn: str) -> list[dict]:
        sfn = self.client("stepfunctions")
        events, token = [], None
        while True:
            page = sfn.get_execution_history(executionArn=execution_arn, **({"nextToken": token} if token else {}))
            events += page["events"]
            token = page.get("nextToken")
            if not token:
                return events

    def states_entered(self, execution_arn: str) -> list[str]:
        return [e["stateEnteredEventDetails"]["name"] for e in self.history(execution_arn) if "stateEnteredEventDetails" in e]

    # -- state for assertions ------------------------------------------------------------------------

    def _sm_backend(self):
        return sm_models.sagemaker_backends[ACCOUNT_ID][self.region]

    def sagemaker_resources(self) -> dict[str, dict]:
        """What exists in SageMaker now: name -> summary, per resource type."""
        backend = self._sm_backend()
        state = self.sagemaker.region_state(backend)
        return {
            "endpoints": {n: {"status": e.endpoint_status, "config": e.endpoint_config_name, "failure_reason": e.failure_reason} for n, e in backend.endpoints.items()},
            "endpoint_configs": {n: {"variants": [v.get("ModelName") for v in c.production_variants], "shadow_variants": [v.get("ModelName") for v in getattr(c, "shadow_production_variants", None) or []]} for n, c in backend.endpoint_configs.items()},
            "models": {n: {"image": (m.primary_container or {}).get("Image")} for n, m in backend._models.items()},
            "optimization_jobs": {n: {"status": j["OptimizationJobStatus"]} for n, j in state.optimization_jobs.items()},
            "inference_components": {n: {"status": c["InferenceComponentStatus"], "endpoint": c["EndpointName"]} for n, c in state.inference_components.items()},
            "processing_jobs": {n: {"status": j.processing_job_status} for n, j in backend.processing_jobs.items()},
        }

    def live_sagemaker_resources(self) -> dict[str, list[str]]:
        """Resources that cost money or must be cleaned up: endpoints, endpoint configs, models, inference
        components and unfinished optimization jobs. Empty lists everywhere means nothing was left behind."""
        res = self.sagemaker_resources()
        return {
            "endpoints": sorted(res["endpoints"]),
            "endpoint_configs": sorted(res["endpoint_configs"]),
            "models": sorted(res["models"]),
            "inference_components": sorted(res["inference_components"]),
            "optimization_jobs": sorted(n for n, j in res["optimization_jobs"].items() if j["status"] in ("STARTING", "INPROGRESS", "STOPPING")),
        }

    def create_live_endpoint(self, name: str, config_name: str) -> None:
        """An endpoint already InService on `config_name`, as CloudFormation leaves one (no Scenario outcome)."""
        self.client("sagemaker").create_endpoint(EndpointName=name, EndpointConfigName=config_name)
        backend = self._sm_backend()
        self.sagemaker.region_state(backend).endpoints.pop(name, None)
        endpoint = backend.endpoints[name]
        endpoint.endpoint_status, endpoint.failure_reason = "InService", None

    def model_packages(self, group: str | None = None) -> list[dict]:
        """ListModelPackages summaries (ModelPackageArn, ModelApprovalStatus, ...), oldest first."""
        kwargs = {"ModelPackageGroupName": group} if group else {}
        return self.client("sagemaker").list_model_packages(SortBy="CreationTime", SortOrder="Ascending", **kwargs)["ModelPackageSummaryList"]

    def sns_messages(self, topic_arn: str | None = None) -> list[dict]:
        """Messages published to SNS topics: {"TopicArn", "Message", "Subject", "MessageAttributes"}."""
        from moto.sns.models import sns_backends

        out = []
        for arn, topic in sns_backends[ACCOUNT_ID][self.region].topics.items():
            if topic_arn and arn != topic_arn:
                continue
            for note in topic.sent_notifications:
                _, message, subject, attributes, _ = note
                out.append({"TopicArn": arn, "Message": message, "Subject": subject, "MessageAttributes": attributes})
        return out

    def s3_objects(self, bucket: str, prefix: str = "") -> dict[str, bytes]:
        s3 = self.client("s3")
        out = {}
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
            for obj in page.get("Contents", []):
                out[obj["Key"]] = s3.get_object(Bucket=bucket, Key=obj["Key"])["Body"].read()
        return out

    # -- Lambda --------------------------------------------------------------------------------------

    def _handler_for(self, backend, function_name: str) -> tuple[str, Callable | None]:
        name = _function_name(function_name)
        if name in self.lambda_handlers:
            return name, self.lambda_handlers[name]
        try:
            fn = backend.get_function(function_name)
        except Exception:  # noqa: BLE001 - unknown to moto too
            return name, None
        return name, self.lambda_handlers.get(fn.handler)

    def _invoke(self, backend, function_name: str, body: Any, response_headers: dict) -> bytes:
        name, handler = self._handler_for(backend, function_name)
        event = json.loads(body) if body else {}
        self.lambda_invocations.append((name, event))
        request_id = str(uuid.uuid4())
        response_headers["x-amzn-requestid"] = request_id
        if handler is None:
            raise _UnknownFunction(name)
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
            result = handler(event, context)
            payload = json.dumps(result)
        except Exception as exc:  # noqa: BLE001 - becomes the function error, as in Lambda's Python runtime
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


class _UnknownFunction(Exception):
    def __init__(self, name: str):
        super().__init__(name)
        self.name = name


def _state_task_service_for(original, harness: GateHarness):
    def state_task_service_for(service_name: str):
        if service_name == "sagemaker":
            service = StateTaskServiceSageMaker()
            service.strict = harness.strict_integrations
            return service
        return original(service_name=service_name)

    return state_task_service_for


def _lambda_invoke(original):
    def invoke(self, function_name, qualifier, body, headers, response_headers):
        harness = _ACTIVE
        if harness is None:
            return original(self, function_name, qualifier, body, headers, response_headers)
        try:
            payload = harness._invoke(self, function_name, body, response_headers)
        except _UnknownFunction as unknown:
            from moto.awslambda.exceptions import UnknownFunctionException

            arn = f"arn:aws:lambda:{self.region_name}:{self.account_id}:function:{unknown.name}"
            raise UnknownFunctionException(f"{arn} (GateHarness has no in-process handler for it; registered: {sorted(harness.lambda_handlers)})") from None
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
        with harness._lock:
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
        return 200, {"x-amzn-requestid": request_id, "content-type": "application/x-amz-json-1.1"}, json.dumps(result, default=_json_default)

    return call_action


def _error_response(request_id: str, err: SageMakerError):
    body = json.dumps({"__type": err.code, "message": err.message})
    return err.status, {"x-amzn-requestid": request_id, "content-type": "application/x-amz-json-1.1"}, body
