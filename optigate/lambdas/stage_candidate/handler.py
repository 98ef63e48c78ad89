"""Stage a candidate's extra files.

Two kinds of event:

1. Copies: what the optimized candidate reads but the optimization job does not write (an EAGLE-3 head, a draft
   model), from the baseline's prefix into the candidate's.

   Event: {"copies": [{"source": "s3://<model bucket>/<model prefix>eagle3/",
                       "target": "s3://<gate bucket>/optimized/<run>/eagle3/"}, ...]}
   Returns {"objects": <count>, "bytes": <total>}.

2. A trained head: after an optimization job trained an EAGLE head (ModelSpeculativeDecodingConfig), find it from
   the model the job registered (OutputConfig.SageMakerModel, as DescribeModel returns it), keep or copy it under
   the candidate's prefix, and render OPTION_SPECULATIVE_CONFIG for it.

   Event: {"trained_head": {"model": <DescribeModel output>, "output": "s3://<gate bucket>/optimized/<run>/",
                            "environment": {<the candidate's OPTION_*>}, "num_speculative_tokens": 3,
                            "head_dir": "speculative_head"}}
   Returns {"model_uri": <the candidate's prefix>, "environment": {... OPTION_SPECULATIVE_CONFIG},
            "head": <the head's S3 prefix>, "method": "eagle" | "eagle3"}.

   Where the job puts the head is not documented (API reference of OptimizationJobOutputConfig; the SageMaker
   Python SDK never sends ModelSpeculativeDecodingConfig). The registered model is read the way SageMaker serves
   a model: its container's OPTION_SPECULATIVE_CONFIG `model` (or OPTION_SPECULATIVE_DRAFT_MODEL) is a container
   path, under /opt/ml/model (the model's own ModelDataSource) or under
   /opt/ml/additional-model-data-sources/<channel> (that AdditionalModelDataSources channel). Fail-closed: the
   weights must be an uncompressed S3 prefix and the head must lie in the job's output (the gate may read nothing
   else); a head outside the weights' prefix is copied under it (CloudFormation's AWS::SageMaker::Model has no
   AdditionalModelDataSources, so the promoted model serves one prefix). vLLM's method is the one the registered
   model names, else read from the head's config.json `architectures` (the service trains EAGLE-2 or EAGLE-3
   heads depending on the architecture); anything else stops the run before a candidate is created.

Copies are CopyObject: server-side, nothing passes through the function (one request each, so objects up to
CopyObject's 5 GB; the target bucket's default encryption applies). A source without any object fails: the
candidate would not start without it.
"""

from __future__ import annotations

import json
from typing import Any

import boto3

MAX_COPY_BYTES = 5 * 1024**3  # CopyObject's limit; a larger object needs a multipart UploadPartCopy
MODEL_DIR = "/opt/ml/model"  # where SageMaker mounts ModelDataSource
ADDITIONAL_DIR = "/opt/ml/additional-model-data-sources"  # where it mounts AdditionalModelDataSources channels
HEAD_OPTIONS = ("OPTION_SPECULATIVE_CONFIG", "OPTION_SPECULATIVE_DRAFT_MODEL")
METHODS = ("eagle3", "eagle")  # vLLM's speculative methods for EAGLE-3 and EAGLE(-2) heads, most specific first


def split_s3_uri(uri: str) -> tuple[str, str]:
    bucket, _, key = uri.removeprefix("s3://").partition("/")
    return bucket, key


def _folder(uri: str) -> str:
    return uri.rstrip("/") + "/"


def _under(uri: str, prefix: str) -> bool:
    return _folder(uri).startswith(_folder(prefix))


def copy_prefix(s3, source: str, target: str) -> tuple[int, int]:
    """Copy every object under `source` to the same relative key under `target`: (objects, bytes)."""
    source_bucket, source_prefix = split_s3_uri(source)
    target_bucket, target_prefix = split_s3_uri(target)
    found = total = 0
    request = {"Bucket": source_bucket, "Prefix": source_prefix}
    while True:
        page = s3.list_objects_v2(**request)
        for item in page.get("Contents", []):
            key, size = item["Key"], item["Size"]
            if key.endswith("/") and size == 0:
                continue  # a "folder" marker
            if size > MAX_COPY_BYTES:
                raise ValueError(f"s3://{source_bucket}/{key} has {size} bytes, more than one CopyObject takes")
            s3.copy_object(
                Bucket=target_bucket,
                Key=target_prefix + key.removeprefix(source_prefix),
                CopySource={"Bucket": source_bucket, "Key": key},
            )
            found += 1
            total += size
        if not page.get("IsTruncated"):
            break
        request["ContinuationToken"] = page["NextContinuationToken"]
    if not found:
        raise FileNotFoundError(f"nothing to stage under {source}: the candidate reads it")
    return found, total


