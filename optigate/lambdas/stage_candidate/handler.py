"""Stage a candidate's extra files: copy what the optimized candidate reads but the optimization job does
not write (an EAGLE-3 head, a draft model) from the baseline's prefix into the candidate's.

Event: {"copies": [{"source": "s3://<model bucket>/<model prefix>eagle3/",
                    "target": "s3://<gate bucket>/optimized/<run>/eagle3/"}, ...]}
Every object under each source prefix is copied to the same relative key under its target: streamed from
GetObject into PutObject (one request each, so objects up to PutObject's 5 GB; the target bucket's default
encryption applies). A source without any object fails: the candidate would not start without it.
Returns {"objects": <count>, "bytes": <total>}.
"""

from __future__ import annotations

import boto3

MAX_PUT_BYTES = 5 * 1024**3  # PutObject's limit; a larger object needs a multipart upload


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
                if size > MAX_PUT_BYTES:
                    raise ValueError(f"s3://{source_bucket}/{key} has {size} bytes, more than one PutObject takes")
                body = s3.get_object(Bucket=source_bucket, Key=key)["Body"]
                s3.put_object(
                    Bucket=target_bucket,
                    Key=target_prefix + key.removeprefix(source_prefix),
                    Body=body,
                    ContentLength=size,
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
