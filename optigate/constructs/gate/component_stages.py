"""An adapter team's gate: the inference components on its twin and candidate endpoints.

Both endpoints are created without a model (a variant that inference components fill), then each gets a base
component (the twin's runs the live model, the candidate's the candidate model, each one copy reserving the
same compute) and one component per adapter on that base (the twin's the live archive, the candidate's the
candidate's version). The cleanup deletes every component of the run before the endpoints go: the console
deletes inference components before their endpoint (https://docs.aws.amazon.com/sagemaker/latest/dg/
realtime-endpoints-delete-resources.html), and whether SageMaker deletes an adapter's base while the adapter
stays is not documented, so deletion is retried in rounds until the run has no component left.
"""

from __future__ import annotations

from typing import Any

from aws_cdk import Duration
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from optigate.constructs.evaluation_job import EvaluatedAdapter
from optigate.constructs.gate import grants
from optigate.constructs.gate.tasks import CleanupPath, SdkTask, run_name, sdk_task
from optigate.deployment.gate import GatePlan
from optigate.deployment.gate_components import MAX_RUN_COMPONENTS, GateComponents

#: The variant the gate's endpoints serve their components on (the components name it).
VARIANT = "AllTraffic"
#: Components SageMaker lists per call (ListInferenceComponents' MaxResults): a run's components are counted in one
#: page, so a run has at most 100 (the base and 49 adapters on each side; GateComponents refuses more).
LIST_PAGE = MAX_RUN_COMPONENTS
#: Cleanup rounds (list, delete what is left, wait) before the endpoints are deleted anyway.
CLEANUP_ROUNDS = 20
CLEANUP_WAIT_SECONDS = 30

SIDES: dict[str, str] = {"twin": "Twin", "cand": "Candidate"}


def components_of(plan: GatePlan) -> GateComponents:
    if plan.components is None:
        raise ValueError(f"the gate of {plan.prefix} serves no inference components")
    return plan.components


def component_name(plan: GatePlan, side: str, index: int, run_id_path: str = "$.run.id") -> str:
    """A run's component (optigate.naming.run_component_template) as a Step Functions expression."""
    return f"States.Format('{plan.component_template(side, index)}', {run_id_path})"  # type: ignore[arg-type]


def stage_components(
    scope: Construct,
    plan: GatePlan,
    cleanup: CleanupPath,
    baseline_model_name: str,
    then: sfn.IChainable,
) -> sfn.IChainable:
    """Create both sides' base components and wait for them, then every adapter's component on each base and wait
    for all; then `then`. Each create is its own state (its names are literal templates: the IAM check resolves
    them); each wait is one loop that counts the run's InService components, however many adapters there are."""
    components = components_of(plan)
    owned = grants.run_components(scope, plan)
    models = {"twin": {"ModelName": baseline_model_name}, "cand": {"ModelName.$": run_name(plan, "cand")}}

    def create(side: str, index: int, specification: dict[str, Any], label: str) -> SdkTask:
        runtime = {"VariantName": VARIANT, "RuntimeConfig": {"CopyCount": 1}} if index == 0 else {}
        return cleanup.guarded(
            sdk_task(
                scope,
                f"Create{SIDES[side]}{label}",
                "aws-sdk:sagemaker:createInferenceComponent",
                {
                    "InferenceComponentName.$": component_name(plan, side, index),
                    "EndpointName.$": run_name(plan, side),  # type: ignore[arg-type]
                    "Specification": specification,
                    **runtime,
                },
                grants=[owned],
                result_path=sfn.JsonPath.DISCARD,
            )
        )

    def base(side: str) -> SdkTask:
        compute = components.compute_of(side)
        download, startup = plan.side(side).startup_timeouts
        specification = {
            **models[side],
            "ComputeResourceRequirements": {
                "NumberOfAcceleratorDevicesRequired": compute.accelerators,
                "NumberOfCpuCoresRequired": compute.cores,
                "MinMemoryRequiredInMb": compute.min_memory_mb,
            },
            "StartupParameters": {
                "ModelDataDownloadTimeoutInSeconds": download,
                "ContainerStartupHealthCheckTimeoutInSeconds": startup,
            },
        }
        return create(side, 0, specification, "BaseComponent")

    def adapter(side: str, index: int, artifact: str) -> SdkTask:
        specification = {
            "BaseInferenceComponentName.$": component_name(plan, side, 0),
            "Container": {"ArtifactUrl": artifact},
        }
        return create(side, index, specification, f"Adapter{index:02d}Component")

    all_ready = _wait_for_components(scope, plan, cleanup, "Components", components.run_components, then)
    chain = sfn.Chain.start(base("twin")).next(base("cand"))
    if not components.adapters:
        return chain.next(all_ready)
    creates = []
    for a in components.adapters:
        creates += [
            adapter("twin", a.index, a.artifact_uri),
            adapter("cand", a.index, a.candidate_artifact_uri),
        ]
    adapters_chain = sfn.Chain.start(creates[0])
    for state in creates[1:]:
        adapters_chain = adapters_chain.next(state)
    adapters_chain.next(all_ready)
    return chain.next(_wait_for_components(scope, plan, cleanup, "BaseComponents", components.SIDES, adapters_chain))


