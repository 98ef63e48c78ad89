"""The gate's proofs are model packages: each verdict is recorded in the team's group with the
candidate's fingerprint (Approved, Rejected, or PendingManualApproval when the verdict is
inconclusive: a person approves or rejects it in the registry), and a candidate judged before is
not judged again."""

from __future__ import annotations

from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from optigate.constructs.gate import grants
from optigate.constructs.gate.tasks import CleanupPath, SdkTask, sdk_task
from optigate.deployment.gate import GatePlan
from optigate.promote.lock import adapters_metadata, compiled_for_metadata


def record_verdict(
    scope: Construct, plan: GatePlan, group_name: str, bucket_name: str, cleanup: CleanupPath
) -> sfn.Choice:
    """The verdict as a model package carrying the fingerprint and the report, then the cleanup:
    APPROVED Approved, INCONCLUSIVE PendingManualApproval (never promoted by itself; a person's
    approval in the registry starts the pipeline as any approval does), anything else Rejected."""

    def record(name: str, status: str) -> SdkTask:
        return cleanup.guarded(
            sdk_task(
                scope,
                name,
                "aws-sdk:sagemaker:createModelPackage",
                {
                    "ModelPackageGroupName": group_name,
                    "ModelPackageDescription.$": "$.decision.summary",
                    "ModelApprovalStatus": status,
                    "InferenceSpecification": {
                        "Containers": [plan.candidate_container()],
                        "SupportedRealtimeInferenceInstanceTypes": plan.supported_instance_types,
                        "SupportedContentTypes": ["application/json"],
                        "SupportedResponseMIMETypes": ["application/json", "application/jsonlines"],
                    },
                    "CustomerMetadataProperties": {
                        "report.$": "States.Format('s3://" + bucket_name + "/{}', $.decision.report_key)",
                        "gate_run.$": "$.run.id",
                        "fingerprint": plan.fingerprint,
                        # What a compiled engine is built for, so that a later team file can say it must be recompiled.
                        **({"compiled_for": compiled_for_metadata(plan.compiled_for)} if plan.compiled_for else {}),
                        # New adapter versions, which a promotion writes into the lock (optigate.promote).
                        **(adapters_metadata(plan.components.approved_adapters) if plan.components else {}),
                    },
                },
                grants=[grants.group_packages(scope, group_name)],
                result_path="$.model_package",
                result_selector={"arn.$": "$.ModelPackageArn"},
            )
        )

    return (
        sfn.Choice(scope, "Approved?")
        .when(
            sfn.Condition.boolean_equals("$.decision.approved", True),
            record("RecordApproved", "Approved").next(cleanup.entry),
        )
        .when(
            sfn.Condition.string_equals("$.decision.outcome", "INCONCLUSIVE"),
            record("RecordInconclusive", "PendingManualApproval").next(cleanup.entry),
        )
        .otherwise(record("RecordRejected", "Rejected").next(cleanup.entry))
    )


# Over 80 lines: the proof lookup's states chained in the order they run.
def unless_proven(
    scope: Construct, plan: GatePlan, group_name: str, cleanup: CleanupPath, start: sfn.IChainable
) -> sfn.IChainable:
    """The newest package of the group carries the fingerprint of the candidate it judged: the
    same candidate, Approved, passes at once (a pipeline re-run costs seconds, not a benchmark);
    Rejected, fails at once with the earlier verdict; still PendingManualApproval (inconclusive,
    nobody has decided yet), fails at once with `Inconclusive`. Input {"force": true} proves it again."""
    fingerprint = plan.fingerprint
    last = cleanup.guarded(
        sdk_task(
            scope,
            "FindLastProof",
            "aws-sdk:sagemaker:listModelPackages",
            {
                "ModelPackageGroupName": group_name,
                "SortBy": "CreationTime",
                "SortOrder": "Descending",
                "MaxResults": 1,
            },
            grants=[grants.LIST_MODEL_PACKAGES],
            result_path="$.last",
            result_selector={"arns.$": "$.ModelPackageSummaryList[*].ModelPackageArn"},
        )
    )
    describe = sdk_task(
        scope,
        "DescribeLastProof",
        "aws-sdk:sagemaker:describeModelPackage",
        {"ModelPackageName.$": "States.ArrayGetItem($.last.arns, 0)"},
        grants=[grants.group_packages(scope, group_name)],
        # The whole answer, no ResultSelector: approval status, description and metadata are optional
        # in DescribeModelPackage's output, and selecting an absent one is a States.Runtime error that no
        # Catch handles (one package registered by hand would break every later run). The Choice tests them.
        result_path="$.last_proof",
    )
    describe.add_catch(start, errors=["States.ALL"], result_path="$.last_error")
    # A package without our metadata (registered by hand) is no proof of anything: prove.
    same = sfn.Condition.and_(
        sfn.Condition.is_not_present("$.force"),
        sfn.Condition.is_present("$.last_proof.CustomerMetadataProperties.fingerprint"),
        sfn.Condition.string_equals("$.last_proof.CustomerMetadataProperties.fingerprint", fingerprint),
        sfn.Condition.is_present("$.last_proof.ModelPackageDescription"),
        sfn.Condition.is_present("$.last_proof.ModelApprovalStatus"),
    )
    proven = sfn.Pass(
        scope,
        "AlreadyProven",
        parameters={
            "approved": True,
            "unchanged": True,
            "model_package_arn.$": "$.last_proof.ModelPackageArn",
            "summary.$": f"States.Format('UNCHANGED {plan.prefix}: candidate {fingerprint} was approved before "
            "({}); nothing to prove', $.last_proof.ModelPackageArn)",
        },
        result_path="$.decision",
    ).next(sfn.Succeed(scope, "CandidateAlreadyProven", output_path="$.decision"))
    rejected = sfn.Fail(
        scope,
        "CandidateRejectedBefore",
        error="CandidateRejectedBefore",
        cause_path=f"States.Format('candidate {fingerprint} is unchanged since it was rejected ({{}}): {{}}. "
        "Change the candidate, or start the gate with the input force: true to prove it again', "
        "$.last_proof.ModelPackageArn, $.last_proof.ModelPackageDescription)",
    )
    undecided = sfn.Fail(
        scope,
        "CandidateUndecidedBefore",
        error="Inconclusive",
        cause_path=f"States.Format('candidate {fingerprint} is unchanged since its verdict was inconclusive ({{}}): "
        "{}. Approve or reject that model package in the registry, or start the gate with the input force: true "
        "to prove it again', $.last_proof.ModelPackageArn, $.last_proof.ModelPackageDescription)",
    )

    def status_is(status: str) -> sfn.Condition:
        return sfn.Condition.and_(same, sfn.Condition.string_equals("$.last_proof.ModelApprovalStatus", status))

    judged = (
        sfn.Choice(scope, "SameCandidateAsLastProof?")
        .when(status_is("Approved"), proven)
        .when(status_is("Rejected"), rejected)
        .when(status_is("PendingManualApproval"), undecided)
        .otherwise(start)
    )
    describe.next(judged)
    return sfn.Chain.start(last).next(
        sfn.Choice(scope, "ProvenBefore?").when(sfn.Condition.is_present("$.last.arns[0]"), describe).otherwise(start)
    )
