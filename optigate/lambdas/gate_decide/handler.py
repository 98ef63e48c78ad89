# Over 400 lines: the decision function's one file: its inputs read through their schemas, the look, the verdict.
"""Gate decision: read the two benchmark results and the quality verdict from S3, decide, write the
report next to them, publish metrics, return a small verdict (Step Functions payloads are small).

Event (optigate.lambdas.events.DecideEvent, which refuses an unknown or missing key, or a value of the wrong type):
  {"team", "environment", "change": {...}, "thresholds": {gate.benchmark}, "price_per_hour_usd",
   "instance_count", "prediction": {...} | null, "bucket", "baseline_key", "candidate_key" (an `optigate bench
   --json` file each; or, as the deployed gate sends, "baseline_keys", "candidate_keys": one merged fleet result per
   (level, block), in order),
   "evaluation_key": "..." | null, "report_prefix": "gates/<run_id>",
   "shadow": {"window_minutes", "sampling_percentage", "production_variant", "shadow_variant",
              "metric_data": GetMetricData's answer for the mirror window} (optional),
   "cross_check": {"tolerance", "jobs": [{"concurrency", "side", "job", "result": {"status", "output" |
                   "reason"}}]} (optional: SageMaker's managed benchmark, reported beside, never decided on),
   "adapter_check": {"<adapter>": {"uri", "rank", "base_model", "base_model_check", "base_model_why", ...}}
                    (optional: the stager's check of each new adapter version's archive, reported, never decided on)
Returns {"approved", "outcome" (APPROVED | REJECTED | INCONCLUSIVE), "reasons", "report_key", "summary"};
the full verdict is in report.json. Every benchmark result is read through its schema (optigate.bench.result_file:
MergedResultFile, BenchResultFile), the evaluation's verdict as a JSON object with a status: one that
fails, or a merged result naming shards the merge could not read (each re-read through the bench result's schema to
say where it is wrong), makes the verdict INCONCLUSIVE with where and what (unreadable_verdict): nothing is
decided on it, the summary the notification publishes names it, and the package waits for a person.
CloudWatch (namespace optigate/gate, dimensions Team, Environment):
Approved 0/1, Inconclusive 0/1, and per level (plus Concurrency) CandidateP99TtftMs and ThroughputGainPct.
"""

from __future__ import annotations

import json
import logging
import tempfile
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import boto3

from optigate.bench.result_file import ResultFileError, parse_merged_result, parse_result
from optigate.gate.cross_check import OUTPUT_ARCHIVE, ExportError, read_archive
from optigate.gate.decision import UNDECIDED, GateInputs, GateVerdict, decide, unreadable_verdict
from optigate.gate.decision.looks import Looks, judge_round, rounds_summary
from optigate.gate.report import render_html, render_json
from optigate.lambdas.events import BenchmarkRounds, DecideEvent, resolved
from optigate.naming import benchmark_result_key

LOG = logging.getLogger(__name__)
NAMESPACE = "optigate/gate"
MAX_RETURN_BYTES = 3000  # the returned dict stays well under 4 KB
#: The summary is the SNS message and the Fail state's cause: whatever a file made it say, it stays this short.
MAX_SUMMARY_CHARS = 1200
#: Where each look after a round writes its intervals, under the report's prefix.
LOOKS_FOLDER = "looks"


class UnreadableInput(ValueError):
    """A file the decision reads that failed its schema: the message says which file, where and what."""


def _body(s3, bucket: str, key: str) -> bytes:
    return s3.get_object(Bucket=bucket, Key=key)["Body"].read()


