"""The gate's benchmark workload as one worker of the fleet builds it (optigate/lambdas/benchmark): the team's captured
traffic read inside the account, or synthetic requests with length distributions; and the check, before an EAGLE head
is trained from data capture, that the capture holds enough records the training job reads
(:func:`check_training_data`).

Every worker of both sides must send the same requests. The gate checks the capture once before anything is paid
for (:func:`check_capture`): it pins the window's end (`until`, a little before now, so records SageMaker has not
yet delivered cannot enter later) and a digest of the requests; each worker rebuilds the workload from the same
capture and window, refuses with WorkloadChanged when its digest differs, and takes its share (every shards-th
request, on the shared schedule). Nothing here returns or logs prompt text: only :func:`shape` and the digest.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

from botocore.exceptions import ClientError

from optigate.bench.core.capture import CaptureRead, parse_training_line, read_capture
from optigate.bench.core.workload import Workload, digest, from_capture, shape, synthetic

#: How long before the check the pinned window ends. SageMaker delivers capture files periodically and does not
#: document the delay; records of the last minutes could still arrive after the check and change what a later
#: worker reads (the digest would then refuse the run), so the window ends this long before the check.
SETTLE_SECONDS = 15 * 60
#: The longest recorded schedule a replay may take: a worker (Lambda, at most 15 minutes) runs the whole of it.
MAX_REPLAY_SECONDS = 12 * 60


class CaptureUnavailable(ValueError):
    """The capture is missing, empty or unreadable: the gate fails with this error's name and the reason."""


class TrainingDataUnavailable(CaptureUnavailable):
    """The capture an EAGLE head trains from holds fewer readable chat records than the team requires: the gate
    fails with this error's name, the prefix and the count found and needed, before the optimization job exists."""


class ReplayTooLong(ValueError):
    """The recorded schedule does not fit in one worker's run: the gate fails before anything is paid for."""


class WorkloadChanged(ValueError):
    """A worker read other requests than the gate's check pinned: the two sides would not be compared alike."""


def capture_workload(spec: dict[str, Any], *, until: float, s3_client: Any = None) -> Workload:
    """The workload of the gate's `spec` ({source, kind, window_days, max_requests, speedup}) from the records
    captured up to `until` (epoch seconds). CaptureUnavailable when the capture holds no readable request then."""
    source, max_requests = str(spec["source"]), int(spec["max_requests"])
    try:
        read = read_capture(source, s3_client=s3_client, window_days=float(spec["window_days"]), now=until)
    except ValueError as error:
        raise CaptureUnavailable(str(error)) from None
    except ClientError as error:  # no such bucket, access denied: the capture is not there to read
        code = error.response.get("Error", {}).get("Code", "error")
        raise CaptureUnavailable(f"{source}: {code} ({error})") from None
    # read_capture bounds the window's start only; records after `until` arrived after the check.
    kept = tuple(request for request in read.requests if request.at <= until)[-max_requests:]
    if not kept:
        raise CaptureUnavailable(
            f"{source}: no readable capture record in the {spec['window_days']:g} days before the check"
        )
    pinned = CaptureRead(requests=kept, skipped=read.skipped, files=read.files)
    try:
        return from_capture(
            pinned, kind=str(spec["kind"]), speedup=float(spec["speedup"]), max_requests=max_requests, source=source
        )
    except ValueError as error:
        raise CaptureUnavailable(str(error)) from None


def check_capture(spec: dict[str, Any], *, now: float | None = None, s3_client: Any = None) -> dict[str, Any]:
    """The gate's check before anything is paid for: the capture holds requests and (a replay) its schedule fits in
    one worker's run. Returns the pinned window end, the digest and the workload's shape (no text)."""
    until = (time.time() if now is None else now) - SETTLE_SECONDS
    workload = capture_workload(spec, until=until, s3_client=s3_client)
    duration = max((request.offset_s or 0.0) for request in workload.requests)
    if workload.scheduled and duration > MAX_REPLAY_SECONDS:
        raise ReplayTooLong(
            f"{spec['source']}: the {len(workload.requests)} requests span {duration / 60:.0f} min at speedup "
            f"{float(spec['speedup']):g}, and a benchmark worker runs at most {MAX_REPLAY_SECONDS // 60} min: raise "
            f"speedup to at least {float(spec['speedup']) * duration / MAX_REPLAY_SECONDS:.1f} or lower max_requests"
        )
    return {"until": until, "digest": digest(workload), "shape": shape(workload)}


