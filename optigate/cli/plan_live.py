"""`optigate plan TEAM --calibrate --endpoint NAME`: the live endpoint's own KV-cache figures (vLLM's, published by
SageMaker's detailed observability, read with CloudWatch's QueryMetrics: optigate.bench.server_metrics) beside the
planner's KV capacity, to check it. Reads only; writes nothing (gate reports calibrate, `--calibrate REPORT`)."""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

from optigate.cli.errors import CliError
from optigate.cli.output import console

AGREES = (0.8, 1.25)  # live KV share over the planner's, inside which the planner's KV capacity holds


def add_live_arguments(planner: argparse.ArgumentParser) -> None:
    """`plan --calibrate --endpoint`'s options: which live endpoint to read, how far back, where."""
    planner.add_argument(
        "--endpoint",
        default=None,
        help="with --calibrate: a live endpoint whose KV usage and batch to read (default: none: calibrate from gate "
        "reports)",
    )
    planner.add_argument(
        "--window-minutes", type=int, default=60, help="with --endpoint: how far back to read (default: 60)"
    )
    planner.add_argument("--region", default=None, help="with --endpoint: its region (default: the AWS config's)")


def live_kv_check(plan: dict[str, Any], figures: dict[str, Any]) -> dict[str, Any]:
    """The live peak KV share against the planner's for the same batch: the planner fills its KV cache with
    `max_concurrent_sequences_at_typical_length` sequences of the typical length, so `running_max` of them should
    fill running_max / that share. The two peaks need not coincide in time, so this is a check, not a calibration."""
    kv, running = figures.get("kv_cache_usage_max"), figures.get("running_max")
    sequences, capacity = plan.get("max_concurrent_sequences_at_typical_length"), plan.get("kv_capacity_tokens")
    missing = figures.get("missing") or {}
    if kv is None or not running or not sequences or not capacity:
        why = "; ".join(f"{k}: {missing[k]}" for k in ("kv_cache_usage_max", "running_max") if k in missing)
        return {"checked": False, "why": why or "no live KV usage or batch to compare", "figures": figures}
    predicted = min(1.0, running / sequences)
    ratio = kv / predicted
    if ratio > AGREES[1]:
        verdict = "the live KV cache fills faster than planned: longer sequences than the typical length, or less KV"
    elif ratio < AGREES[0]:
        verdict = "the live KV cache fills slower than planned: shorter sequences than the typical length, or more KV"
    else:
        verdict = "the planner's KV capacity agrees with the live endpoint"
    return {
        "checked": True,
        "live_kv_share_max": kv,
        "live_running_max": running,
        "planned_kv_share_at_that_batch": round(predicted, 4),
        "ratio": round(ratio, 3),
        "tokens_per_running_sequence": round(kv * capacity / running),
        "planned_kv_capacity_tokens": capacity,
        "planned_sequences_at_typical_length": sequences,
        "preemptions": figures.get("preemptions"),
        "verdict": verdict,
        "figures": figures,
    }


def check_endpoint(args: argparse.Namespace, plan: dict[str, Any], container: tuple[str, str]) -> int:
    """Read the endpoint's window and print the check: exit 0 checked, 3 when the figures cannot decide. `container`:
    the team's (family, image tag); a container that exports no KV series (no LMI container does:
    optigate.serving.surfaces) is said in one line without a query."""
    import boto3

    from optigate.bench import server_metrics
    from optigate.serving import surfaces

    served = surfaces.Container.from_tag(*container)
    if "vllm:kv_cache_usage_perc" not in surfaces.server_series(served):
        raise CliError(
            f"{args.endpoint}: {served} exports no KV-cache series (djl-serving serves no /metrics: "
            "docs/container-surfaces.md), so there is nothing live to check the planner with; calibrate from gate "
            "reports instead (--calibrate REPORT)",
            exit_code=3,
        )

    region = args.region or boto3.Session().region_name
    if not region:
        raise CliError("--endpoint: no AWS region (give --region or configure one)", exit_code=2)
    end = time.time()
    figures = server_metrics.read_window(
        server_metrics.signed_transport(region), args.endpoint, end - 60 * args.window_minutes, end
    )
    check = live_kv_check(plan, figures)
    if args.json:
        console.print_json(json.dumps(check, default=str))
    elif check["checked"]:
        c = check
        console.print(
            f"{args.endpoint}, last {args.window_minutes} min: KV cache at most {c['live_kv_share_max']:.0%} with "
            f"{c['live_running_max']:.0f} requests running; the planner: {c['planned_kv_share_at_that_batch']:.0%} "
            f"for that batch ({c['planned_sequences_at_typical_length']} sequences of the typical length fill "
            f"{c['planned_kv_capacity_tokens']:,} tokens), {c['tokens_per_running_sequence']:,} tokens per running "
            f"sequence live. {c['verdict']}.",
            highlight=False,
        )
    else:
        console.print(f"{args.endpoint}: cannot check the planner: {check['why']}", highlight=False)
    return 0 if check["checked"] else 3
