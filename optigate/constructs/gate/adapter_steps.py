"""An adapter team's steps before anything is created or paid for: new adapter versions' archives checked, and the
benchmark's mix read from CloudWatch when the team sets none. Both run in the gate's staging function
(optigate/lambdas/stage_candidate)."""

from __future__ import annotations

from aws_cdk import Aws
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from optigate import naming
from optigate.config.models import split_s3_uri
from optigate.constructs import nag
from optigate.constructs.common import allow_source_decrypt
from optigate.constructs.gate import grants
from optigate.constructs.gate.candidate import Stager
from optigate.constructs.gate.component_stages import component_name
from optigate.constructs.gate.tasks import CleanupPath, sdk_task
from optigate.deployment.gate import GatePlan
from optigate.lambdas.events import AdapterMix, FromState, StageEvent

#: Where the archive check's result waits for the decision (each adapter's rank, base model check and why).
CHECKED = "$.adapter_check"


def _checked_archives(plan: GatePlan) -> tuple[dict[str, str], dict[str, object]] | None:
    """The new adapter versions the candidate brings (name: archive) and the limits they are checked against; None
    when there is nothing to check."""
    components = plan.components
    changed = {a.name: a.candidate_artifact_uri for a in components.adapters if a.changed} if components else {}
    if not changed or components is None or components.adapter_limits is None:
        return None
    return changed, components.adapter_limits


def check_adapter_archives(
    scope: Construct, plan: GatePlan, stager: Stager, cleanup: CleanupPath, then: sfn.IChainable
) -> sfn.IChainable:
    """A candidate that brings new adapter versions (gate.candidate.adapters): each archive is read and checked
    (optigate.deployment.adapter_archive: rank, base model by its id and its architecture, target modules vLLM
    serves) before any job or endpoint exists; a refused archive fails the run as AdapterRefused, with the adapter
    and the reason. What each passing archive is (its base model check among it: "same", or "unknown" with why)
    goes to `$.adapter_check` for the decision's report. Else `then`."""
    checked = _checked_archives(plan)
    if checked is None:
        return then
    changed, limits = checked
    function, role = stager.get()
    nag.allow(
        role,
        ["s3:GetObject"],
        [f"arn:{Aws.PARTITION}:s3:::{uri.removeprefix('s3://')}" for uri in sorted(changed.values())],
        why_wildcard=None,
    )
    # Without ListBucket a missing archive reads as AccessDenied; with it, as the missing archive it is. HeadObject's
    # check of ListBucket carries no s3:prefix, so no prefix condition (it would deny exactly that check).
    buckets = sorted({split_s3_uri(uri)[0] for uri in changed.values()})
    nag.allow(role, ["s3:ListBucket"], [f"arn:{Aws.PARTITION}:s3:::{bucket}" for bucket in buckets])
    components = plan.components
    if components is not None:  # the new versions are read with their adapters' keys
        allow_source_decrypt(role, [a.key_arn for a in components.adapters if a.changed and a.key_arn])
    check = cleanup.guarded(
        sdk_task(
            scope,
            "CheckAdapterArchives",
            "lambda:invoke",
            {
                "FunctionName": function.function_arn,
                # The limits read through the event as the function will read them (a malformed one fails the synth).
                "Payload": StageEvent.from_event({"adapter_check": {"adapters": changed, **limits}}).to_payload(),
            },
            grants=[grants.invoke(function)],
            result_path=CHECKED,
            result_selector={"adapters.$": "$.Payload.adapters"},
        )
    )
    return check.next(then)


def decide_input(plan: GatePlan) -> FromState | None:
    """The archive check's result for the decision (DecideEvent.adapter_check), which reports it (never decides on
    it: a refused archive stopped the run before anything was created); None when no archive was checked."""
    return FromState(f"{CHECKED}.adapters") if _checked_archives(plan) is not None else None


def read_adapter_mix(
    scope: Construct, plan: GatePlan, stager: Stager, cleanup: CleanupPath, then: sfn.IChainable
) -> sfn.IChainable:
    """An adapter team without gate.benchmark.adapter_mix: the live components' shares of Invocations over the last
    7 days, read from CloudWatch before anything is created, become the benchmark's spread (`$.mix.twin`,
    `$.mix.cand`); no history fails the run as NoInvocationHistory (a refusal, not a guess). Else `then`."""
    components = plan.components
    if components is None or components.mix is not None:
        return then
    function, _ = stager.get()  # its role may read metrics (candidate.Stager)
    live = {label: naming.inference_component_name(plan.live_endpoint, label) for label in components.labels}
    sides = {
        side: {f"{label}.$": component_name(plan, side, index) for index, label in enumerate(components.labels)}
        for side in ("twin", "cand")
    }
    read = cleanup.guarded(
        sdk_task(
            scope,
            "ReadAdapterMix",
            "lambda:invoke",
            {
                "FunctionName": function.function_arn,
                "Payload": StageEvent(adapter_mix=AdapterMix(live=live, sides=sides)).to_payload(),
            },
            grants=[grants.invoke(function)],
            result_path="$.mix",
            result_selector={"twin.$": "$.Payload.twin", "cand.$": "$.Payload.cand"},
        )
    )
    return read.next(then)
