"""Template assertions for each construct, on small stacks built for the purpose."""

from __future__ import annotations

from dataclasses import replace

import pytest
from aws_cdk import Stack
from aws_cdk.assertions import Match, Template

from optigate.constructs import (
    AdapterSpec,
    LoraAdapters,
    ShadowVariant,
    TunedEndpoint,
    VariantSettings,
)
from optigate.constructs.lora_adapters import ComponentCompute
from optigate.deployment.endpoint import BlueGreen, EndpointScaling
from tests.fixtures.small_stacks import IMAGE
from tests.fixtures.small_stacks import lmi_model as _model
from tests.fixtures.small_stacks import small_stack as _stack

#: A base component's scalable target as an endpoint plan gives it (optigate.deployment.endpoint.EndpointScaling).
COPIES = EndpointScaling("copies", 1, 1, target=4, scale_in_cooldown_seconds=300, scale_out_cooldown_seconds=60)


def _policy_statements(template: Template) -> list[dict]:
    statements = []
    for policy in template.find_resources("AWS::IAM::Policy").values():
        statements += policy["Properties"]["PolicyDocument"]["Statement"]
    return statements


# --------------------------------------------------------------------------- LmiModel


def test_lmi_model_reads_only_its_prefix_and_pulls_only_its_repository():
    stack = _stack()
    _model(stack)
    template = Template.from_stack(stack)
    template.has_resource_properties(
        "AWS::SageMaker::Model",
        {
            "EnableNetworkIsolation": True,
            "PrimaryContainer": {
                "Image": IMAGE,
                "Environment": {"OPTION_MAX_MODEL_LEN": "8192"},
                "ModelDataSource": {
                    "S3DataSource": {
                        "S3Uri": "s3://acme-models/llama/",
                        "S3DataType": "S3Prefix",
                        "CompressionType": "None",
                    }
                },
            },
        },
    )
    statements = _policy_statements(template)
    by_action = {}
    for statement in statements:
        actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
        for action in actions:
            by_action.setdefault(action, []).append(statement)
    object_resources = [s["Resource"] for s in by_action["s3:GetObject"]]
    assert object_resources == [{"Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"}, ":s3:::acme-models/llama/*"]]}]
    assert by_action["s3:ListBucket"][0]["Condition"] == {"StringLike": {"s3:prefix": ["llama/*"]}}
    assert (
        by_action["ecr:BatchGetImage"][0]["Resource"] == "arn:aws:ecr:us-east-1:763104351884:repository/djl-inference"
    )
    assert "s3:PutObject" not in by_action and "s3:*" not in by_action and "sagemaker:*" not in by_action
    log_resources = str(by_action["logs:PutLogEvents"][0]["Resource"])
    assert "/aws/sagemaker/Endpoints/chat-dev*" in log_resources
    template.resource_properties_count_is(
        "AWS::IAM::Role", Match.object_like({"ManagedPolicyArns": Match.any_value()}), 0
    )


def test_lmi_model_accepts_eula_only_when_asked():
    stack = _stack()
    _model(stack, accept_eula=True)
    Template.from_stack(stack).has_resource_properties(
        "AWS::SageMaker::Model",
        {"PrimaryContainer": {"ModelDataSource": {"S3DataSource": {"ModelAccessConfig": {"AcceptEula": True}}}}},
    )


# --------------------------------------------------------------------------- TunedEndpoint


