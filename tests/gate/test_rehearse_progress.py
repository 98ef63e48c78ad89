"""`optigate rehearse`'s progress lines, from an execution history as Step Functions (and moto) write it."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from optigate.rehearse.progress import CAUSE_WIDTH, StateProgress, StateStep, failure_cause, state_steps

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


# A cleanup whose first delete finds nothing (the endpoint was never created) and whose second deletes the model.
MISSED = {"taskFailedEventDetails": {"error": "SageMaker.SageMakerException", "cause": "Could not find endpoint"}}
CLEANUP = _history(
    (0, "TaskStateEntered", "DeleteEndpoint", None),
    (1, "TaskFailed", None, MISSED),
    (1, "TaskStateExited", "DeleteEndpoint", None),
    (1, "TaskStateEntered", "DeleteModel", None),
    (2, "TaskStateExited", "DeleteModel", None),
    (2, "TaskStateEntered", "NotifyFailure", None),
    (3, "TaskStateExited", "NotifyFailure", None),
    (3, "FailStateEntered", "GateFailed", None),
    (3, "ExecutionFailed", None, {"executionFailedEventDetails": {"error": "GateFailed"}}),
)


def test_a_cleanup_that_finds_nothing_to_delete_is_one_quiet_line_not_an_error():
    lines: list[str] = []
    StateProgress(lines.append, cleanup={"DeleteEndpoint", "DeleteModel"}).update(CLEANUP, final=True)
    assert [line.split()[:2] for line in lines] == [
        ["DeleteModel", "ok"],
        ["cleanup:", "1"],
        ["NotifyFailure", "ok"],
        ["GateFailed", "error"],
    ]
    assert lines[1] == (
        "  cleanup: 1 found nothing to delete or stop (SageMaker.SageMakerException: never created, or already "
        "going): DeleteEndpoint; 1.0 s"
    )
    # -v keeps every visit with its error; a state outside the cleanup keeps its error line.
    verbose: list[str] = []
    StateProgress(verbose.append, verbose=True, cleanup={"DeleteEndpoint"}).update(CLEANUP, final=True)
    assert verbose[0].split()[:3] == ["DeleteEndpoint", "error", "SageMaker.SageMakerException"]
    plain: list[str] = []
    StateProgress(plain.append).update(CLEANUP, final=True)
    assert plain[0].split()[:2] == ["DeleteEndpoint", "error"]


def test_a_failure_is_one_line_of_cause_without_the_lambdas_stack_trace():
    lambda_error = {
        "errorMessage": "archive-missing: redline (s3://acme/legal/redline-v2.tar.gz): no bucket acme",
        "errorType": "AdapterRefused",
        "requestId": "1",
        "stackTrace": ['  File "handler.py", line 1, in handler\n    raise\n'],
    }
    failure = {"Error": "AdapterRefused", "Cause": json.dumps(lambda_error)}
    execution = {"status": "FAILED", "error": "GateFailed", "cause": json.dumps(failure)}
    assert failure_cause(execution) == (
        "GateFailed: AdapterRefused: archive-missing: redline (s3://acme/legal/redline-v2.tar.gz): no bucket acme"
    )
    # A named failure's cause is its text; a verdict's, the summary; a long one is cut; a success has none.
    named = {"Error": "OptimizationFailed", "Cause": "optimization job FAILED:\n quantization diverged"}
    assert failure_cause({"error": "GateFailed", "cause": json.dumps(named)}) == (
        "GateFailed: OptimizationFailed: optimization job FAILED: quantization diverged"
    )
    rejected = {"error": "CandidateRejected", "cause": "REJECTED legal/dev: 1 of 9 checks fail (quality[redline])"}
    assert failure_cause(rejected) == "CandidateRejected: REJECTED legal/dev: 1 of 9 checks fail (quality[redline])"
    long = failure_cause({"error": "GateFailed", "cause": "x" * 1000}) or ""
    assert len(long) == CAUSE_WIDTH and long.endswith("…")
    assert failure_cause({"status": "SUCCEEDED"}) is None
