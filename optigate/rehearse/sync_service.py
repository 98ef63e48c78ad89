"""``arn:aws:states:::sagemaker:<action>[.sync]`` for moto's Step Functions executor, which lacks
Step Functions' optimized SageMaker integration: request-response for the optimized APIs, and
``.sync`` (create, then poll Describe until terminal) for the job APIs. As Step Functions does, a field the
integration does not take (optigate.rehearse.optimized_parameters, the sourced list) is refused when the state machine
is created (a literal key: InvalidDefinition) and when the Task runs (a value filled from a path: States.Runtime)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Final

from botocore.exceptions import ClientError
from moto.stepfunctions.parser.api import HistoryEventType, TaskFailedEventDetails
from moto.stepfunctions.parser.asl.component.common.error_name.custom_error_name import CustomErrorName
from moto.stepfunctions.parser.asl.component.common.error_name.failure_event import (
    FailureEvent,
    FailureEventException,
)
from moto.stepfunctions.parser.asl.component.common.error_name.states_error_name import StatesErrorName
from moto.stepfunctions.parser.asl.component.common.error_name.states_error_name_type import (
    StatesErrorNameType,
)
from moto.stepfunctions.parser.asl.component.common.parargs import Parameters
from moto.stepfunctions.parser.asl.component.common.payload.payloadvalue.payloadarr.payload_arr import PayloadArr
from moto.stepfunctions.parser.asl.component.common.payload.payloadvalue.payloadbinding.payload_binding import (
    PayloadBindingValue,
)
from moto.stepfunctions.parser.asl.component.common.payload.payloadvalue.payloadtmpl.payload_tmpl import PayloadTmpl
from moto.stepfunctions.parser.asl.component.state.exec.state_task.service.resource import ResourceCondition
from moto.stepfunctions.parser.asl.component.state.exec.state_task.service.state_task_service_callback import (
    StateTaskServiceCallback,
)
from moto.stepfunctions.parser.asl.eval.event.event_detail import EventDetails
from moto.stepfunctions.parser.asl.utils.encoding import to_json_str

from optigate.rehearse import optimized_parameters
from optigate.rehearse.sagemaker.state import snake
from optigate.rehearse.validation import service_model

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
_ENDED: Final = {"Failed", "Stopped"}
_SYNC_JOBS: Final[dict[str, tuple[str, str, set[str], set[str]]]] = {
    # action -> (name parameter, status field, success statuses, failure statuses)
    "createProcessingJob": ("ProcessingJobName", "ProcessingJobStatus", {"Completed"}, _ENDED),
    "createTrainingJob": ("TrainingJobName", "TrainingJobStatus", {"Completed"}, _ENDED),
    "createTransformJob": ("TransformJobName", "TransformJobStatus", {"Completed"}, _ENDED),
    "createHyperParameterTuningJob": (
        "HyperParameterTuningJobName",
        "HyperParameterTuningJobStatus",
        {"Completed"},
        _ENDED,
    ),
    "createLabelingJob": ("LabelingJobName", "LabelingJobStatus", {"Completed"}, _ENDED),
}

#: (region, service, state_credentials) -> a boto3 client, as moto's ``boto_client_for`` makes one.
ClientFactory = Callable[..., Any]


class StateTaskServiceSageMaker(StateTaskServiceCallback):
    """The ``sagemaker`` task service. ``strict`` refuses actions Step Functions does not optimize (as AWS
    does at CreateStateMachine); ``client_for`` makes the SageMaker client (the harness's validating one)."""

    def __init__(self, client_for: ClientFactory, *, strict: bool = True):
        # WaitForTaskToken is listed only so the base class sets up its callback endpoint for `.sync`;
        # `.waitForTaskToken` itself is refused below, as Step Functions refuses it for SageMaker.
        patterns = {ResourceCondition.Sync, ResourceCondition.WaitForTaskToken}
        super().__init__(supported_integration_patterns=patterns)  # type: ignore[arg-type]  # moto types them as str
        self.client_for = client_for
        self.strict = strict

    def _allowed(self) -> dict[str, str | None]:
        return (
            OPTIMIZED_SAGEMAKER_ACTIONS if self.strict else {**OPTIMIZED_SAGEMAKER_ACTIONS, **LENIENT_SAGEMAKER_ACTIONS}
        )

    def _operation(self) -> str:
        action = self.resource.api_action
        return action[0].upper() + action[1:]

    def _get_supported_parameters(self) -> set[str] | None:
        action = self.resource.api_action
        if action not in self._allowed():
            return None
        if action in OPTIMIZED_SAGEMAKER_ACTIONS:  # Step Functions' own list, not the API's
            return set(optimized_parameters.top_level(action))
        return set(service_model("sagemaker").operation_model(self._operation()).input_shape.members)

    def _literal_parameters(self) -> Any:
        """The state's Parameters as written: each key (`Key.$` for a path), literal structures and lists kept."""

        def written(value: Any) -> Any:
            if isinstance(value, PayloadTmpl):
                return {
                    binding.field if isinstance(binding, PayloadBindingValue) else f"{binding.field}.$": (
                        written(binding.payload_value) if isinstance(binding, PayloadBindingValue) else None
                    )
                    for binding in value.payload_bindings
                }
            if isinstance(value, PayloadArr):
                return [written(item) for item in value.payload_values]
            return None

        return written(self.parargs.template_eval_component) if isinstance(self.parargs, Parameters) else {}

    def _eval_parameters(self, env) -> dict:
        """The Parameters evaluated, refused (States.Runtime) if a path filled a field Step Functions does not take;
        moto's own version drops a top-level one silently instead."""
        parameters: dict = {}
        if self.parargs is not None:
            self.parargs.eval(env=env)
            parameters = env.stack.pop()
        action = self.resource.api_action
        fields = (
            optimized_parameters.unknown_fields(action, parameters) if action in OPTIMIZED_SAGEMAKER_ACTIONS else []
        )
        if fields:
            cause = (
                f"The Parameters '{to_json_str(parameters)}' could not be used to start the Task: "
                f"[{optimized_parameters.refusal(action, self.name, fields)}]"
            )
            details = TaskFailedEventDetails(
                resource=self._get_sfn_resource(),
                resourceType="sagemaker",
                error=StatesErrorNameType.StatesRuntime.to_name(),
                cause=cause,
            )
            raise FailureEventException(
                FailureEvent(
                    env=env,
                    error_name=StatesErrorName(typ=StatesErrorNameType.StatesRuntime),
                    event_type=HistoryEventType.TaskFailed,
                    event_details=EventDetails(taskFailedEventDetails=details),  # type: ignore[typeddict-item]
                )
            )
        return parameters

    def _validate_service_integration_is_supported(self):
        action, condition, arn = self.resource.api_action, self.resource.condition, self.resource.resource_arn
        if action not in self._allowed():
            hint = (
                f" Use arn:aws:states:::aws-sdk:sagemaker:{action} instead."
                if action in LENIENT_SAGEMAKER_ACTIONS
                else ""
            )
            raise ValueError(
                f"The resource provided {arn} not recognized. The value is not a valid resource ARN, "
                f"or the resource is not available in this region.{hint}"
            )
        unsupported_sync = condition == ResourceCondition.Sync and action not in _SYNC_JOBS
        if condition in (ResourceCondition.WaitForTaskToken, ResourceCondition.Sync2) or unsupported_sync:
            raise ValueError(
                f"The resource provided {arn} not recognized: SageMaker {action} does not support .{condition}."
            )
        if action in OPTIMIZED_SAGEMAKER_ACTIONS:
            fields = optimized_parameters.unknown_fields(action, self._literal_parameters())
            if fields:
                raise ValueError(optimized_parameters.refusal(action, self.name, fields))

    def _get_sfn_resource_type(self) -> str:
        return "sagemaker"

    def _from_error(self, env, ex: Exception) -> FailureEvent:
        if isinstance(ex, ClientError):
            error = "SageMaker.AmazonSageMakerException"
            meta = ex.response.get("ResponseMetadata", {})
            cause = (
                f"{ex.response['Error'].get('Message', '')} (Service: AmazonSageMaker; "
                f"Status Code: {meta.get('HTTPStatusCode', 400)}; Error Code: {ex.response['Error'].get('Code')}; "
                f"Request ID: {meta.get('RequestId', '')}; Proxy: null)"
            )
            details = TaskFailedEventDetails(
                error=error, cause=cause, resource=self._get_sfn_resource(), resourceType="sagemaker"
            )
            return FailureEvent(
                env=env,
                error_name=CustomErrorName(error),
                event_type=HistoryEventType.TaskFailed,
                event_details=EventDetails(taskFailedEventDetails=details),  # type: ignore[typeddict-item]
            )
        return super()._from_error(env=env, ex=ex)

    def _client(self, resource_runtime_part, state_credentials):
        return self.client_for(
            region=resource_runtime_part.region, service="sagemaker", state_credentials=state_credentials
        )

    def _eval_service_task(self, env, resource_runtime_part, normalised_parameters, state_credentials):
        client = self._client(resource_runtime_part, state_credentials)
        response = getattr(client, snake(self.resource.api_action))(**normalised_parameters) or {}
        response.pop("ResponseMetadata", None)
        env.stack.append(response)

    def _build_sync_resolver(self, env, resource_runtime_part, normalised_parameters, state_credentials):
        env.stack.pop()  # the Create response; `.sync` outputs the final Describe instead
        name_key, status_key, succeeded, failed = _SYNC_JOBS[self.resource.api_action]
        describe_operation = OPTIMIZED_SAGEMAKER_ACTIONS[self.resource.api_action]
        if describe_operation is None:  # unreachable: every _SYNC_JOBS action has a Describe
            raise ValueError(f"{self.resource.api_action} has no .sync integration")
        describe = snake(describe_operation)
        client = self._client(resource_runtime_part, state_credentials)
        name = normalised_parameters[name_key]

        def resolve():
            response = getattr(client, describe)(**{name_key: name})
            response.pop("ResponseMetadata", None)
            status = response.get(status_key)
            if status in succeeded:
                return json.loads(to_json_str(response))
            if status in failed:
                details = TaskFailedEventDetails(
                    resource=self._get_sfn_resource(),
                    resourceType="sagemaker",
                    error=StatesErrorNameType.StatesTaskFailed.to_name(),
                    cause=to_json_str(response),
                )
                raise FailureEventException(
                    FailureEvent(
                        env=env,
                        error_name=StatesErrorName(typ=StatesErrorNameType.StatesTaskFailed),
                        event_type=HistoryEventType.TaskFailed,
                        # moto's EventDetails TypedDict is total; an event carries one of its keys
                        event_details=EventDetails(taskFailedEventDetails=details),  # type: ignore[typeddict-item]
                    )
                )
            return None

        return resolve
