"""Over every gate of the example app: the optimized candidate is one container. The optimization job runs
on the image the candidate model serves, nothing reads the job's optional RecommendedInferenceImage, the
model package records exactly the candidate model's container (a promotion deploys the package), and every
folder under /opt/ml/model the candidate's environment names is staged into an optimized candidate's prefix."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import botocore.session
import pytest

from optigate.rehearse.asl import iter_states
from optigate.rehearse.gate_layout import gate_layout
from optigate.rehearse.template import placeholder_definition, state_machines
from optigate.serving.lmi import MODEL_DIR


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, dict):
        for key, item in value.items():
            yield key
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)
    elif isinstance(value, str):
        yield value


def _configs_with_image() -> set[str]:
    union = botocore.session.get_session().get_service_model("sagemaker").shape_for("OptimizationConfig")
    return {name for name, shape in union.members.items() if "Image" in getattr(shape, "members", {})}


def _package_environment_limit() -> int:
    """ModelPackageContainerDefinition.Environment: "We support up to 16 entries in the map" (botocore's text;
    its shape allows 100, CreateModel's too, so only the package would refuse a longer one)."""
    shape = botocore.session.get_session().get_service_model("sagemaker").shape_for("ModelPackageContainerDefinition")
    found = re.search(r"up to (\d+) entries", shape.members["Environment"].documentation)
    assert found, "botocore no longer states the limit"
    return int(found.group(1))


def _operation(state: dict[str, Any]) -> str:
    return state.get("Resource", "").rsplit(":", 1)[-1] if state.get("Type") == "Task" else ""


def candidate_problems(definition: dict[str, Any]) -> list[str]:
    """What makes the gate's candidate model, its optimization job and its model package disagree."""
    states = list(iter_states(definition))
    problems = [
        f"{name}: reads RecommendedInferenceImage (optional; the candidate must run its pinned image)"
        for name, state in states
        if any("RecommendedInferenceImage" in text for text in _strings(state))
    ]
    models = [(name, s["Parameters"]["PrimaryContainer"]) for name, s in states if _operation(s) == "createModel"]
    if len(models) != 1:
        return [*problems, f"expected one candidate model, found {[name for name, _ in models]}"]
    name, container = models[0]
    image = container.get("Image")
    if image is None:
        problems.append(f"{name}: the candidate's image is chosen at run time ({container.get('Image.$')})")
    jobs = [(n, s) for n, s in states if _operation(s) == "createOptimizationJob"]
    for job_name, job in jobs:
        for config in job["Parameters"]["OptimizationConfigs"]:
            for kind, settings in config.items():
                if kind in _configs_with_image() and (settings.get("Image") is None or settings["Image"] != image):
                    problems.append(f"{job_name}: {kind} runs {settings.get('Image')}, the candidate serves {image}")
    for package_name, package in ((n, s) for n, s in states if _operation(s) == "createModelPackage"):
        if package["Parameters"]["InferenceSpecification"]["Containers"] != [container]:
            problems.append(f"{package_name}: records another container than {name} creates")
        if len(container.get("Environment", {})) > _package_environment_limit():
            problems.append(f"{package_name}: more environment entries than a model package holds")
    if jobs:
        staged = {
            copy["source"].rstrip("/").rsplit("/", 1)[-1]
            for _, s in states
            if _operation(s) == "invoke"
            for copy in s["Parameters"]["Payload"].get("copies", [])
            if "optimized/" in copy.get("target.$", "")
        }
        speculative = json.loads(container.get("Environment", {}).get("OPTION_SPECULATIVE_CONFIG", "{}"))
        model = speculative.get("model", "")
        if model.startswith(f"{MODEL_DIR}/") and model.removeprefix(f"{MODEL_DIR}/").strip("/") not in staged:
            problems.append(f"{name}: reads {model}, which the optimization job does not write and nothing stages")
    return problems


# A template check: slow, and kept by --fast (tests/tiers.py).
@pytest.mark.slow
@pytest.mark.fast_tier
def test_every_optimized_candidate_is_one_container_from_job_to_package(example_app):
    checked = {}
    for stack, template in example_app.templates.items():
        if not state_machines(template):
            continue
        definition = placeholder_definition(template, gate_layout(template).gate)
        assert candidate_problems(definition) == [], stack
        operations = {_operation(state) for _, state in iter_states(definition)}
        checked[stack] = "createOptimizationJob" in operations
    # research optimizes (an fp8 job) in every environment, with its EAGLE-3 head staged: the checks ran.
    assert {stack for stack, optimizes in checked.items() if optimizes} >= {
        "optigate-dev-research",
        "optigate-staging-research",
        "optigate-prod-research",
    }, checked


def test_every_optimization_config_names_the_candidate_models_image(example_app):
    template = example_app.templates["optigate-prod-research"]
    definition = placeholder_definition(template, gate_layout(template).gate)
    states = dict(iter_states(definition))
    (job,) = [s for s in states.values() if _operation(s) == "createOptimizationJob"]
    (model,) = [s for s in states.values() if _operation(s) == "createModel"]
    image = model["Parameters"]["PrimaryContainer"]["Image"]
    assert image.startswith("763104351884.dkr.ecr.us-west-2.amazonaws.com/djl-inference:")
    assert [c["ModelQuantizationConfig"]["Image"] for c in job["Parameters"]["OptimizationConfigs"]] == [image]


@pytest.mark.slow
@pytest.mark.fast_tier
def test_a_candidate_that_loses_its_image_or_head_is_reported():
    """The seeded mistakes of issue 13 item 3: the image the job recommends, a job on its default image, a
    package that records another container, and an EAGLE-3 head left in the baseline's prefix."""
    env = {"OPTION_SPECULATIVE_CONFIG": json.dumps({"method": "eagle3", "model": f"{MODEL_DIR}/eagle3"})}
    data = {"S3DataSource": {"S3Uri.$": "$.candidate.model_uri", "S3DataType": "S3Prefix"}}
    container = {"Image.$": "$.candidate.image", "Environment": env, "ModelDataSource": data}
    quantize = {"ModelQuantizationConfig": {"OverrideEnvironment": {"OPTION_QUANTIZE": "fp8"}}}

    def task(operation: str, parameters: dict, following: str | None = None) -> dict:
        service = "aws-sdk:sagemaker" if operation != "createModel" else "sagemaker"
        end = {"Next": following} if following else {"End": True}
        return {"Type": "Task", "Resource": f"arn:aws:states:::{service}:{operation}", "Parameters": parameters, **end}

    def definition(model: dict, package: dict, configs: list, candidate: dict) -> dict:
        return {
            "StartAt": "Job",
            "States": {
                "Job": task("createOptimizationJob", {"OptimizationConfigs": configs}, "From"),
                "From": {"Type": "Pass", "Parameters": candidate, "ResultPath": "$.candidate", "Next": "Model"},
                "Model": task("createModel", {"PrimaryContainer": model}, "Record"),
                "Record": task("createModelPackage", {"InferenceSpecification": {"Containers": [package]}}),
            },
        }

    recommended = {
        "image.$": "$.optimization.OptimizationOutput.RecommendedInferenceImage",
        "model_uri.$": "$.optimization.OutputConfig.S3OutputLocation",
    }
    problems = candidate_problems(definition(container, {**container, "Environment": {}}, [quantize], recommended))
    assert [problem.split(":")[0] for problem in problems] == ["From", "Model", "Job", "Record", "Model"], problems
    assert "RecommendedInferenceImage" in problems[0] and "run time" in problems[1] and "eagle3" in problems[4]

    pinned = {**{k: v for k, v in container.items() if k != "Image.$"}, "Image": "lmi:0.36.0"}
    job = [{"ModelQuantizationConfig": {**quantize["ModelQuantizationConfig"], "Image": "lmi:0.36.0"}}]
    fixed = definition(pinned, pinned, job, {"model_uri.$": "$.optimization.OutputConfig.S3OutputLocation"})
    assert [p.split(":")[0] for p in candidate_problems(fixed)] == ["Model"]  # only the head is still missing
    fixed["States"]["Model"]["Next"] = "Stage"
    copies = [{"source": "s3://models/llama/eagle3/", "target.$": "States.Format('s3://gate/optimized/{}/eagle3/')"}]
    fixed["States"]["Stage"] = {
        "Type": "Task",
        "Resource": "arn:aws:states:::lambda:invoke",
        "Parameters": {"FunctionName": "stage", "Payload": {"copies": copies}},
        "Next": "Record",
    }
    assert candidate_problems(fixed) == []
    crowded = {**pinned, "Environment": {**env, **{f"OPTION_{i}": "1" for i in range(16)}}}
    fixed["States"]["Model"]["Parameters"]["PrimaryContainer"] = crowded
    fixed["States"]["Record"]["Parameters"]["InferenceSpecification"]["Containers"] = [crowded]
    assert [p.split(":")[0] for p in candidate_problems(fixed)] == ["Record"]  # 17 entries
