"""Inference-component rules: what the component API refuses, or what CloudFormation cannot express, for a team
serving adapters (the base component and one component per adapter).

Sources (checked on 2026-12-01): botocore 1.44.8's SageMaker model (CreateInferenceComponentInput,
InferenceComponentSpecification); cfn-lint 1.58.0's AWS::SageMaker::InferenceComponent schema
(InferenceComponentSpecification, InferenceComponentSpecificationForInstanceType, InferenceComponentSchedulingConfig);
the user guide on instance pools, https://docs.aws.amazon.com/sagemaker/latest/dg/realtime-endpoints-heterogeneous.html.
docs/inference-components.md says what each source states.
"""

from __future__ import annotations

from collections.abc import Iterator

from optigate.config.models import TeamConfig
from optigate.config.rule_registry import Found, Problem, rule_check

CFN_SCHEMA = "https://docs.aws.amazon.com/AWSCloudFormation/latest/TemplateReference/aws-resource-sagemaker-inferencecomponent.html"


def component_problems(team: TeamConfig) -> list[Problem]:
    """The inference-component rules in the order they are reported, one rule function each."""
    return [
        *adapters_on_one_instance_type(team),
        *component_settings_need_adapters(team),
        *scheduling_needs_zone_balance(team),
    ]


@rule_check("OG530", "adapter components need an endpoint with one instance type (no pools)")
def adapters_on_one_instance_type(team: TeamConfig) -> Iterator[Found]:
    """A team serving adapters gives no `instance_pools`: neither in `serving` nor in its gate's candidate (the
    candidate's twin stages the adapters too).

    Why: CreateInferenceComponent takes `Specification` or `Specifications` (one per instance type, 2-5 in the
    CloudFormation schema); BaseInferenceComponentName, which makes a component an adapter, is accepted only on the
    singular Specification, which CloudFormation's AWS::SageMaker::InferenceComponent schema describes as "for an
    endpoint with a single instance type" (cfn-lint 1.58.0's schema). No AWS page documents an adapter component on
    a variant with InstancePools, so optigate does not deploy one (docs/inference-components.md).
    """
    if team.adapters and "instance_pools" in team.gate.candidate:  # the candidate's twin stages the adapters too
        yield (
            ("gate", "candidate", "instance_pools"),
            "a candidate of a team serving adapters runs them as adapter components, which need an endpoint "
            "with a single instance type (BaseInferenceComponentName only in the singular Specification, "
            f"{CFN_SCHEMA}); remove instance_pools from the candidate",
        )
    if team.adapters and team.serving.instance_pools:
        yield (
            ("serving", "instance_pools"),
            "adapter components (BaseInferenceComponentName) are accepted only in an inference component's "
            "singular Specification, which CloudFormation's AWS::SageMaker::InferenceComponent schema describes "
            "as for an endpoint with a single instance type, and no AWS page documents adapters beside "
            f"InstancePools ({CFN_SCHEMA}); remove instance_pools (and instance_provision_timeout_seconds) or "
            "serve the adapters from a team of their own",
        )


@rule_check("OG531", "inference_components only for a team serving adapters")
def component_settings_need_adapters(team: TeamConfig) -> Iterator[Found]:
    """`inference_components` (the base component's caching and copy placement) is set only by a team serving
    adapters.

    Why: only a team serving adapters runs on inference components (the base and one per adapter); the endpoint of a
    team without adapters is model-backed and has no component to cache or place.
    """
    if team.inference_components is not None and not team.adapters:
        yield (
            ("inference_components",),
            "this team's endpoint is model-backed (no adapters), so it has no inference component to cache or "
            "place; remove inference_components",
        )


@rule_check("OG532", "scheduling_config names availability_zone_balance (CloudFormation requires it)")
def scheduling_needs_zone_balance(team: TeamConfig) -> Iterator[Found]:
    """`inference_components.scheduling_config` names `availability_zone_balance` beside its placement strategy:
    refused rather than filled in.

    Why: CloudFormation's AWS::SageMaker::InferenceComponent schema (cfn-lint 1.58.0) requires both
    PlacementStrategy and AvailabilityZoneBalance in SchedulingConfig, and aws-cdk-lib's
    InferenceComponentSchedulingConfigProperty makes both required too; the API alone does not
    (https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_InferenceComponentSchedulingConfig.html).
    """
    settings = team.inference_components
    scheduling = settings.scheduling_config if settings is not None else None
    if scheduling is not None and scheduling.availability_zone_balance is None:
        yield (
            ("inference_components", "scheduling_config"),
            "CloudFormation's AWS::SageMaker::InferenceComponent schema requires AvailabilityZoneBalance beside "
            "PlacementStrategy in SchedulingConfig (the API alone does not); add availability_zone_balance: "
            "{enforcement_mode: PERMISSIVE} (max_imbalance optional, SageMaker's default 0)",
        )


#: This module's rules, in ID order: optigate.deployment.all_rules collects them (every_rule).
RULES = (
    adapters_on_one_instance_type,
    component_settings_need_adapters,
    scheduling_needs_zone_balance,
)
