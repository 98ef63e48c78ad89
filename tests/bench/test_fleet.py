"""The benchmark Lambda handlers against the emulator (S3 in moto), and the BenchmarkFleet
construct: cfn-lint, cdk-nag and the shape of its state machine."""

from __future__ import annotations

import importlib.util
import json

import boto3
import pytest
from moto import mock_aws

from optigate.lambdas import handler_source


def _handler(folder: str):
    spec = importlib.util.spec_from_file_location(f"lambda_{folder}", handler_source(folder))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.handler


@mock_aws
def test_worker_shards_run_against_the_emulator_and_merge_exactly(emulator_url):
    s3 = boto3.client("s3", region_name="us-east-1")
    s3.create_bucket(Bucket="results")
    worker, merger = _handler("benchmark"), _handler("benchmark_merge")
    base = {
        "endpoint_name": "ok",
        "endpoint_url": emulator_url,
        "engine_mode": "async",
        "region": "us-east-1",
        "concurrency": 2,
        "requests": 4,
        "prompt_tokens": 8,
        "max_new_tokens": 5,
        "run_id": "run-1",
        "bucket": "results",
        "prefix": "benchmarks",
    }
    outputs = [worker({**base, "shard": shard}, None) for shard in range(3)]
    assert [o["key"] for o in outputs] == [f"benchmarks/run-1/c2/shard-000{i}.json" for i in range(3)]
    assert all(o["requests"] == 4 and o["errors"] == {} for o in outputs)
    merged = merger({"shards": outputs, "bucket": "results", "key": "benchmarks/run-1/result.json"}, None)
    summary = merged["summary"]
    assert summary["requests"] == 12 and summary["concurrency"] == 6
    stored = json.loads(s3.get_object(Bucket="results", Key="benchmarks/run-1/result.json")["Body"].read())
    shard_ttfts = []
    for output in outputs:
        shard = json.loads(s3.get_object(Bucket="results", Key=output["key"])["Body"].read())
        shard_ttfts += shard["runs"][0]["samples"]["ttft_ms"]
    assert sorted(stored["runs"][0]["samples"]["ttft_ms"]) == sorted(shard_ttfts)


def test_worker_counts_errors_without_failing(emulator_url):
    with mock_aws():
        boto3.client("s3", region_name="us-east-1").create_bucket(Bucket="results")
        output = _handler("benchmark")(
            {
                "endpoint_name": "throttled",
                "endpoint_url": emulator_url,
                "engine_mode": "async",
                "concurrency": 1,
                "requests": 3,
                "max_new_tokens": 4,
                "run_id": "r",
                "bucket": "results",
                "shard": 0,
                "timeout_s": 5,
            }
        )
    assert output["errors"] == {"ThrottlingException": 3}


@pytest.mark.slow
@pytest.mark.parametrize(("endpoint", "mode"), [("ok", "async"), ("ok-rolling-batch", "rolling-batch")])
def test_the_worker_talks_to_each_engine_mode_in_its_own_stream(emulator_url, endpoint, mode):
    with mock_aws():
        boto3.client("s3", region_name="us-east-1").create_bucket(Bucket="results")
        event = {"endpoint_url": emulator_url, "concurrency": 1, "requests": 2, "max_new_tokens": 5, "run_id": "r"}
        event.update(bucket="results", shard=0, timeout_s=5, endpoint_name=endpoint)
        right = _handler("benchmark")({**event, "engine_mode": mode})
        other = "rolling-batch" if mode == "async" else "async"
        wrong = _handler("benchmark")({**event, "engine_mode": other})
        with pytest.raises(ValueError, match="engine_mode"):
            _handler("benchmark")(event)  # no mode: refused, never guessed
    assert right["errors"] == {} and right["requests"] == 2
    assert wrong["errors"] == {"StreamFormatMismatch": 2}  # the wrong mode's stream fails loudly


@pytest.fixture(scope="module")
def fleet_stack(tmp_path_factory):
    from aws_cdk import App, Stack

    from optigate.constructs.benchmark_fleet import BenchmarkFleet, FleetTarget
    from optigate.stacks.app import FEATURE_FLAGS, enable_nag

    outdir = tmp_path_factory.mktemp("fleet")
    app = App(outdir=str(outdir), context=FEATURE_FLAGS)
    stack = Stack(app, "Fleet", env={"account": "111111111111", "region": "us-east-1"})
    fleet = BenchmarkFleet(stack, "Bench", target=FleetTarget("chat-dev"), shards=4)
    enable_nag(app)
    app.synth()  # raises on any unacknowledged cdk-nag finding
    return json.loads((outdir / "Fleet.template.json").read_text()), fleet


# A template check: slow, and kept by --fast (tests/tiers.py).
@pytest.mark.slow
@pytest.mark.fast_tier
def test_fleet_passes_cfn_lint(fleet_stack):
    from cfnlint.api import ManualArgs, lint

    template, _ = fleet_stack
    matches = lint(json.dumps(template), config=ManualArgs(regions=["us-east-1"]))
    assert [f"{m.rule.id} {m.message}" for m in matches if m.rule.id.startswith("E")] == []


def test_fleet_state_machine_fans_out_then_merges(fleet_stack):
    template, _ = fleet_stack
    (machine,) = [r for r in template["Resources"].values() if r["Type"] == "AWS::StepFunctions::StateMachine"]
    definition = json.loads(
        "".join(
            part if isinstance(part, str) else "X" for part in machine["Properties"]["DefinitionString"]["Fn::Join"][1]
        )
    )
    assert definition["StartAt"] == "ShardIndexes"
    shards = definition["States"]["Shards"]
    assert shards["Type"] == "Map" and shards["ItemProcessor"]["ProcessorConfig"]["Mode"] == "DISTRIBUTED"
    assert shards["MaxConcurrency"] == 4 and shards["Next"] == "MergeShards"
    # each worker is told the engine mode of the endpoint's container, which decides the stream it reads
    assert shards["ItemSelector"]["engine_mode.$"] == "$.engine_mode"
    assert definition["States"]["ShardIndexes"]["Parameters"]["shards.$"] == "States.ArrayRange(0, 3, 1)"
    assert machine["Properties"]["TracingConfiguration"]["Enabled"] is True
    assert machine["Properties"]["LoggingConfiguration"]["Level"] == "ALL"


def test_fleet_worker_may_invoke_only_its_endpoint(fleet_stack):
    template, _ = fleet_stack
    statements = [
        s
        for r in template["Resources"].values()
        if r["Type"] == "AWS::IAM::Policy"
        for s in r["Properties"]["PolicyDocument"]["Statement"]
    ]
    invoke = [s for s in statements if "sagemaker:InvokeEndpointWithResponseStream" in json.dumps(s["Action"])]
    assert len(invoke) == 1
    assert "endpoint/chat-dev*" in json.dumps(invoke[0]["Resource"])
    assert not any(a in json.dumps(s["Action"]) for s in statements for a in ('"sagemaker:*"', '"s3:*"', '"*"'))


def test_fleet_lambda_asset_carries_the_handler_and_the_bench_modules(fleet_stack):
    from optigate.constructs.assets import BENCH_CORE, _lambda_files

    names = set(_lambda_files("benchmark"))
    core = {f"optigate/bench/core/{path.name}" for path in BENCH_CORE.glob("*.py")}
    assert (
        "handler.py" in names and {"optigate/bench/core/runner.py", "optigate/bench/core/__init__.py"} <= core <= names
    )