def test_tuned_endpoint_sets_timeouts_routing_and_blue_green_with_rollback_alarms():
    stack = _stack()
    endpoint = TunedEndpoint(
        stack,
        "Endpoint",
        model=_model(stack),
        variant=VariantSettings(
            instance_type="ml.p5.48xlarge",
            instance_count=4,
            model_data_download_timeout_seconds=2010,
            container_startup_health_check_timeout_seconds=2720,
        ),
        endpoint_name="research-prod",
        blue_green=BlueGreen(canary_percentage=25, wait_minutes=5),
    )
    template = Template.from_stack(stack)
    template.has_resource_properties(
        "AWS::SageMaker::EndpointConfig",
        {
            "ProductionVariants": [
                Match.object_like(
                    {
                        "InstanceType": "ml.p5.48xlarge",
                        "InitialInstanceCount": 4,
                        "ModelDataDownloadTimeoutInSeconds": 2010,
                        "ContainerStartupHealthCheckTimeoutInSeconds": 2720,
                        "RoutingConfig": {"RoutingStrategy": "LEAST_OUTSTANDING_REQUESTS"},
                    }
                )
            ],
            # p5 keeps the model on NVMe instance storage: SageMaker refuses a KmsKeyId there.
            "KmsKeyId": Match.absent(),
        },
    )
    template.has_resource_properties(
        "AWS::SageMaker::Endpoint",
        {
            "EndpointName": "research-prod",
            "DeploymentConfig": {
                "BlueGreenUpdatePolicy": Match.object_like(
                    {
                        "TrafficRoutingConfiguration": {
                            "Type": "CANARY",
                            "CanarySize": {"Type": "INSTANCE_COUNT", "Value": 1},
                            "WaitIntervalInSeconds": 300,
                        }
                    }
                ),
                "AutoRollbackConfiguration": {"Alarms": Match.any_value()},
            },
        },
    )
    alarms = template.find_resources("AWS::CloudWatch::Alarm")
    metric_names = sorted(alarm["Properties"]["MetricName"] for alarm in alarms.values())
    assert metric_names == ["Invocation5XXErrors", "ModelLatency"]
    rollback = template.find_resources("AWS::SageMaker::Endpoint")
    (endpoint_resource,) = rollback.values()
    assert len(endpoint_resource["Properties"]["DeploymentConfig"]["AutoRollbackConfiguration"]["Alarms"]) == 2
    template.resource_count_is("AWS::CloudWatch::Dashboard", 1)
    assert endpoint.production_variant_names == ["AllTraffic"]


def test_tuned_endpoint_encrypts_ebs_volumes_with_a_rotating_customer_key():
    stack = _stack()
    TunedEndpoint(
        stack,
        "Endpoint",
        model=_model(stack),
        variant=VariantSettings(instance_type="ml.inf2.24xlarge", volume_size_gb=256),
        endpoint_name="neuron-dev",
        data_capture_percentage=10,
    )
    template = Template.from_stack(stack)
    template.has_resource_properties("AWS::KMS::Key", {"EnableKeyRotation": True})
    template.has_resource_properties(
        "AWS::SageMaker::EndpointConfig",
        {
            "KmsKeyId": {"Fn::GetAtt": [Match.string_like_regexp("EndpointKey"), "Arn"]},
            "ProductionVariants": [Match.object_like({"VolumeSizeInGB": 256})],
            "DataCaptureConfig": Match.object_like({"EnableCapture": True, "InitialSamplingPercentage": 10}),
        },
    )
    # Captured payloads: KMS-encrypted and SSL-only.
    template.has_resource_properties(
        "AWS::S3::Bucket",
        {
            "BucketEncryption": {
                "ServerSideEncryptionConfiguration": [
                    Match.object_like(
                        {
                            "ServerSideEncryptionByDefault": {
                                "SSEAlgorithm": "aws:kms",
                                "KMSMasterKeyID": Match.any_value(),
                            }
                        }
                    )
                ]
            }
        },
    )
    template.has_resource_properties(
        "AWS::S3::BucketPolicy",
        {
            "PolicyDocument": {
                "Statement": Match.array_with(
                    [Match.object_like({"Effect": "Deny", "Condition": {"Bool": {"aws:SecureTransport": "false"}}})]
                )
            }
        },
    )


