"""LoraAdapters: one base model as an inference component, each LoRA adapter as a component on it."""

from __future__ import annotations

import jsii
from aws_cdk import Duration
from aws_cdk import aws_applicationautoscaling as appscaling
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sagemaker as sagemaker
from constructs import Construct

from optigate import naming
from optigate.constructs.common import target_tracking
from optigate.constructs.data_capture import CaptureSettings, capture_config, capture_prefix
from optigate.constructs.lmi_model import LmiModel
from optigate.constructs.rollback_alarms import MAX_METRICS_PER_ALARM, rollback_alarms, variant_metric
from optigate.constructs.tuned_endpoint import metrics_property, variant_placement
from optigate.deployment.component_rollout import ComponentRollout
from optigate.deployment.component_settings import BaseComponentSettings, ComponentPlacement
from optigate.deployment.endpoint import EndpointScaling, LiveAdapter
from optigate.deployment.gate_components import ComponentCompute
from optigate.deployment.variant import VariantSettings
from optigate.plan.catalog import has_instance_storage

#: A LoRA adapter as the construct takes it: the endpoint plan's LiveAdapter, whose `name` becomes part of its inference
#: component name and whose `s3_uri` is a .tar.gz (its `approved` is for the summary; the construct ignores it).
AdapterSpec = LiveAdapter


@jsii.implements(cloudwatch.IAlarmAction)
class _ScalingPolicyAction:
    """Lets an L2 alarm trigger an L1 step-scaling policy."""

    def __init__(self, policy_arn: str) -> None:
        self._arn = policy_arn

    def bind(self, _scope: Construct, _alarm: cloudwatch.IAlarm) -> cloudwatch.AlarmActionConfig:
        return cloudwatch.AlarmActionConfig(alarm_action_arn=self._arn)


