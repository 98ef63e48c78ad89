"""Inference components (not in moto): Create/Describe/Update/Delete/List, shaped by botocore's sagemaker model
(DescribeInferenceComponentOutput: Specification as InferenceComponentSpecificationSummary, RuntimeConfig as
Desired/CurrentCopyCount, LastDeploymentConfig), progressing as the scenario says, with the refusals AWS documents.

Sources: the API reference's InferenceComponentSpecification (BaseInferenceComponentName: "Before you can create
an adapter inference component, you must have an existing inference component that contains the foundation
model"; ComputeResourceRequirements: "Omit this parameter if your request is meant to create an adapter inference
component"; Specifications: "You can use either this parameter or the singular Specification parameter, but not
both"), https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_InferenceComponentSpecification.html; the
refusal of a component on an endpoint whose variant has a model, as a user saw it (pulumi/pulumi-aws#4940).
"""

from __future__ import annotations

import hashlib

from optigate.rehearse.sagemaker.state import Operations, Progress, SageMakerError, arn_of, endpoint_of, not_found, now
from optigate.rehearse.scenario import Outcome, resolve_outcome

# What CreateInferenceComponent answers for an endpoint whose variant serves a model (pulumi/pulumi-aws#4940).
NOT_A_COMPONENT_ENDPOINT = (
    "Inference Components are not supported in this Endpoint. Please make sure this endpoint can deploy "
    "inference components."
)
# What InvokeEndpoint answers when the header is missing on such an endpoint
# (aws-samples/amazon-kendra-langchain-extensions#64).
HEADER_REQUIRED = (
    "Inference Component Name header is required for endpoints to which you plan to deploy inference components. "
    "Please include Inference Component Name header or consider using SageMaker models."
)
_SPEC_KEYS = ("Specification", "Specifications")


def _specifications(spec: dict) -> list[dict]:
    """The one Specification, or each of Specifications."""
    return [spec["Specification"]] if "Specification" in spec else list(spec.get("Specifications", []))


def _summary(spec: dict, resolved_at) -> dict:
    """InferenceComponentSpecification as DescribeInferenceComponent reports it
    (InferenceComponentSpecificationSummary): the image as DeployedImage, the rest echoed."""
    keys = (
        "InstanceType",
        "ModelName",
        "StartupParameters",
        "ComputeResourceRequirements",
        "BaseInferenceComponentName",
        "SchedulingConfig",
    )
    summary = {key: spec[key] for key in keys if key in spec}
    if "DataCacheConfig" in spec:
        summary["DataCacheConfig"] = {"EnableCaching": spec["DataCacheConfig"]["EnableCaching"]}
    container = spec.get("Container")
    if container is not None:
        out = {
            key: container[key] for key in ("ArtifactUrl", "Environment", "ContainerMetricsConfig") if key in container
        }
        if "Image" in container:
            # The digest a real deployment resolves the tag to; a stable stand-in per image.
            digest = hashlib.sha256(container["Image"].encode()).hexdigest()
            out["DeployedImage"] = {
                "SpecifiedImage": container["Image"],
                "ResolvedImage": f"{container['Image'].split(':')[0]}@sha256:{digest}",
                "ResolutionTime": resolved_at,
            }
        summary["Container"] = out
    return summary


