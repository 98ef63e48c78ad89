"""SageMaker's managed benchmark as a cross-check: read what its NVIDIA AIPerf run wrote and set it beside
optigate's own figures (pure: stdlib only, no AWS; the decide Lambda does the S3 reads around it).

What a managed benchmark job writes: `output.tar.gz` under its S3OutputLocation, holding AIPerf's
`profile_export_aiperf.json` (the SageMaker SDK reads it so: sagemaker/serve/ai_inference_recommender/
result.py, `BenchmarkResult.from_s3`). That file is one JSON object whose metric entries are
`{"unit": ..., "avg": ..., "p50": ..., "p99": ..., "min": ..., "max": ..., "std": ...}` keyed by the metric's
tag, beside non-metric members (`input_config`, `error_summary`, `start_time`, ...): AIPerf
docs/tutorials/working-with-profile-exports.md ("Aggregated Statistics (JSON)",
https://github.com/ai-dynamo/aiperf). The metrics compared, as AIPerf defines them
(docs/metrics_reference.md):

- `time_to_first_token`: first response chunk − request start (its client's clock; includes its own
  overhead), per request;
- `inter_token_latency`: (request_latency − TTFT) / (output_sequence_length − 1), a per-request mean:
  what optigate calls TPOT (not optigate's per-gap ITL);
- `output_token_throughput`: output tokens / benchmark duration (tokens/sec), one value (`avg`).

A cross-check never decides: :func:`compare` only reports agreement, disagreement beyond the tolerance, or
"unavailable" with the reason; the gate's verdict is optigate's alone.
"""

from __future__ import annotations

import io
import json
import math
import tarfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

PROFILE_EXPORT = "profile_export_aiperf.json"
OUTPUT_ARCHIVE = "output.tar.gz"
#: A concurrency sweep writes this instead of one top-level profile export (SDK result.py); the gate runs one
#: level per job, so a sweep is not what it asked for.
SEARCH_HISTORY = "search_history.json"

#: Units AIPerf writes for times (docs: "ms" for latencies, "sec" for the benchmark duration), to milliseconds.
_TO_MS = {"ns": 1e-6, "us": 1e-3, "µs": 1e-3, "ms": 1.0, "s": 1000.0, "sec": 1000.0, "seconds": 1000.0}
_RATE_UNITS = frozenset({"tokens/sec", "tokens/s", "tokens per second"})

#: What is compared: (our name, AIPerf tag, AIPerf statistic, optigate's figure, kind).
COMPARED = (
    ("ttft_p99_ms", "time_to_first_token", "p99", "p99_ttft_ms", "ms"),
    ("itl_p99_ms", "inter_token_latency", "p99", "p99_tpot_ms", "ms"),
    ("output_tokens_per_s", "output_token_throughput", "avg", "output_tokens_per_s", "rate"),
)


class ExportError(ValueError):
    """The managed job's output cannot be read as one AIPerf profile export."""


@dataclass(frozen=True)
class AiperfFigures:
    """The figures of one AIPerf run that the cross-check compares (None when the export lacks one)."""

    ttft_p99_ms: float | None
    itl_p99_ms: float | None
    output_tokens_per_s: float | None
    request_count: float | None = None
    error_count: float | None = None

    def to_dict(self) -> dict[str, float | None]:
        return {
            "ttft_p99_ms": self.ttft_p99_ms,
            "itl_p99_ms": self.itl_p99_ms,
            "output_tokens_per_s": self.output_tokens_per_s,
            "request_count": self.request_count,
            "error_count": self.error_count,
        }


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def _stat(profile: Mapping[str, Any], tag: str, stat: str, kind: str) -> float | None:
    entry = profile.get(tag)
    if not isinstance(entry, Mapping):
        return None
    value = _number(entry.get(stat))
    if value is None:
        return None
    unit = str(entry.get("unit") or "").strip()
    if kind == "count":
        return value
    if kind == "ms":
        if unit not in _TO_MS:
            raise ExportError(f"{tag} is in {unit or 'no unit'}, not a unit of time AIPerf writes")
        return value * _TO_MS[unit]
    if unit and unit not in _RATE_UNITS:
        raise ExportError(f"{tag} is in {unit}, not tokens/sec")
    return value


def parse_profile(profile: Mapping[str, Any]) -> AiperfFigures:
    """The compared figures of a parsed `profile_export_aiperf.json`, latencies in ms."""
    if not isinstance(profile, Mapping):
        raise ExportError(f"{PROFILE_EXPORT} is not a JSON object")
    figures = {name: _stat(profile, tag, stat, kind) for name, tag, stat, _, kind in COMPARED}
    errors = profile.get("error_request_count")
    return AiperfFigures(
        **figures,
        request_count=_stat(profile, "request_count", "avg", "count"),
        error_count=_number(errors.get("avg")) if isinstance(errors, Mapping) else _number(errors),
    )