class LoraAdapters(Construct):
    """An endpoint that serves a base model and its LoRA adapters through inference components.

    The endpoint's variant has no model (inference components carry it), so the endpoint config
    names an execution role. The base component reserves accelerators, CPU and memory derived from
    the instance; each adapter component names the base by its explicit name and carries only the
    adapter archive (no compute requirements: it shares the base's copies).

    :param model: the base LmiModel (its role is the endpoint's execution role and may read the adapters).
    :param variant: provisioning of the endpoint's instances.
    :param endpoint_name: the SageMaker endpoint name; components are named `<endpoint>-base`, `<endpoint>-<adapter>`
        (optigate.naming.inference_component_name).
    :param adapters: the LoRA adapters.
    :param compute: per-copy reservation of the base component.
    :param scaling: the base component's scalable target (the endpoint plan's, in `copies`; with `scale_to_zero`,
        idle copies and instances go to zero and a NoCapacityInvocationFailures alarm scales back out from zero).
        @default a fixed number of copies
    :param encryption_key: @default a new key with rotation (used where the instance has EBS storage)
    :param rollout: how an update of the base component rolls out (its DeploymentConfig: a rolling update, rolled
        back on the endpoint's 5XX and p99 model-latency alarms); adapter components get none, having no copies of
        their own. None: no DeploymentConfig and no rollback alarms. @default ComponentRollout()
    :param base_settings: the base component's DataCacheConfig and SchedulingConfig
        (optigate.deployment.component_settings). @default neither (SageMaker's defaults)
    :param data_capture: the endpoint config's DataCaptureConfig, as a TunedEndpoint's. @default none
    """

    # Over 80 lines: each adapter's component, archive check and alarms wired in one loop over the adapters.
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        model: LmiModel,
        variant: VariantSettings,
        endpoint_name: str,
        adapters: list[AdapterSpec],
        compute: ComponentCompute,
        scaling: EndpointScaling | None = None,
        encryption_key: kms.IKey | None = None,
        rollout: ComponentRollout | None = ComponentRollout(),  # noqa: B008 (frozen: one shared default is safe)
        base_settings: BaseComponentSettings | None = None,
        data_capture: CaptureSettings | None = None,
        detailed_metrics: bool = True,
    ) -> None:
        super().__init__(scope, construct_id)
        if scaling is not None and scaling.unit != "copies":
            raise ValueError(f"{self.node.path}: inference components scale copies, not {scaling.unit}")
        names = [adapter.name for adapter in adapters]
        if len(set(names)) != len(names):
            raise ValueError(f"{self.node.path}: adapter names must be unique, got {names}")
        _refuse_adapters_on_pools(self.node.path, variant, adapters)
        settings = base_settings or BaseComponentSettings()
        self.endpoint_name = endpoint_name
        self.base_component_name = naming.inference_component_name(endpoint_name, "base")
        component_names = {a.name: naming.inference_component_name(endpoint_name, a.name) for a in adapters}
        self.key = encryption_key or kms.Key(
            self, "Key", enable_key_rotation=True, description=f"Encrypts {endpoint_name} volumes"
        )
        model.grant_read([adapter.s3_uri for adapter in adapters])
        model.grant_logs([self.base_component_name, *component_names.values()])

        managed_scaling = None
        if scaling is not None and scaling.managed_instances is not None:
            low, high = scaling.managed_instances
            managed_scaling = sagemaker.CfnEndpointConfig.ManagedInstanceScalingProperty(
                status="ENABLED", min_instance_count=low, max_instance_count=high
            )
        elif scaling is not None and scaling.scale_to_zero:
            instances_per_copy = 1  # a copy never spans instances
            managed_scaling = sagemaker.CfnEndpointConfig.ManagedInstanceScalingProperty(
                status="ENABLED",
                min_instance_count=0,
                max_instance_count=max(variant.instance_count, scaling.max_capacity * instances_per_copy),
            )
        production = sagemaker.CfnEndpointConfig.ProductionVariantProperty(
            variant_name=variant.variant_name,
            **variant_placement(variant),  # InstancePools instead of InstanceType with pools
            initial_instance_count=variant.instance_count,
            model_data_download_timeout_in_seconds=variant.model_data_download_timeout_seconds,
            container_startup_health_check_timeout_in_seconds=variant.container_startup_health_check_timeout_seconds,
            volume_size_in_gb=variant.volume_size_gb,
            routing_config=sagemaker.CfnEndpointConfig.RoutingConfigProperty(routing_strategy=variant.routing_strategy),
            managed_instance_scaling=managed_scaling,
            inference_ami_version=variant.inference_ami_version,
        )
        local_storage = has_instance_storage(variant.instance_type)
        self.capture_bucket: s3.Bucket | None = None
        capture_property = None
        if data_capture is not None and data_capture.percentage > 0:
            capture_property, self.capture_bucket = capture_config(self, model, self.key, data_capture)
        self.config = sagemaker.CfnEndpointConfig(
            self,
            "Config",
            production_variants=[production],
            execution_role_arn=model.role.role_arn,
            # Components carry the model, not the variant: the config isolates their containers, as the model would
            # on a model-backed endpoint (CreateEndpointConfig.EnableNetworkIsolation: "all model containers").
            enable_network_isolation=True,
            kms_key_id=None if local_storage else self.key.key_arn,
            data_capture_config=capture_property,
            metrics_config=metrics_property(detailed_metrics),
        )
        self.endpoint = sagemaker.CfnEndpoint(
            self, "Endpoint", endpoint_name=endpoint_name, endpoint_config_name=self.config.attr_endpoint_config_name
        )

        self.base = sagemaker.CfnInferenceComponent(
            self,
            "Base",
            inference_component_name=self.base_component_name,
            endpoint_name=self.endpoint.attr_endpoint_name,
            variant_name=variant.variant_name,
            specification=sagemaker.CfnInferenceComponent.InferenceComponentSpecificationProperty(
                model_name=model.model_name,
                compute_resource_requirements=sagemaker.CfnInferenceComponent.InferenceComponentComputeResourceRequirementsProperty(
                    number_of_accelerator_devices_required=compute.accelerators,
                    number_of_cpu_cores_required=compute.cores,
                    min_memory_required_in_mb=compute.min_memory_mb,
                ),
                startup_parameters=sagemaker.CfnInferenceComponent.InferenceComponentStartupParametersProperty(
                    model_data_download_timeout_in_seconds=variant.model_data_download_timeout_seconds,
                    container_startup_health_check_timeout_in_seconds=variant.container_startup_health_check_timeout_seconds,
                ),
                data_cache_config=_data_cache_property(settings.enable_caching),
                scheduling_config=_scheduling_property(settings.placement),
            ),
            runtime_config=sagemaker.CfnInferenceComponent.InferenceComponentRuntimeConfigProperty(
                copy_count=compute.copies
            ),
        )
        self.adapter_components: dict[str, sagemaker.CfnInferenceComponent] = {}
        for adapter in adapters:
            component = sagemaker.CfnInferenceComponent(
                self,
                f"Adapter-{adapter.name}",
                inference_component_name=component_names[adapter.name],
                endpoint_name=self.endpoint.attr_endpoint_name,
                specification=sagemaker.CfnInferenceComponent.InferenceComponentSpecificationProperty(
                    base_inference_component_name=self.base_component_name,
                    container=sagemaker.CfnInferenceComponent.InferenceComponentContainerSpecificationProperty(
                        artifact_url=adapter.s3_uri
                    ),
                ),
            )
            # The base is referenced by name (a string), so order the creation explicitly.
            component.node.add_dependency(self.base)
            self.adapter_components[adapter.name] = component

        self.rollback_alarms: list[cloudwatch.Alarm] = []
        if rollout is not None:
            self._guard_updates(rollout, variant)
        if scaling is not None:
            self._autoscaling(scaling)

    def _guard_updates(self, rollout: ComponentRollout, variant: VariantSettings) -> None:
        """The base component's DeploymentConfig: a rolling update in CAPACITY_PERCENT batches (copies come and go
        with autoscaling, so a COPY_COUNT fixed at synth could leave the API's 5-50% range), rolled back on the
        same alarms as a model-backed endpoint's blue/green update. CloudFormation passes DeploymentConfig on an
        update only (a write-only property of AWS::SageMaker::InferenceComponent; CreateInferenceComponent takes
        none), which is when it matters."""
        self.rollback_alarms = rollback_alarms(
            self,
            self.endpoint_name,
            variant,
            lambda name, statistic: variant_metric(self.endpoint_name, variant.variant_name, name, statistic),
            max_5xx_per_minute=rollout.max_5xx_per_minute,
            p99_model_latency_ms=rollout.p99_model_latency_ms,
            update="a rolling update of the base inference component",
            # An endpoint hosting components may publish its invocations per component only: the alarms read those
            # too (the base's, and each adapter's, which the base's copies serve).
            components=[
                self.base_component_name,
                *(naming.inference_component_name(self.endpoint_name, name) for name in self.adapter_components),
            ],
        )
        component = sagemaker.CfnInferenceComponent
        self.base.deployment_config = component.InferenceComponentDeploymentConfigProperty(
            rolling_update_policy=component.InferenceComponentRollingUpdatePolicyProperty(
                maximum_batch_size=component.InferenceComponentCapacitySizeProperty(
                    type="CAPACITY_PERCENT", value=rollout.batch_percent
                ),
                wait_interval_in_seconds=rollout.wait_seconds,
                maximum_execution_timeout_in_seconds=rollout.timeout_seconds,
                rollback_maximum_batch_size=component.InferenceComponentCapacitySizeProperty(
                    type="CAPACITY_PERCENT", value=rollout.rollback_batch_percent
                ),
            ),
            auto_rollback_configuration=(
                component.AutoRollbackConfigurationProperty(
                    alarms=[component.AlarmProperty(alarm_name=alarm.alarm_name) for alarm in self.rollback_alarms]
                )
                if rollout.auto_rollback
                else None
            ),
        )

    def capture_prefix(self) -> str | None:
        """Where this endpoint's captured records are (optigate.constructs.data_capture.capture_prefix); the records
        of every component are under the one variant and name no component."""
        return capture_prefix(self.capture_bucket, self.endpoint_name)

    def _autoscaling(self, scaling: EndpointScaling) -> None:
        target = target_tracking(
            self,
            resource_id=f"inference-component/{self.base_component_name}",
            dimension="sagemaker:inference-component:DesiredCopyCount",
            min_capacity=0 if scaling.scale_to_zero else scaling.min_capacity,
            max_capacity=scaling.max_capacity,
            metric="SageMakerInferenceComponentConcurrentRequestsPerCopyHighResolution",
            target_value=scaling.target,
            policy_name=f"{self.base_component_name}-concurrency",
            cooldowns=(scaling.scale_in_cooldown_seconds, scaling.scale_out_cooldown_seconds),
            depends_on=self.base,
        )
        if not scaling.scale_to_zero:
            return
        # Target tracking cannot leave zero: a request that finds no copy raises
        # NoCapacityInvocationFailures, whose alarm adds the first copy.
        scale_out = appscaling.CfnScalingPolicy(
            self,
            "ScaleOutFromZero",
            policy_name=f"{self.base_component_name}-from-zero",
            policy_type="StepScaling",
            scaling_target_id=target.ref,
            step_scaling_policy_configuration=appscaling.CfnScalingPolicy.StepScalingPolicyConfigurationProperty(
                adjustment_type="ChangeInCapacity",
                metric_aggregation_type="Maximum",
                cooldown=scaling.scale_out_cooldown_seconds,
                step_adjustments=[
                    appscaling.CfnScalingPolicy.StepAdjustmentProperty(
                        metric_interval_lower_bound=0, scaling_adjustment=1
                    )
                ],
            ),
        )
        # A request for an adapter finds no capacity as much as one for the base: which component name the
        # metric then carries is not documented, so every component is watched (the Developer Guide's
        # scale-from-zero alarm is per inference component). An alarm reads at most 10 metrics.
        adapters = (naming.inference_component_name(self.endpoint_name, name) for name in self.adapter_components)
        components = [self.base_component_name, *adapters]
        self.no_capacity_alarms: list[cloudwatch.Alarm] = []
        for start in range(0, len(components), MAX_METRICS_PER_ALARM):
            watched = components[start : start + MAX_METRICS_PER_ALARM]
            metrics = {
                f"m{i}": cloudwatch.Metric(
                    namespace="AWS/SageMaker",
                    metric_name="NoCapacityInvocationFailures",
                    dimensions_map={"InferenceComponentName": name},
                    statistic="Maximum",
                    period=Duration.minutes(1),
                )
                for i, name in enumerate(watched)
            }
            alarm = cloudwatch.Alarm(
                self,
                "NoCapacity" if start == 0 else f"NoCapacity{start // MAX_METRICS_PER_ALARM + 1}",
                metric=cloudwatch.MathExpression(
                    expression=" + ".join(f"FILL({key}, 0)" for key in metrics),
                    using_metrics=metrics,
                    period=Duration.minutes(1),
                    label="requests that found no copy",
                ),
                threshold=1,
                evaluation_periods=1,
                comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
                treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
                alarm_description=f"{', '.join(watched)}: a request found no copy; scale the base out from zero",
            )
            alarm.add_alarm_action(_ScalingPolicyAction(scale_out.attr_arn))
            self.no_capacity_alarms.append(alarm)


