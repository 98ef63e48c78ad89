"""Production endpoints publish the server's own metrics by the team file's switch (serving.detailed_metrics, on by
default): MetricsConfig.EnableDetailedObservability on the endpoint config, model-backed or inference components,
and in the config request the gate's shadow copies."""

from __future__ import annotations

import pytest
from aws_cdk.assertions import Template

from optigate.config.models import Serving
from optigate.constructs import AdapterSpec, LoraAdapters, TunedEndpoint, VariantSettings
from optigate.constructs.lora_adapters import ComponentCompute
from optigate.deployment.observability import gate_metrics_config, metrics_config
from tests.fixtures.small_stacks import lmi_model, small_stack


def _config(template: Template) -> dict:
    (config,) = template.find_resources("AWS::SageMaker::EndpointConfig").values()
    return config["Properties"]


@pytest.mark.parametrize("enabled", [True, False])
def test_tuned_endpoint_states_detailed_observability_and_the_shadow_copy_keeps_it(enabled):
    stack = small_stack()
    endpoint = TunedEndpoint(
        stack,
        "Endpoint",
        model=lmi_model(stack),
        variant=VariantSettings(instance_type="ml.g6.2xlarge"),
        endpoint_name="chat-dev",
        detailed_metrics=enabled,
    )
    assert _config(Template.from_stack(stack))["MetricsConfig"] == {"EnableDetailedObservability": enabled}
    assert endpoint.config_request()["MetricsConfig"] == {"EnableDetailedObservability": enabled}


def test_tuned_endpoint_publishes_by_default():
    stack = small_stack()
    TunedEndpoint(
        stack,
        "Endpoint",
        model=lmi_model(stack),
        variant=VariantSettings(instance_type="ml.g6.2xlarge"),
        endpoint_name="chat-dev",
    )
    assert _config(Template.from_stack(stack))["MetricsConfig"] == {"EnableDetailedObservability": True}


@pytest.mark.parametrize("enabled", [True, False])
def test_adapter_endpoint_states_detailed_observability(enabled):
    stack = small_stack()
    LoraAdapters(
        stack,
        "Adapters",
        model=lmi_model(stack),
        variant=VariantSettings(instance_type="ml.g6e.12xlarge"),
        endpoint_name="support-dev",
        adapters=[AdapterSpec("triage", "s3://acme-adapters/triage.tar.gz")],
        compute=ComponentCompute(accelerators=1, min_memory_mb=16384),
        detailed_metrics=enabled,
    )
    assert _config(Template.from_stack(stack))["MetricsConfig"] == {"EnableDetailedObservability": enabled}


def test_the_team_switch_is_on_unless_the_file_turns_it_off():
    assert Serving(instance_type="ml.g6.2xlarge").detailed_metrics is True
    assert Serving(instance_type="ml.g6.2xlarge", detailed_metrics=False).detailed_metrics is False


def test_metrics_config_refuses_a_frequency_sagemaker_does_not_take():
    assert gate_metrics_config() == {"EnableDetailedObservability": True, "MetricPublishFrequencyInSeconds": 10}
    assert metrics_config(False, 10) == {"EnableDetailedObservability": False}
    with pytest.raises(ValueError, match="MetricPublishFrequencyInSeconds"):
        metrics_config(True, 15)