def read_archive(archive: bytes) -> dict[str, Any]:
    """`profile_export_aiperf.json` out of a job's `output.tar.gz` (the first member with that name, as the SDK
    reads it). A sweep's `search_history.json` or no export at all is an ExportError."""
    try:
        with tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz") as tar:
            members = [m for m in tar.getmembers() if m.isfile()]
            if any(m.name.endswith(SEARCH_HISTORY) for m in members):
                raise ExportError(f"{OUTPUT_ARCHIVE} holds a concurrency sweep ({SEARCH_HISTORY}), not one level")
            member = next((m for m in members if m.name.endswith(PROFILE_EXPORT)), None)
            if member is None:
                raise ExportError(f"{OUTPUT_ARCHIVE} holds no {PROFILE_EXPORT}")
            handle = tar.extractfile(member)
            data = handle.read() if handle else b""
    except (tarfile.TarError, OSError, EOFError) as error:
        raise ExportError(f"{OUTPUT_ARCHIVE} is not a gzip tar archive: {error}") from error
    try:
        profile = json.loads(data)
    except ValueError as error:
        raise ExportError(f"{PROFILE_EXPORT} is not JSON: {error}") from error
    if not isinstance(profile, dict):
        raise ExportError(f"{PROFILE_EXPORT} is not a JSON object")
    return profile


# --------------------------------------------------------------------------- the comparison


def _allowance(name: str, ours: float, tolerance: Mapping[str, float]) -> float:
    """How far AIPerf may read from `ours`: the larger of the absolute and relative allowance for latencies,
    the relative one for throughput."""
    if name == "output_tokens_per_s":
        return abs(ours) * float(tolerance["throughput_pct"]) / 100
    absolute, relative = float(tolerance[name]), float(tolerance[name.replace("_ms", "_pct")])
    return max(absolute, abs(ours) * relative / 100)


def compare_side(
    ours: Mapping[str, Any], theirs: AiperfFigures, tolerance: Mapping[str, float]
) -> tuple[list[dict[str, Any]], list[str]]:
    """Each compared metric of one side at one level: both values, the difference and whether it is beyond the
    tolerance; and a sentence per disagreement."""
    rows, disagreements = [], []
    managed = theirs.to_dict()
    for name, tag, stat, figure, _ in COMPARED:
        mine, aiperf = _number(ours.get(figure)), managed[name]
        row: dict[str, Any] = {"metric": name, "optigate": mine, "aiperf": aiperf, "aiperf_source": f"{tag}.{stat}"}
        if mine is None or aiperf is None:
            row.update(difference=None, allowed=None, disagrees=None)
        else:
            allowed = _allowance(name, mine, tolerance)
            row.update(difference=aiperf - mine, allowed=allowed, disagrees=abs(aiperf - mine) > allowed)
            if row["disagrees"]:
                disagreements.append(f"{name} optigate {mine:,.1f}, AIPerf {aiperf:,.1f} (allowed ±{allowed:,.1f})")
        rows.append(row)
    return rows, disagreements


def compare(
    levels: Sequence[Mapping[str, Any]],
    jobs: Sequence[Mapping[str, Any]],
    tolerance: Mapping[str, float],
) -> dict[str, Any]:
    """The cross-check section of the gate report.

    `levels`: the verdict's levels (optigate's figures per concurrency and side). `jobs`: one entry per managed
    job, `{"concurrency", "side" ("baseline" | "candidate"), "job", "status", "reason"?, "profile"?}` where
    `profile` is the parsed export of a Completed job. A job that did not complete, or whose export cannot be
    read, is "unavailable" with its reason; one that completed is "agrees" or "disagrees"."""
    ours = {(int(level["concurrency"]), side): level[side] for level in levels for side in ("baseline", "candidate")}
    entries, flagged, unavailable = [], [], []
    for job in sorted(jobs, key=lambda j: (int(j["concurrency"]), j["side"] != "baseline")):
        level, side = int(job["concurrency"]), str(job["side"])
        entry: dict[str, Any] = {"concurrency": level, "side": side, "job": job.get("job"), "status": job.get("status")}
        reason = None
        if job.get("status") != "Completed":
            reason = job.get("reason") or f"the managed job ended {job.get('status') or 'without a status'}"
        elif (level, side) not in ours:
            reason = "optigate measured no figures at this level"
        else:
            try:
                figures = parse_profile(job.get("profile") or {})
            except ExportError as error:
                reason = str(error)
            else:
                rows, disagreements = compare_side(ours[(level, side)], figures, tolerance)
                entry.update(outcome="disagrees" if disagreements else "agrees", metrics=rows)
                entry["aiperf"] = figures.to_dict()
                if disagreements:
                    flagged.append(f"concurrency {level} {side}: " + "; ".join(disagreements))
        if reason is not None:
            entry.update(outcome="unavailable", reason=reason, metrics=[])
            unavailable.append(f"concurrency {level} {side}: {reason}")
        entries.append(entry)
    if not entries:
        headline = "SageMaker cross-check: unavailable (no managed benchmark ran)"
    elif flagged:
        headline = (
            f"SageMaker cross-check DISAGREES beyond tolerance at {len(flagged)} of {len(entries)} runs "
            "(optigate's numbers decide; see the cross-check section)"
        )
    elif unavailable and len(unavailable) == len(entries):
        headline = "SageMaker cross-check: unavailable (" + "; ".join(unavailable) + ")"
    elif unavailable:
        headline = (
            f"SageMaker cross-check agrees within tolerance; {len(unavailable)} of {len(entries)} runs unavailable"
        )
    else:
        headline = f"SageMaker cross-check agrees within tolerance at all {len(entries)} runs"
    return {
        "engine": "sagemaker-aiperf",
        "tolerance": dict(tolerance),
        "headline": headline,
        "disagreements": flagged,
        "unavailable": unavailable,
        "runs": entries,
    }
