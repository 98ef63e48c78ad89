"""OptimizationGate: the state machine of one team's gate in one environment (see the package docstring)."""

from __future__ import annotations

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_ecr_assets as ecr_assets
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sagemaker as sagemaker
from aws_cdk import aws_sns as sns
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from optigate import naming
from optigate.constructs import nag
from optigate.constructs.assets import image_context
from optigate.constructs.benchmark_fleet import BenchmarkFleet
from optigate.constructs.common import function_role
from optigate.constructs.evaluation_job import EvaluationJob
from optigate.constructs.gate import access, cross_check, proof, shadow, stages
from optigate.constructs.gate.spec import GateSpec
from optigate.constructs.gate.tasks import CleanupPath, PollStates, poll_loop, run_name, sdk_task, start_run


class OptimizationGate(Construct):
    """The gate of one team in one environment (see the package docstring).

    :param spec: what to prove and the thresholds, from the team's config.
    :param fleet: the BenchmarkFleet that loads baseline and candidate.
    :param evaluation: the EvaluationJob comparing their answers.
    :param bucket: where reports and optimized artifacts go (the fleet's and evaluation's bucket).
    :param encryption_key: encrypts artifacts, reports and the notification topic.
    :param model_package_group: @default a new group named after team and environment
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        spec: GateSpec,
        fleet: BenchmarkFleet,
        evaluation: EvaluationJob,
        bucket: s3.IBucket,
        encryption_key: kms.IKey,
        model_package_group: str | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        self.spec = spec
        self.bucket = bucket
        self.key = encryption_key
        self.group_name = model_package_group or naming.package_group(spec.team, spec.environment)
        self.group = sagemaker.CfnModelPackageGroup(
            self,
            "Group",
            model_package_group_name=self.group_name,
            model_package_group_description=f"optigate: proven candidates of {spec.team} in {spec.environment}",
            model_package_group_policy=access.group_policy(self, spec, self.group_name),
        )
        # Retained: the group holds every verdict (the audit trail of what was proven and promoted), and
        # DeleteModelPackageGroup refuses a group that still has versions, which would fail stack deletion.
        self.group.apply_removal_policy(RemovalPolicy.RETAIN)
        self.topic = sns.Topic(
            self,
            "Notifications",
            master_key=encryption_key,
            display_name=f"optigate gate {spec.prefix}",
            enforce_ssl=True,
        )
        self.decider = self._decider()
        # The function that stages the candidate's files an optimization job does not write, if any
        # (stages.stage_candidate_files sets it while the definition is built).
        self.stager: lambda_.Function | None = None
        # SageMaker's managed benchmark beside the gate's own, when configured: its role and workload configs.
        self.cross_check_role = cross_check.job_role(self) if spec.cross_check else None
        self.workload_configs = cross_check.workload_configs(self) if spec.cross_check else []
        self.state_machine = self._state_machine(fleet, evaluation)
        if self.cross_check_role is not None:
            cross_check.grant(self, self.cross_check_role, self.workload_configs)
        if self.stager is not None:
            nag.allow(self.state_machine.role, ["lambda:InvokeFunction"], [self.stager.function_arn])
        access.grant_gate(self, fleet, evaluation)
        self.invoker = access.pipeline_access(self) if spec.pipeline else None

    # ------------------------------------------------------------------ the decision Lambda

    def _decider(self) -> lambda_.Function:
        role, log_group = function_role(self, "Decide")
        nag.allow(
            role,
            ["s3:GetObject", "s3:PutObject"],
            [self.bucket.arn_for_objects("*")],
            why_wildcard="Reads benchmark and evaluation results and writes reports in the gate's own results bucket.",
        )
        nag.allow(role, ["kms:Decrypt", "kms:Encrypt", "kms:GenerateDataKey"], [self.key.key_arn])
        if self.spec.cross_check:
            # The managed benchmark's output.tar.gz is found by listing the job's output prefix.
            nag.allow(
                role,
                ["s3:ListBucket"],
                [self.bucket.bucket_arn],
                conditions={"StringLike": {"s3:prefix": [f"{cross_check.OUTPUT_PREFIX}/*"]}},
            )
        nag.allow(
            role,
            ["cloudwatch:PutMetricData"],
            ["*"],
            conditions={"StringEquals": {"cloudwatch:namespace": "optigate/gate"}},
            why_wildcard="PutMetricData has no resource scope; the condition limits it to the optigate/gate namespace.",
        )
        # A container image: numpy and matplotlib (see optigate/containers/gate-decide/Dockerfile). x86_64 like
        # the evaluation image, so a build machine without arm64 emulation can build both.
        return lambda_.DockerImageFunction(
            self,
            "Decide",
            architecture=lambda_.Architecture.X86_64,
            code=lambda_.DockerImageCode.from_image_asset(
                image_context("gate-decide"), file="Dockerfile", platform=ecr_assets.Platform.LINUX_AMD64
            ),
            timeout=Duration.minutes(5),
            memory_size=1024,
            role=role,
            log_group=log_group,
            description=f"optigate gate decision for {self.spec.prefix}",
        )

    # ------------------------------------------------------------------ definition

    def _state_machine(self, fleet: BenchmarkFleet, evaluation: EvaluationJob) -> sfn.StateMachine:
        spec = self.spec
        deletes = stages.cleanup_and_end(self)
        restore_path: tuple[sfn.Choice, sfn.Choice] | None = None  # (the restore, where it leads on)
        if spec.shadow:
            # With a shadow, every path first returns the live endpoint to its CloudFormation
            # config; AfterRestore then leads on (wired below, once the decision exists).
            after_restore = sfn.Choice(self, "AfterRestore")
            restore = shadow.restore_live(self, spec, then=after_restore)
            restore_path = (restore, after_restore)
            cleanup = CleanupPath(
                self,
                sfn.Pass(self, "Cleanup", result=sfn.Result.from_boolean(True), result_path="$.cleaning").next(restore),
            )
        else:
            cleanup = CleanupPath(self, deletes)
        start_candidate, candidate_ready = stages.candidate_source(self, cleanup)

        # ---- stage on a temporary endpoint
        create_model = cleanup.guarded(
            sdk_task(
                self,
                "CreateCandidateModel",
                "sagemaker:createModel",
                {
                    "ModelName.$": run_name(spec, "cand"),
                    "ExecutionRoleArn": spec.model_role_arn,
                    "EnableNetworkIsolation": True,
                    "PrimaryContainer": spec.candidate_container(),
                },
                result_path=sfn.JsonPath.DISCARD,
            )
        )
        create_config, create_endpoint = stages.temporary_endpoint(
            self, cleanup, "cand", "Candidate", {"ModelName.$": run_name(spec, "cand")}
        )

        # ---- the baseline's twin: the live model, the candidate's instance type and count, no users
        create_twin_config, create_twin = stages.baseline_twin(self, cleanup)

        # ---- benchmark, evaluate, (mirror live traffic,) decide, record
        benchmark = stages.benchmark_levels(self, fleet, cleanup)
        evaluate = cleanup.guarded(
            evaluation.task(
                self,
                "Evaluate",
                job_name=run_name(spec, "eval"),
                baseline=run_name(spec, "twin"),
                candidate=run_name(spec, "cand"),
                result_path=sfn.JsonPath.DISCARD,
            )
        )
        decide = cleanup.guarded(stages.decide(self))
        twin_ready = stages.endpoint_ready(self, cleanup, "twin", then=benchmark)
        endpoint_ready = poll_loop(
            self,
            PollStates(
                reset="ResetEndpointPolls",
                wait="WaitForEndpoint",
                count="CountEndpointPoll",
                choice="CandidateInService?",
            ),
            describe=cleanup.guarded(
                sdk_task(
                    self,
                    "DescribeCandidateEndpoint",
                    "aws-sdk:sagemaker:describeEndpoint",
                    {"EndpointName.$": run_name(spec, "cand")},
                    result_path="$.endpoint",
                )
            ),
            until=[
                (sfn.Condition.string_equals("$.endpoint.EndpointStatus", "InService"), twin_ready),
                (
                    sfn.Condition.string_equals("$.endpoint.EndpointStatus", "Failed"),
                    cleanup.fail_with_reason(
                        "CandidateEndpointFailed",
                        "CandidateEndpointFailed",
                        "candidate endpoint",
                        "$.endpoint.EndpointStatus",
                        "$.endpoint.FailureReason",
                    ),
                ),
            ],
            timed_out=cleanup.fail_with(
                "CandidateEndpointTimedOut",
                "CandidateEndpointTimedOut",
                f"the candidate endpoint was not InService within {spec.max_polls} polls of {spec.poll_seconds} s",
            ),
            poll_seconds=spec.poll_seconds,
            max_polls=spec.max_polls,
        )
        candidate_ready.next(create_model).next(create_config).next(create_endpoint).next(create_twin_config).next(
            create_twin
        ).next(endpoint_ready.entry)
        if self.cross_check_role is not None:
            benchmark.next(cross_check.cross_check_states(self, self.cross_check_role, then=evaluate))
        else:
            benchmark.next(evaluate)
        if restore_path is not None:
            restore, after_restore = restore_path
            # After the restore: the deletes when cleaning up or failed, else on to the decision.
            cleaning_or_failed = sfn.Condition.or_(
                sfn.Condition.is_present("$.cleaning"), sfn.Condition.is_present("$.failure")
            )
            after_restore.when(cleaning_or_failed, deletes).otherwise(decide)
            evaluate.next(shadow.mirror_live_traffic(self, spec, cleanup, then=restore))
        else:
            evaluate.next(decide)
        decide.next(proof.record_verdict(self, cleanup))

        definition = sfn.Chain.start(start_run(self)).next(proof.unless_proven(self, cleanup, start_candidate))
        log_group = logs.LogGroup(
            self, "Logs", retention=logs.RetentionDays.THREE_MONTHS, removal_policy=RemovalPolicy.DESTROY
        )
        return sfn.StateMachine(
            self,
            "StateMachine",
            state_machine_name=naming.gate_state_machine_name(spec.team, spec.environment),
            definition_body=sfn.DefinitionBody.from_chainable(definition),
            state_machine_type=sfn.StateMachineType.STANDARD,
            tracing_enabled=True,
            logs=sfn.LogOptions(destination=log_group, level=sfn.LogLevel.ALL, include_execution_data=True),
            timeout=Duration.hours(24),
        )
