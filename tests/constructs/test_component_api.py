"""What the inference-component API offers, rendered by LoraAdapters: the base component's DataCacheConfig and
SchedulingConfig, data capture on an endpoint serving adapters, and no adapters on instance pools. Values are checked
against botocore's SageMaker model (the API) and cfn-lint's AWS::SageMaker::InferenceComponent schema."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from aws_cdk import App, Stack
from aws_cdk.assertions import Template
from botocore.model import Shape, StructureShape
from botocore.session import Session
from botocore.validate import ParamValidator

from optigate.constructs import AdapterSpec, LmiModel, LoraAdapters, VariantSettings
from optigate.constructs.data_capture import CaptureSettings
from optigate.constructs.lora_adapters import ComponentCompute
from optigate.deployment.component_settings import BaseComponentSettings, ComponentPlacement
from optigate.deployment.endpoint import EndpointScaling

IMAGE = "763104351884.dkr.ecr.us-east-1.amazonaws.com/djl-inference:0.36.0-lmi27.0.0-cu130"
SPREAD = ComponentPlacement("SPREAD", "PERMISSIVE", 1)

#: A base component's scalable target as an endpoint plan gives it (optigate.deployment.endpoint.EndpointScaling).
COPIES = EndpointScaling("copies", 1, 1, target=4, scale_in_cooldown_seconds=300, scale_out_cooldown_seconds=60)


def _adapters(
    settings: BaseComponentSettings | None = None,
    capture: CaptureSettings | None = None,
    variant: VariantSettings | None = None,
) -> Template:
    stack = Stack(App(), "Test", env={"account": "111111111111", "region": "us-east-1"})
    model = LmiModel(
        stack, "Model", image_uri=IMAGE, environment={}, model_data_uri="s3://acme/qwen/", name_prefix="support-dev"
    )
    LoraAdapters(
        stack,
        "Adapters",
        model=model,
        variant=variant or VariantSettings(instance_type="ml.g6e.12xlarge"),
        endpoint_name="support-dev",
        adapters=[AdapterSpec(name, f"s3://acme-adapters/{name}.tar.gz") for name in ("triage", "reply")],
        compute=ComponentCompute(accelerators=1, min_memory_mb=16384),
        scaling=replace(COPIES, min_capacity=0, max_capacity=4, scale_to_zero=True),
        base_settings=settings,
        data_capture=capture,
    )
    return Template.from_stack(stack)


def _components(template: Template) -> tuple[dict, list[dict]]:
    components = [r["Properties"] for r in template.find_resources("AWS::SageMaker::InferenceComponent").values()]
    (base,) = [c for c in components if "BaseInferenceComponentName" not in c["Specification"]]
    return base, [c for c in components if c is not base]


def _api_problems(specification: dict) -> list[str]:
    """botocore's validation of a CreateInferenceComponent request with `specification` (types, required members,
    unknown keys) plus the enum and integer ranges of its model, which ParamValidator leaves out. Empty: valid."""
    model = Session().get_service_model("sagemaker")
    shape = model.operation_model("CreateInferenceComponent").input_shape
    request = {"InferenceComponentName": "support-dev-base", "EndpointName": "support-dev"}
    report = ParamValidator().validate({**request, "Specification": specification}, shape).generate_report()
    problems = [report] if report else []

    def walk(value: object, member: Shape, where: str) -> None:
        if isinstance(member, StructureShape) and isinstance(value, dict):
            for key, item in value.items():
                if key in member.members:
                    walk(item, member.members[key], f"{where}.{key}")
        elif getattr(member, "enum", None) and value not in member.enum:  # type: ignore[attr-defined]
            problems.append(f"{where}: {value!r} not in {member.enum}")  # type: ignore[attr-defined]
        elif member.type_name == "integer" and isinstance(value, int):
            low, high = member.metadata.get("min"), member.metadata.get("max")
            if (low is not None and value < low) or (high is not None and value > high):
                problems.append(f"{where}: {value} outside {low}-{high}")

    walk(specification, shape.members["Specification"], "Specification")
    return problems


def _cfn_errors(template: Template) -> list[str]:
    from cfnlint.api import ManualArgs, lint

    matches = lint(json.dumps(template.to_json()), config=ManualArgs(regions=["us-east-1"]))
    return [f"{m.rule.id} {m.message}" for m in matches if m.rule.id.startswith("E")]


# A template check: slow, and kept by --fast (tests/tiers.py).
@pytest.mark.slow
@pytest.mark.fast_tier
def test_the_base_component_caches_and_spreads_its_copies_and_adapters_carry_neither():
    template = _adapters(BaseComponentSettings(enable_caching=True, placement=SPREAD))
    base, adapters = _components(template)
    specification = base["Specification"]
    assert specification["DataCacheConfig"] == {"EnableCaching": True}
    assert specification["SchedulingConfig"] == {
        "PlacementStrategy": "SPREAD",
        "AvailabilityZoneBalance": {"EnforcementMode": "PERMISSIVE", "MaxImbalance": 1},
    }
    sent = {key: specification[key] for key in ("DataCacheConfig", "SchedulingConfig")}
    assert _api_problems(sent) == []
    for adapter in adapters:  # they run in the base's copies: nothing of their own to cache or place
        assert "DataCacheConfig" not in adapter["Specification"]
        assert "SchedulingConfig" not in adapter["Specification"]
    assert _cfn_errors(template) == []


def test_the_api_check_catches_a_wrong_placement():
    """The botocore check above can fail: a strategy outside the enum, a zone imbalance above 100, a cache config
    without EnableCaching."""
    wrong = {
        "SchedulingConfig": {
            "PlacementStrategy": "PACKED",
            "AvailabilityZoneBalance": {"EnforcementMode": "PERMISSIVE", "MaxImbalance": 101},
        },
        "DataCacheConfig": {},
    }
    problems = "\n".join(_api_problems(wrong))
    assert "'PACKED' not in" in problems and "101 outside 0-100" in problems and "EnableCaching" in problems


def test_without_settings_the_base_component_has_neither_property():
    base, _ = _components(_adapters())
    assert "DataCacheConfig" not in base["Specification"]
    assert "SchedulingConfig" not in base["Specification"]


def test_an_adapter_endpoint_captures_its_traffic_as_a_model_backed_one():
    capture = CaptureSettings(20, "s3_managed", ("application/json",))
    template = _adapters(capture=capture)
    (config,) = template.find_resources("AWS::SageMaker::EndpointConfig").values()
    captured = config["Properties"]["DataCaptureConfig"]
    assert captured["InitialSamplingPercentage"] == 20
    assert captured["EnableCapture"] is True
    assert [option["CaptureMode"] for option in captured["CaptureOptions"]] == ["Input", "Output"]
    assert captured["CaptureContentTypeHeader"] == {"JsonContentTypes": ["application/json"]}
    assert "KmsKeyId" not in captured  # s3_managed: what an optimization job can read
    assert "ExecutionRoleArn" in config["Properties"]  # still an inference-component endpoint
    writes = [
        statement
        for policy in template.find_resources("AWS::IAM::Policy").values()
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
        if statement["Action"] == "s3:PutObject"
    ]
    assert writes, "the model role (which SageMaker writes the capture as) may not write the capture"
    assert _cfn_errors(template) == []


def test_adapter_components_are_refused_on_instance_pools():
    pools = VariantSettings(
        instance_type="ml.g6e.12xlarge", instance_pools=(("ml.g6e.12xlarge", 1), ("ml.g6e.2xlarge", 2))
    )
    with pytest.raises(ValueError, match=r"one instance type.*OG530"):
        _adapters(variant=pools)