def shard_of(workload: Workload, shard: int, shards: int) -> Workload:
    """Worker `shard`'s share of `shards`: every shards-th request, a replay's on the shared schedule (its offsets
    still count from the whole workload's first request)."""
    if not 0 <= shard < shards:
        raise ValueError(f"shard {shard} of {shards}")
    share = workload.requests[shard::shards]
    if not share:
        raise CaptureUnavailable(
            f"{workload.source}: {len(workload.requests)} captured request(s) cannot feed {shards} workers"
        )
    return replace(workload, requests=share)


def worker_workload(event: dict[str, Any], *, s3_client: Any = None) -> Workload | None:
    """The workload one worker sends, from its event: `workload` (captured, with the check's `until` and `digest`),
    `synthetic` (length distributions), or neither (None: the load's own synthetic prompts)."""
    spec, lengths = event.get("workload"), event.get("synthetic")
    shard, shards = int(event.get("shard", 0)), int(event.get("shards", 1))
    if spec:
        if "until" not in spec or "digest" not in spec:
            raise WorkloadChanged("a captured workload reaches a worker without the gate check's until and digest")
        workload = capture_workload(spec, until=float(spec["until"]), s3_client=s3_client)
        found = digest(workload)
        if found != spec["digest"]:
            raise WorkloadChanged(
                f"{spec['source']}: this worker read {len(workload.requests)} request(s) that differ from those the "
                "gate's check pinned (the capture changed inside the window): both sides would not send the same"
            )
        return shard_of(workload, shard, shards)
    if lengths:
        return synthetic(
            max(1, int(event["requests"])),
            prompt_tokens=tuple(lengths["prompt_tokens"]),
            max_new_tokens=tuple(lengths["max_new_tokens"]),
            shared_prefix_share=float(lengths.get("shared_prefix_share", 0.0)),
            prefix_tokens=int(lengths.get("prefix_tokens", 0)),
            seed=shard * 100_003,  # the same requests for the baseline and the candidate of a block
        )
    return None


def check_training_data(spec: dict[str, Any], *, s3_client: Any = None) -> dict[str, Any]:
    """The gate's check before an optimization job trains an EAGLE head from data capture: at least
    `spec["min_records"]` records the job reads (optigate.bench.core.capture.parse_training_line: OpenAI chat or
    completions, ShareGPT; JSON-encoded) under `spec["source"]`, the whole prefix the job gets. Files are read newest
    first and reading stops once enough are found. TrainingDataUnavailable naming the prefix, the count found and
    needed, the reasons records were skipped and what to do; else {source, records (the count needed, found), files
    read}."""
    source, needed = str(spec["source"]), int(spec["min_records"])
    if needed < 1:
        raise ValueError(f"min_records must be at least 1, got {needed}")
    files = 0
    try:
        read = read_capture(
            source, s3_client=s3_client, max_requests=needed, min_readable_share=0.0, parse=parse_training_line
        )
        found, files = len(read.requests), read.files
        note = read.skipped_note()
        detail = f"{files} file(s) read" + (f"; skipped {note}" if note else "")
    except ValueError as error:  # no files, nothing readable, or the prefix cannot be listed
        found, detail = 0, str(error).removeprefix(f"{source}: ")
    except ClientError as error:  # no such bucket, access denied
        found, detail = 0, str(error.response.get("Error", {}).get("Code", "error"))
    if found < needed:
        raise TrainingDataUnavailable(
            f"{source}: {found:,} readable chat record(s) found, {needed:,} needed to train the EAGLE head ({detail}); "
            "let the endpoint capture more OpenAI chat or completions requests sent with InvokeEndpoint (streamed "
            "calls may not be captured: OG423), train_from an S3 prefix of ShareGPT/OpenAI data, or lower "
            "gate.candidate.speculative_decoding.min_training_records"
        )
    return {"source": source, "records": found, "files": files}
