"""The staging Lambda's trained-head mode with S3 in moto: where the registered optimized model says the head is,
the prefix the candidate then serves, vLLM's method, and every layout it refuses (fail-closed: the real layout is
undocumented)."""

from __future__ import annotations

import json

import boto3
import pytest
from moto import mock_aws

from optigate.rehearse.gate_run import load_handler

OUTPUT = "s3://gate/optimized/run1/"
ENVIRONMENT = {"OPTION_QUANTIZE": "fp8"}


def _prefix(uri: str) -> dict:
    return {"S3DataSource": {"S3Uri": uri, "S3DataType": "S3Prefix", "CompressionType": "None"}}


def _model(environment: dict, weights: str = OUTPUT, channels: dict | None = None, **container) -> dict:
    primary = {"Image": "lmi", "Environment": environment, "ModelDataSource": _prefix(weights), **container}
    if channels:
        primary["AdditionalModelDataSources"] = [
            {"ChannelName": name, **_prefix(uri)} for name, uri in channels.items()
        ]
    return {"ModelName": "chat-dev-optm-run1", "PrimaryContainer": primary}


def _stage(model: dict, files: dict[str, bytes]) -> dict:
    with mock_aws():
        s3 = boto3.client("s3", region_name="us-east-1")
        for bucket in ("gate", "elsewhere"):
            s3.create_bucket(Bucket=bucket)
        for uri, body in files.items():
            bucket, _, key = uri.removeprefix("s3://").partition("/")
            s3.put_object(Bucket=bucket, Key=key, Body=body)
        handler = load_handler("stage_candidate")
        event = {
            "trained_head": {
                "model": model,
                "output": OUTPUT,
                "environment": ENVIRONMENT,
                "num_speculative_tokens": 4,
                "head_dir": "speculative_head",
            }
        }
        result = handler(event, None)
        result["objects"] = sorted(o["Key"] for o in s3.list_objects_v2(Bucket="gate").get("Contents", []))
        return result


def _speculative(result: dict) -> dict:
    return json.loads(result["environment"]["OPTION_SPECULATIVE_CONFIG"])


EAGLE2 = b'{"architectures": ["EagleLlamaForCausalLM"]}'
EAGLE3 = b'{"architectures": ["LlamaForCausalLMEagle3"]}'


def test_a_head_under_the_model_prefix_is_served_in_place_with_the_method_its_config_names():
    model = _model({"OPTION_SPECULATIVE_CONFIG": json.dumps({"model": "/opt/ml/model/eagle"})})
    result = _stage(model, {f"{OUTPUT}eagle/config.json": EAGLE2})
    assert result["model_uri"] == OUTPUT and result["method"] == "eagle"
    assert _speculative(result) == {"method": "eagle", "model": "/opt/ml/model/eagle", "num_speculative_tokens": 4}
    assert result["environment"]["OPTION_QUANTIZE"] == "fp8"
    assert result["objects"] == ["optimized/run1/eagle/config.json"]  # nothing copied


def test_a_head_in_another_channel_of_the_output_is_copied_under_the_model_prefix():
    weights, head = f"{OUTPUT}model/", f"{OUTPUT}head/"
    model = _model(
        {"OPTION_SPECULATIVE_DRAFT_MODEL": "/opt/ml/additional-model-data-sources/draft"},
        weights=weights,
        channels={"draft": head},
    )
    result = _stage(model, {f"{weights}config.json": b"{}", f"{head}config.json": EAGLE3})
    assert result["model_uri"] == weights and result["head"] == f"{weights}speculative_head/"
    assert _speculative(result)["model"] == "/opt/ml/model/speculative_head"
    assert _speculative(result)["method"] == "eagle3"
    assert "optimized/run1/model/speculative_head/config.json" in result["objects"]


def test_the_method_the_registered_model_names_wins_over_the_config():
    model = _model({"OPTION_SPECULATIVE_CONFIG": json.dumps({"method": "eagle", "model": "/opt/ml/model/h"})})
    assert _stage(model, {f"{OUTPUT}h/config.json": EAGLE3})["method"] == "eagle"


@pytest.mark.parametrize(
    ("model", "files", "refusal"),
    [
        (_model({}), {}, "does not say where its EAGLE head is"),
        (
            _model(
                {"OPTION_SPECULATIVE_CONFIG": json.dumps({"model": "/opt/ml/model/h"})}, weights="s3://elsewhere/m/"
            ),
            {"s3://elsewhere/m/h/config.json": EAGLE3},
            "outside the job's output",
        ),
        (
            _model(
                {"OPTION_SPECULATIVE_DRAFT_MODEL": "/opt/ml/additional-model-data-sources/d"},
                channels={"d": "s3://elsewhere/head/"},
            ),
            {"s3://elsewhere/head/config.json": EAGLE3},
            "outside the job's output",
        ),
        (
            _model({"OPTION_SPECULATIVE_DRAFT_MODEL": "/opt/ml/additional-model-data-sources/d"}),
            {},
            "channel 'd', which it does not have",
        ),
        (
            {"ModelName": "m", "PrimaryContainer": {"ModelDataUrl": f"{OUTPUT}model.tar.gz", "Environment": {}}},
            {},
            "ModelDataUrl",
        ),
        (
            _model({"OPTION_SPECULATIVE_CONFIG": json.dumps({"model": "/opt/ml/model/h"})}),
            {f"{OUTPUT}h/config.json": b'{"architectures": ["LlamaForCausalLM"]}'},
            "cannot tell whether the head",
        ),
        (
            _model({"OPTION_SPECULATIVE_CONFIG": json.dumps({"model": "/opt/ml/model/h"})}),
            {},
            "is not at",
        ),
        (
            _model({"OPTION_SPECULATIVE_CONFIG": json.dumps({"model": "/opt/ml/model"})}),
            {f"{OUTPUT}config.json": EAGLE3},
            "whole prefix",
        ),
    ],
    ids=[
        "no-head-path",
        "weights-elsewhere",
        "head-elsewhere",
        "unknown-channel",
        "tarball",
        "unknown-architecture",
        "empty-head",
        "head-is-the-model",
    ],
)
def test_layouts_the_gate_cannot_serve_as_proven_are_refused(model, files, refusal):
    with pytest.raises((ValueError, FileNotFoundError), match=refusal):
        _stage(model, files)
