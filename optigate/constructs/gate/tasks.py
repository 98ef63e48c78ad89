"""The gate's building blocks: an AWS SDK task that retries throttling and carries the IAM grant its
call needs, the way to the cleanup that every error and failure takes, and one bounded poll loop (wait,
describe, count, decide)."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from aws_cdk import Aws, Duration
from aws_cdk import aws_iam as iam
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from optigate import naming
from optigate.constructs import nag, retries
from optigate.deployment.gate import GatePlan


@dataclass(frozen=True)
class Grant:
    """One IAM statement a task's call needs (optigate.constructs.nag.allow: a wildcard needs its reason)."""

    actions: tuple[str, ...]
    resources: tuple[str, ...]
    conditions: dict[str, Any] | None = field(default=None, hash=False)
    why_wildcard: str | None = None

    @property
    def key(self) -> str:
        """Equal statements, wherever declared, are applied once (their acknowledgements too)."""
        return json.dumps([self.actions, self.resources, self.conditions, self.why_wildcard], sort_keys=True)

    def apply(self, role: iam.IRole) -> None:
        nag.allow(
            role, list(self.actions), list(self.resources), why_wildcard=self.why_wildcard, conditions=self.conditions
        )


@dataclass(frozen=True)
class ConstructGrant:
    """A grant a construct makes itself (`function.grant_invoke`, `EvaluationJob.grant_run`), applied once per `key`."""

    key: str
    apply: Callable[[iam.IRole], object]


TaskGrant = Grant | ConstructGrant
State = TypeVar("State", bound=sfn.CustomState)


class SdkTask(sfn.CustomState):
    """A Task state and the grants its call needs (applied to the state machine's role by :func:`apply_grants`)."""

    def __init__(
        self, scope: Construct, name: str, *, state_json: dict[str, Any], grants: Sequence[TaskGrant] = ()
    ) -> None:
        super().__init__(scope, name, state_json=state_json)
        self.grants = tuple(grants)


def sdk_task(
    scope: Construct,
    name: str,
    resource: str,
    parameters: dict[str, Any],
    *,
    grants: Sequence[TaskGrant],
    result_path: str | None = None,
    result_selector: dict[str, Any] | None = None,
) -> SdkTask:
    """A Task state calling `arn:<partition>:states:::<resource>`, retrying what its kind of
    integration raises for throttling and transient faults (optigate.constructs.retries), with the
    `grants` its call needs."""
    state: dict[str, Any] = {
        "Type": "Task",
        "Resource": f"arn:{Aws.PARTITION}:states:::{resource}",
        "Parameters": parameters,
        "ResultPath": result_path,
    }
    state["Retry"] = [retries.retry_for(state["Resource"])]
    if result_selector:
        state["ResultSelector"] = result_selector
    return SdkTask(scope, name, state_json=state, grants=grants)


def apply_grants(scope: Construct, role: iam.IRole) -> None:
    """Grant `role` what every task under `scope` needs, each grant once."""
    grants: dict[str, TaskGrant] = {}
    for child in scope.node.find_all():
        if isinstance(child, SdkTask):
            grants.update((grant.key, grant) for grant in child.grants)
    for grant in grants.values():
        grant.apply(role)


def start_run(scope: Construct) -> sfn.Pass:
    """The first state: a new run id at `$.run.id`, which every per-run resource name carries."""
    return sfn.Pass(scope, "Init", parameters={"id.$": naming.RUN_ID_EXPRESSION}, result_path="$.run")


def run_name(plan: GatePlan, kind: naming.RunKind) -> str:
    """The name a run gives its `kind` of resource (optigate.naming), as a Step Functions expression
    that formats the run id `$.run.id` into it."""
    return f"States.Format('{plan.run_name_template(kind)}', $.run.id)"


