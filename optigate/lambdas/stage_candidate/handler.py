# Over 400 lines: the staging function ships as this one file (and its two standard-library helpers), four modes.
"""Stage a candidate's extra files.

Four kinds of event, one typed event (optigate.lambdas.events.StageEvent, staged beside this handler as events.py),
which refuses an unknown or missing key or a value of the wrong type, naming it, and any but exactly one mode:

1. Copies: what the optimized candidate reads but the optimization job does not write (an EAGLE-3 head, a draft
   model), from the baseline's prefix into the candidate's.

   Event: {"copies": [{"source": "s3://<model bucket>/<model prefix>eagle3/",
                       "target": "s3://<gate bucket>/optimized/<run>/eagle3/"}, ...]}
   Returns {"objects": <count>, "bytes": <total>}.

2. A trained head: after an optimization job trained an EAGLE head (ModelSpeculativeDecodingConfig), find it from
   the model the job registered (OutputConfig.SageMakerModel, as DescribeModel returns it), keep or copy it under
   the candidate's prefix, and render OPTION_SPECULATIVE_CONFIG for it.

   Event: {"trained_head": {"model": <DescribeModel output>, "output": "s3://<gate bucket>/optimized/<run>/",
                            "baseline": "s3://<model bucket>/<model prefix>", "environment": {<the candidate's
                            OPTION_*>}, "num_speculative_tokens": 3, "head_dir": "speculative_head"}}
   Returns {"model_uri": <the candidate's prefix>, "environment": {... OPTION_SPECULATIVE_CONFIG},
            "head": <the head's S3 prefix>, "method": "eagle" | "eagle3", "layout": "job_output" | "baseline"}.

   Where the job puts the head is not documented (API reference of OptimizationJobOutputConfig). The registered
   model is read the way SageMaker serves a model: its container's OPTION_SPECULATIVE_CONFIG `model` (or
   OPTION_SPECULATIVE_DRAFT_MODEL) is a container path, under /opt/ml/model (the model's own ModelDataSource) or
   under /opt/ml/additional-model-data-sources/<channel> (that AdditionalModelDataSources channel). Two layouts of
   the weights are accepted, fail-closed:
   - "job_output": the weights are an uncompressed S3 prefix inside the job's output (a job that also quantized);
   - "baseline": the weights are exactly the baseline's own prefix, the job's ModelSource (what the SageMaker
     Python SDK builds for speculative decoding without a quantization, compilation or sharding job: the base
     model keeps its source and the draft is the AdditionalModelDataSources channel `draft_model`, named by
     OPTION_SPECULATIVE_DRAFT_MODEL=/opt/ml/additional-model-data-sources/draft_model/; aws/sagemaker-python-sdk
     sagemaker-serve/src/sagemaker/serve/model_builder_utils.py, _set_additional_model_source,
     _generate_channel_name, _optimize_for_hf, at a24812666d258d9d19c9a82d0c9385ca0bd3ba01). The baseline's
     files are then copied into `<output>model/`, beside which the head is copied: the gate never writes to the
     team's model prefix, and reads no other S3 than the job's output and the baseline.
   Either way the head must lie in the job's output, and the model may have no other channel. A head outside the
   weights' prefix is copied under it (CloudFormation's AWS::SageMaker::Model has no AdditionalModelDataSources,
   so the promoted model serves one prefix). vLLM's method is the one the registered model names, else read from
   the head's config.json `architectures` (the service trains EAGLE-2 or EAGLE-3 heads depending on the
   architecture); anything else stops the run before a candidate is created.

3. An adapter check (a new adapter version as the candidate, `gate.candidate.adapters`): before any endpoint exists,
   download each archive (at most adapter_archive.MAX_ARCHIVE_BYTES, streamed, never written to disk) and check it
   the way vLLM will load it (optigate.deployment.adapter_archive: rank within max_lora_rank, the team's base
   model by its Hugging Face id where both name one and by its architecture wherever the archive shows it, target
   modules vLLM serves, no DoRA / modules_to_save / bias, a safe archive).

   Event: {"adapter_check": {"adapters": {"<adapter>": "s3://<bucket>/<key>.tar.gz", ...}, "max_lora_rank": 32,
                             "base_models": ["Qwen/Qwen2.5-7B-Instruct"], "modules": ["q_proj", ...],
                             "architecture": {"hidden_size": 3584, "num_hidden_layers": 28, ...}}}
                                                                    (ResolvedTeam.adapter_limits.event() + adapters)
   Returns {"adapters": {"<adapter>": {"uri", "bytes", "rank", "lora_alpha", "base_model", "base_model_check"
   ("same" | "unknown": not compared, e.g. a local path), "base_model_why", "architecture_checked" (the files whose
   figures matched the team's architecture)}}}, which the gate's report shows.
   Fails with error AdapterRefused ("<reason>: <adapter> (<uri>): <why>", the reason one of adapter_archive's
   named reasons, "archive-missing" for an object or a bucket that is not there) for an archive the candidate cannot
   serve; other errors (access denied, a malformed event) are the run's own failures. IAM: s3:GetObject on the archives
   (kms:Decrypt of the adapter's kms_key_arn when it has one). The function's code needs optigate/deployment/
   adapter_archive.py staged beside the handler as ADAPTER_ARCHIVE_FILE (it imports the standard library only).

4. An adapter mix (a team with adapters and no gate.benchmark.adapter_mix): each live component's share of the
   Invocations CloudWatch recorded over the last 7 days, before anything is created (read_adapter_mix). Fails with
   error NoInvocationHistory when there is none. IAM: cloudwatch:GetMetricData (no resource scope). The code needs
   optigate/deployment/adapter_mix.py beside the handler (standard library only).

Copies are server-side, nothing passes through the function: CopyObject up to its 5 GB, a multipart copy
(UploadPartCopy) above it; the target bucket's default encryption applies, and a source encrypted with
model.source.kms_key_arn is read with the kms:Decrypt the role is granted. A source without any object fails: the
candidate would not start without it.
"""