def test_single_instance_blue_green_shifts_all_at_once_and_bakes():
    stack = _stack()
    TunedEndpoint(
        stack,
        "Endpoint",
        model=_model(stack),
        variant=VariantSettings(instance_type="ml.g6.2xlarge"),
        endpoint_name="e",
    )
    Template.from_stack(stack).has_resource_properties(
        "AWS::SageMaker::Endpoint",
        {
            "DeploymentConfig": {
                "BlueGreenUpdatePolicy": Match.object_like(
                    {"TrafficRoutingConfiguration": {"Type": "ALL_AT_ONCE", "WaitIntervalInSeconds": 600}}
                ),
                "AutoRollbackConfiguration": Match.any_value(),
            }
        },
    )


# --------------------------------------------------------------------------- ShadowVariant


def test_shadow_variant_mirrors_the_configured_share_of_traffic():
    stack = _stack()
    endpoint = TunedEndpoint(
        stack,
        "Endpoint",
        model=_model(stack),
        variant=VariantSettings(instance_type="ml.p5.48xlarge"),
        endpoint_name="e",
    )
    ShadowVariant(
        stack,
        "Shadow",
        endpoint=endpoint,
        model=_model(stack, "Candidate"),
        variant=VariantSettings(instance_type="ml.p5.48xlarge"),
        sampling_percentage=20,
    )
    template = Template.from_stack(stack)
    template.has_resource_properties(
        "AWS::SageMaker::EndpointConfig",
        {
            "ProductionVariants": [Match.object_like({"VariantName": "AllTraffic", "InitialVariantWeight": 1})],
            "ShadowProductionVariants": [
                Match.object_like(
                    {
                        "VariantName": "Shadow",
                        "InitialVariantWeight": 0.2,
                        "ModelName": {"Fn::GetAtt": [Match.string_like_regexp("CandidateModel"), "ModelName"]},
                    }
                )
            ],
        },
    )


def test_shadow_variant_with_two_production_variants_is_refused():
    stack = _stack()
    endpoint = TunedEndpoint(
        stack,
        "Endpoint",
        model=_model(stack),
        variant=VariantSettings(instance_type="ml.g6.2xlarge"),
        endpoint_name="e",
    )
    endpoint.add_production_variant(
        _model(stack, "B"), VariantSettings(instance_type="ml.g6e.xlarge", variant_name="B"), weight=0.5
    )
    with pytest.raises(
        ValueError, match=r"a shadow variant needs exactly one production variant, the endpoint has 2 \(AllTraffic, B\)"
    ):
        ShadowVariant(
            stack,
            "Shadow",
            endpoint=endpoint,
            model=_model(stack, "C"),
            variant=VariantSettings(instance_type="ml.g6.2xlarge"),
            sampling_percentage=10,
        )


def test_second_shadow_variant_is_refused():
    stack = _stack()
    endpoint = TunedEndpoint(
        stack,
        "Endpoint",
        model=_model(stack),
        variant=VariantSettings(instance_type="ml.g6.2xlarge"),
        endpoint_name="e",
    )
    ShadowVariant(
        stack,
        "S1",
        endpoint=endpoint,
        model=_model(stack, "C1"),
        variant=VariantSettings(instance_type="ml.g6.2xlarge"),
        sampling_percentage=10,
    )
    with pytest.raises(ValueError, match="already has a shadow variant"):
        ShadowVariant(
            stack,
            "S2",
            endpoint=endpoint,
            model=_model(stack, "C2"),
            variant=VariantSettings(instance_type="ml.g6.2xlarge", variant_name="S2"),
            sampling_percentage=10,
        )


# --------------------------------------------------------------------------- LoraAdapters


def _adapters_stack(scaling: EndpointScaling | None, adapters: tuple[str, ...] = ("triage", "reply")) -> Template:
    stack = _stack()
    LoraAdapters(
        stack,
        "Adapters",
        model=_model(stack),
        variant=VariantSettings(instance_type="ml.g6e.12xlarge"),
        endpoint_name="support-dev",
        adapters=[AdapterSpec(name, f"s3://acme-adapters/{name}.tar.gz") for name in adapters],
        compute=ComponentCompute(accelerators=1, min_memory_mb=16384),
        scaling=scaling,
    )
    return Template.from_stack(stack)


