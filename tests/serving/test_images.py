"""Image URIs read straight from the SageMaker SDK's JSON tables: the same URI the SDK's own
`image_uris.retrieve` gives, for every version and region of every family, without importing the SDK."""

from __future__ import annotations

import json
import subprocess
import sys
from functools import cache

import pytest

from optigate.serving import images


# A contract (the SageMaker SDK's image URIs): slow, and kept by --fast (tests/tiers.py).
@pytest.mark.slow
@pytest.mark.fast_tier
def test_every_image_uri_is_the_one_the_sdk_retrieves():
    from sagemaker.core import common_utils, image_uris

    # The SDK reloads botocore's endpoint data on every call (what made synth slow); once is enough here.
    original = common_utils._botocore_resolver
    common_utils._botocore_resolver = cache(original)
    try:
        compared = 0
        for family, framework in images.SDK_FRAMEWORK.items():
            for version in [*images.known_versions(family), "latest"]:
                for region in images.regions_for(family, version):
                    expected = image_uris.retrieve(framework, region=region, version=version)
                    assert images.image_uri(family, version, region) == expected, (family, version, region)
                    compared += 1
    finally:
        common_utils._botocore_resolver = original
    assert compared > 500  # every family, version and region (921 with SDK 3.27)


@pytest.mark.parametrize(
    ("region", "uri"),
    [
        ("us-east-1", "763104351884.dkr.ecr.us-east-1.amazonaws.com/djl-inference:0.36.0-lmi27.0.0-cu130"),
        ("cn-north-1", "727897471807.dkr.ecr.cn-north-1.amazonaws.com.cn/djl-inference:0.36.0-lmi27.0.0-cu130"),
    ],
)
def test_an_image_uri_names_the_region_registry_and_tag(region, uri):
    assert images.image_uri("lmi", "0.36.0", region) == uri


def test_an_unknown_version_or_region_is_refused_with_what_exists():
    with pytest.raises(ValueError, match=r"no lmi image version '0\.1\.0'.*known: .*0\.36\.0"):
        images.image_uri("lmi", "0.1.0", "us-east-1")
    with pytest.raises(ValueError, match=r"no lmi 0\.36\.0 image in region 'xx-nowhere-1'.*us-east-1"):
        images.image_uri("lmi", "0.36.0", "xx-nowhere-1")


def test_a_table_the_direct_reader_does_not_understand_is_refused(monkeypatch, tmp_path):
    """A future table with per-processor or per-Python-version images must not be read as a flat one."""
    table = {"versions": {"9.9.9": {"processors": ["gpu"], "repository": "r", "tag_prefix": "t", "registries": {}}}}
    (tmp_path / "djl-lmi.json").write_text(json.dumps(table))
    monkeypatch.setattr(images, "_tables_folder", lambda: tmp_path)
    images._table.cache_clear()
    try:
        with pytest.raises(RuntimeError, match=r"version 9\.9\.9 \['processors'\]"):
            images.known_versions("lmi")
    finally:
        images._table.cache_clear()