from __future__ import annotations

import io
import json
from typing import Any

import boto3
from botocore.exceptions import ClientError

MAX_COPY_BYTES = 5 * 1024**3  # CopyObject's limit; a larger object is copied in parts (UploadPartCopy)
PART_BYTES = 1024**3  # per UploadPartCopy: between S3's 5 MiB and 5 GiB, and 10,000 parts hold 10 TB
MODEL_DIR = "/opt/ml/model"  # where SageMaker mounts ModelDataSource
ADDITIONAL_DIR = "/opt/ml/additional-model-data-sources"  # where it mounts AdditionalModelDataSources channels
HEAD_OPTIONS = ("OPTION_SPECULATIVE_CONFIG", "OPTION_SPECULATIVE_DRAFT_MODEL")
METHODS = ("eagle3", "eagle")  # vLLM's speculative methods for EAGLE-3 and EAGLE(-2) heads, most specific first
BASELINE_COPY_DIR = "model"  # where, under the job's output, the baseline's files are copied when the job kept them
ADAPTER_ARCHIVE_FILE = "adapter_archive.py"  # where the function's code carries optigate.deployment.adapter_archive
MISSING_ARCHIVE = "archive-missing"  # an adapter check's reason for an archive (or its bucket) that is not there
COPY_WORKERS = 8  # parallel server-side copies: a 70B checkpoint is ~30 objects of up to 5 GB


def split_s3_uri(uri: str) -> tuple[str, str]:
    bucket, _, key = uri.removeprefix("s3://").partition("/")
    return bucket, key


def _folder(uri: str) -> str:
    return uri.rstrip("/") + "/"


def _under(uri: str, prefix: str) -> bool:
    return _folder(uri).startswith(_folder(prefix))


def _objects(s3, uri: str) -> list[tuple[str, int]]:
    """(key, size) of every object under `uri`, without "folder" markers."""
    bucket, prefix = split_s3_uri(uri)
    found: list[tuple[str, int]] = []
    request = {"Bucket": bucket, "Prefix": prefix}
    while True:
        page = s3.list_objects_v2(**request)
        found += [
            (o["Key"], o["Size"]) for o in page.get("Contents", []) if not (o["Key"].endswith("/") and not o["Size"])
        ]
        if not page.get("IsTruncated"):
            return found
        request["ContinuationToken"] = page["NextContinuationToken"]


def copy_in_parts(s3, origin: dict[str, str], size: int, bucket: str, key: str) -> None:
    """A server-side multipart copy (UploadPartCopy) of an object larger than CopyObject takes; aborted on failure
    so that no parts are left behind."""
    upload = s3.create_multipart_upload(Bucket=bucket, Key=key)["UploadId"]
    try:
        parts = []
        for number, start in enumerate(range(0, size, PART_BYTES), start=1):
            end = min(start + PART_BYTES, size) - 1
            part = s3.upload_part_copy(
                Bucket=bucket,
                Key=key,
                UploadId=upload,
                PartNumber=number,
                CopySource=origin,
                CopySourceRange=f"bytes={start}-{end}",
            )
            parts.append({"PartNumber": number, "ETag": part["CopyPartResult"]["ETag"]})
        s3.complete_multipart_upload(Bucket=bucket, Key=key, UploadId=upload, MultipartUpload={"Parts": parts})
    except Exception:
        s3.abort_multipart_upload(Bucket=bucket, Key=key, UploadId=upload)
        raise


