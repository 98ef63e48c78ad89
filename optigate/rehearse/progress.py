"""A rehearsal's progress as lines a person reads live or in a log: one per state, each when the state is left.

The gate's polling loops and benchmark blocks visit the same states again and again (a rehearsal of chat enters
about 60 states, a real gate hundreds): each state gets one line, the first time it is left, and the visits that
follow are folded into one `again:` line per loop, written when the run moves on to a state it has not seen.
`verbose` writes one line per visit instead. Plain text with fixed columns: no cursor movement, so a log file
reads like the terminal.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
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
    """Feeds on an execution's history as it grows (`update`) and writes each state's line once it is known."""

    def __init__(self, write: Callable[[str], None], verbose: bool = False) -> None:
        self.write = write
        self.verbose = verbose
        self.reported = 0  # steps of the history already handled
        self.seen: set[str] = set()
        self.again: dict[str, list[StateStep]] = {}  # revisits not yet written, by state, in first-revisit order

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

    def _step(self, step: StateStep) -> None:
        if self.verbose:
            self.write(step_line(step))
            return
        if step.name in self.seen:
            self.again.setdefault(step.name, []).append(step)
            if step.error is not None:  # an error is news even on a revisit
                self._flush_again()
            return
        self._flush_again()
        self.seen.add(step.name)
        self.write(step_line(step))

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