def read_evaluation(s3, bucket: str, key: str) -> dict:
    """The evaluation's verdict.json: a JSON object with a string `status` (and `reasons`, a list, when present),
    as optigate.gate.decision.checks.quality_check reads it; else UnreadableInput."""
    source = f"s3://{bucket}/{key}"
    try:
        data = json.loads(_body(s3, bucket, key))
    except (ValueError, RecursionError) as error:  # not JSON, not UTF-8, nesting past the limit, a huge integer
        raise UnreadableInput(f"{source}: expected a JSON evaluation verdict, found {type(error).__name__}") from None
    if not isinstance(data, dict):
        raise UnreadableInput(f"{source}: expected an object (the evaluation's verdict), found a {type(data).__name__}")
    if not isinstance(data.get("status"), str):
        raise UnreadableInput(
            f"{source}: status: expected a string (pass, fail, ...), found {data.get('status')!r:.60}"
        )
    if not isinstance(data.get("reasons") or [], list):
        raise UnreadableInput(f"{source}: reasons: expected a list, found {json.dumps(data.get('reasons'))[:60]}")
    return data


def _flatten(value) -> list[str]:
    """Keys from a JSONPath projection (`$.benchmark[*].baseline.key`), however nested it arrives."""
    if isinstance(value, str):
        return [value]
    return [key for item in value for key in _flatten(item)]


def _error_code(error: Exception) -> str | None:
    """An AWS error's code (botocore's ClientError carries its response), None for any other error."""
    response = getattr(error, "response", None)
    return response.get("Error", {}).get("Code") if isinstance(response, dict) else None


def read_result(s3, bucket: str, key: str, merged: bool) -> dict:
    """One benchmark result through its schema: a merged fleet result (`merged`) or an `optigate bench --json`
    file; UnreadableInput naming the object and the JSON path when it fails it, or when a merged one lists shards
    the merge could not read (the first one re-read through the bench result's schema, to name its own path; the
    merge's reason when that reads)."""
    source = f"s3://{bucket}/{key}"
    try:
        body = _body(s3, bucket, key)
        data = parse_merged_result(body, source) if merged else parse_result(body, source)
    except ResultFileError as error:
        raise UnreadableInput(str(error)) from None
    except Exception as error:  # a round whose result the fleet never wrote: nothing to decide it on
        if _error_code(error) != "NoSuchKey":
            raise
        raise UnreadableInput(f"{source}: no such object (the benchmark wrote no result there)") from None
    unreadable = data.get("unreadable_shards") or []
    if not unreadable:
        return data
    shard = unreadable[0]
    problem = f"s3://{bucket}/{shard['key']}: {shard['reason']}"
    try:  # the shard is in the merged result's bucket, as the fleet writes both
        parse_result(_body(s3, bucket, shard["key"]), f"s3://{bucket}/{shard['key']}")
    except ResultFileError as error:
        problem = str(error)
    except Exception as error:  # the shard cannot be fetched again (gone, no access): the merge's reason says enough
        LOG.warning("the unreadable shard %s could not be re-read: %s", shard["key"], error)
    more = f" ({len(unreadable) - 1} more unreadable shard(s) listed in {source})" if len(unreadable) > 1 else ""
    raise UnreadableInput(f"a benchmark shard merged into {source} could not be read: {problem}{more}")


def read_event(event: DecideEvent | dict) -> DecideEvent:
    """The decision's event, read through DecideEvent (EventError naming the key it refuses) unless it already is."""
    return event if isinstance(event, DecideEvent) else DecideEvent.from_event(event)


def read_benchmark(s3, bucket: str, event: DecideEvent | dict, side: str) -> dict:
    """One side's results: `<side>_keys` (one merged fleet result per (level, block), in the benchmark Map's order:
    the deployed gate's) or `<side>_key` (one `optigate bench --json` file), each read through its schema
    (UnreadableInput if one fails it). Each run is tagged with its `block`: the n-th run at a level is block n (a
    run that carries a block keeps it)."""
    decision = read_event(event)
    if decision.rounds is not None:
        merged, keys = True, round_keys(decision.rounds, side)
    else:
        merged = bool(getattr(decision, f"{side}_keys"))
        keys = _flatten(resolved(getattr(decision, f"{side}_keys")) if merged else [getattr(decision, f"{side}_key")])
    runs = []
    seen: dict[int, int] = {}
    for key in keys:
        for index, run in enumerate(read_result(s3, bucket, key, merged)["runs"]):
            level = int(run["concurrency"])
            block = seen.get(level, 0)
            seen[level] = block + 1
            block = run.get("block", block)
            if type(block) is not int or block < 0:
                where = f"s3://{bucket}/{key}: runs[{index}].block"
                raise UnreadableInput(f"{where}: expected a whole number, found {json.dumps(block)[:60]}")
            runs.append({**run, "block": block})
    return {"runs": runs}