def test_adapter_components_reference_the_base_by_name_without_compute():
    template = _adapters_stack(None)
    config = template.find_resources("AWS::SageMaker::EndpointConfig")
    (config_resource,) = config.values()
    variant = config_resource["Properties"]["ProductionVariants"][0]
    assert "ModelName" not in variant
    assert "ExecutionRoleArn" in config_resource["Properties"]
    template.has_resource_properties(
        "AWS::SageMaker::InferenceComponent",
        {
            "InferenceComponentName": "support-dev-base",
            "Specification": {
                "ModelName": Match.any_value(),
                "ComputeResourceRequirements": {
                    "NumberOfAcceleratorDevicesRequired": 1,
                    "NumberOfCpuCoresRequired": 2,
                    "MinMemoryRequiredInMb": 16384,
                },
                "StartupParameters": Match.any_value(),
            },
            "RuntimeConfig": {"CopyCount": 1},
        },
    )
    components = template.find_resources("AWS::SageMaker::InferenceComponent")
    adapters = {
        c["Properties"]["InferenceComponentName"]: c
        for c in components.values()
        if "BaseInferenceComponentName" in c["Properties"]["Specification"]
    }
    assert sorted(adapters) == ["support-dev-reply", "support-dev-triage"]
    base_logical_id = next(
        k for k, c in components.items() if c["Properties"]["InferenceComponentName"] == "support-dev-base"
    )
    for component in adapters.values():
        specification = component["Properties"]["Specification"]
        assert specification["BaseInferenceComponentName"] == "support-dev-base"
        assert "ComputeResourceRequirements" not in specification
        assert specification["Container"]["ArtifactUrl"].endswith(".tar.gz")
        assert base_logical_id in component["DependsOn"]


def test_adapters_are_readable_by_the_endpoint_role():
    template = _adapters_stack(None)
    resources = [str(s["Resource"]) for s in _policy_statements(template) if s["Action"] == "s3:GetObject"]
    assert any("acme-adapters/triage.tar.gz" in r for r in resources)
    assert any("acme-adapters/reply.tar.gz" in r for r in resources)


def test_scale_to_zero_copies_instances_and_scales_back_out_on_no_capacity():
    template = _adapters_stack(replace(COPIES, min_capacity=0, max_capacity=4, scale_to_zero=True))
    template.has_resource_properties(
        "AWS::SageMaker::EndpointConfig",
        {
            "ProductionVariants": [
                Match.object_like(
                    {"ManagedInstanceScaling": {"Status": "ENABLED", "MinInstanceCount": 0, "MaxInstanceCount": 4}}
                )
            ]
        },
    )
    template.has_resource_properties(
        "AWS::ApplicationAutoScaling::ScalableTarget",
        {
            "ResourceId": "inference-component/support-dev-base",
            "ScalableDimension": "sagemaker:inference-component:DesiredCopyCount",
            "MinCapacity": 0,
            "MaxCapacity": 4,
        },
    )
    template.has_resource_properties("AWS::ApplicationAutoScaling::ScalingPolicy", {"PolicyType": "StepScaling"})
    assert _no_capacity_watch(template) == [
        {"support-dev-base", "support-dev-triage", "support-dev-reply"}
    ]  # a request to any adapter wakes the base


def test_managed_instance_scaling_without_scale_to_zero_takes_the_placements_instance_range():
    """serving.autoscaling.managed_instance_scaling: true (issue 37): instances follow copies that never go to zero,
    between what the minimum copies need and room for the maximum's rolling batch (optigate.deployment.placement)."""
    scaling = replace(COPIES, min_capacity=1, max_capacity=3, managed_instances=(1, 4))
    template = _adapters_stack(scaling)
    template.has_resource_properties(
        "AWS::SageMaker::EndpointConfig",
        {
            "ProductionVariants": [
                Match.object_like(
                    {"ManagedInstanceScaling": {"Status": "ENABLED", "MinInstanceCount": 1, "MaxInstanceCount": 4}}
                )
            ]
        },
    )
    (config,) = (
        _adapters_stack(replace(COPIES, min_capacity=1, max_capacity=3))
        .find_resources("AWS::SageMaker::EndpointConfig")
        .values()
    )
    assert "ManagedInstanceScaling" not in config["Properties"]["ProductionVariants"][0]