# ---------------------------------------------------------------- the component API's options (DESIGN-26, item 7)


def _refuse_adapters_on_pools(path: str, variant: VariantSettings, adapters: list[AdapterSpec]) -> None:
    """Adapter components are accepted only in the singular Specification, "for an endpoint with a single instance
    type" (CloudFormation's AWS::SageMaker::InferenceComponent schema); the config refuses it first (OG530)."""
    if adapters and variant.instance_pools:
        raise ValueError(
            f"{path}: adapter components need an endpoint with one instance type, got pools "
            f"{[t for t, _ in variant.instance_pools]} (rule OG530)"
        )


def _data_cache_property(
    enable_caching: bool | None,
) -> sagemaker.CfnInferenceComponent.InferenceComponentDataCacheConfigProperty | None:
    """Specification.DataCacheConfig (EnableCaching, required in it): artifacts and image kept on each instance."""
    if enable_caching is None:
        return None
    return sagemaker.CfnInferenceComponent.InferenceComponentDataCacheConfigProperty(enable_caching=enable_caching)


def _scheduling_property(
    placement: ComponentPlacement | None,
) -> sagemaker.CfnInferenceComponent.InferenceComponentSchedulingConfigProperty | None:
    """Specification.SchedulingConfig: PlacementStrategy (SPREAD | BINPACK) and AvailabilityZoneBalance, which the
    CloudFormation schema requires beside it (EnforcementMode PERMISSIVE, MaxImbalance 0-100)."""
    if placement is None:
        return None
    return sagemaker.CfnInferenceComponent.InferenceComponentSchedulingConfigProperty(
        placement_strategy=placement.placement_strategy,
        availability_zone_balance=sagemaker.CfnInferenceComponent.InferenceComponentAvailabilityZoneBalanceProperty(
            enforcement_mode=placement.enforcement_mode, max_imbalance=placement.max_imbalance
        ),
    )
