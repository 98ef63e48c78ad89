"""Run real Step Functions definitions in-process on moto, SageMaker and Lambda included (tests and
`optigate rehearse`).

moto 5.x can execute an ASL definition (``mock_aws(config={"stepfunctions": {"execute_state_machine": True}})``)
but three gaps stop optigate's gate machine from running there:

* Lambda functions are invoked in Docker. :class:`GateHarness` routes ``lambda:Invoke`` to Python
  callables instead (``lambda_handlers``; optigate.rehearse.lambda_runtime).
* The optimized ``arn:aws:states:::sagemaker:*`` integration is unsupported by moto's executor. The
  harness registers its own task service for ``sagemaker`` (optigate.rehearse.sync_service).
* moto's SageMaker backend lacks operations and behaves unlike AWS: every request is validated against
  botocore's service model (optigate.rehearse.validation), the missing APIs are emulated and the status
  of endpoints and jobs advances as a :class:`Scenario` says (optigate.rehearse.sagemaker).

Usage::

    scenario = Scenario(endpoint=Outcome("Failed", after=2))
    with GateHarness(lambda_handlers={"pick": pick}, scenario=scenario) as h:
        result = h.run(definition, {"input": 1})
        assert result["status"] == "FAILED"
        assert h.sagemaker_resources()["endpoints"] == {}

Nothing here touches moto's files: everything is a ``unittest.mock.patch`` (optigate.rehearse.patches)
applied in ``__enter__`` and undone in ``__exit__``. Only one harness may be active at a time.
"""

from __future__ import annotations

import gc
import json
import threading
import time
import uuid
from collections.abc import Callable
from contextlib import ExitStack, suppress
from typing import Any, Final, Self

import boto3
from botocore.exceptions import ClientError
from moto import mock_aws
from moto.sagemaker import models as sm_models

from optigate.rehearse import patches
from optigate.rehearse.lambda_runtime import InProcessLambdas
from optigate.rehearse.sagemaker import SageMakerEmulator
from optigate.rehearse.scenario import Scenario
from optigate.rehearse.validation import check_definition

ACCOUNT_ID: Final = "123456789012"
REGION: Final = "us-east-1"
ROLE_ARN: Final = f"arn:aws:iam::{ACCOUNT_ID}:role/optigate-test"