def _no_capacity_watch(template: Template) -> list[set[str]]:
    """The components each scale-from-zero alarm watches; every alarm acts on the step-scaling policy."""
    watched = []
    for alarm in template.find_resources("AWS::CloudWatch::Alarm").values():
        properties = alarm["Properties"]
        queries = properties.get("Metrics", [])
        stats = [q["MetricStat"]["Metric"] for q in queries if "MetricStat" in q]
        if not any(m["MetricName"] == "NoCapacityInvocationFailures" for m in stats):
            continue
        ((logical, attribute),) = [action["Fn::GetAtt"] for action in properties["AlarmActions"]]
        assert logical.startswith("AdaptersScaleOutFromZero") and attribute == "Arn"
        (expression,) = [q["Expression"] for q in queries if "Expression" in q]
        assert expression == " + ".join(f"FILL({q['Id']}, 0)" for q in queries if "MetricStat" in q)
        watched.append({d["Value"] for m in stats for d in m["Dimensions"]})
    return watched


def test_scale_from_zero_watches_every_adapter_in_alarms_of_at_most_ten_metrics():
    scaling = replace(COPIES, min_capacity=0, max_capacity=4, scale_to_zero=True)
    template = _adapters_stack(scaling, adapters=tuple(f"a{i}" for i in range(12)))
    watched = _no_capacity_watch(template)
    assert [len(w) for w in watched] == [10, 3]
    assert set().union(*watched) == {"support-dev-base", *(f"support-dev-a{i}" for i in range(12))}


def test_duplicate_adapter_names_are_refused():
    stack = _stack()
    with pytest.raises(ValueError, match="adapter names must be unique"):
        LoraAdapters(
            stack,
            "A",
            model=_model(stack),
            variant=VariantSettings(instance_type="ml.g6e.12xlarge"),
            endpoint_name="e",
            adapters=[AdapterSpec("x", "s3://b/x.tar.gz"), AdapterSpec("x", "s3://b/y.tar.gz")],
            compute=ComponentCompute(accelerators=1),
        )


def test_the_blue_green_timeout_cap_is_the_apis_own_maximum():
    import botocore.session

    from optigate.constructs.blue_green import MAX_BLUE_GREEN_SECONDS

    shape = botocore.session.get_session().get_service_model("sagemaker").shape_for("BlueGreenUpdatePolicy")
    assert shape.members["MaximumExecutionTimeoutInSeconds"].metadata["max"] == MAX_BLUE_GREEN_SECONDS


# --------------------------------------------------------------------------- instance pools


def _pooled_endpoint(stack: Stack, pools=(("ml.g6e.2xlarge", 1), ("ml.g6.2xlarge", 2))) -> TunedEndpoint:
    return TunedEndpoint(
        stack,
        "Endpoint",
        model=_model(stack),
        variant=VariantSettings(instance_type=pools[0][0], instance_pools=pools, provision_timeout_seconds=900),
        endpoint_name="chat-dev",
    )


def test_pools_replace_the_instance_type_and_the_shadow_stage_copy_carries_them():
    stack = _stack()
    endpoint = _pooled_endpoint(stack)
    template = Template.from_stack(stack)
    (config,) = template.find_resources("AWS::SageMaker::EndpointConfig").values()
    (variant,) = config["Properties"]["ProductionVariants"]
    assert "InstanceType" not in variant  # "replace the InstanceType parameter ... with an InstancePools list"
    assert variant["InstancePools"] == [
        {"InstanceType": "ml.g6e.2xlarge", "Priority": 1},
        {"InstanceType": "ml.g6.2xlarge", "Priority": 2},
    ]
    assert variant["VariantInstanceProvisionTimeoutInSeconds"] == 900
    (request,) = endpoint.config_request()["ProductionVariants"]
    assert request["InstancePools"] == variant["InstancePools"] and "InstanceType" not in request
    assert request["VariantInstanceProvisionTimeoutInSeconds"] == 900


