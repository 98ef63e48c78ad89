"""What the patches and the emulators read of the active rehearsal harness: a Protocol, so that they need not
import optigate.rehearse.harness (which imports them): the package has no import circle, type-only ones
included. GateHarness is the one implementation."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, Protocol

from optigate.rehearse.lambda_runtime import InProcessLambdas
from optigate.rehearse.scenario import Scenario


class SageMakerRequests(Protocol):
    """Answers a SageMaker request from the emulated state (optigate.rehearse.sagemaker.SageMakerEmulator)."""

    def handle(self, backend: Any, action: str, params: dict) -> dict | None: ...

    def region_state(self, backend: Any) -> Any: ...


class Harness(Protocol):
    """The harness while it is active: its scenario, what it records, and how moto is patched."""

    scenario: Scenario
    lambdas: InProcessLambdas
    lambda_handlers: dict[str, Callable[[dict, Any], Any]]
    strict_integrations: bool
    sync_poll_seconds: float
    retry_time_scale: float
    started: bool
    throttled: list[str]
    rejected_requests: list[tuple[str, str, str]]
    hook_errors: list[Exception]
    published_traffic: set[tuple[str, str]]
    lock: threading.RLock

    @property
    def sagemaker(self) -> SageMakerRequests: ...

    def client(self, service: str) -> Any: ...

    def sagemaker_backend(self) -> Any: ...
