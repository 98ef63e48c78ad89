"""A replay's schedule fidelity: how far each send lagged behind its recorded time, and whether the client, not the
server, shaped the load (then the run is refused). Standard library and optigate.bench.core.metrics only: the benchmark
merge function judges the shards of a replay together with it and must not import the client."""

from __future__ import annotations

from typing import Any

from optigate.bench.core.metrics import RunSamples, summarize


def schedule_fidelity(lags_ms: list[float], bound_ms: float) -> dict[str, Any]:
    """A replayed run's lag of sends behind their schedule: p50/p99/max in ms, the bound and whether the client
    shaped the load (p99 over the bound; no send at all: unknown, so client-bound as well: fail closed)."""
    lag = summarize(lags_ms)
    p99 = lag["p99"]
    return {
        "p50_lag_ms": lag["p50"],
        "p99_lag_ms": p99,
        "max_lag_ms": lag["max"],
        "bound_ms": bound_ms,
        "client_bound": p99 is None or p99 > bound_ms,
    }


def refusal(schedule: dict[str, Any]) -> str | None:
    """Why a replayed run cannot be judged, or None when it kept its schedule."""
    if not schedule["client_bound"]:
        return None
    if schedule["p99_lag_ms"] is None:
        return "no request was sent, so the schedule's fidelity is unknown"
    return (
        f"the client fell behind the recorded schedule: p99 lag {schedule['p99_lag_ms']:.1f} ms > bound "
        f"{schedule['bound_ms']:g} ms (max {schedule['max_lag_ms']:.1f} ms), so the client, not the server, shaped "
        "the load; use more --workers, a lower --speedup or a less loaded machine"
    )


def judge_schedule(summary: dict[str, Any], run: RunSamples, bound_ms: float) -> None:
    """Add a replayed run's schedule fidelity to its result, and its refusal when the client shaped the load."""
    summary["schedule"] = schedule_fidelity(run.queue_ms, bound_ms)
    why = refusal(summary["schedule"])
    if why is not None:
        summary["refused"] = why
        summary["warnings"] = [*summary.get("warnings", []), f"c={run.concurrency}: refused: {why}"]