def round_keys(rounds: BenchmarkRounds, side: str) -> list[str]:
    """One side's merged results, round by round (each round's levels in order): where the fleet wrote them."""
    run_id, done = resolved(rounds.run_id), resolved(rounds.done)
    return [benchmark_result_key(run_id, side, level, block) for block in range(done) for level in rounds.per_shard]


def read_path(s3, bucket: str, prefix: str) -> list[dict]:
    """The looks' intervals, round by round, as each look wrote them (none for a fixed size, which looks once). A
    look that cannot be read is left out of the path, which only illustrates: the verdict is the last look's data."""
    path = []
    folder = f"{prefix.strip('/')}/{LOOKS_FOLDER}/"
    try:
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=folder):
            for item in page.get("Contents") or []:
                path.append(json.loads(_body(s3, bucket, item["Key"])))
    except Exception as error:  # any failure: the path only illustrates (see the docstring)
        LOG.warning("the looks under %s could not be read: %s", folder, error)
    return sorted((look for look in path if isinstance(look, dict)), key=lambda look: look.get("rounds") or 0)


def looks_of(rounds: BenchmarkRounds) -> Looks:
    return Looks(rounds.min_rounds, rounds.max_rounds, rounds.max_minutes)


def minutes_between(start: str | None, end: str | None) -> float | None:
    """Minutes from `start` to `end` (ISO 8601 as Step Functions' context gives them; None: now), None without a
    start or when either cannot be read."""
    if not start:
        return None
    try:
        begun = datetime.fromisoformat(start.replace("Z", "+00:00"))
        finished = datetime.fromisoformat(end.replace("Z", "+00:00")) if end else datetime.now(UTC)
    except ValueError:
        LOG.warning("unreadable round times %r, %r", start, end)
        return None
    return max(0.0, (finished - begun).total_seconds() / 60)


def read_inputs(s3, event: DecideEvent) -> tuple[dict, dict, dict | None] | list[str]:
    """Both sides' benchmark results and the evaluation's verdict (None when none ran), or what failed its schema
    (one problem per file kind, so a person sees each side's)."""
    bucket, evaluation_key = event.bucket, resolved(event.evaluation_key)
    problems: list[str] = []
    read: list = []
    for side in ("baseline", "candidate"):
        try:
            read.append(read_benchmark(s3, bucket, event, side))
        except UnreadableInput as error:
            problems.append(f"{side} benchmark: {error}")
    try:
        read.append(read_evaluation(s3, bucket, evaluation_key) if evaluation_key else None)
    except UnreadableInput as error:
        problems.append(f"evaluation: {error}")
    return problems or (read[0], read[1], read[2])