def test_rollback_alarms_read_the_variant_and_each_pools_instance_type_series():
    stack = _stack()
    _pooled_endpoint(stack)
    template = Template.from_stack(stack)
    alarms = [a["Properties"] for a in template.find_resources("AWS::CloudWatch::Alarm").values()]
    assert len(alarms) == 2
    for alarm in alarms:
        queries = alarm["Metrics"]
        dimension_sets = [
            {d["Name"]: d["Value"] for d in q["MetricStat"]["Metric"]["Dimensions"]}
            for q in queries
            if "MetricStat" in q
        ]
        assert {"EndpointName": "chat-dev", "VariantName": "AllTraffic"} in dimension_sets
        assert {d.get("InstanceType") for d in dimension_sets} == {None, "ml.g6e.2xlarge", "ml.g6.2xlarge"}
        (expression,) = [q["Expression"] for q in queries if "Expression" in q]
        assert expression.startswith("IF(FILL(variant, 0) > ")
    (endpoint,) = template.find_resources("AWS::SageMaker::Endpoint").values()
    rollback = endpoint["Properties"]["DeploymentConfig"]["AutoRollbackConfiguration"]["Alarms"]
    assert len(rollback) == 2


# A template check: slow, and kept by --fast (tests/tiers.py).
@pytest.mark.slow
@pytest.mark.fast_tier
def test_pooled_endpoint_passes_cfn_lint():
    import json

    from cfnlint.api import ManualArgs, lint

    stack = _stack()
    _pooled_endpoint(stack)
    template = Template.from_stack(stack).to_json()
    matches = lint(json.dumps(template), config=ManualArgs(regions=["us-east-1"]))
    assert [m for m in matches if m.rule.id.startswith("E")] == []


def test_variant_settings_refuse_pools_of_nvme_and_ebs_types_and_a_primary_not_first():
    with pytest.raises(ValueError, match="mix NVMe and EBS"):
        VariantSettings(instance_type="ml.inf2.xlarge", instance_pools=(("ml.inf2.xlarge", 1), ("ml.trn1.2xlarge", 2)))
    with pytest.raises(ValueError, match="must start with"):
        VariantSettings(instance_type="ml.g6.2xlarge", instance_pools=(("ml.g6e.2xlarge", 1), ("ml.g6.2xlarge", 2)))


def test_each_construct_takes_the_plans_scalable_target_in_its_own_unit():
    """The endpoint plan's EndpointScaling is the constructs' prop: instances for a TunedEndpoint's variant, copies for
    the base inference component; the other unit is refused rather than rendered."""
    with pytest.raises(ValueError, match="inference components scale copies, not instances"):
        _adapters_stack(replace(COPIES, unit="instances"))
    stack = _stack()
    with pytest.raises(ValueError, match="a model-backed variant scales instances, not copies"):
        TunedEndpoint(
            stack,
            "Endpoint",
            model=_model(stack),
            variant=VariantSettings(instance_type="ml.g6.2xlarge"),
            endpoint_name="chat-dev",
            scaling=COPIES,
        )
    TunedEndpoint(
        stack,
        "Scaled",
        model=_model(stack, "ScaledModel"),
        variant=VariantSettings(instance_type="ml.g6.2xlarge"),
        endpoint_name="chat-dev2",
        scaling=replace(COPIES, unit="instances", max_capacity=3, target=10),
    )
    Template.from_stack(stack).has_resource_properties(
        "AWS::ApplicationAutoScaling::ScalableTarget",
        {"ResourceId": "endpoint/chat-dev2/variant/AllTraffic", "MinCapacity": 1, "MaxCapacity": 3},
    )
