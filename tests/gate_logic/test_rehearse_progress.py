"""`optigate rehearse`'s progress lines, from an execution history as Step Functions (and moto) write it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from optigate.rehearse.progress import StateProgress, StateStep, state_steps

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _history(*events: tuple[float, str, str | None, dict | None]) -> list[dict]:
    """(seconds, type, state name or None, extra details) -> events shaped as get_execution_history's."""
    out = []
    for at, kind, name, extra in events:
        event: dict = {"timestamp": T0 + timedelta(seconds=at), "type": kind}
        if kind.endswith("StateEntered"):
            event["stateEnteredEventDetails"] = {"name": name}
        elif kind.endswith("StateExited"):
            event["stateExitedEventDetails"] = {"name": name}
        event.update(extra or {})
        out.append(event)
    return out


# Init, a poll loop visited twice, a Task that fails and is caught, then the Fail state the execution ends in.
HISTORY = _history(
    (0, "PassStateEntered", "Init", None),
    (1, "PassStateExited", "Init", None),
    (1, "WaitStateEntered", "Wait", None),
    (3, "WaitStateExited", "Wait", None),
    (3, "ChoiceStateEntered", "Done?", None),
    (3.5, "ChoiceStateExited", "Done?", None),
    (3.5, "WaitStateEntered", "Wait", None),
    (6, "WaitStateExited", "Wait", None),
    (6, "ChoiceStateEntered", "Done?", None),
    (6.5, "ChoiceStateExited", "Done?", None),
    (6.5, "TaskStateEntered", "Benchmark", None),
    (9, "TaskFailed", None, {"taskFailedEventDetails": {"error": "States.Timeout", "cause": "slow"}}),
    (9, "TaskStateExited", "Benchmark", None),
    (9, "FailStateEntered", "Rejected", None),
    (9, "ExecutionFailed", None, {"executionFailedEventDetails": {"error": "CandidateRejected"}}),
)


def test_each_visit_has_its_seconds_and_its_error():
    steps = state_steps(HISTORY)
    assert [s.name for s in steps] == ["Init", "Wait", "Done?", "Wait", "Done?", "Benchmark", "Rejected"]
    assert [s.seconds for s in steps] == [1.0, 2.0, 0.5, 2.5, 0.5, 2.5, 0.0]
    assert steps[5] == StateStep("Benchmark", 2.5, "States.Timeout")
    assert steps[-1] == StateStep("Rejected", 0.0, "CandidateRejected", finished=False)
    assert all(s.error is None for s in steps[:5])


def test_one_line_per_state_with_the_loop_folded_and_written_as_the_run_goes():
    lines: list[str] = []
    progress = StateProgress(lines.append)
    progress.update(HISTORY[:5])  # Init and the first Wait have ended; Done? is running
    assert [line.split()[0] for line in lines] == ["Init", "Wait"]
    progress.update(HISTORY[:11])  # the loop's second round: held until the run moves on
    assert len(lines) == 3
    progress.update(HISTORY, final=True)
    assert [line.split()[0] for line in lines] == ["Init", "Wait", "Done?", "again:", "Benchmark", "Rejected"]
    assert lines[3] == "  again: Wait ×1, Done? ×1; 3.0 s"
    assert lines[4].split() == ["Benchmark", "error", "States.Timeout", "2.5", "s"]
    assert lines[5].split() == ["Rejected", "error", "CandidateRejected", "0.0", "s"]
    assert all(line == line.rstrip() and len(line) <= 100 for line in lines)


def test_verbose_writes_every_visit():
    lines: list[str] = []
    progress = StateProgress(lines.append, verbose=True)
    progress.update(HISTORY, final=True)
    assert [line.split()[0] for line in lines] == ["Init", "Wait", "Done?", "Wait", "Done?", "Benchmark", "Rejected"]