def verdict_for(s3, event: DecideEvent | dict) -> tuple[GateVerdict, dict | None, dict | None]:
    """The verdict on the event's inputs, and both sides' benchmark results (None when an input failed its
    schema: the verdict is then unreadable_verdict's, and nothing is computed from them)."""
    event = read_event(event)
    read = read_inputs(s3, event)
    if isinstance(read, list):
        return unreadable_verdict(event.team, event.environment, read, event.change), None, None
    baseline, candidate, evaluation = read
    inputs = gate_inputs(s3, event, baseline, candidate, evaluation)
    if event.rounds is None:
        return decide(inputs), baseline, candidate
    rounds, looks = event.rounds, looks_of(event.rounds)
    judgement = judge_round(inputs, looks)
    verdict = judgement.verdict or decide(inputs, confidence=looks.confidence)
    reason, why = resolved(rounds.reason), resolved(rounds.why)
    if judgement.verdict is None:  # fewer rounds at some level than a look needs: the checks say what is missing
        reason, why = "incomplete", f"{judgement.rounds} round(s) measured at every level, {looks.min_rounds} planned"
    summary = rounds_summary(
        judgement,
        looks,
        minutes=minutes_between(resolved(rounds.started), resolved(rounds.ended)),
        price_per_hour_usd=event.price_per_hour_usd,
        instance_count=event.instance_count or 1,
        stopped=(reason, why) if reason and why else None,
    )
    # Only a benchmark in rounds looked after its rounds (its last look's reason is sent); a fixed size looked once.
    looked = read_path(s3, event.bucket, resolved(event.report_prefix)) if reason is not None else []
    summary["path"] = looked or [judgement.to_dict()]
    return replace(verdict, rounds=summary), baseline, candidate


def gate_inputs(s3, event: DecideEvent, baseline: dict, candidate: dict, evaluation: dict | None) -> GateInputs:
    """What the decision judges: both sides' results and the evaluation as read, the rest as the event gives it (a
    look's event has no evaluation, shadow, cross-check or server metrics yet: DecideEvent leaves them None)."""
    return GateInputs(
        team=event.team,
        environment=event.environment,
        change=event.change or {},
        thresholds=event.thresholds or {},
        baseline_benchmark=baseline,
        candidate_benchmark=candidate,
        evaluation=evaluation,
        price_per_hour_usd=event.price_per_hour_usd,
        instance_count=event.instance_count or 1,
        cost_basis=event.cost_basis,  # the plan's (what one measured copy or endpoint costs an hour)
        prediction=event.prediction,
        shadow=shadow_figures(event.shadow),
        cross_check=cross_check_jobs(s3, event.cross_check),
        # What the reader read, where the containers publish server series (none on LMI: no read, None here).
        server_metrics=resolved(event.server_metrics),
        # A speculative candidate's evidence and break-even (the plan's); without it nothing approves speculation.
        speculation=event.speculation,
        traffic=resolved(event.workload),  # the captured workload's shape (constructs.gate.benchmark_workload)
        adapter_check=resolved(event.adapter_check),  # each new adapter version's archive (gate.adapter_steps)
    )


def look(s3, event: DecideEvent) -> dict:
    """A look after a round: whether the rounds stop (optigate.gate.decision.looks.judge_round). A result that
    fails its schema stops them too: the decision then says which file (unreadable_verdict)."""
    rounds = event.rounds
    if rounds is None:  # DecideEvent.check refuses a look without rounds
        raise ValueError("a look needs the rounds it judges")
    read = read_inputs(s3, event)
    if isinstance(read, list):
        return {"stop": True, "reason": "inputs", "why": f"a result could not be read: {read[0]}"[:MAX_SUMMARY_CHARS]}
    inputs = gate_inputs(s3, event, *read)
    judgement = judge_round(inputs, looks_of(rounds), minutes_spent=minutes_between(resolved(rounds.started), None))
    LOG.info("round %d: %s", judgement.rounds, judgement.why)
    # Each look's intervals, for the report's path of the rounds (read back by the decision: read_path).
    key = f"{resolved(event.report_prefix).strip('/')}/{LOOKS_FOLDER}/round-{judgement.rounds:03d}.json"
    s3.put_object(Bucket=event.bucket, Key=key, Body=json.dumps(judgement.to_dict()).encode())
    return {"stop": judgement.stop, "reason": judgement.reason, "why": _cut(judgement.why, MAX_SUMMARY_CHARS, "")}