def _wait_for_components(
    scope: Construct, plan: GatePlan, cleanup: CleanupPath, label: str, expected: int, then: sfn.IChainable
) -> sfn.IChainable:
    """Wait until `expected` of the run's components are InService (then `then`); one Failed, or too many polls,
    is a named failure. The run id is in every component name of the run and in no other run's."""
    listed = grants.list_components()

    def listing(name: str, status: str, path: str) -> SdkTask:
        return cleanup.guarded(
            sdk_task(
                scope,
                name,
                "aws-sdk:sagemaker:listInferenceComponents",
                {"NameContains.$": "$.run.id", "StatusEquals": status, "MaxResults": LIST_PAGE},
                grants=[listed],
                result_path=path,
                result_selector={"names.$": "$.InferenceComponents[*].InferenceComponentName"},
            )
        )

    reset = sfn.Pass(
        scope, f"Reset{label}Polls", result=sfn.Result.from_object({"count": 0}), result_path="$.component_polls"
    )
    wait = sfn.Wait(scope, f"WaitFor{label}", time=sfn.WaitTime.duration(Duration.seconds(plan.benchmark.poll_seconds)))
    ready = listing(f"List{label}InService", "InService", "$.components_ready")
    failed = listing(f"List{label}Failed", "Failed", "$.components_failed")
    count = sfn.Pass(
        scope,
        f"Count{label}Poll",
        parameters={
            "count.$": "States.MathAdd($.component_polls.count, 1)",
            "ready.$": "States.ArrayLength($.components_ready.names)",
        },
        result_path="$.component_polls",
    )
    choice = (
        sfn.Choice(scope, f"{label}InService?")
        .when(
            sfn.Condition.is_present("$.components_failed.names[0]"),
            cleanup.fail_with(
                f"{label}Failed",
                f"{label}Failed",
                cause_path="States.Format('inference components failed: {} (DescribeInferenceComponent says why)', "
                "States.JsonToString($.components_failed.names))",
            ),
        )
        .when(sfn.Condition.number_greater_than_equals("$.component_polls.ready", expected), then)
        .when(
            sfn.Condition.number_greater_than_equals("$.component_polls.count", plan.benchmark.max_polls),
            cleanup.fail_with(
                f"{label}TimedOut",
                f"{label}TimedOut",
                f"{expected} inference components were not InService within {plan.benchmark.max_polls} polls of "
                f"{plan.benchmark.poll_seconds} s",
            ),
        )
        .otherwise(wait)
    )
    reset.next(wait).next(ready).next(failed).next(count).next(choice)
    return reset