class InferenceComponentOperations(Operations):
    """Create/Describe/Update/Delete/ListInferenceComponent(s), UpdateInferenceComponentRuntimeConfig."""

    def _component(self, backend, state, name: str) -> dict:
        if name not in state.inference_components:
            raise not_found("inference component", arn_of("inference-component", name, backend))
        return state.inference_components[name]

    @staticmethod
    def _one_spec_form(params: dict) -> None:
        if all(key in params for key in _SPEC_KEYS):
            raise SageMakerError(
                "ValidationException",
                "Specify either Specification or Specifications for the inference component, not both.",
            )

    def _variant(self, backend, endpoint, requested: str | None) -> dict:
        """The endpoint's production variant the component goes on; refused when it serves a model."""
        config = backend.endpoint_configs.get(endpoint.endpoint_config_name)
        variants = list(config.production_variants) if config is not None else []
        if any(variant.get("ModelName") for variant in variants):
            raise SageMakerError("ValidationException", NOT_A_COMPONENT_ENDPOINT)
        by_name = {variant["VariantName"]: variant for variant in variants}
        if requested is not None:
            if requested not in by_name:
                raise SageMakerError(
                    "ValidationException", f'Could not find variant "{requested}" on endpoint "{endpoint.arn}".'
                )
            return by_name[requested]
        if len(variants) != 1:
            # VariantName is optional in the API; which variant it then means on a several-variant endpoint is not
            # documented, so the emulator refuses rather than guess.
            raise SageMakerError("ValidationException", f'Name a VariantName of endpoint "{endpoint.arn}".')
        return variants[0]

    def _accelerator_refusal(self, variant: dict, specs: list[dict]) -> str | None:
        """Why no copy can be placed: one copy asks more accelerators than an instance of the variant has. AWS does
        not document the message; the emulator fails the component (it can never reach InService)."""
        from optigate.deployment import serving  # the instance catalog, through the layer rehearse may import

        pools = sorted(variant.get("InstancePools") or [], key=lambda pool: pool["Priority"])
        default_type = variant.get("InstanceType") or (pools[0]["InstanceType"] if pools else None)
        for spec in specs:
            wanted = spec.get("ComputeResourceRequirements", {}).get("NumberOfAcceleratorDevicesRequired")
            instance_type = spec.get("InstanceType", default_type)
            if wanted is None or instance_type is None:
                continue
            try:
                has = serving.get_instance(instance_type).accelerator_count
            except KeyError:  # not in the catalog: nothing to compare with
                continue
            if wanted > has:
                return (
                    f"Insufficient accelerators: a copy requires {wanted:g} accelerator devices, "
                    f"an {instance_type} instance has {has}."
                )
        return None

    def _op_create_inference_component(self, backend, state, params):
        name = params["InferenceComponentName"]
        arn = arn_of("inference-component", name, backend)
        if name in state.inference_components:
            raise SageMakerError("ValidationException", f'Cannot create already existing inference component "{arn}".')
        self._one_spec_form(params)
        endpoint = endpoint_of(backend, params["EndpointName"])
        variant = self._variant(backend, endpoint, params.get("VariantName"))
        specs = _specifications(params)
        for spec in specs:
            model = spec.get("ModelName")
            if model is not None and model not in backend._models:
                raise not_found("model", arn_of("model", model, backend))
            base_name = spec.get("BaseInferenceComponentName")
            if base_name is None:
                continue
            base = self._component(backend, state, base_name)  # the base must exist first (API reference)
            if base["EndpointName"] != endpoint.endpoint_name:
                # The adapter is loaded by its base and uses the base's compute (API reference): it cannot live on
                # another endpoint. The message is the emulator's.
                raise SageMakerError(
                    "ValidationException",
                    f'Base inference component "{base_name}" is on endpoint "{base["EndpointName"]}", '
                    f'not "{endpoint.endpoint_name}".',
                )
            if "ComputeResourceRequirements" in spec:
                raise SageMakerError(
                    "ValidationException",
                    "ComputeResourceRequirements must be omitted for an adapter inference component "
                    "(BaseInferenceComponentName): it uses the compute resources of its base.",
                )
        created = now()
        component = {
            "InferenceComponentName": name,
            "InferenceComponentArn": arn,
            "EndpointName": endpoint.endpoint_name,
            "EndpointArn": endpoint.arn,
            "VariantName": variant["VariantName"],
            "InferenceComponentStatus": "Creating",
            "CreationTime": created,
            "LastModifiedTime": created,
            "spec": {key: params[key] for key in _SPEC_KEYS if key in params},
            "copies": params.get("RuntimeConfig", {}).get("CopyCount"),
            "current_copies": 0,
        }
        state.inference_components[name] = component
        outcome = resolve_outcome(self.scenario.inference_component, params)
        refusal = self._accelerator_refusal(variant, specs)
        if refusal is not None:
            outcome = Outcome("Failed", after=outcome.after if outcome.after is not None else 1, failure_reason=refusal)
        state.inference_component_progress[name] = progress = Progress(outcome, outcome.after, "create")
        if progress.remaining == 0:
            self._finish(backend, component, progress)
        return {"InferenceComponentArn": arn}

    def _alarms_in_alarm(self, backend, deployment: dict | None) -> list[str]:
        """The AutoRollbackConfiguration alarms that are in ALARM (moto's CloudWatch) when the deployment ends."""
        from moto.cloudwatch.models import cloudwatch_backends

        names = [a["AlarmName"] for a in (deployment or {}).get("AutoRollbackConfiguration", {}).get("Alarms", [])]
        alarms = cloudwatch_backends[backend.account_id][backend.region_name].alarms
        return [name for name in names if name in alarms and alarms[name].state_value == "ALARM"]

    def _finish(self, backend, component: dict, progress: Progress) -> None:
        status = progress.outcome.status
        component.pop("FailureReason", None)
        if progress.kind == "update":
            pending = component.pop("pending")
            in_alarm = self._alarms_in_alarm(backend, component.get("LastDeploymentConfig"))
            if status == "RolledBack" or (status == "InService" and in_alarm):
                # The previous specification serves again; the endpoint emulation reports a roll-back the same way.
                reason = progress.outcome.failure_reason or (
                    f"Deployment rolled back: alarm(s) {', '.join(in_alarm)} in ALARM."
                    if in_alarm
                    else "Deployment rolled back."
                )
                component.update(InferenceComponentStatus="InService", FailureReason=reason)
            elif status == "InService":
                component["spec"] = pending["spec"]
                component["copies"] = pending["copies"]
                component.update(InferenceComponentStatus="InService", current_copies=component["copies"] or 0)
            else:
                component.update(InferenceComponentStatus=status)
        else:
            component["InferenceComponentStatus"] = status
            if status == "InService":
                component["current_copies"] = component["copies"] or 0
        if component["InferenceComponentStatus"] == "Failed":
            component["FailureReason"] = progress.outcome.failure_reason or (
                "The inference component update failed."
                if progress.kind == "update"
                else "The inference component failed to start."
            )
        component["LastModifiedTime"] = now()
        progress.remaining = None

    def _op_describe_inference_component(self, backend, state, params):
        name = params["InferenceComponentName"]
        component = self._component(backend, state, name)
        progress = state.inference_component_progress[name]
        if progress.remaining is not None and progress.tick():
            self._finish(backend, component, progress)
        return self.described(component)

    @staticmethod
    def described(component: dict) -> dict:
        """DescribeInferenceComponentOutput: only the members the API has (Specification or Specifications,
        as summaries)."""
        keys = (
            "InferenceComponentName",
            "InferenceComponentArn",
            "EndpointName",
            "EndpointArn",
            "VariantName",
            "FailureReason",
            "CreationTime",
            "LastModifiedTime",
            "InferenceComponentStatus",
            "LastDeploymentConfig",
        )
        out = {key: component[key] for key in keys if key in component}
        spec = component["spec"]
        if "Specification" in spec:
            out["Specification"] = _summary(spec["Specification"], component["CreationTime"])
        elif "Specifications" in spec:
            out["Specifications"] = [_summary(s, component["CreationTime"]) for s in spec["Specifications"]]
        if component["copies"] is not None:
            out["RuntimeConfig"] = {
                "DesiredCopyCount": component["copies"],
                "CurrentCopyCount": component["current_copies"],
            }
        return out

    def _op_update_inference_component(self, backend, state, params):
        name = params["InferenceComponentName"]
        component = self._component(backend, state, name)
        self._one_spec_form(params)
        status = component["InferenceComponentStatus"]
        if status != "InService":
            # As UpdateEndpoint answers for an endpoint that is not InService (the component's text is not documented).
            raise SageMakerError(
                "ValidationException",
                f'Cannot update inference component "{component["InferenceComponentArn"]}" while it is {status}.',
            )
        pending_spec = {key: params[key] for key in _SPEC_KEYS if key in params} or component["spec"]
        for spec in _specifications(pending_spec):
            model = spec.get("ModelName")
            if model is not None and model not in backend._models:
                raise not_found("model", arn_of("model", model, backend))
        copies = params.get("RuntimeConfig", {}).get("CopyCount", component["copies"])
        component["pending"] = {"spec": pending_spec, "copies": copies}
        if "DeploymentConfig" in params:
            component["LastDeploymentConfig"] = params["DeploymentConfig"]
        component.update(InferenceComponentStatus="Updating", LastModifiedTime=now())
        component.pop("FailureReason", None)
        outcome = resolve_outcome(self.scenario.inference_component_update, params)
        state.inference_component_progress[name] = progress = Progress(outcome, outcome.after, "update")
        if progress.remaining == 0:
            self._finish(backend, component, progress)
        return {"InferenceComponentArn": component["InferenceComponentArn"]}

    def _op_update_inference_component_runtime_config(self, backend, state, params):
        component = self._component(backend, state, params["InferenceComponentName"])
        copies = params["DesiredRuntimeConfig"]["CopyCount"]
        component.update(copies=copies, current_copies=copies, LastModifiedTime=now())
        return {"InferenceComponentArn": component["InferenceComponentArn"]}

    def _op_delete_inference_component(self, backend, state, params):
        # Deleting a base that still has adapter components: the API reference says only "Deletes an inference
        # component." and documents no refusal, so the emulator does not invent one (its adapters stay listed).
        self._component(backend, state, params["InferenceComponentName"])
        del state.inference_components[params["InferenceComponentName"]]
        state.inference_component_progress.pop(params["InferenceComponentName"], None)
        return {}

    def _op_list_inference_components(self, backend, state, params):
        # Status moves on whoever looks: a List sees what a Describe would (the gate's waits list).
        for name, component in state.inference_components.items():
            progress = state.inference_component_progress.get(name)
            if progress is not None and progress.remaining is not None and progress.tick():
                self._finish(backend, component, progress)
        items = list(state.inference_components.values())
        for member, key in (
            ("EndpointNameEquals", "EndpointName"),
            ("VariantNameEquals", "VariantName"),
            ("StatusEquals", "InferenceComponentStatus"),
        ):
            if member in params:
                items = [c for c in items if c[key] == params[member]]
        if "NameContains" in params:
            items = [c for c in items if params["NameContains"] in c["InferenceComponentName"]]
        sort_key = {"Name": "InferenceComponentName", "Status": "InferenceComponentStatus"}.get(
            params.get("SortBy", "CreationTime"), "CreationTime"
        )
        items.sort(key=lambda c: c[sort_key], reverse=params.get("SortOrder", "Descending") == "Descending")
        # One page: MaxResults (botocore: 1-100, default 10); the gate's listings ask for a whole run in one.
        items = items[: params.get("MaxResults", 10)]
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

    # -- invocation ------------------------------------------------------------------------------------

    def invocation_error(self, backend, state, endpoint_name: str, component_name: str | None) -> SageMakerError | None:
        """What sagemaker-runtime's InvokeEndpoint answers (HTTP 400 ValidationError) before any model runs, or None
        when the request reaches the model: the rehearsal's router asks this before handing a request to the
        runtime emulator. Only the texts cited above are AWS's; the not-InService text is the emulator's."""
        if endpoint_name not in backend.endpoints:
            message = f"Endpoint {endpoint_name} of account {backend.account_id} not found."
            return SageMakerError("ValidationError", message)
        endpoint = backend.endpoints[endpoint_name]
        config = backend.endpoint_configs.get(endpoint.endpoint_config_name)
        serves_components = config is not None and not any(
            variant.get("ModelName") for variant in config.production_variants
        )
        if component_name is None:
            return SageMakerError("ValidationError", HEADER_REQUIRED) if serves_components else None
        component = state.inference_components.get(component_name)
        if component is None or component["EndpointName"] != endpoint_name:
            return SageMakerError(
                "ValidationError", f"Inference component {component_name} not found on endpoint {endpoint_name}."
            )
        if component["InferenceComponentStatus"] not in ("InService", "Updating"):  # Updating still serves
            return SageMakerError(
                "ValidationError",
                f"Inference component {component_name} is not in service ({component['InferenceComponentStatus']}).",
            )
        return None
