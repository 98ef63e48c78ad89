"""The server's own figures in the proof: when the benchmark starts and when it ends, the times are kept
(`$.server_window`); after the evaluation (minutes in which CloudWatch ingests the last points published every 10 s),
a function of the gate reads what each temporary endpoint's vLLM published over that window
(optigate.bench.server_metrics over CloudWatch's QueryMetrics) into `$.server_metrics`, which the decision reads.
The endpoints exist only for this run and only the benchmark loads them inside that window (each side idles while
the other side's block runs: a counter's ratio, such as acceptance, is unchanged by that; a mean over time is
diluted). A query that fails is a missing figure with its reason, never a failed run.

The read is its own function with its own role (optigate/lambdas/read_server_metrics), which may only read metrics:
cloudwatch:GetMetricData, cloudwatch:ListMetrics and cloudwatch:QueryMetrics, what QueryMetrics needs
(optigate.bench.server_metrics.QUERY_ACTIONS), on "*" because none supports a resource-level permission.

Only where the candidate's container publishes server series (GatePlan.server_series, from optigate.serving.surfaces):
no LMI container does, so an LMI team's gate has none of these states."""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from optigate.bench.server_metrics import QUERY_ACTIONS
from optigate.constructs import nag
from optigate.constructs.assets import PACKAGE, stage
from optigate.constructs.common import function_role
from optigate.constructs.gate import grants
from optigate.constructs.gate.tasks import CleanupPath, SdkTask, run_name, sdk_task
from optigate.deployment.gate import GatePlan
from optigate.lambdas import handler_source
from optigate.lambdas.events import FromState, ServerMetricsEvent, ServerWindow

RESULT_PATH = "$.server_metrics"
WINDOW_PATH = "$.server_window"


def mark_benchmark_start(scope: Construct) -> sfn.Pass:
    """The benchmark's start, kept for the read (`$.server_window.start`): the window holds the benchmark, not the
    endpoints' start-up and idle time, which would dilute a mean or a hit rate."""
    return sfn.Pass(
        scope, "BenchmarkWindowStarts", parameters={"start.$": "$$.State.EnteredTime"}, result_path=WINDOW_PATH
    )


def mark_benchmark_end(scope: Construct) -> sfn.Pass:
    """The benchmark's end beside its start (`$.server_window.end`)."""
    return sfn.Pass(
        scope,
        "BenchmarkWindowEnds",
        parameters={"start.$": f"{WINDOW_PATH}.start", "end.$": "$$.State.EnteredTime"},
        result_path=WINDOW_PATH,
    )


def reader_function(scope: Construct, plan: GatePlan) -> lambda_.Function:
    """The function that reads the metrics, its role allowed only that (and its own logs)."""
    role, log_group = function_role(scope, "ServerMetrics")
    nag.allow(
        role,
        list(QUERY_ACTIONS),
        ["*"],
        why_wildcard="GetMetricData and ListMetrics support no resource-level permission (the Service Authorization "
        "Reference lists no resource type for either), nor does QueryMetrics, which SageMaker's PromQL page lists "
        "beside them; CloudWatch's QueryMetrics needs them to read the gate's temporary endpoints' container metrics.",
    )
    return lambda_.Function(
        scope,
        "ServerMetricsFunction",
        runtime=lambda_.Runtime.PYTHON_3_14,
        architecture=lambda_.Architecture.ARM_64,
        handler="handler.handler",
        code=lambda_.Code.from_asset(
            str(
                stage(
                    "read_server_metrics",
                    {
                        "handler.py": handler_source("read_server_metrics"),
                        "server_metrics.py": PACKAGE / "bench" / "server_metrics.py",
                        # Its event, ServerMetricsEvent (standard library only).
                        "events.py": PACKAGE / "lambdas" / "events.py",
                    },
                )
            )
        ),
        timeout=Duration.minutes(10),  # at most 2 x 9 queries of 30 s each
        memory_size=256,
        role=role,
        log_group=log_group,
        description=f"optigate gate of {plan.prefix}: read the temporary endpoints' server metrics",
    )


def read_server_metrics(scope: Construct, plan: GatePlan, cleanup: CleanupPath) -> SdkTask:
    """Each side's figures over [the run's start, the benchmark's end] (the reader's server_metrics event)."""
    function = reader_function(scope, plan)
    return cleanup.guarded(
        sdk_task(
            scope,
            "ReadServerMetrics",
            "lambda:invoke",
            {
                "FunctionName": function.function_arn,
                "Payload": ServerMetricsEvent(
                    server_metrics=ServerWindow(
                        sides={"baseline.$": run_name(plan, "twin"), "candidate.$": run_name(plan, "cand")},
                        start=FromState(f"{WINDOW_PATH}.start"),
                        end=FromState(f"{WINDOW_PATH}.end"),
                    )
                ).to_payload(),
            },
            grants=[grants.invoke(function)],
            result_path=RESULT_PATH,
            result_selector={"baseline.$": "$.Payload.baseline", "candidate.$": "$.Payload.candidate"},
        )
    )