def delete_run_components(scope: Construct, plan: GatePlan, then: sfn.IChainable) -> sfn.IChainable:
    """The cleanup's first step for an adapter team: delete each of the run's components (adapters before their
    bases; a delete that fails is caught: never created, already deleting, or a base whose adapters are still
    going), wait, and list the run's components again; while any is left, another round of the bases' deletes,
    at most CLEANUP_ROUNDS; then `then` (the endpoint deletes)."""
    components = components_of(plan)
    owned = grants.run_components(scope, plan)
    order = [(side, a.index) for a in components.adapters for side in SIDES] + [(side, 0) for side in SIDES]
    reset = sfn.Pass(
        scope, "ResetComponentCleanup", result=sfn.Result.from_object({"count": 0}), result_path="$.cleanup_rounds"
    )
    wait = sfn.Wait(
        scope, "WaitForComponentDeletes", time=sfn.WaitTime.duration(Duration.seconds(CLEANUP_WAIT_SECONDS))
    )
    deletes = [
        sdk_task(
            scope,
            f"Delete{SIDES[side]}{'BaseComponent' if index == 0 else f'Adapter{index:02d}Component'}",
            "aws-sdk:sagemaker:deleteInferenceComponent",
            {"InferenceComponentName.$": component_name(plan, side, index)},
            grants=[owned],
            result_path=sfn.JsonPath.DISCARD,
        )
        for side, index in order
    ]
    for state, following in zip(deletes, [*deletes[1:], wait], strict=True):
        state.next(following)
        state.add_catch(following, errors=["States.ALL"], result_path="$.cleanup_error")
    listing = sdk_task(
        scope,
        "ListRunComponents",
        "aws-sdk:sagemaker:listInferenceComponents",
        {"NameContains.$": "$.run.id", "MaxResults": LIST_PAGE},
        grants=[grants.list_components()],
        result_path="$.run_components",
        result_selector={"names.$": "$.InferenceComponents[*].InferenceComponentName"},
    )
    count = sfn.Pass(
        scope,
        "CountComponentCleanup",
        parameters={"count.$": "States.MathAdd($.cleanup_rounds.count, 1)"},
        result_path="$.cleanup_rounds",
    )
    # Later rounds delete the bases only: an adapter's delete went out in the first round (a repeated one fails on
    # a component already Deleting, after its retries), a base may have been refused while its adapters remained.
    bases = len(SIDES)
    choice = (
        sfn.Choice(scope, "RunComponentsLeft?")
        .when(sfn.Condition.is_not_present("$.run_components.names[0]"), then)
        .when(sfn.Condition.number_greater_than_equals("$.cleanup_rounds.count", CLEANUP_ROUNDS), then)
        .otherwise(deletes[-bases])
    )
    listing.add_catch(then, errors=["States.ALL"], result_path="$.cleanup_error")
    wait.next(count).next(listing).next(choice)
    reset.next(deletes[0])
    return reset


def benchmark_components(plan: GatePlan, side: str, run_id_path: str) -> list[dict[str, Any]]:
    """The benchmark workers' `inference_components` on `side`: each component the mix sends requests to, its
    adapter label and weight (optigate.lambdas.benchmark)."""
    components = components_of(plan)
    if components.mix is None:
        raise ValueError(f"the gate of {plan.prefix} has no adapter mix")
    index = {label: i for i, label in enumerate(components.labels)}
    return [
        {"name.$": component_name(plan, side, index[label], run_id_path), "adapter": label, "weight": weight}
        for label, weight in components.mix
    ]


def evaluated(plan: GatePlan) -> list[EvaluatedAdapter]:
    """What the evaluation judges on an adapter team's endpoints: the base on the gate's dataset and each adapter on
    its own (or the gate's), each its component on the twin and on the candidate; none for a model-backed team."""
    if plan.components is None:
        return []
    datasets = [plan.components.base_dataset_uri, *(a.dataset_uri for a in plan.components.adapters)]
    return [
        EvaluatedAdapter(label, dataset, component_name(plan, "twin", index), component_name(plan, "cand", index))
        for index, (label, dataset) in enumerate(zip(plan.components.labels, datasets, strict=True))
    ]