def copy_prefix(s3, source: str, target: str) -> tuple[int, int]:
    """Copy every object under `source` to the same relative key under `target`: (objects, bytes)."""
    from concurrent.futures import ThreadPoolExecutor

    source_bucket, source_prefix = split_s3_uri(source)
    target_bucket, target_prefix = split_s3_uri(target)
    objects = _objects(s3, source)
    if not objects:
        raise FileNotFoundError(f"nothing to stage under {source}: the candidate reads it")

    def copy(item: tuple[str, int]) -> None:
        key, size = item
        target_key = target_prefix + key.removeprefix(source_prefix)
        origin = {"Bucket": source_bucket, "Key": key}
        if size > MAX_COPY_BYTES:
            copy_in_parts(s3, origin, size, target_bucket, target_key)
        else:
            s3.copy_object(Bucket=target_bucket, Key=target_key, CopySource=origin)

    with ThreadPoolExecutor(max_workers=COPY_WORKERS) as pool:
        list(pool.map(copy, objects))
    return len(objects), sum(size for _, size in objects)


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


def _head_location(name: str, container: dict[str, Any], weights: str) -> tuple[str, str | None, str | None]:
    """The head's S3 prefix, the vLLM method the registered model names (or None) and the channel it is served
    from (None: the model's own prefix)."""
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
        return _folder(weights + path.removeprefix(MODEL_DIR).lstrip("/")), method, None
    if path.startswith(ADDITIONAL_DIR + "/"):
        channel, _, rest = path.removeprefix(ADDITIONAL_DIR + "/").partition("/")
        for source in container.get("AdditionalModelDataSources", []):
            if source.get("ChannelName") == channel:
                data = source.get("S3DataSource", {})
                if (data.get("S3DataType"), data.get("CompressionType", "None")) != ("S3Prefix", "None"):
                    raise ValueError(
                        f"the optimized model {name} reads channel {channel!r} as {data.get('S3DataType')}/"
                        f"{data.get('CompressionType')}; the gate stages an uncompressed S3 prefix only"
                    )
                return _folder(_folder(data["S3Uri"]) + rest), method, channel
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