@dataclass(frozen=True)
class CleanupPath:
    """Where every error and failure goes: `entry`, the cleanup (through the restore of the live
    endpoint when the gate shadows). The reason is kept in `$.failure`."""

    scope: Construct
    entry: sfn.IChainable

    def guarded(self, state: State) -> State:
        state.add_catch(self.entry, errors=["States.ALL"], result_path="$.failure")
        return state

    def fail_with(self, name: str, error: str, cause: str | None = None, *, cause_path: str | None = None) -> sfn.Chain:
        """A named failure (a fixed `cause`, or one read at run time from `cause_path`), then the cleanup."""
        reason = {"Error": error, "Cause": cause} if cause_path is None else {"Error": error, "Cause.$": cause_path}
        return sfn.Pass(self.scope, name, parameters=reason, result_path="$.failure").next(self.entry)

    def fail_with_reason(self, name: str, error: str, what: str, status_path: str, reason_path: str) -> sfn.Choice:
        """A named failure whose cause is `what`, the status at `status_path` and, when present, the
        reason at `reason_path`. A FailureReason is optional in every SageMaker Describe output (absent
        on STOPPED, for one); formatting an absent path is a States.Runtime error that no Catch handles."""
        explained = self.fail_with(
            name, error, cause_path=f"States.Format('{what} {{}}: {{}}', {status_path}, {reason_path})"
        )
        unexplained = self.fail_with(
            f"{name}WithoutReason", error, cause_path=f"States.Format('{what} {{}} (no reason given)', {status_path})"
        )
        return (
            sfn.Choice(self.scope, f"{name}?")
            .when(sfn.Condition.is_present(reason_path), explained)
            .otherwise(unexplained)
        )


@dataclass(frozen=True)
class Ending:
    """Where a run ends: `cleanup`, the deletes of what it may have created, then the notification and the end;
    `nothing_created`, a failure's notification and end without them (a failure before the first create)."""

    cleanup: sfn.IChainable
    nothing_created: sfn.IChainable


@dataclass(frozen=True)
class PollStates:
    """The names of one poll loop's states."""

    reset: str
    wait: str
    count: str
    choice: str


@dataclass(frozen=True)
class PollLoop:
    """A bounded poll loop: `entry` resets the counter and starts it; `wait` waits one interval and
    polls again (for a step that must be followed by another poll)."""

    entry: sfn.Pass
    wait: sfn.Wait


def poll_loop(
    scope: Construct,
    names: PollStates,
    *,
    describe: SdkTask,
    until: Sequence[tuple[sfn.Condition, sfn.IChainable]],
    timed_out: sfn.IChainable,
    poll_seconds: int,
    max_polls: int,
    then: Sequence[tuple[sfn.Condition, sfn.IChainable]] = (),
    counter: str = "$.polls",
    describe_first: bool = False,
) -> PollLoop:
    """Describe until one of `until` holds (the first that holds wins), at most `max_polls` times.

    After `until`, `timed_out` once the count reaches `max_polls`, then the first of `then` that
    holds, else wait and poll again. By default the loop waits before each describe and counts it;
    `describe_first` describes at once and counts each wait.
    """
    reset = sfn.Pass(scope, names.reset, result=sfn.Result.from_object({"count": 0}), result_path=counter)
    wait = sfn.Wait(scope, names.wait, time=sfn.WaitTime.duration(Duration.seconds(poll_seconds)))
    count = sfn.Pass(
        scope, names.count, parameters={"count.$": f"States.MathAdd({counter}.count, 1)"}, result_path=counter
    )
    choice = sfn.Choice(scope, names.choice)
    for condition, target in until:
        choice.when(condition, target)
    choice.when(sfn.Condition.number_greater_than_equals(f"{counter}.count", max_polls), timed_out)
    for condition, target in then:
        choice.when(condition, target)
    choice.otherwise(wait)
    if describe_first:
        reset.next(describe)
        wait.next(count).next(describe)
        describe.next(choice)
    else:
        reset.next(wait)
        wait.next(describe).next(count).next(choice)
    return PollLoop(entry=reset, wait=wait)
