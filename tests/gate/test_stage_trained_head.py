"""The staging Lambda's trained-head mode with S3 in moto: where the registered optimized model says the head is,
the prefix the candidate then serves, vLLM's method, and every layout it refuses (fail-closed: the real layout is
undocumented)."""

from __future__ import annotations

import json

import boto3
import pytest
from moto import mock_aws

from optigate.rehearse.gate_handlers import load_handler

OUTPUT = "s3://gate/optimized/run1/"
BASELINE = "s3://models/llama-3.1-8b/"  # the team's model prefix: the job's ModelSource
ENVIRONMENT = {"OPTION_QUANTIZE": "fp8"}
# The SageMaker Python SDK's speculative-decoding model: the draft in channel `draft_model`, named by
# OPTION_SPECULATIVE_DRAFT_MODEL with a trailing slash (provider sagemaker/auto/jumpstart) or without (custom)
# (aws/sagemaker-python-sdk sagemaker-serve/src/sagemaker/serve/model_builder_utils.py, a24812666d25).
SDK_CHANNEL = "/opt/ml/additional-model-data-sources/draft_model"
BASE_FILES = {
    f"{BASELINE}config.json": b'{"architectures": ["LlamaForCausalLM"]}',
    f"{BASELINE}model.safetensors": b"w",
}


def _prefix(uri: str) -> dict:
    return {"S3DataSource": {"S3Uri": uri, "S3DataType": "S3Prefix", "CompressionType": "None"}}


def _model(environment: dict, weights: str = OUTPUT, channels: dict | None = None, **container) -> dict:
    primary = {"Image": "lmi", "Environment": environment, "ModelDataSource": _prefix(weights), **container}
    if channels:
        primary["AdditionalModelDataSources"] = [
            {"ChannelName": name, **_prefix(uri)} for name, uri in channels.items()
        ]
    return {"ModelName": "chat-dev-optm-run1", "PrimaryContainer": primary}