def _weights(name: str, container: dict[str, Any]) -> str:
    source = container.get("ModelDataSource", {}).get("S3DataSource")
    if source is None:
        what = f"ModelDataUrl {container['ModelDataUrl']}" if "ModelDataUrl" in container else "no model data"
        raise ValueError(f"the optimized model {name} has {what}; the gate serves an uncompressed S3 prefix only")
    if (source.get("S3DataType"), source.get("CompressionType", "None")) != ("S3Prefix", "None"):
        raise ValueError(
            f"the optimized model {name} reads {source.get('S3Uri')} as {source.get('S3DataType')}/"
            f"{source.get('CompressionType')}; the gate serves an uncompressed S3 prefix only"
        )
    return _folder(source["S3Uri"])


def _head_location(name: str, container: dict[str, Any], weights: str) -> tuple[str, str | None]:
    """The head's S3 prefix and the vLLM method the registered model names (or None)."""
    environment = container.get("Environment", {})
    path, method = None, None
    if "OPTION_SPECULATIVE_CONFIG" in environment:
        config = json.loads(environment["OPTION_SPECULATIVE_CONFIG"])
        path, method = config.get("model"), config.get("method")
    elif "OPTION_SPECULATIVE_DRAFT_MODEL" in environment:
        path = environment["OPTION_SPECULATIVE_DRAFT_MODEL"]
    if not isinstance(path, str):
        raise ValueError(
            f"the optimized model {name} does not say where its EAGLE head is (no model path in "
            f"{' or '.join(HEAD_OPTIONS)} of its environment: {sorted(environment)})"
        )
    path = path.rstrip("/")
    if path == MODEL_DIR or path.startswith(MODEL_DIR + "/"):
        return _folder(weights + path.removeprefix(MODEL_DIR).lstrip("/")), method
    if path.startswith(ADDITIONAL_DIR + "/"):
        channel, _, rest = path.removeprefix(ADDITIONAL_DIR + "/").partition("/")
        for source in container.get("AdditionalModelDataSources", []):
            if source.get("ChannelName") == channel:
                return _folder(_folder(source["S3DataSource"]["S3Uri"]) + rest), method
        raise ValueError(f"the optimized model {name} serves its head from channel {channel!r}, which it does not have")
    raise ValueError(
        f"the optimized model {name} serves its head from {path}, outside {MODEL_DIR} and {ADDITIONAL_DIR}"
    )


def _method(s3, head: str, named: str | None) -> str:
    """vLLM's method for the head: as the registered model names it, else from its config.json."""
    if named in METHODS:
        return named
    bucket, key = split_s3_uri(head)
    try:
        config = json.loads(s3.get_object(Bucket=bucket, Key=key + "config.json")["Body"].read())
    except s3.exceptions.NoSuchKey:
        config = {}
    architectures = [str(a).lower() for a in config.get("architectures", [])]
    for method in METHODS:
        if any(method in architecture for architecture in architectures):
            return method
    raise ValueError(
        f"cannot tell whether the head at {head} is EAGLE or EAGLE-3 (method {named!r}, architectures "
        f"{config.get('architectures')}); vLLM needs its method"
    )


def stage_trained_head(s3, event: dict[str, Any]) -> dict[str, Any]:
    model = event["model"]
    name = model.get("ModelName", "the optimized model")
    output = _folder(event["output"])
    containers = [model["PrimaryContainer"]] if "PrimaryContainer" in model else model.get("Containers", [])
    if len(containers) != 1:
        raise ValueError(f"the optimized model {name} has {len(containers)} containers; the gate serves one")
    (container,) = containers
    weights = _weights(name, container)
    if not _under(weights, output):
        raise ValueError(
            f"the optimized model {name} reads its weights from {weights}, outside the job's output {output}; the "
            "gate stages only what the job wrote"
        )
    head, named = _head_location(name, container, weights)
    if not _under(head, output):
        raise ValueError(f"the EAGLE head of {name} is at {head}, outside the job's output {output}")
    if head == weights:
        raise ValueError(f"the optimized model {name} names its whole prefix {weights} as the EAGLE head")
    if _under(head, weights):
        relative = head.removeprefix(weights).rstrip("/")
    else:
        relative = event.get("head_dir", "speculative_head")
        copy_prefix(s3, head, f"{weights}{relative}/")
    staged = f"{weights}{relative}/"
    bucket, key = split_s3_uri(staged)
    if not s3.list_objects_v2(Bucket=bucket, Prefix=key, MaxKeys=1).get("KeyCount"):
        raise FileNotFoundError(f"the EAGLE head of {name} is not at {staged}: nothing to serve")
    method = _method(s3, staged, named)
    speculative = {
        "method": method,
        "model": f"{MODEL_DIR}/{relative}",
        "num_speculative_tokens": int(event["num_speculative_tokens"]),
    }
    environment = {
        **event["environment"],
        "OPTION_SPECULATIVE_CONFIG": json.dumps(speculative, sort_keys=True, separators=(",", ":")),
    }
    return {"model_uri": weights, "environment": dict(sorted(environment.items())), "head": staged, "method": method}


def handler(event: dict, _context=None) -> dict:
    s3 = boto3.client("s3")
    if "trained_head" in event:
        return stage_trained_head(s3, event["trained_head"])
    count = total = 0
    for copy in event["copies"]:
        found, size = copy_prefix(s3, copy["source"], copy["target"])
        count += found
        total += size
    return {"objects": count, "bytes": total}
