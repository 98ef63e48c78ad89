"""Models, endpoint configs and endpoints: moto has them, but not as AWS behaves (no UpdateEndpoint, no
shadow variants, InService at once). Endpoints go through Creating / Updating as the scenario says."""

from __future__ import annotations

from moto.sagemaker import models as sm_models

from optigate.rehearse.sagemaker.state import (
    Operations,
    Progress,
    SageMakerError,
    arn_of,
    endpoint_of,
    not_found,
    now,
)
from optigate.rehearse.scenario import Outcome, resolve_outcome


class EndpointOperations(Operations):
    """CreateModel, CreateEndpointConfig, Create/Describe/Update/DeleteEndpoint."""

    # -- models and endpoint configs -----------------------------------------------------------------

    def _op_create_model(self, backend, state, params):
        if params["ModelName"] in backend._models:
            arn = arn_of("model", params["ModelName"], backend)
            raise SageMakerError("ValidationException", f'Cannot create already existing model "{arn}".')

    def _op_create_endpoint_config(self, backend, state, params):
        name = params["EndpointConfigName"]
        arn = sm_models.FakeEndpointConfig.arn_formatter(name, backend.account_id, backend.region_name)
        if name in backend.endpoint_configs:
            raise SageMakerError(
                "ValidationException", f'Cannot create already existing endpoint configuration "{arn}".'
            )
        for variant in params["ProductionVariants"] + params.get("ShadowProductionVariants", []):
            model = variant.get("ModelName")
            if model is not None and model not in backend._models:
                raise not_found("model", arn_of("model", model, backend))
            if model is None and "ExecutionRoleArn" not in params:
                raise SageMakerError(
                    "ValidationException",
                    "ExecutionRoleArn is required for an endpoint configuration with inference components "
                    "(no ModelName).",
                )
        # moto declares `is_created` abstract (CloudFormationModel) yet instantiates these itself
        config = sm_models.FakeEndpointConfig(  # type: ignore[abstract]
            account_id=backend.account_id,
            region_name=backend.region_name,
            endpoint_config_name=name,
            # moto knows InstanceType or ServerlessConfig only: it validates the priority-1 pool's type.
            production_variants=[self._moto_variant(v) for v in params["ProductionVariants"]],
            async_inference_config=params.get("AsyncInferenceConfig"),
            data_capture_config=params.get("DataCaptureConfig"),
            tags=params.get("Tags"),
            kms_key_id=params.get("KmsKeyId"),
        )
        config.production_variants = params["ProductionVariants"]  # as sent: InstancePools, not InstanceType
        del config.arn  # moto stores a tuple here; DescribeEndpointConfig has no "Arn"
        self._stash(config, params)
        backend.endpoint_configs[name] = config
        return {"EndpointConfigArn": config.endpoint_config_arn}

    @staticmethod
    def _moto_variant(variant: dict) -> dict:
        pools = variant.get("InstancePools")
        if not pools or "InstanceType" in variant:
            return variant
        return {**variant, "InstanceType": min(pools, key=lambda pool: pool["Priority"])["InstanceType"]}

    # -- endpoints -----------------------------------------------------------------------------------

    def _variants_of(self, config) -> tuple[list, list | None]:
        def runtime(variants):
            out = []
            for v in variants or []:
                item = {"VariantName": v["VariantName"]}
                if "InitialInstanceCount" in v:
                    item["CurrentInstanceCount"] = item["DesiredInstanceCount"] = v["InitialInstanceCount"]
                if "InitialVariantWeight" in v:
                    item["CurrentWeight"] = item["DesiredWeight"] = v["InitialVariantWeight"]
                if v.get("InstancePools"):
                    item["InstancePools"] = self._placed(v["InstancePools"], v.get("InitialInstanceCount", 0))
                out.append(item)
            return out

        shadow = getattr(config, "shadow_production_variants", None)
        return runtime(config.production_variants), (runtime(shadow) if shadow else None)

    def _placed(self, pools: list[dict], count: int) -> list[dict]:
        """ProductionVariantSummary.InstancePools (InstancePoolSummary: InstanceType, CurrentInstanceCount): every
        instance on the highest-priority pool with capacity (Scenario.no_capacity), as SageMaker falls back on an
        insufficient-capacity error; none placed when no pool has capacity."""
        ordered = sorted(pools, key=lambda pool: pool["Priority"])
        landed = next((p["InstanceType"] for p in ordered if p["InstanceType"] not in self.scenario.no_capacity), None)
        return [
            {"InstanceType": p["InstanceType"], "CurrentInstanceCount": count if p["InstanceType"] == landed else 0}
            for p in ordered
        ]

    def _op_create_endpoint(self, backend, state, params):
        name = params["EndpointName"]
        if name in backend.endpoints:
            arn = sm_models.FakeEndpoint.arn_formatter(name, backend.account_id, backend.region_name)
            raise SageMakerError("ValidationException", f'Cannot create already existing endpoint "{arn}".')
        config_name = params["EndpointConfigName"]
        if config_name not in backend.endpoint_configs:
            arn = sm_models.FakeEndpointConfig.arn_formatter(config_name, backend.account_id, backend.region_name)
            raise not_found("endpoint configuration", arn)
        config = backend.endpoint_configs[config_name]
        endpoint = sm_models.FakeEndpoint(  # type: ignore[abstract]  # as FakeEndpointConfig above
            account_id=backend.account_id,
            region_name=backend.region_name,
            endpoint_name=name,
            endpoint_config_name=config_name,
            production_variants=[],
            data_capture_config=config.data_capture_config,
            tags=params.get("Tags"),
        )
        # Attributes moto's FakeEndpoint lacks and DescribeEndpoint returns (see _op_describe_endpoint).
        endpoint.production_variants, endpoint.shadow_production_variants = self._variants_of(config)  # type: ignore[attr-defined]
        endpoint.pending_deployment_summary = None  # type: ignore[attr-defined]
        backend.endpoints[name] = endpoint
        outcome = resolve_outcome(self.scenario.endpoint, params)
        progress = Progress(outcome, outcome.after, "create")
        state.endpoints[name] = progress
        endpoint.endpoint_status = "Creating"
        if progress.remaining == 0:
            self._finish_endpoint(backend, endpoint, progress)
        return {"EndpointArn": endpoint.arn}

    def _finish_endpoint(self, backend, endpoint, progress: Progress) -> None:
        outcome = progress.outcome
        endpoint.last_modified_time = now()
        endpoint.pending_deployment_summary = None
        if progress.kind == "update" and outcome.status == "InService":
            config = backend.endpoint_configs.get(progress.new_config)
            endpoint.endpoint_config_name = progress.new_config
            if config is not None:
                before = {v["VariantName"]: v for v in endpoint.production_variants}
                endpoint.production_variants, endpoint.shadow_production_variants = self._variants_of(config)
                for variant in endpoint.production_variants:
                    self._retain(variant, before.get(variant["VariantName"]), progress.retained)
            endpoint.endpoint_status, endpoint.failure_reason = "InService", None
        elif progress.kind == "update" and outcome.status == "RolledBack":
            endpoint.endpoint_status = "InService"
            endpoint.failure_reason = outcome.failure_reason or "Update rolled back."
        else:
            endpoint.endpoint_status = outcome.status
            endpoint.failure_reason = outcome.failure_reason if outcome.status == "Failed" else None
            if outcome.status == "Failed" and not endpoint.failure_reason:
                endpoint.failure_reason = (
                    "The primary container for production variant AllTraffic did not pass the ping health check."
                )
        progress.remaining = None
        progress.outcome = Outcome(endpoint.endpoint_status, after=None)

    @staticmethod
    def _retain(variant: dict, before: dict | None, retained: frozenset[str]) -> None:
        """What RetainAllVariantProperties keeps of a variant the update does not replace."""
        if before is None:
            return
        for prop, keys in (
            ("DesiredInstanceCount", ("CurrentInstanceCount", "DesiredInstanceCount")),
            ("DesiredWeight", ("CurrentWeight", "DesiredWeight")),
        ):
            if prop in retained:
                variant.update({key: before[key] for key in keys if key in before})

    def _op_describe_endpoint(self, backend, state, params):
        endpoint = endpoint_of(backend, params["EndpointName"])
        progress = state.endpoints.get(endpoint.endpoint_name)
        if progress is not None and progress.remaining is not None and progress.tick():
            self._finish_endpoint(backend, endpoint, progress)

    def _op_update_endpoint(self, backend, state, params):
        endpoint = endpoint_of(backend, params["EndpointName"])
        config_name = params["EndpointConfigName"]
        if config_name not in backend.endpoint_configs:
            arn = sm_models.FakeEndpointConfig.arn_formatter(config_name, backend.account_id, backend.region_name)
            raise not_found("endpoint configuration", arn)
        if endpoint.endpoint_status != "InService":
            raise SageMakerError("ValidationException", f'Cannot update in-progress endpoint "{endpoint.arn}".')
        outcome = resolve_outcome(self.scenario.endpoint_update, params)
        progress = Progress(
            outcome,
            outcome.after,
            "update",
            new_config=config_name,
            previous_config=endpoint.endpoint_config_name,
            retained=frozenset(
                {"DesiredInstanceCount", "DesiredWeight"} if params.get("RetainAllVariantProperties") else ()
            )
            - {p["VariantPropertyType"] for p in params.get("ExcludeRetainedVariantProperties", [])},
        )
        state.endpoints[endpoint.endpoint_name] = progress
        variants, shadow = self._variants_of(backend.endpoint_configs[config_name])
        endpoint.endpoint_status = "Updating"
        endpoint.failure_reason = None
        endpoint.pending_deployment_summary = {
            "EndpointConfigName": config_name,
            "StartTime": now(),
            "ProductionVariants": variants,
            **({"ShadowProductionVariants": shadow} if shadow else {}),
        }
        if progress.remaining == 0:
            self._finish_endpoint(backend, endpoint, progress)
        return {"EndpointArn": endpoint.arn}

    def _op_delete_endpoint(self, backend, state, params):
        endpoint_of(backend, params["EndpointName"])
        state.endpoints.pop(params["EndpointName"], None)
