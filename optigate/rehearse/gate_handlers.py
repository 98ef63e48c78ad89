"""The gate's Lambda handlers run in-process in a rehearsal: each function role's handler from the repository's
source, the benchmark worker routed to the emulator of the endpoint it measures, and the evaluation's verdict
written as the processing job would."""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Final

import boto3

from optigate.config.models import split_s3_uri
from optigate.rehearse.gate_layout import CROSS_CHECK, DECIDE, MERGE, SERVER_METRICS, STAGE, WORKER
from optigate.rehearse.harness import REGION, active_harness

#: The handler source folder of each function role (see lambda_source).
HANDLER_FOLDERS: Final = {
    WORKER: "benchmark",
    MERGE: "benchmark_merge",
    DECIDE: "gate_decide",
    STAGE: "stage_candidate",
    CROSS_CHECK: "ai_benchmark_jobs",
    SERVER_METRICS: "read_server_metrics",
}


def lambda_source(folder: str) -> Path:
    """Where the handler of a Lambda function's source folder is (the one place that knows)."""
    from optigate.lambdas import handler_source

    return handler_source(folder)


def load_handler(folder: str) -> Callable[[dict, Any], Any]:
    spec = importlib.util.spec_from_file_location(f"optigate_lambda_{folder}", lambda_source(folder))
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load the Lambda handler of {folder} from {lambda_source(folder)}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.handler


#: A rehearsal's bound on a replay's p99 schedule lag (the deployed worker's is 5 ms). A rehearsal proves the gate's
#: path, not the host's timing: on a shared host a block's first sends lagged by more than 250 ms in the full test
#: suite, so only a replay that fell seconds behind is refused here.
REHEARSAL_MAX_LAG_MS = 10_000.0


def lambda_handlers(baseline_url: str, candidate_url: str, *, decide: Callable | None = None) -> dict[str, Callable]:
    """In-process handlers by function role. The benchmark worker loads the emulator of its endpoint: an
    endpoint that serves only models CloudFormation owns (the live endpoint, or the gate's baseline twin
    of it) is the baseline, any other the candidate. Each invocation is recorded in the harness
    (``benchmarked``): the endpoint, its status and the models it served at that moment."""
    worker, merge = load_handler(HANDLER_FOLDERS[WORKER]), load_handler(HANDLER_FOLDERS[MERGE])

    def routed_worker(event: dict, context: Any) -> Any:
        if "workload_check" in event or "training_data_check" in event:  # the gate's capture checks: no endpoint
            return worker(event, context)
        name = event["endpoint_name"]
        baseline = False
        harness = active_harness()
        if harness is not None:
            serving = harness.endpoint_serving(name)
            models = set(serving["models"]) if serving else set()
            baseline = name in harness.live_endpoints or (bool(models) and models <= harness.baseline_models)
            harness.benchmarked.append(
                {"endpoint": name, "run_id": event.get("run_id"), "baseline": baseline, **(serving or {})}
            )
        url = baseline_url if baseline else candidate_url
        # moto runs a Distributed Map's iterations one after another: a replay's shards cannot share a start here,
        # so each replays on its own clock (tests/bench/test_replay_shards.py runs the shared start for real).
        event = {key: value for key, value in event.items() if key != "schedule_entered"}
        # The host runs the client beside moto and both emulators: a replay's sends may lag by more than the 5 ms a
        # worker on its own keeps (tests/bench/test_replay.py and test_replay_shards.py hold the client to that).
        return worker({**event, "endpoint_url": url, "timeout_s": 30, "max_lag_ms": REHEARSAL_MAX_LAG_MS}, context)

    def emulator_of(name: str) -> str | None:
        """The emulator serving endpoint `name` (as the worker is routed), None for an endpoint not serving."""
        harness = active_harness()
        serving = harness.endpoint_serving(name) if harness is not None else None
        if harness is None or serving is None:
            return None
        models = set(serving["models"])
        baseline = name in harness.live_endpoints or (bool(models) and models <= harness.baseline_models)
        return baseline_url if baseline else candidate_url

    def server_metrics(event: dict, context: Any) -> Any:
        """The read of the endpoints' container metrics, answered as CloudWatch's QueryMetrics would be (moto has no
        PromQL): from the emulators' /metrics (optigate.rehearse.cloudwatch.emulated_query_metrics)."""
        from optigate.bench.server_metrics import read_sides
        from optigate.rehearse.cloudwatch import emulated_query_metrics

        return read_sides(emulated_query_metrics(emulator_of), event["server_metrics"])

    return {
        WORKER: routed_worker,
        MERGE: merge,
        DECIDE: decide or load_handler(HANDLER_FOLDERS[DECIDE]),
        STAGE: load_handler(HANDLER_FOLDERS[STAGE]),
        SERVER_METRICS: server_metrics,
        CROSS_CHECK: load_handler(HANDLER_FOLDERS[CROSS_CHECK]),
    }


def evaluation_writer(
    status: str, reasons: list[str] | tuple[str, ...] = (), *, adapters: Mapping[str, str] | None = None
) -> Callable[[dict], None]:
    """A processing-job hook that writes the evaluation verdict the gate reads.

    With `adapters` (an adapter team's gate, e.g. ``evaluation_writer("pass", adapters={"reply": "fail"})``):
    each adapter the request evaluates comes out as `adapters[name]`, else `status`, and the job's own code
    writes its whole output (optigate.rehearse.evaluation_outcomes); `reasons` are then the real ones."""

    def hook(request: dict) -> None:
        s3 = boto3.client("s3", region_name=REGION)
        if adapters is not None:
            from optigate.rehearse.evaluation_outcomes import upload_adapter_outcomes

            upload_adapter_outcomes(request, adapters, status, s3)
            return
        output = request["ProcessingOutputConfig"]["Outputs"][0]["S3Output"]["S3Uri"]
        bucket, key = split_s3_uri(output)
        verdict = {"status": status, "passed": status == "pass", "reasons": list(reasons), "warnings": [], "checks": []}
        s3.put_object(Bucket=bucket, Key=f"{key.rstrip('/')}/verdict.json", Body=json.dumps(verdict))

    return hook
