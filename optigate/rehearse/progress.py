"""A rehearsal's progress as lines a person reads live or in a log: one per state, each when the state is left.

The gate's polling loops and benchmark blocks visit the same states again and again (a rehearsal of chat enters
about 60 states, a real gate hundreds): each state gets one line, the first time it is left, and the visits that
follow are folded into one `again:` line per loop, written when the run moves on to a state it has not seen.
The cleanup's deletes catch their own errors (a resource the run never created, or one already going): those are
folded into one `cleanup:` line rather than an error line each. `verbose` writes one line per visit instead. Plain
text with fixed columns: no cursor movement, so a log file reads like the terminal.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

#: Widest state name given its own column; longer names push the outcome right (they are not cut).
NAME_WIDTH = 32


@dataclass(frozen=True)
class StateStep:
    """One visit of one state: how long it took and the error it raised (caught or not), if any."""

    name: str
    seconds: float
    error: str | None = None
    finished: bool = True  # False: the execution ended in this state (a Fail or Succeed state, or a stop)

    @property
    def outcome(self) -> str:
        return "ok" if self.error is None else f"error {self.error}"


def _seconds(start: Any, end: Any) -> float:
    if isinstance(start, datetime) and isinstance(end, datetime):
        return max(0.0, (end - start).total_seconds())
    return 0.0


def state_steps(history: Sequence[dict[str, Any]]) -> list[StateStep]:
    """Each state visit of an execution's history (get_execution_history's events, in order), in the order the
    visits ended; visits still open at the end (the execution ended in them) come last, in the order they began.

    A failure event (TaskFailed, ExecutionFailed, ...) belongs to the latest visit still open when it happens."""
    open_visits: dict[str, deque[int]] = {}
    started: list[tuple[str, Any]] = []  # per visit, in entry order: (name, timestamp)
    errors: dict[int, str] = {}
    ended: list[tuple[int, Any]] = []  # (visit, timestamp) in exit order
    for event in history:
        timestamp = event.get("timestamp")
        entered = event.get("stateEnteredEventDetails")
        exited = event.get("stateExitedEventDetails")
        if entered is not None:
            open_visits.setdefault(entered["name"], deque()).append(len(started))
            started.append((entered["name"], timestamp))
        elif exited is not None and open_visits.get(exited["name"]):
            ended.append((open_visits[exited["name"]].popleft(), timestamp))
        elif str(event.get("type", "")).endswith("Failed"):
            details = next((v for k, v in event.items() if k.endswith("EventDetails") and isinstance(v, dict)), {})
            still_open = [visit for visits in open_visits.values() for visit in visits]
            if still_open and details.get("error"):
                errors[max(still_open)] = str(details["error"])
    last = history[-1].get("timestamp") if history else None
    steps = [StateStep(started[visit][0], _seconds(started[visit][1], at), errors.get(visit)) for visit, at in ended]
    for visit in sorted(visit for visits in open_visits.values() for visit in visits):
        name, at = started[visit]
        steps.append(StateStep(name, _seconds(at, last), errors.get(visit), finished=False))
    return steps


def step_line(step: StateStep, visits: int = 1) -> str:
    """`  Name                      ok      0.4 s` (with `×3` and the visits' total seconds when looped)."""
    outcome = step.outcome if step.finished or step.error else "ended here"
    times = f" ×{visits}" if visits > 1 else ""
    return f"  {step.name + times:<{NAME_WIDTH}} {outcome:<10} {step.seconds:7.1f} s"


class StateProgress:
    """Feeds on an execution's history as it grows (`update`) and writes each state's line once it is known.

    `cleanup`: the states whose errors are caught as a cleanup's miss (optigate.rehearse.gate_layout.cleanup_states);
    their failed visits are folded into one `cleanup:` line."""

    def __init__(self, write: Callable[[str], None], verbose: bool = False, cleanup: Collection[str] = ()) -> None:
        self.write = write
        self.verbose = verbose
        self.cleanup = frozenset(cleanup)
        self.reported = 0  # steps of the history already handled
        self.seen: set[str] = set()
        self.again: dict[str, list[StateStep]] = {}  # revisits not yet written, by state, in first-revisit order
        self.missed: list[StateStep] = []  # cleanup visits whose error was caught, not yet written

    def update(self, history: Sequence[dict[str, Any]], final: bool = False) -> None:
        """Write the lines of the visits that ended since the last call; `final`: the execution is over, so the
        states it ended in and any pending revisits are written too."""
        steps = state_steps(history)
        finished = [step for step in steps if step.finished]
        for step in finished[self.reported :]:
            self._step(step)
        self.reported = len(finished)
        if final:
            for step in steps[len(finished) :]:
                self._step(step)
            self._flush_again()
            self._flush_missed()

    def _step(self, step: StateStep) -> None:
        if self.verbose:
            self.write(step_line(step))
            return
        if step.error is not None and step.finished and step.name in self.cleanup:
            self.missed.append(step)  # caught: the run goes on; said once the cleanup's deletes are over
            return
        if step.name in self.seen:
            self.again.setdefault(step.name, []).append(step)
            if step.error is not None:  # an error is news even on a revisit
                self._flush_again()
            return
        self._flush_again()
        if step.name not in self.cleanup:
            self._flush_missed()
        self.seen.add(step.name)
        self.write(step_line(step))

    def _flush_missed(self) -> None:
        if not self.missed:
            return
        names = list(dict.fromkeys(step.name for step in self.missed))
        errors = ", ".join(sorted({str(step.error) for step in self.missed}))
        seconds = sum(step.seconds for step in self.missed)
        self.write(
            f"  cleanup: {len(names)} found nothing to delete or stop ({errors}: never created, or already going): "
            f"{', '.join(names)}; {seconds:.1f} s"
        )
        self.missed = []

    def _flush_again(self) -> None:
        if not self.again:
            return
        parts = []
        for name, visits in self.again.items():
            errors = [v.error for v in visits if v.error]
            part = f"{name} ×{len(visits)}" + (f" (error {errors[-1]})" if errors else "")
            parts.append(part)
        seconds = sum(v.seconds for visits in self.again.values() for v in visits)
        self.write(f"  again: {', '.join(parts)}; {seconds:.1f} s")
        self.again = {}


#: The most characters of a failure's cause `failure_cause` gives (one line on a terminal or two).
CAUSE_WIDTH = 300


def failure_cause(execution: dict[str, Any]) -> str | None:
    """An ended execution's failure in one line, without the stack trace a Lambda's error carries: `GateFailed:
    AdapterRefused: archive-missing: redline (s3://...): no such object`; None when it did not fail.

    The gate's Fail states carry the failure they caught (`{"Error", "Cause"}` as JSON) or the verdict's summary;
    a Lambda's cause is its JSON error (errorType, errorMessage, stackTrace), of which the message is kept."""
    error = execution.get("error")
    if not error:
        return None
    parts = [str(error)]
    cause: Any = execution.get("cause")
    for _ in range(3):  # a Fail state's failure, the Lambda error inside it, ...
        parsed = _json(cause)
        if isinstance(parsed, dict) and "Error" in parsed:
            parts.append(str(parsed["Error"]))
            cause = parsed.get("Cause")
        elif isinstance(parsed, dict) and "errorMessage" in parsed:
            if parsed.get("errorType") and parsed["errorType"] != parts[-1]:
                parts.append(str(parsed["errorType"]))
            cause = parsed["errorMessage"]
        else:
            break
    if cause not in (None, ""):
        parts.append(str(cause))
    line = " ".join(": ".join(dict.fromkeys(parts)).split())
    return line if len(line) <= CAUSE_WIDTH else line[: CAUSE_WIDTH - 1] + "…"


def _json(value: Any) -> Any:
    if not isinstance(value, str) or not value.lstrip().startswith("{"):
        return value
    try:
        return json.loads(value)
    except ValueError:
        return value
