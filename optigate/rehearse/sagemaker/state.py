"""What every emulated operation shares: errors as the API answers them, the progress of a resource
towards its scenario Outcome, and the emulator's state per account and region."""

from __future__ import annotations

import datetime as _dt
import json
import re
from dataclasses import dataclass, field
from typing import Any

from moto.sagemaker import models as sm_models

from optigate.rehearse.context import Harness
from optigate.rehearse.scenario import Outcome, Scenario


def now() -> _dt.datetime:
    return _dt.datetime.now(_dt.UTC)


def snake(key: str) -> str:
    """PascalCase -> snake_case: an API member as moto's attribute, an action as boto3's method."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", key).lower()


def json_default(value: Any) -> Any:
    if isinstance(value, _dt.datetime):
        return value.timestamp()
    raise TypeError(f"not JSON serializable: {value!r}")


class SageMakerError(Exception):
    """An error answer of the SageMaker API (its code, message and HTTP status)."""

    def __init__(self, code: str, message: str, status: int = 400):
        super().__init__(message)
        self.code, self.message, self.status = code, message, status


def arn_of(kind: str, name: str, backend) -> str:
    return sm_models.arn_formatter(kind, name, backend.account_id, backend.region_name)


def not_found(kind: str, arn: str) -> SageMakerError:
    return SageMakerError("ValidationException", f'Could not find {kind} "{arn}".')


def endpoint_of(backend, name: str):
    """moto's endpoint, or the error SageMaker answers for an unknown one."""
    if name not in backend.endpoints:
        raise not_found("endpoint", sm_models.FakeEndpoint.arn_formatter(name, backend.account_id, backend.region_name))
    return backend.endpoints[name]


@dataclass
class Progress:
    """Where a resource is on its way to the Outcome the scenario gave it."""

    outcome: Outcome
    remaining: int | None  # in-progress Describes left; None once terminal (or if it never ends)
    kind: str  # "create" | "update"
    new_config: str | None = None
    previous_config: str | None = None
    # UpdateEndpoint's RetainAllVariantProperties minus ExcludeRetainedVariantProperties: what the update keeps
    # of each variant that stays ("DesiredInstanceCount", "DesiredWeight").
    retained: frozenset[str] = frozenset()

    def tick(self) -> bool:
        """One Describe call. True when the resource has just reached its terminal status."""
        if self.remaining is None:
            return False
        if self.remaining > 0:
            self.remaining -= 1
            return False
        return True


@dataclass
class RegionState:
    """What the emulator keeps per account and region, beside moto's backend."""

    endpoints: dict[str, Progress] = field(default_factory=dict)
    processing_jobs: dict[str, Progress] = field(default_factory=dict)
    processing_requests: dict[str, dict] = field(default_factory=dict)
    optimization_jobs: dict[str, dict] = field(default_factory=dict)
    optimization_progress: dict[str, Progress] = field(default_factory=dict)
    optimization_requests: dict[str, dict] = field(default_factory=dict)
    optimization_seen: set[str] = field(default_factory=set)
    inference_components: dict[str, dict] = field(default_factory=dict)
    inference_component_progress: dict[str, Progress] = field(default_factory=dict)
    # SageMaker's managed benchmark (optigate.rehearse.sagemaker.benchmarks)
    ai_workload_configs: dict[str, dict] = field(default_factory=dict)
    ai_benchmark_jobs: dict[str, dict] = field(default_factory=dict)
    ai_benchmark_progress: dict[str, Progress] = field(default_factory=dict)
    ai_benchmark_stops: list[str] = field(default_factory=list)  # jobs a StopAIBenchmarkJob reached, in order


class Operations:
    """Base of the groups of emulated operations: the harness they serve and its scenario.

    An operation ``Action`` is emulated by a method ``_op_action(backend, state, params)`` that returns
    the result dict, or None to let moto answer (after its own bookkeeping)."""

    harness: Harness

    @property
    def scenario(self) -> Scenario:
        return self.harness.scenario

    def _run_hook(self, hook, request: dict, status_field: str, failed: str) -> dict:
        # The hook runs inside moto's request handling, i.e. while the state machine thread waits for this
        # Describe call; boto3 calls to moto from the hook are fine. An exception fails the job.
        try:
            return hook(json.loads(json.dumps(request, default=str))) or {}
        except Exception as exc:  # any exception: a failing hook is a failing job
            self.harness.hook_errors.append(exc)
            return {status_field: failed, "FailureReason": f"AlgorithmError: {type(exc).__name__}: {exc}"}

    @staticmethod
    def _stash(obj, params: dict) -> None:
        """Keep request members moto drops, so Describe returns them (moto turns attributes into fields)."""
        present = obj.response_object
        for key, value in params.items():
            if key not in present and key != "Tags":
                setattr(obj, snake(key), value)
