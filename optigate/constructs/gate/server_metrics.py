"""The server's own figures in the proof: when the benchmark ends, its time is kept (`$.server_window.end`); after
the evaluation (minutes in which CloudWatch ingests the last points published every 10 s), the gate's staging
function reads what each temporary endpoint's vLLM published from the run's start to that end
(optigate.bench.server_metrics over CloudWatch's QueryMetrics) into `$.server_metrics`, which the decision reads.
The endpoints exist only for this run and only the benchmark loads them before that end, so the window is the
benchmark's. A query that fails is a missing figure with its reason, never a failed run."""

from __future__ import annotations

from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from optigate.constructs.gate import grants
from optigate.constructs.gate.candidate import Stager
from optigate.constructs.gate.tasks import CleanupPath, SdkTask, run_name, sdk_task
from optigate.deployment.gate import GatePlan

RESULT_PATH = "$.server_metrics"
WINDOW_END_PATH = "$.server_window"


def mark_benchmark_end(scope: Construct) -> sfn.Pass:
    """The benchmark's end, kept for the read (`$.server_window.end`)."""
    return sfn.Pass(
        scope, "BenchmarkWindowEnds", parameters={"end.$": "$$.State.EnteredTime"}, result_path=WINDOW_END_PATH
    )


def read_server_metrics(scope: Construct, plan: GatePlan, stager: Stager, cleanup: CleanupPath) -> SdkTask:
    """Each side's figures over [the run's start, the benchmark's end] (the staging function's server_metrics event)."""
    function, _ = stager.get()  # its role may query CloudWatch's metrics (candidate.Stager)
    return cleanup.guarded(
        sdk_task(
            scope,
            "ReadServerMetrics",
            "lambda:invoke",
            {
                "FunctionName": function.function_arn,
                "Payload": {
                    "server_metrics": {
                        "sides": {"baseline.$": run_name(plan, "twin"), "candidate.$": run_name(plan, "cand")},
                        "start.$": "$$.Execution.StartTime",
                        "end.$": f"{WINDOW_END_PATH}.end",
                    }
                },
            },
            grants=[grants.invoke(function)],
            result_path=RESULT_PATH,
            result_selector={"baseline.$": "$.Payload.baseline", "candidate.$": "$.Payload.candidate"},
        )
    )