def _stage(model: dict, files: dict[str, bytes], baseline: str | None = BASELINE, **patched) -> dict:
    with mock_aws():
        s3 = boto3.client("s3", region_name="us-east-1")
        for bucket in ("gate", "elsewhere", "models"):
            s3.create_bucket(Bucket=bucket)
        for uri, body in files.items():
            bucket, _, key = uri.removeprefix("s3://").partition("/")
            s3.put_object(Bucket=bucket, Key=key, Body=body)
        handler = load_handler("stage_candidate")
        handler.__globals__.update(patched)
        event = {
            "trained_head": {
                "model": model,
                "output": OUTPUT,
                **({"baseline": baseline} if baseline is not None else {}),
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


def _sdk_model(path: str = SDK_CHANNEL + "/", head: str = f"{OUTPUT}draft_model/", weights: str = BASELINE) -> dict:
    """The registered model as the SDK builds a speculative-decoding model that no quantization job rewrote: the
    base weights at their own source, the head in channel `draft_model`."""
    return _model({"OPTION_SPECULATIVE_DRAFT_MODEL": path}, weights=weights, channels={"draft_model": head})


@pytest.mark.parametrize("path", [SDK_CHANNEL + "/", SDK_CHANNEL], ids=["sagemaker-provider", "custom-provider"])
def test_the_sdk_layout_copies_the_baseline_and_the_head_into_one_candidate_prefix_of_the_output(path):
    result = _stage(_sdk_model(path), {**BASE_FILES, f"{OUTPUT}draft_model/config.json": EAGLE3})
    assert result["layout"] == "baseline"
    assert result["model_uri"] == f"{OUTPUT}model/" and result["head"] == f"{OUTPUT}model/speculative_head/"
    assert _speculative(result) == {
        "method": "eagle3",
        "model": "/opt/ml/model/speculative_head",
        "num_speculative_tokens": 4,
    }
    # One self-contained prefix (what CloudFormation deploys after a promotion): the baseline's every file beside
    # the head; nothing is written to the team's model prefix.
    assert {
        "optimized/run1/model/config.json",
        "optimized/run1/model/model.safetensors",
        "optimized/run1/model/speculative_head/config.json",
    } <= set(result["objects"])
    assert (
        result["environment"]["OPTION_QUANTIZE"] == "fp8"
        and "OPTION_SPECULATIVE_DRAFT_MODEL" not in result["environment"]
    )


def test_the_sdk_layout_after_a_quantization_keeps_the_weights_in_the_output_and_copies_the_head_beside_them():
    weights = f"{OUTPUT}"
    model = _sdk_model(weights=weights)
    result = _stage(model, {f"{OUTPUT}config.json": b"{}", f"{OUTPUT}draft_model/config.json": EAGLE2})
    assert (result["layout"], result["model_uri"], result["method"]) == ("job_output", OUTPUT, "eagle")
    assert _speculative(result)["model"] == "/opt/ml/model/draft_model"  # served in place: it is under the weights


def test_objects_beyond_copyobjects_limit_are_copied_in_parts():
    result = _stage(_sdk_model(), {**BASE_FILES, f"{OUTPUT}draft_model/config.json": EAGLE3}, MAX_COPY_BYTES=0)
    assert "optimized/run1/model/model.safetensors" in result["objects"]


def test_a_multipart_copy_is_byte_exact_and_aborted_on_failure():
    body = bytes(range(256)) * (11 * 1024 * 4)  # 11 MiB: three parts of 5 MiB (S3's least but the last)
    with mock_aws():
        s3 = boto3.client("s3", region_name="us-east-1")
        for bucket in ("models", "gate"):
            s3.create_bucket(Bucket=bucket)
        s3.put_object(Bucket="models", Key="m/shard.safetensors", Body=body)
        handler = load_handler("stage_candidate")
        handler.__globals__.update(MAX_COPY_BYTES=0, PART_BYTES=5 * 1024**2)
        copy_in_parts = handler.__globals__["copy_in_parts"]
        copy_in_parts(s3, {"Bucket": "models", "Key": "m/shard.safetensors"}, len(body), "gate", "c/shard.safetensors")
        assert s3.get_object(Bucket="gate", Key="c/shard.safetensors")["Body"].read() == body
        with pytest.raises(Exception, match="UploadPartCopy"):
            copy_in_parts(s3, {"Bucket": "models", "Key": "m/missing"}, len(body), "gate", "c/missing")
        assert not s3.list_multipart_uploads(Bucket="gate").get("Uploads")


@pytest.mark.parametrize(
    ("model", "files", "baseline", "refusal"),
    [
        (_sdk_model(weights="s3://models/other-model/"), BASE_FILES, BASELINE, "neither inside the job's output"),
        (_sdk_model(weights="s3://models/"), BASE_FILES, BASELINE, "neither inside the job's output"),
        (_sdk_model(weights=f"{BASELINE}sub/"), BASE_FILES, BASELINE, "neither inside the job's output"),
        (_sdk_model(), BASE_FILES, None, "neither inside the job's output"),
        (
            _model({"OPTION_SPECULATIVE_DRAFT_MODEL": SDK_CHANNEL + "/"}, weights=BASELINE),
            BASE_FILES,
            BASELINE,
            "channel 'draft_model', which it does not have",
        ),
        (
            _sdk_model(head=f"{BASELINE}eagle/"),
            {**BASE_FILES, f"{BASELINE}eagle/config.json": EAGLE3},
            BASELINE,
            "outside the job's output",
        ),
        (
            _model(
                {"OPTION_SPECULATIVE_DRAFT_MODEL": SDK_CHANNEL + "/"},
                weights=BASELINE,
                channels={"draft_model": f"{OUTPUT}draft_model/", "extra": "s3://elsewhere/x/"},
            ),
            {**BASE_FILES, f"{OUTPUT}draft_model/config.json": EAGLE3},
            BASELINE,
            "besides its EAGLE head",
        ),
        (_sdk_model(), BASE_FILES, BASELINE, "nothing to stage under s3://gate/optimized/run1/draft_model/"),
        (
            _sdk_model(),
            {
                **BASE_FILES,
                f"{BASELINE}speculative_head/config.json": b"{}",
                f"{OUTPUT}draft_model/config.json": EAGLE3,
            },
            BASELINE,
            "already has a speculative_head/ folder",
        ),
        (
            _sdk_model(head=f"{OUTPUT}model/draft/"),
            {**BASE_FILES, f"{OUTPUT}model/draft/config.json": EAGLE3},
            BASELINE,
            "where the baseline's files would be copied",
        ),
        (_sdk_model(), {f"{OUTPUT}draft_model/config.json": EAGLE3}, BASELINE, "nothing to stage under s3://models/"),
    ],
    ids=[
        "weights-not-the-teams",
        "weights-the-bucket",
        "weights-inside-the-baseline",
        "no-baseline-in-the-event",
        "channel-missing",
        "head-at-the-baseline",
        "another-channel",
        "empty-head",
        "baseline-has-the-head-folder",
        "head-where-the-copy-goes",
        "empty-baseline",
    ],
)
def test_sdk_layouts_the_gate_cannot_serve_as_proven_are_refused(model, files, baseline, refusal):
    with pytest.raises((ValueError, FileNotFoundError), match=refusal):
        _stage(model, files, baseline)


@pytest.mark.parametrize(
    ("model", "files", "refusal"),
    [
        (_model({}), {}, "does not say where its EAGLE head is"),
        (
            _model(
                {"OPTION_SPECULATIVE_CONFIG": json.dumps({"model": "/opt/ml/model/h"})}, weights="s3://elsewhere/m/"
            ),
            {"s3://elsewhere/m/h/config.json": EAGLE3},
            "neither inside the job's output",
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