def test_resolving_an_image_does_not_import_the_sdk():
    code = (
        "import sys\n"
        "from optigate.serving import images\n"
        "images.image_uri('lmi', '0.36.0', 'us-east-1')\n"
        "print(sorted(m for m in sys.modules if m.startswith('sagemaker.')))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=900)
    assert done.stdout.strip() == "[]"


def test_the_cuda13_ami_rule_is_the_sdks_own():
    """Read from the SDK's source without importing it: the same values the imported module holds."""
    from sagemaker.serve import model_builder_servers as sdk

    assert images._sdk_cuda13_ami_rule() == (sdk._CUDA_13_INFERENCE_AMI, sdk._CUDA_13_INFERENCE_AMI_COMPATIBLE_FAMILIES)


@pytest.mark.parametrize(
    ("tag", "instance_type", "ami"),
    [
        ("0.38.0-lmi29.0.0-cu130", "ml.g6.2xlarge", "al2023-ami-sagemaker-inference-gpu-4-1"),
        ("0.38.0-lmi29.0.0-cu130", "ml.p5.48xlarge", "al2023-ami-sagemaker-inference-gpu-4-1"),
        ("0.35.0-lmi17.0.0-cu128", "ml.g6.2xlarge", None),  # CUDA 12.8 runs on the default hosts
        ("0.38.0-lmi29.0.0-cu130", "ml.inf2.8xlarge", None),  # not a family the SDK documents for the AMI
        ("0.29.0-neuronx-sdk2.19.1", "ml.inf2.8xlarge", None),
    ],
)
def test_a_cuda13_image_runs_on_the_ami_the_sdk_chooses(tag, instance_type, ami):
    from sagemaker.serve.model_builder_servers import _ModelBuilderServers

    assert images.inference_ami_version(tag, instance_type) == ami
    builder = _ModelBuilderServers()
    builder.image_uri = f"763104351884.dkr.ecr.us-east-1.amazonaws.com/djl-inference:{tag}"
    assert builder._resolve_inference_ami_version(instance_type, None) == ami  # what the SDK itself does


def _model_of(variant: dict, models: dict[str, str]) -> str:
    """The image of the model a CloudFormation variant serves; an inference-component endpoint's variant
    names no model, and its stack has one."""
    reference = variant.get("ModelName")
    if isinstance(reference, dict):
        logical = (reference.get("Fn::GetAtt") or [reference.get("Ref")])[0]
        return models[logical]
    assert len(set(models.values())) == 1, models
    return next(iter(models.values()))


def test_every_variant_of_the_example_app_names_the_ami_its_image_needs(example_app):
    """Every variant CloudFormation creates, and every endpoint config the gate creates, runs on the AMI
    its image needs on its instance type: a CUDA 13 image on a default host fails to start
    (CannotStartContainerError: docs.aws.amazon.com/sagemaker/latest/dg/inference-gpu-drivers.html)."""
    from optigate.rehearse.asl import sdk_calls
    from optigate.rehearse.template import placeholder_definition, resources_of_type, state_machines

    assert example_app.error is None
    checked, needing = 0, 0

    def check(where: str, variant: dict, image: str) -> None:
        nonlocal checked, needing
        types = [pool["InstanceType"] for pool in variant.get("InstancePools", [])] or [variant["InstanceType"]]
        expected = images.inference_ami_version_for(images.tag_of(image), types)
        assert variant.get("InferenceAmiVersion") == expected, (where, variant.get("VariantName"), image)
        checked += 1
        needing += expected is not None

    for name, template in example_app.templates.items():
        models = {
            logical: resource["Properties"]["PrimaryContainer"]["Image"]
            for logical, resource in resources_of_type(template, "AWS::SageMaker::Model").items()
        }
        for config in resources_of_type(template, "AWS::SageMaker::EndpointConfig").values():
            props = config["Properties"]
            for variant in props.get("ProductionVariants", []) + props.get("ShadowProductionVariants", []):
                check(name, variant, _model_of(variant, models))
        for logical in state_machines(template):
            calls = {call.state: call for call in sdk_calls(placeholder_definition(template, logical))}
            if "CreateCandidateModel" not in calls:
                continue
            candidate_image = calls["CreateCandidateModel"].parameters["PrimaryContainer"]["Image"]
            live_image = next(iter(models.values())) if len(models) == 1 else None
            for state, variant_key in (("CreateCandidateConfig", "ProductionVariants"), ("CreateShadowConfig", None)):
                if state in calls:
                    key = variant_key or "ShadowProductionVariants"
                    for variant in calls[state].parameters[key]:
                        check(f"{name} {state}", variant, candidate_image)
            twin = calls["CreateTwinConfig"].parameters["ProductionVariants"][0]
            check(f"{name} CreateTwinConfig", twin, live_image or _model_of({}, models))
    assert checked >= 20 and needing >= 10, (checked, needing)  # the example's CUDA 13 images need the AMI


@pytest.mark.parametrize(
    ("image", "version"),
    [
        ("763104351884.dkr.ecr.us-east-1.amazonaws.com/djl-inference:0.36.0-lmi27.0.0-cu130", (0, 36, 0)),
        ("727897471807.dkr.ecr.cn-north-1.amazonaws.com.cn/djl-inference:0.29.0-lmi11.0.0-cu124", (0, 29, 0)),
        ("localhost:5000/djl-inference:0.35.0-lmi16.0.0-cu128", (0, 35, 0)),  # a registry port is not the tag
        ("123456789012.dkr.ecr.us-east-1.amazonaws.com/custom:latest", None),
        ("123456789012.dkr.ecr.us-east-1.amazonaws.com/djl-inference", None),  # no tag at all
        ("123456789012.dkr.ecr.us-east-1.amazonaws.com/tgi:2.0.1-tgi2.0.1-gpu", None),  # versioned, but not LMI
    ],
)
def test_the_lmi_version_of_an_image_is_read_from_its_tag(image, version):
    assert images.lmi_version(image) == version


def test_lmi_versions_compare_as_numbers_not_text():
    assert images.version_tuple("0.36.0") > images.version_tuple("0.9.0")
    assert images.lmi_version("x/djl-inference:0.36.0-lmi27.0.0-cu130") >= images.FIRST_COMPRESSED_TENSORS_LMI