def shadow_figures(shadow: dict | None) -> dict | None:
    """The mirror window's CloudWatch figures per variant. A window may straddle two periods:
    counts add up, the p99 takes the worse period (never averaged into something better)."""
    if not shadow:
        return None
    # MetricDataResults, and a result's Values, are optional in GetMetricData's answer: none is no traffic.
    results = (shadow.get("metric_data") or {}).get("MetricDataResults") or []
    series = {result["Id"]: result.get("Values") or [] for result in results}

    def side(prefix: str, variant: str | None) -> dict:
        latency = series.get(f"{prefix}_latency") or []
        return {
            "variant": variant,
            "invocations": sum(series.get(f"{prefix}_invocations") or []),
            "errors_5xx": sum(series.get(f"{prefix}_errors") or []),
            # ModelLatency is published in microseconds.
            "p99_model_latency_ms": max(latency) / 1000 if latency else None,
        }

    return {
        "window_minutes": shadow.get("window_minutes"),
        "sampling_percentage": shadow.get("sampling_percentage"),
        "production": side("production", shadow.get("production_variant")),
        "shadow": side("shadow", shadow.get("shadow_variant")),
    }


def managed_output(s3, location: str) -> dict:
    """The AIPerf profile export a managed benchmark job wrote: the first `output.tar.gz` under its
    S3OutputLocation (listed page by page, as the SageMaker SDK finds it), read by optigate.gate.cross_check."""
    bucket, _, prefix = location.removeprefix("s3://").partition("/")
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        for item in page.get("Contents") or []:
            if item["Key"].endswith(OUTPUT_ARCHIVE):
                return read_archive(s3.get_object(Bucket=bucket, Key=item["Key"])["Body"].read())
    raise ExportError(f"no {OUTPUT_ARCHIVE} under {location}")


def cross_check_jobs(s3, cross_check: dict | None) -> dict | None:
    """The managed benchmark's jobs as the decision reads them: each one's status and reason, and the parsed
    export of a Completed one. An output that cannot be read makes that job's cross-check unavailable, never
    the decision fail: the cross-check does not decide."""
    if not cross_check:
        return None
    jobs = []
    for job in cross_check.get("jobs") or []:
        result = job.get("result") or {}
        entry = {
            "concurrency": job["concurrency"],
            "side": job["side"],
            "job": job.get("job"),
            "status": result.get("status"),
            "reason": result.get("reason"),
        }
        if entry["status"] == "Completed":
            try:
                entry["profile"] = managed_output(s3, str(result.get("output") or ""))
            except Exception as error:  # any failure to read is "unavailable" (see the docstring)
                LOG.exception("the managed benchmark's output could not be read")
                entry.update(status="Unreadable", reason=f"its output could not be read: {error}")
        jobs.append(entry)
    return {"tolerance": cross_check.get("tolerance") or {}, "jobs": jobs}


def _plots(
    s3, bucket: str, prefix: str, baseline: dict, candidate: dict, verdict: GateVerdict | None = None
) -> list[tuple[str, bytes]]:
    """The benchmark plots next to the report, and their bytes to embed in it; with an SLO (the verdict has
    capacity) also the Pareto view, throughput per instance against p99 TTFT. They illustrate; the
    numbers decide, so a plot that cannot be drawn is logged, not fatal."""
    from optigate.bench.html_report import write_plots
    from optigate.bench.plots import PARETO_NAME, pareto_figure, png, sides_of
    from optigate.gate.rounds_report import ROUNDS_PLOT, rounds_figure

    results = [("baseline", baseline), ("candidate", candidate)]
    try:
        with tempfile.TemporaryDirectory() as folder:
            written = write_plots(results, Path(folder))
            capacity = verdict.capacity if verdict is not None else None
            path = (verdict.rounds or {}).get("path") if verdict is not None else None
            figure = rounds_figure(path) if path else None
            if figure is not None:  # each look's intervals (optigate.gate.rounds_report)
                written.append(Path(folder, ROUNDS_PLOT))
                written[-1].write_bytes(png(figure))
            if capacity:
                figure = pareto_figure(
                    sides_of(results),
                    ttft_budget_ms=capacity["slo"]["p99_ttft_ms"],
                    instances=int(capacity["instance_count"]),
                )
                written.append(Path(folder, PARETO_NAME))
                written[-1].write_bytes(png(figure))
            for path in written:
                key = f"{prefix}/{path.name}"
                s3.put_object(Bucket=bucket, Key=key, Body=path.read_bytes(), ContentType="image/png")
            return [(path.name, path.read_bytes()) for path in written]
    except Exception:  # any failure: see the docstring
        LOG.exception("benchmark plots could not be drawn")
        return []


