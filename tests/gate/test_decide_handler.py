"""The gate_decide Lambda handler with S3 and CloudWatch in moto: inputs from S3, both reports
written next to them, metrics published, and a return value small enough for Step Functions."""

from __future__ import annotations

import importlib.util
import json
from datetime import UTC, datetime, timedelta

import boto3
import pytest
from moto import mock_aws

from optigate.lambdas import handler_source
from tests.conftest import REPO
from tests.fixtures.synthetic_runs import PASS, THRESHOLDS, bench, itl_for_gain, synthetic_run

BUCKET = "gate-results"


def _handler():
    spec = importlib.util.spec_from_file_location("lambda_gate_decide", handler_source("gate_decide"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.handler


@pytest.fixture(scope="module")
def results() -> dict:
    return {
        "baseline": bench(synthetic_run(1, seed=21), synthetic_run(4, seed=22)),
        "faster": bench(
            synthetic_run(1, itl_ms=itl_for_gain(0.3), seed=23), synthetic_run(4, itl_ms=itl_for_gain(0.3), seed=24)
        ),
        "failing": bench(
            *(synthetic_run(c, all_fail=True, requests=20, seed=25 + c) for c in (1, 2, 3, 4, 5, 6, 7, 8))
        ),
    }


def _put(s3, key: str, data: dict) -> str:
    s3.put_object(Bucket=BUCKET, Key=key, Body=json.dumps(data).encode())
    return key


def _event(**overrides) -> dict:
    event = {
        "team": "chat",
        "environment": "dev",
        "change": {"quantization": "fp8"},
        "thresholds": {**THRESHOLDS, "concurrency": [1, 4]},
        "price_per_hour_usd": 1.212,
        "instance_count": 1,
        "prediction": {
            "decode_tpot_ms_batch1": 6.0,
            "cost_per_million_output_tokens": 1.0,
            "prefill_ms": 40.0,
            "kv_capacity_tokens": 100_000,
        },
        "bucket": BUCKET,
        "baseline_key": "runs/r1/baseline.json",
        "candidate_key": "runs/r1/candidate.json",
        "evaluation_key": "runs/r1/verdict.json",
        "report_prefix": "runs/r1/gate/",
    }
    event.update(overrides)
    return event


def _metric_values(cloudwatch, name: str, dimensions: list[dict]) -> list[float]:
    now = datetime.now(UTC)
    response = cloudwatch.get_metric_data(
        MetricDataQueries=[
            {
                "Id": "m",
                "MetricStat": {
                    "Metric": {"Namespace": "optigate/gate", "MetricName": name, "Dimensions": dimensions},
                    "Period": 60,
                    "Stat": "Maximum",
                },
            }
        ],
        StartTime=now - timedelta(minutes=10),
        EndTime=now + timedelta(minutes=10),  # moto walks every period: keep it short
    )
    return response["MetricDataResults"][0]["Values"]


# A contract (the decide handler's reads and writes): slow, and kept by --fast (tests/tiers.py).
@pytest.mark.slow
@pytest.mark.fast_tier
@mock_aws
def test_handler_reads_inputs_writes_reports_and_publishes_metrics(results):
    s3 = boto3.client("s3", region_name="us-east-1")
    s3.create_bucket(Bucket=BUCKET)
    _put(s3, "runs/r1/baseline.json", results["baseline"])
    _put(s3, "runs/r1/candidate.json", results["faster"])
    _put(s3, "runs/r1/verdict.json", PASS)

    output = _handler()(_event(), None)

    assert output["approved"] is True and output["outcome"] == "APPROVED" and output["reasons"] == []
    assert output["report_key"] == "runs/r1/gate/report.json"
    assert output["summary"] == "APPROVED chat/dev: all 12 checks pass"  # with goodput per level and capacity
    assert len(json.dumps(output)) < 4096
    report = json.loads(s3.get_object(Bucket=BUCKET, Key="runs/r1/gate/report.json")["Body"].read())
    assert report["approved"] is True and len(report["checks"]) == 12
    assert report["capacity"]["baseline"]["holds_up_to"] == report["capacity"]["candidate"]["holds_up_to"] == 4
    assert report["cost_per_million_output_tokens"][0]["candidate"] is not None
    page = s3.get_object(Bucket=BUCKET, Key="runs/r1/gate/report.html")
    body = page["Body"].read()
    assert page["ContentType"].startswith("text/html") and b'<img src="data:image/png;base64,' in body
    # With an SLO the page carries the Pareto view (stored beside it too), capacity and goodput.
    assert b"pareto_throughput_vs_p99_ttft.png" in body and b"Capacity within the SLO" in body and b"Goodput" in body
    stored = s3.list_objects_v2(Bucket=BUCKET, Prefix="runs/r1/gate/")["Contents"]
    assert "runs/r1/gate/pareto_throughput_vs_p99_ttft.png" in {item["Key"] for item in stored}

    cloudwatch = boto3.client("cloudwatch", region_name="us-east-1")
    team = [{"Name": "Team", "Value": "chat"}, {"Name": "Environment", "Value": "dev"}]
    names = {m["MetricName"] for m in cloudwatch.list_metrics(Namespace="optigate/gate")["Metrics"]}
    assert names == {"Approved", "Inconclusive", "CandidateP99TtftMs", "ThroughputGainPct"}
    assert _metric_values(cloudwatch, "Approved", team) == [1.0]
    assert _metric_values(cloudwatch, "Inconclusive", team) == [0.0]
    at_four = [*team, {"Name": "Concurrency", "Value": "4"}]
    [gain] = _metric_values(cloudwatch, "ThroughputGainPct", at_four)
    assert gain == pytest.approx(report["levels"][1]["throughput_gain_pct"]) and gain > 20
    [p99] = _metric_values(cloudwatch, "CandidateP99TtftMs", at_four)
    assert p99 == pytest.approx(results["faster"]["runs"][1]["ttft_ms"]["p99"])


@mock_aws
def test_the_stagers_adapter_check_reaches_the_verdict_as_given(results):
    """The state machine passes the archive check's result (`$.adapter_check.adapters`); the report carries it."""
    s3 = boto3.client("s3", region_name="us-east-1")
    s3.create_bucket(Bucket=BUCKET)
    _put(s3, "runs/r1/baseline.json", results["baseline"])
    _put(s3, "runs/r1/candidate.json", results["faster"])
    _put(s3, "runs/r1/verdict.json", PASS)
    checked = {"reply": {"uri": "s3://a/reply.tar.gz", "base_model_check": "unknown", "base_model_why": "a path"}}
    verdict, _, _ = _handler().__globals__["verdict_for"](s3, _event(adapter_check=checked))
    assert verdict.to_dict()["adapter_check"] == checked and verdict.approved
    verdict, _, _ = _handler().__globals__["verdict_for"](s3, _event())
    assert verdict.to_dict()["adapter_check"] is None


# A contract (the decide handler's reads and writes): slow, and kept by --fast (tests/tiers.py).
@pytest.mark.slow
@pytest.mark.fast_tier
@mock_aws
def test_handler_rejects_without_evaluation_and_keeps_its_answer_small(results):
    s3 = boto3.client("s3", region_name="us-east-1")
    s3.create_bucket(Bucket=BUCKET)
    _put(s3, "runs/r1/baseline.json", bench(*(synthetic_run(c, requests=20, seed=40 + c) for c in range(1, 9))))
    _put(s3, "runs/r1/candidate.json", results["failing"])

    output = _handler()(_event(evaluation_key=None, thresholds={**THRESHOLDS, "concurrency": list(range(1, 9))}), None)

    assert output["approved"] is False and output["outcome"] == "REJECTED"
    serialized = json.dumps(output)
    assert len(serialized) < 4096
    report = json.loads(s3.get_object(Bucket=BUCKET, Key="runs/r1/gate/report.json")["Body"].read())
    assert len(report["reasons"]) > len(output["reasons"]) - 1  # the full list lives in the report
    assert output["reasons"][-1].endswith("more in runs/r1/gate/report.json")
    assert "quality fails: no quality evidence" in report["reasons"][-1]
    assert output["summary"].startswith("REJECTED chat/dev: ")
    cloudwatch = boto3.client("cloudwatch", region_name="us-east-1")
    team = [{"Name": "Team", "Value": "chat"}, {"Name": "Environment", "Value": "dev"}]
    assert _metric_values(cloudwatch, "Approved", team) == [0.0]
    # No successful candidate request: no p99 and no throughput gain are published for those levels.
    names = {m["MetricName"] for m in cloudwatch.list_metrics(Namespace="optigate/gate")["Metrics"]}
    assert names == {"Approved", "Inconclusive"}


def test_handler_imports_only_the_pure_gate_logic():
    source = (handler_source("gate_decide")).read_text()
    imports = sorted(line.split()[1] for line in source.splitlines() if line.startswith(("import ", "from ")))
    assert imports == [
        "__future__",
        "boto3",
        "dataclasses",
        "datetime",
        "json",
        "logging",
        "optigate.bench.result_file",
        "optigate.gate.cross_check",
        "optigate.gate.decision",
        "optigate.gate.decision.looks",
        "optigate.gate.report",
        "optigate.lambdas.events",
        "optigate.naming",
        "pathlib",
        "tempfile",
    ]
    modules = [REPO / "optigate" / "gate" / f"{name}.py" for name in ("report", "__init__", "cross_check")]
    modules += sorted((REPO / "optigate" / "gate" / "decision").glob("*.py"))
    assert {path.stem for path in modules} >= {"inputs", "checks", "wording", "verdict"}
    for path in modules:
        text = path.read_text()
        assert "boto3" not in text and "aws_cdk" not in text and "moto" not in text, path


# --------------------------------------------------------------------------- a benchmark in rounds


def _rounds_event(done: int, **overrides) -> dict:
    rounds = {
        "run_id": "r9",
        "per_shard": [1, 4],
        "done": done,
        "started": "2026-12-08T00:00:00Z",
        "min_rounds": 3,
        "max_rounds": 4,
        **overrides,
    }
    event = _event(rounds=rounds, report_prefix="reports/r9/", evaluation_key="runs/r1/verdict.json")
    for key in ("baseline_key", "candidate_key"):
        event.pop(key)
    return event


def _put_rounds(s3, rounds: int, gain: float) -> None:
    """Each round's merged results where the fleet writes them (optigate.naming.benchmark_result_key)."""
    from optigate.naming import benchmark_result_key

    for block in range(rounds):
        for level in (1, 4):
            for side, candidate_gain in (("baseline", 0.0), ("candidate", gain)):
                run = synthetic_run(level, itl_ms=itl_for_gain(candidate_gain), requests=60, seed=100 * block + level)
                merged = {**bench(run), "shards": 1, "shard_keys": [f"shards/{side}-{block}-{level}.json"]}
                _put(s3, benchmark_result_key("r9", side, level, block), merged)


@pytest.mark.slow
@mock_aws
def test_a_look_answers_whether_to_stop_and_the_verdict_reports_the_rounds_path(results):
    s3 = boto3.client("s3", region_name="us-east-1")
    s3.create_bucket(Bucket=BUCKET)
    _put(s3, "runs/r1/verdict.json", PASS)
    _put_rounds(s3, 4, 0.0)  # the same server: the throughput check sits on its 10 % minimum's wrong side
    handler = _handler()
    look = handler({**_rounds_event(3, started="2026-12-08T00:00:00Z"), "look": True, "evaluation_key": None}, None)
    assert set(look) == {"stop", "reason", "why"} and look["reason"] in ("failed", "continue"), look
    written = s3.list_objects_v2(Bucket=BUCKET, Prefix="reports/r9/looks/")["Contents"]
    assert [item["Key"] for item in written] == ["reports/r9/looks/round-003.json"]
    why = "the budget of 4 rounds is spent"
    output = handler(_rounds_event(4, ended="2026-12-08T00:12:00Z", reason="budget", why=why), None)
    report = json.loads(s3.get_object(Bucket=BUCKET, Key=output["report_key"])["Body"].read())
    rounds = report["rounds"]
    assert (rounds["done"], rounds["reason"], rounds["why"]) == (4, "budget", why)  # the last look's, as kept
    assert rounds["benchmark_minutes"] == 12.0 and rounds["endpoint_minutes"] == 24.0
    assert rounds["usd"] == pytest.approx(24 / 60 * 1.212)
    assert [look["rounds"] for look in rounds["path"]] == [3]  # the looks as each wrote them
    gain = next(c for c in report["checks"] if c["name"] == "throughput_gain")
    assert "97.5 % CI" in gain["detail"]  # two looks share the 5 %


@pytest.mark.slow
@mock_aws
def test_rounds_missing_at_a_level_say_so_and_fail_that_level_closed(results):
    s3 = boto3.client("s3", region_name="us-east-1")
    s3.create_bucket(Bucket=BUCKET)
    _put(s3, "runs/r1/verdict.json", PASS)
    _put_rounds(s3, 3, 0.3)
    s3.delete_object(Bucket=BUCKET, Key="benchmarks/r9-candidate-c4-b2/result.json")
    output = _handler()(_rounds_event(3), None)
    # The missing result is an input the decision cannot read: nothing is decided on the rest.
    assert output["outcome"] == "INCONCLUSIVE" and "r9-candidate-c4-b2" in output["summary"]