def active_harness() -> GateHarness | None:
    """The GateHarness now active (the patches see it as a context.Harness), if any."""
    harness = patches.active_harness()
    return harness if isinstance(harness, GateHarness) else None


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
        retry_time_scale: a Retry waits this fraction of its IntervalSeconds (x BackoffRate^n).
    """

    def __init__(
        self,
        lambda_handlers: dict[str, Callable[[dict, Any], Any]] | None = None,
        scenario: Scenario | None = None,
        *,
        region: str = REGION,
        strict_integrations: bool = True,
        sync_poll_seconds: float = 0.05,
        retry_time_scale: float = 0.01,
    ):
        self.lambdas = InProcessLambdas(lambda_handlers)
        self.lambda_handlers = self.lambdas.handlers
        self.lambda_invocations = self.lambdas.invocations  # (function name, event)
        self.scenario = scenario or Scenario()
        self.region = region
        self.strict_integrations = strict_integrations
        self.sync_poll_seconds = sync_poll_seconds
        self.retry_time_scale = retry_time_scale
        self.throttled: list[str] = []  # SageMaker operations answered with ThrottlingException (Scenario.throttle)
        self.started = False  # an execution was started: the setup before it (as CloudFormation's) is never throttled
        self.sagemaker = SageMakerEmulator(self)
        self.rejected_requests: list[tuple[str, str, str]] = []  # (service, operation, error)
        self.hook_errors: list[Exception] = []
        self.published_traffic: set[tuple[str, str]] = set()  # (endpoint, variant) whose metrics are out
        self.live_endpoints: set[str] = set()  # created by create_live_endpoint, as CloudFormation would
        self.baseline_models: set[str] = set()  # what the live endpoints serve (CloudFormation's models)
        self.benchmarked: list[dict[str, Any]] = []  # each benchmark worker's endpoint (optigate.rehearse.gate_run)
        self.lock = threading.RLock()  # one SageMaker request at a time
        self._stack: ExitStack | None = None
        self._state_machines: dict[str, str] = {}

    # -- lifecycle -----------------------------------------------------------------------------------

    def __enter__(self) -> Self:
        patches.activate(self)
        stack = ExitStack()
        try:
            moto_config = {"stepfunctions": {"execute_state_machine": True}, "lambda": {"use_docker": False}}
            stack.enter_context(mock_aws(config=moto_config))  # type: ignore[call-overload]  # a partial DefaultConfig
            patches.apply_patches(stack, self)
        except BaseException:
            stack.close()
            patches.deactivate()
            raise
        self._stack = stack
        return self

    def __exit__(self, *exc) -> None:
        try:
            self._stop_running_executions()
        finally:
            if self._stack is not None:
                self._stack.close()
                self._stack = None
            patches.deactivate()
            gc.unfreeze()

    def _stop_running_executions(self) -> None:
        sfn = self.client("stepfunctions")
        for arn in self._state_machines.values():
            for execution in sfn.list_executions(stateMachineArn=arn, statusFilter="RUNNING").get("executions", []):
                with suppress(ClientError):  # finished meanwhile
                    sfn.stop_execution(
                        executionArn=execution["executionArn"], error="Harness.Exit", cause="GateHarness exited"
                    )
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
        sfn = self.client("stepfunctions")
        arn = sfn.create_state_machine(name=name, definition=body, roleArn=ROLE_ARN, type="STANDARD")["stateMachineArn"]
        self._state_machines[name] = arn
        return arn

    def start(self, state_machine_arn: str, execution_input: Any = None, name: str | None = None) -> str:
        kwargs = {
            "stateMachineArn": state_machine_arn,
            "input": json.dumps({} if execution_input is None else execution_input),
        }
        if name:
            kwargs["name"] = name
        self.started = True
        # The benchmark worker collects garbage before it measures (optigate.bench.core.load): in a Lambda that is its
        # own small heap, here it is this whole process's (moto, the templates, a test session's), a quarter of a
        # second each time. Frozen, what exists before the start is left out of every collection until the harness
        # exits.
        gc.freeze()
        return self.client("stepfunctions").start_execution(**kwargs)["executionArn"]

    def wait(
        self,
        execution_arn: str,
        timeout: float = 60.0,
        # Each describe_execution is milliseconds of moto's CPU under the GIL the executor's threads need too:
        # a tenth of a second keeps a rehearsal's own polling out of what it measures.
        poll: float = 0.1,
        on_state: Callable[[str], None] | None = None,
        on_history: Callable[[list[dict], bool], None] | None = None,
    ) -> dict:
        """describe_execution once the execution is no longer RUNNING, with ``output`` parsed;
        ``on_state`` is told each state entered as it happens, ``on_history`` the whole history so far and whether
        the execution has ended (both read from the history every half second, and once at the end)."""
        sfn = self.client("stepfunctions")
        deadline = time.monotonic() + timeout
        reported, next_report = 0, 0.0
        while True:
            described = sfn.describe_execution(executionArn=execution_arn)
            watched = on_state is not None or on_history is not None
            if watched and (described["status"] != "RUNNING" or time.monotonic() >= next_report):
                history = self.history(execution_arn)
                if on_history is not None:
                    on_history(history, described["status"] != "RUNNING")
                entered = [e["stateEnteredEventDetails"]["name"] for e in history if "stateEnteredEventDetails" in e]
                if on_state is not None:
                    for state in entered[reported:]:
                        on_state(state)
                reported, next_report = len(entered), time.monotonic() + 0.5
            if described["status"] != "RUNNING":
                break
            if time.monotonic() > deadline:
                history = self.history(execution_arn)
                sfn.stop_execution(
                    executionArn=execution_arn, error="Harness.Timeout", cause=f"still RUNNING after {timeout}s"
                )
                last_events = json.dumps(history[-5:], default=str)
                raise TimeoutError(f"{execution_arn} still RUNNING after {timeout}s; last events: {last_events}")
            time.sleep(poll)
        described.pop("ResponseMetadata", None)
        if described.get("output") is not None:
            described["output"] = json.loads(described["output"])
        return described

    def run(self, definition: dict | str, execution_input: Any = None, timeout: float = 60.0) -> dict:
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
        return [
            e["stateEnteredEventDetails"]["name"]
            for e in self.history(execution_arn)
            if "stateEnteredEventDetails" in e
        ]

    # -- state for assertions ------------------------------------------------------------------------

    def sagemaker_backend(self):
        """moto's SageMaker backend of the harness's account and region (to set up or inspect a state)."""
        return sm_models.sagemaker_backends[ACCOUNT_ID][self.region]

    def sagemaker_resources(self) -> dict[str, dict]:
        """What exists in SageMaker now: name -> summary, per resource type."""
        backend = self.sagemaker_backend()
        state = self.sagemaker.region_state(backend)

        def shadow_models(config) -> list:
            return [v.get("ModelName") for v in getattr(config, "shadow_production_variants", None) or []]

        return {
            "endpoints": {
                n: {"status": e.endpoint_status, "config": e.endpoint_config_name, "failure_reason": e.failure_reason}
                for n, e in backend.endpoints.items()
            },
            "endpoint_configs": {
                n: {
                    "variants": [v.get("ModelName") for v in c.production_variants],
                    "shadow_variants": shadow_models(c),
                }
                for n, c in backend.endpoint_configs.items()
            },
            "models": {n: {"image": (m.primary_container or {}).get("Image")} for n, m in backend._models.items()},
            "optimization_jobs": {
                n: {"status": j["OptimizationJobStatus"]} for n, j in state.optimization_jobs.items()
            },
            "inference_components": {
                n: {"status": c["InferenceComponentStatus"], "endpoint": c["EndpointName"]}
                for n, c in state.inference_components.items()
            },
            "processing_jobs": {n: {"status": j.processing_job_status} for n, j in backend.processing_jobs.items()},
        }

    def live_sagemaker_resources(self) -> dict[str, list[str]]:
        """Resources that cost money or must be cleaned up: endpoints, endpoint configs, models, inference
        components and unfinished optimization jobs. Empty lists everywhere means nothing was left behind."""
        res = self.sagemaker_resources()
        running = ("STARTING", "INPROGRESS", "STOPPING")
        return {
            "endpoints": sorted(res["endpoints"]),
            "endpoint_configs": sorted(res["endpoint_configs"]),
            "models": sorted(res["models"]),
            "inference_components": sorted(res["inference_components"]),
            "optimization_jobs": sorted(n for n, j in res["optimization_jobs"].items() if j["status"] in running),
        }

    def endpoint_serving(self, name: str) -> dict[str, Any] | None:
        """An endpoint's status, config and the models of its production variants now; None if there is none."""
        backend = self.sagemaker_backend()
        with self.lock:
            endpoint = backend.endpoints.get(name)
            if endpoint is None:
                return None
            config = backend.endpoint_configs.get(endpoint.endpoint_config_name)
            variants = config.production_variants if config is not None else []
            # An endpoint serving inference components: the models of its base components, as Describe says.
            from optigate.rehearse.sagemaker.components import InferenceComponentOperations

            components = [
                InferenceComponentOperations.described(c)
                for c in self.sagemaker.region_state(backend).inference_components.values()
                if c.get("EndpointName") == name
            ]
            specs = {c["InferenceComponentName"]: c.get("Specification") or {} for c in components}
            return {
                "status": endpoint.endpoint_status,
                "config": endpoint.endpoint_config_name,
                "models": [v.get("ModelName") for v in variants if v.get("ModelName")]
                + [spec["ModelName"] for spec in specs.values() if spec.get("ModelName")],
                "components": sorted(specs),
                # What each adapter component serves (its archive), by component name.
                "artifacts": {
                    component: (spec.get("Container") or {})["ArtifactUrl"]
                    for component, spec in specs.items()
                    if (spec.get("Container") or {}).get("ArtifactUrl")
                },
            }

    def create_live_endpoint(self, name: str, config_name: str) -> None:
        """An endpoint already InService on `config_name`, as CloudFormation leaves one (no Scenario outcome)."""
        self.client("sagemaker").create_endpoint(EndpointName=name, EndpointConfigName=config_name)
        backend = self.sagemaker_backend()
        self.sagemaker.region_state(backend).endpoints.pop(name, None)
        endpoint = backend.endpoints[name]
        endpoint.endpoint_status, endpoint.failure_reason = "InService", None
        self.live_endpoints.add(name)

    def model_packages(self, group: str | None = None) -> list[dict]:
        """ListModelPackages summaries (ModelPackageArn, ModelApprovalStatus, ...), oldest first."""
        kwargs = {"ModelPackageGroupName": group} if group else {}
        sagemaker = self.client("sagemaker")
        return sagemaker.list_model_packages(SortBy="CreationTime", SortOrder="Ascending", **kwargs)[
            "ModelPackageSummaryList"
        ]

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