def _metrics(verdict: GateVerdict) -> list[dict]:
    team = [{"Name": "Team", "Value": verdict.team}, {"Name": "Environment", "Value": verdict.environment}]
    data = [
        {"MetricName": "Approved", "Dimensions": team, "Value": 1.0 if verdict.approved else 0.0, "Unit": "Count"},
        {
            "MetricName": "Inconclusive",
            "Dimensions": team,
            "Value": 1.0 if verdict.outcome == UNDECIDED else 0.0,
            "Unit": "Count",
        },
    ]
    for level in verdict.levels:
        dims = [*team, {"Name": "Concurrency", "Value": str(level["concurrency"])}]
        p99 = level["candidate"]["p99_ttft_ms"]
        if p99 is not None:
            data.append(
                {"MetricName": "CandidateP99TtftMs", "Dimensions": dims, "Value": float(p99), "Unit": "Milliseconds"}
            )
        gain = level["throughput_gain_pct"]
        if gain is not None:
            data.append(
                {"MetricName": "ThroughputGainPct", "Dimensions": dims, "Value": float(gain), "Unit": "Percent"}
            )
    return data


def _cut(text: str, limit: int, report_key: str) -> str:
    return text if len(text) <= limit else f"{text[:limit]}… (the rest in {report_key})"


def _small(verdict: GateVerdict, report_key: str) -> dict:
    """The reasons that fit the budget; the rest are counted and left to report.json."""
    out: dict = {
        "approved": verdict.approved,
        "outcome": verdict.outcome,
        "reasons": [],
        "report_key": report_key,
        "summary": _cut(verdict.summary, MAX_SUMMARY_CHARS, report_key),
    }
    reasons = list(verdict.reasons)
    for index, reason in enumerate(reasons):
        text = reason if len(reason) <= 400 else reason[:397] + "..."
        more = len(reasons) - index - 1
        candidate = {**out, "reasons": out["reasons"] + [text]}
        tail = candidate
        if more:
            tail = {**candidate, "reasons": candidate["reasons"] + [f"... and {more} more in {report_key}"]}
        if len(json.dumps(tail)) > MAX_RETURN_BYTES:
            out["reasons"].append(f"... and {len(reasons) - index} more in {report_key}")
            break
        out = candidate
    return out


def handler(event: dict, _context=None) -> dict:
    decision = DecideEvent.from_event(event)
    s3 = boto3.client("s3")
    if decision.look:
        return look(s3, decision)
    bucket = decision.bucket
    verdict, baseline, candidate = verdict_for(s3, decision)
    prefix = resolved(decision.report_prefix).strip("/")
    report_key, html_key = f"{prefix}/report.json", f"{prefix}/report.html"
    s3.put_object(Bucket=bucket, Key=report_key, Body=render_json(verdict).encode(), ContentType="application/json")
    plots = _plots(s3, bucket, prefix, baseline, candidate, verdict) if baseline and candidate else []
    page = render_html(verdict, plots, decision.thresholds)
    s3.put_object(Bucket=bucket, Key=html_key, Body=page.encode(), ContentType="text/html; charset=utf-8")
    metrics = _metrics(verdict)
    cloudwatch = boto3.client("cloudwatch")
    for start in range(0, len(metrics), 500):  # PutMetricData takes up to 1000 values per call
        cloudwatch.put_metric_data(Namespace=NAMESPACE, MetricData=metrics[start : start + 500])
    return _small(verdict, report_key)
