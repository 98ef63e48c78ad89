"""The emulated SageMaker: every group of operations behind one ``handle``."""

from __future__ import annotations

from optigate.rehearse.context import Harness
from optigate.rehearse.sagemaker.benchmarks import AIBenchmarkOperations
from optigate.rehearse.sagemaker.components import InferenceComponentOperations
from optigate.rehearse.sagemaker.endpoints import EndpointOperations
from optigate.rehearse.sagemaker.jobs import JobOperations
from optigate.rehearse.sagemaker.state import RegionState, SageMakerError, snake


class SageMakerEmulator(EndpointOperations, JobOperations, InferenceComponentOperations, AIBenchmarkOperations):
    """Sits in front of moto's SageMakerResponse. ``handle`` returns a result dict for emulated operations,
    or None to let moto answer (after any state bookkeeping)."""

    def __init__(self, harness: Harness):
        self.harness = harness
        self.calls: list[tuple[str, dict]] = []  # (action, request), every SageMaker request in order
        self._regions: dict[tuple[str, str], RegionState] = {}

    def region_state(self, backend) -> RegionState:
        return self._regions.setdefault((backend.account_id, backend.region_name), RegionState())

    def handle(self, backend, action: str, params: dict) -> dict | None:
        self.calls.append((action, params))
        method = getattr(self, f"_op_{snake(action)}", None)
        return method(backend, self.region_state(backend), params) if method else None

    def refuse_invocation(self, endpoint_name: str, component_name: str | None) -> SageMakerError | None:
        """What InvokeEndpoint answers for this endpoint and InferenceComponentName in the harness's account
        before a model runs (None: the request reaches the model), e.g. a component that is not InService."""
        backend = self.harness.sagemaker_backend()
        with self.harness.lock:
            return self.invocation_error(backend, self.region_state(backend), endpoint_name, component_name)
