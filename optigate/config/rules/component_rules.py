"""Inference-component rules: what the component API refuses, or what CloudFormation cannot express, for a team
serving adapters (the base component and one component per adapter).

Sources (checked on 2026-12-01): botocore 1.44.8's SageMaker model (CreateInferenceComponentInput,
InferenceComponentSpecification); cfn-lint 1.58.0's AWS::SageMaker::InferenceComponent schema
(InferenceComponentSpecification, InferenceComponentSpecificationForInstanceType, InferenceComponentSchedulingConfig);
the user guide on instance pools, https://docs.aws.amazon.com/sagemaker/latest/dg/realtime-endpoints-heterogeneous.html.
docs/inference-components.md says what each source states.
"""

from __future__ import annotations

from optigate.config.models import TeamConfig
from optigate.config.rules.registry import Problem, rule

CFN_SCHEMA = "https://docs.aws.amazon.com/AWSCloudFormation/latest/TemplateReference/aws-resource-sagemaker-inferencecomponent.html"

ADAPTERS_ON_ONE_INSTANCE_TYPE = rule("OG530", "adapter components need an endpoint with one instance type (no pools)")
COMPONENT_SETTINGS_NEED_ADAPTERS = rule("OG531", "inference_components only for a team serving adapters")
SCHEDULING_NEEDS_ZONE_BALANCE = rule(
    "OG532", "scheduling_config names availability_zone_balance (CloudFormation requires it)"
)


def component_problems(team: TeamConfig) -> list[Problem]:
    problems: list[Problem] = []
    if team.adapters and "instance_pools" in team.gate.candidate:  # the candidate's twin stages the adapters too
        problems.append(
            Problem(
                ("gate", "candidate", "instance_pools"),
                "a candidate of a team serving adapters runs them as adapter components, which need an endpoint "
                "with a single instance type (BaseInferenceComponentName only in the singular Specification, "
                f"{CFN_SCHEMA}); remove instance_pools from the candidate",
                ADAPTERS_ON_ONE_INSTANCE_TYPE,
            )
        )
    if team.adapters and team.serving.instance_pools:
        # CreateInferenceComponent takes `Specification` or `Specifications` (one per instance type, 2-5 in the
        # CloudFormation schema); BaseInferenceComponentName is accepted only on the singular Specification, which
        # that schema describes as "for an endpoint with a single instance type". No AWS page documents an adapter
        # component on a variant with InstancePools, so optigate does not deploy one.
        problems.append(
            Problem(
                ("serving", "instance_pools"),
                "adapter components (BaseInferenceComponentName) are accepted only in an inference component's "
                "singular Specification, which CloudFormation's AWS::SageMaker::InferenceComponent schema describes "
                "as for an endpoint with a single instance type, and no AWS page documents adapters beside "
                f"InstancePools ({CFN_SCHEMA}); remove instance_pools (and instance_provision_timeout_seconds) or "
                "serve the adapters from a team of their own",
                ADAPTERS_ON_ONE_INSTANCE_TYPE,
            )
        )
    settings = team.inference_components
    if settings is not None and not team.adapters:
        problems.append(
            Problem(
                ("inference_components",),
                "this team's endpoint is model-backed (no adapters), so it has no inference component to cache or "
                "place; remove inference_components",
                COMPONENT_SETTINGS_NEED_ADAPTERS,
            )
        )
    scheduling = settings.scheduling_config if settings is not None else None
    if scheduling is not None and scheduling.availability_zone_balance is None:
        problems.append(
            Problem(
                ("inference_components", "scheduling_config"),
                "CloudFormation's AWS::SageMaker::InferenceComponent schema requires AvailabilityZoneBalance beside "
                "PlacementStrategy in SchedulingConfig (the API alone does not); add availability_zone_balance: "
                "{enforcement_mode: PERMISSIVE} (max_imbalance optional, SageMaker's default 0)",
                SCHEDULING_NEEDS_ZONE_BALANCE,
            )
        )
    return problems


#: This module's rules, in ID order: optigate.deployment.all_rules collects them (every_rule).
RULES = (
    ADAPTERS_ON_ONE_INSTANCE_TYPE,
    COMPONENT_SETTINGS_NEED_ADAPTERS,
    SCHEDULING_NEEDS_ZONE_BALANCE,
)
