"""Stage a candidate's extra files: copy what the optimized candidate reads but the optimization job does
not write (an EAGLE-3 head, a draft model) from the baseline's prefix into the candidate's.

Event: {"copies": [{"source": "s3://<model bucket>/<model prefix>eagle3/",
                    "target": "s3://<gate bucket>/optimized/<run>/eagle3/"}, ...]}
Every object under each source prefix is copied to the same relative key under its target by CopyObject:
server-side, nothing passes through the function (one request each, so objects up to CopyObject's 5 GB;
the target bucket's default encryption applies). A source without any object fails: the candidate would
not start without it.
Returns {"objects": <count>, "bytes": <total>}.
"""

from __future__ import annotations

import boto3

MAX_COPY_BYTES = 5 * 1024**3  # CopyObject's limit; a larger object needs a multipart UploadPartCopy


def split_s3_uri(uri: str) -> tuple[str, str]:
    bucket, _, key = uri.removeprefix("s3://").partition("/")
    return bucket, key


def handler(event: dict, _context=None) -> dict:
    s3 = boto3.client("s3")
    count = total = 0
    for copy in event["copies"]:
        source_bucket, source_prefix = split_s3_uri(copy["source"])
        target_bucket, target_prefix = split_s3_uri(copy["target"])
        found = 0
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
            raise FileNotFoundError(f"nothing to stage under {copy['source']}: the candidate reads it")
        count += found
    return {"objects": count, "bytes": total}
