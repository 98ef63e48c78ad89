"""Inference components (not in moto): created on an endpoint, InService as the scenario says."""

from __future__ import annotations

from optigate.rehearse.sagemaker.state import Operations, Progress, SageMakerError, arn_of, endpoint_of, not_found, now
from optigate.rehearse.scenario import resolve_outcome


class InferenceComponentOperations(Operations):
    """Create/Describe/Delete/ListInferenceComponent(s)."""

    def _component(self, backend, state, name: str) -> dict:
        if name not in state.inference_components:
            raise not_found("inference component", arn_of("inference-component", name, backend))
        return state.inference_components[name]

    def _op_create_inference_component(self, backend, state, params):
        name = params["InferenceComponentName"]
        arn = arn_of("inference-component", name, backend)
        if name in state.inference_components:
            raise SageMakerError("ValidationException", f'Cannot create already existing inference component "{arn}".')
        endpoint = endpoint_of(backend, params["EndpointName"])
        model = params.get("Specification", {}).get("ModelName")
        if model is not None and model not in backend._models:
            raise not_found("model", arn_of("model", model, backend))
        created = now()
        component = {k: v for k, v in params.items() if k != "Tags"}
        component.update(
            InferenceComponentArn=arn,
            EndpointArn=endpoint.arn,
            InferenceComponentStatus="Creating",
            CreationTime=created,
            LastModifiedTime=created,
        )
        state.inference_components[name] = component
        outcome = resolve_outcome(self.scenario.inference_component, params)
        state.inference_component_progress[name] = progress = Progress(outcome, outcome.after, "create")
        if progress.remaining == 0:
            self._finish_component(component, progress)
        return {"InferenceComponentArn": arn}

    @staticmethod
    def _finish_component(component: dict, progress: Progress) -> None:
        component["InferenceComponentStatus"] = progress.outcome.status
        if progress.outcome.status == "Failed":
            component["FailureReason"] = progress.outcome.failure_reason or "The inference component failed to start."
        component["LastModifiedTime"] = now()
        progress.remaining = None

    def _op_describe_inference_component(self, backend, state, params):
        component = self._component(backend, state, params["InferenceComponentName"])
        progress = state.inference_component_progress[params["InferenceComponentName"]]
        if progress.remaining is not None and progress.tick():
            self._finish_component(component, progress)
        return dict(component)

    def _op_delete_inference_component(self, backend, state, params):
        self._component(backend, state, params["InferenceComponentName"])
        del state.inference_components[params["InferenceComponentName"]]
        return {}

    def _op_list_inference_components(self, backend, state, params):
        # Status moves on whoever looks: a List sees what a Describe would (the gate's waits list).
        for name, component in state.inference_components.items():
            progress = state.inference_component_progress.get(name)
            if progress is not None and progress.remaining is not None and progress.tick():
                self._finish_component(component, progress)
        items = list(state.inference_components.values())
        if "EndpointNameEquals" in params:
            items = [c for c in items if c["EndpointName"] == params["EndpointNameEquals"]]
        if "NameContains" in params:
            items = [c for c in items if params["NameContains"] in c["InferenceComponentName"]]
        if "StatusEquals" in params:
            items = [c for c in items if c["InferenceComponentStatus"] == params["StatusEquals"]]
        keys = (
            "CreationTime",
            "InferenceComponentArn",
            "InferenceComponentName",
            "EndpointArn",
            "EndpointName",
            "VariantName",
            "InferenceComponentStatus",
            "LastModifiedTime",
        )
        return {"InferenceComponents": [{k: c[k] for k in keys if k in c} for c in items]}