def _weights_layout(name: str, weights: str, output: str, baseline: str | None) -> str:
    """Where the registered model's weights are: "job_output" or "baseline" (exactly the job's ModelSource)."""
    if _under(weights, output):
        return "job_output"
    if baseline is not None and weights == _folder(baseline):
        return "baseline"
    raise ValueError(
        f"the optimized model {name} reads its weights from {weights}, neither inside the job's output {output} nor "
        f"the baseline's own prefix {baseline}; the gate stages only what the job wrote and the baseline"
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
    layout = _weights_layout(name, weights, output, event.get("baseline"))
    head, named, channel = _head_location(name, container, weights)
    others = sorted({s.get("ChannelName") for s in container.get("AdditionalModelDataSources", [])} - {channel})
    if others:
        raise ValueError(
            f"the optimized model {name} reads channels {others} besides its EAGLE head; the gate serves one prefix"
        )
    if not _under(head, output):
        raise ValueError(f"the EAGLE head of {name} is at {head}, outside the job's output {output}")
    if head == weights:
        raise ValueError(f"the optimized model {name} names its whole prefix {weights} as the EAGLE head")
    relative = event.get("head_dir", "speculative_head")
    if layout == "baseline":
        # The job kept the base weights where they were: copy them beside the head into the job's output.
        bucket, key = split_s3_uri(weights)
        if s3.list_objects_v2(Bucket=bucket, Prefix=f"{key}{relative}/", MaxKeys=1).get("KeyCount"):
            raise ValueError(f"the baseline {weights} already has a {relative}/ folder; the head would mix with it")
        candidate = f"{output}{BASELINE_COPY_DIR}/"
        if _under(head, candidate):
            raise ValueError(f"the EAGLE head of {name} is at {head}, where the baseline's files would be copied")
        copy_prefix(s3, weights, candidate)
        copy_prefix(s3, head, f"{candidate}{relative}/")
        weights = candidate
    elif _under(head, weights):
        relative = head.removeprefix(weights).rstrip("/")
    else:
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
    return {
        "model_uri": weights,
        "environment": dict(sorted(environment.items())),
        "head": staged,
        "method": method,
        "layout": layout,
    }


def adapter_archive() -> Any:
    """optigate.deployment.adapter_archive (standard library only): from the package where it is installed (tests,
    rehearsal), else the copy staged beside this handler in the function's code (ADAPTER_ARCHIVE_FILE)."""
    try:
        from optigate.deployment import adapter_archive as archive
    except ImportError:
        import adapter_archive as archive  # type: ignore[no-redef]
    return archive


class _Bounded(io.RawIOBase):
    """A response body read at most `limit` bytes far: an object that grows past its HeadObject size stops here."""

    def __init__(self, body: Any, limit: int, what: str) -> None:
        self._body, self._left, self._what = body, limit, what

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        data = self._body.read(min(len(buffer), self._left + 1))
        if len(data) > self._left:
            archive = adapter_archive()
            raise archive.AdapterRefused(archive.TOO_LARGE, f"{self._what} is larger than it said")
        self._left -= len(data)
        buffer[: len(data)] = data
        return len(data)


def check_adapters(s3, event: dict[str, Any]) -> dict[str, Any]:
    """Every candidate adapter archive checked; AdapterRefused (with the adapter named) for the first that fails."""
    archive = adapter_archive()
    limits = archive.AdapterLimits.from_event(event)
    adapters = event.get("adapters")
    if not isinstance(adapters, dict) or not adapters:
        raise ValueError(f"adapter_check names no adapters: {adapters!r}")
    checked: dict[str, Any] = {}
    for name, uri in sorted(adapters.items()):
        bucket, key = split_s3_uri(uri)
        try:
            size = s3.head_object(Bucket=bucket, Key=key)["ContentLength"]
            if size > archive.MAX_ARCHIVE_BYTES:
                raise archive.AdapterRefused(
                    archive.TOO_LARGE, f"the archive is {size} bytes (at most {archive.MAX_ARCHIVE_BYTES})"
                )
            body = s3.get_object(Bucket=bucket, Key=key)["Body"]
            facts = archive.check_archive(io.BufferedReader(_Bounded(body, size, uri), buffer_size=1024**2), limits)
        except archive.AdapterRefused as refusal:
            raise archive.AdapterRefused(refusal.reason, f"{name} ({uri}): {refusal.detail}") from None
        except ClientError as error:  # HeadObject's 404 has no body: S3 then cannot say whether the bucket is there
            code = error.response["Error"]["Code"]
            if code in ("404", "NoSuchKey", "NotFound", "NoSuchBucket"):
                missing = f"no bucket {bucket}" if code == "NoSuchBucket" else "no such object"
                raise archive.AdapterRefused(MISSING_ARCHIVE, f"{name} ({uri}): {missing}") from None
            raise
        checked[name] = {
            "uri": uri,
            "bytes": size,
            "rank": facts.rank,
            "lora_alpha": facts.lora_alpha,
            "base_model": facts.base_model,
            "base_model_check": facts.base_model_check,
            "base_model_why": facts.base_model_why,
            "architecture_checked": list(facts.architecture_checked),
        }
    return {"adapters": checked}


def adapter_mix() -> Any:
    """optigate.deployment.adapter_mix (standard library only), installed or staged beside this handler."""
    try:
        from optigate.deployment import adapter_mix as mix
    except ImportError:
        import adapter_mix as mix  # type: ignore[no-redef]
    return mix


def read_adapter_mix(cloudwatch: Any, event: dict) -> dict:
    """The benchmark's spread when the team sets no adapter_mix: each live component's share of the Invocations
    CloudWatch recorded over the last days (optigate.deployment.adapter_mix), as the workers' `inference_components`
    of each side. No history raises NoInvocationHistory: the gate stops before anything is created.

    Event: {"live": {label: live component}, "sides": {"twin": {label: run component}, "cand": {...}}}."""
    from datetime import UTC, datetime

    mix = adapter_mix()
    live = dict(event["live"])
    request = mix.invocations_query(live, end=datetime.now(UTC))
    values: dict[str, list[float]] = {}
    token = None
    while True:  # one answer may come in pages, a query's values spread over them
        page = cloudwatch.get_metric_data(**request, **({"NextToken": token} if token else {}))
        for result in page.get("MetricDataResults") or []:
            values.setdefault(result.get("Id"), []).extend(result.get("Values") or [])
        token = page.get("NextToken")
        if not token:
            break
    merged = {"MetricDataResults": [{"Id": key, "Values": found} for key, found in values.items()]}
    shares = mix.mix_from_invocations(mix.invocations_from_metric_data(merged, live))
    sides = {side: mix.benchmark_components(shares, dict(names)) for side, names in event["sides"].items()}
    return {**sides, "shares": shares}


def events() -> Any:
    """optigate.lambdas.events (standard library only), installed or staged beside this handler."""
    try:
        from optigate.lambdas import events as module
    except ImportError:
        import events as module  # type: ignore[no-redef]
    return module


def handler(event: dict, _context=None) -> dict:
    stage = events().StageEvent.from_event(event)
    if stage.adapter_mix is not None:
        return read_adapter_mix(boto3.client("cloudwatch"), event["adapter_mix"])
    s3 = boto3.client("s3")
    if stage.adapter_check is not None:
        return check_adapters(s3, event["adapter_check"])
    if stage.trained_head is not None:
        return stage_trained_head(s3, event["trained_head"])
    count = total = 0
    for copy in stage.copies:
        found, size = copy_prefix(s3, copy.source, copy.target)
        count += found
        total += size
    return {"objects": count, "bytes": total}
