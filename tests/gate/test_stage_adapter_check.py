"""The staging Lambda's adapter-check mode with S3 in moto: each candidate archive downloaded (bounded) and checked
before any endpoint exists; a bad one fails the invocation with AdapterRefused, which the state machine catches."""

from __future__ import annotations

import ast
import json
import shutil
import subprocess
import sys
from pathlib import Path

import boto3
import pytest
from moto import mock_aws

from optigate.deployment import adapter_archive as aa
from optigate.rehearse.gate_handlers import load_handler
from tests.fixtures.adapter_archives import LIMITS, adapter, adapter_config, lora_tensors

REPLY = "s3://adapters/support/reply-v3.tar.gz"
TRIAGE = "s3://adapters/support/triage-v4.tar.gz"


def _check(objects: dict[str, bytes], adapters: dict[str, str], **limits) -> dict:
    with mock_aws():
        s3 = boto3.client("s3", region_name="us-east-1")
        s3.create_bucket(Bucket="adapters")
        for uri, body in objects.items():
            s3.put_object(Bucket="adapters", Key=uri.removeprefix("s3://adapters/"), Body=body)
        event = {"adapter_check": {"adapters": adapters, **LIMITS.event(), **limits}}
        return load_handler("stage_candidate")(event, None)


def test_good_archives_pass_and_say_what_they_are():
    result = _check(
        {REPLY: adapter(), TRIAGE: adapter(adapter_config(r=32), lora_tensors(32))}, {"reply": REPLY, "triage": TRIAGE}
    )
    assert result["adapters"]["reply"]["rank"] == 16 and result["adapters"]["triage"]["rank"] == 32
    assert result["adapters"]["reply"]["uri"] == REPLY and result["adapters"]["reply"]["bytes"] > 0
    assert result["adapters"]["reply"]["base_model_check"] == aa.SAME
    assert result["adapters"]["reply"]["architecture_checked"] == [aa.SAFETENSORS]


def test_a_base_recorded_as_a_local_path_passes_as_unknown_and_the_result_says_why():
    local = adapter(adapter_config(base_model_name_or_path="/opt/ml/input/data/model"))
    reply = _check({REPLY: local}, {"reply": REPLY})["adapters"]["reply"]
    assert reply["base_model_check"] == aa.UNKNOWN and reply["base_model"] == "/opt/ml/input/data/model"
    assert "'/opt/ml/input/data/model' is not a Hugging Face id" in reply["base_model_why"]
    assert reply["architecture_checked"] == [aa.SAFETENSORS]
    json.dumps(reply)  # the state machine carries it to the decision


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (adapter(adapter_config(r=64), lora_tensors(64)), aa.RANK),
        (adapter(adapter_config(base_model_name_or_path="meta-llama/Llama-3.1-8B-Instruct")), aa.BASE_MODEL),
        (adapter(adapter_config(target_modules=["q_proj", "lm_head"])), aa.TARGET_MODULE),
        (adapter(tensors=lora_tensors(hidden=4096, kv=1024)), aa.ARCHITECTURE),  # Llama-3.1-8B's widths
        (adapter(adapter_config(use_dora=True)), aa.DORA),
    ],
)
def test_an_archive_the_candidate_cannot_serve_fails_with_a_named_error(body, reason):
    with pytest.raises(aa.AdapterRefused, match=rf"^{reason}: reply \({REPLY}\): ") as refused:
        _check({REPLY: body, TRIAGE: adapter()}, {"reply": REPLY, "triage": TRIAGE})
    # Lambda reports the exception's class name as the error the state machine catches.
    assert type(refused.value).__name__ == "AdapterRefused" and refused.value.reason == reason


def test_a_missing_or_oversize_archive_is_refused(monkeypatch):
    with pytest.raises(aa.AdapterRefused, match=rf"^archive-missing: reply \({REPLY}\): no such object$"):
        _check({}, {"reply": REPLY})
    # A bucket that does not exist is the same refusal, naming the object and the bucket (not S3's NoSuchBucket).
    elsewhere = "s3://no-such-adapters/support/reply-v3.tar.gz"
    with pytest.raises(aa.AdapterRefused, match=rf"^archive-missing: reply \({elsewhere}\): no bucket no-such-\w+$"):
        _check({}, {"reply": elsewhere})
    monkeypatch.setattr(aa, "MAX_ARCHIVE_BYTES", 100)
    with pytest.raises(aa.AdapterRefused, match=r"^archive-too-large: reply"):
        _check({REPLY: adapter()}, {"reply": REPLY})


def test_a_malformed_event_is_no_pass():
    with pytest.raises(ValueError, match="max_lora_rank"):
        _check({REPLY: adapter()}, {"reply": REPLY}, max_lora_rank=None)
    with pytest.raises(ValueError, match="names no adapters"):
        _check({}, {})


def test_the_archive_module_needs_only_the_standard_library():
    """It ships into the stager Lambda beside the handler (boto3 and the standard library only there)."""
    tree = ast.parse(Path(aa.__file__).read_text())
    imported = {
        (node.module if isinstance(node, ast.ImportFrom) else alias.name).split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.Import | ast.ImportFrom)
        for alias in node.names
    }
    assert imported <= set(sys.stdlib_module_names) | {"__future__"}


LAMBDA_RUN = """
import io, json, sys
sys.modules["optigate"] = None  # the function's code has no optigate package
import handler

class Body(io.BytesIO):
    pass

class S3:
    def __init__(self, data):
        self.data = data
    def head_object(self, Bucket, Key):
        return {"ContentLength": len(self.data)}
    def get_object(self, Bucket, Key):
        return {"Body": Body(self.data)}

event = json.loads(sys.argv[1])
try:
    handler.check_adapters(S3(open(sys.argv[2], "rb").read()), event)
except Exception as error:
    print(type(error).__name__, getattr(error, "reason", ""))
"""


def test_the_check_runs_from_the_functions_code_alone(tmp_path):
    """handler.py with adapter_archive.py beside it, as the stager's asset must stage them (no optigate package)."""
    from optigate.lambdas import handler_source

    code = tmp_path / "code"
    code.mkdir()
    shutil.copyfile(handler_source("stage_candidate"), code / "handler.py")
    handler = load_handler("stage_candidate")
    shutil.copyfile(aa.__file__, code / handler.__globals__["ADAPTER_ARCHIVE_FILE"])
    (tmp_path / "reply.tar.gz").write_bytes(adapter(adapter_config(r=64), lora_tensors(64)))
    event = {"adapters": {"reply": REPLY}, **LIMITS.event()}
    run = subprocess.run(
        [sys.executable, "-c", LAMBDA_RUN, json.dumps(event), str(tmp_path / "reply.tar.gz")],
        cwd=code,
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONPATH": str(code), "AWS_DEFAULT_REGION": "us-east-1"},
    )
    assert run.stdout.split() == ["AdapterRefused", aa.RANK], run.stderr
