"""OptimizationGate: the state machine of one team's gate in one environment (see the package docstring)."""

from __future__ import annotations

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_ecr_assets as ecr_assets
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sagemaker as sagemaker
from aws_cdk import aws_sns as sns
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from optigate import naming
from optigate.constructs import nag
from optigate.constructs.assets import image_context
from optigate.constructs.benchmark_fleet import generated_policy_reason
from optigate.constructs.common import function_role
from optigate.constructs.gate import (
    access,
    benchmark_jobs,
    benchmark_workload,
    component_stages,
    cross_check,
    grants,
    proof,
    server_metrics,
    shadow,
    stages,
)
from optigate.constructs.gate.adapter_steps import check_adapter_archives, read_adapter_mix
from optigate.constructs.gate.candidate import Stager, candidate_source
from optigate.constructs.gate.resources import GateResources
from optigate.constructs.gate.tasks import CleanupPath, apply_grants, run_name, sdk_task, start_run
from optigate.deployment.gate import GatePlan


class OptimizationGate(Construct):
    """The gate of one team in one environment (see the package docstring).

    :param plan: what to measure and prove, resolved from the team's config (optigate.deployment.gate).
    :param resources: what the stack created that the gate uses (the model role, the live model and config,
        the results bucket and key, the benchmark fleet, the evaluation job).
    :param model_package_group: @default a new group named after team and environment
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        plan: GatePlan,
        resources: GateResources,
        model_package_group: str | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        if plan.shadow is not None and resources.live_config is None:
            raise ValueError(f"the gate of {plan.prefix} has a shadow stage but no live endpoint config")
        self.plan = plan
        self.resources = resources
        self.bucket = resources.bucket
        self.key = resources.key
        self.group_name = model_package_group or naming.package_group(plan.team, plan.environment)
        self.group = sagemaker.CfnModelPackageGroup(
            self,
            "Group",
            model_package_group_name=self.group_name,
            model_package_group_description=f"optigate: proven candidates of {plan.team} in {plan.environment}",
            model_package_group_policy=access.group_policy(self, plan, self.group_name),
        )
        # Retained: the group holds every verdict (the audit trail of what was proven and promoted), and
        # DeleteModelPackageGroup refuses a group that still has versions, which would fail stack deletion.
        self.group.apply_removal_policy(RemovalPolicy.RETAIN)
        self.topic = sns.Topic(
            self,
            "Notifications",
            master_key=resources.key,
            display_name=f"optigate gate {plan.prefix}",
            enforce_ssl=True,
        )
        self.decider = self._decider()
        # The function that stages the candidate's files an optimization job does not write, if any (created
        # while the definition is built, by the first stage that needs it).
        self.stager = Stager(self, plan, resources.bucket, resources.key)
        # SageMaker's managed benchmark beside the gate's own, when configured: its role and workload configs.
        self.cross_check_role = (
            cross_check.job_role(self, plan, resources.bucket, resources.key) if plan.cross_check else None
        )
        self.workload_configs = cross_check.workload_configs(self, plan) if plan.cross_check else []
        # The function that runs the managed jobs (not Step Functions' SDK integration: see benchmark_jobs).
        self.cross_check_jobs = (
            benchmark_jobs.jobs_function(self, plan, self.cross_check_role) if self.cross_check_role else None
        )
        self.state_machine = self._state_machine()
        # What every task's call needs: each task carries its grant.
        apply_grants(self, self.state_machine.role)
        nag.acknowledge_generated_wildcards(self.state_machine, generated_policy_reason)
        self.invoker = (
            access.pipeline_access(self, plan, self.state_machine.state_machine_arn, self.group_name)
            if plan.pipeline
            else None
        )

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
        if self.plan.cross_check:
            # The managed benchmark's output.tar.gz is found by listing the job's output prefix.
            nag.allow(
                role,
                ["s3:ListBucket"],
                [self.bucket.bucket_arn],
                conditions={"StringLike": {"s3:prefix": [f"{cross_check.OUTPUT_PREFIX}/*"]}},
            )
        if self.plan.benchmark.max_rounds is not None:
            # The decision lists the looks each round wrote under the run's report prefix (the report's path).
            nag.allow(
                role,
                ["s3:ListBucket"],
                [self.bucket.bucket_arn],
                conditions={"StringLike": {"s3:prefix": [f"{stages.REPORTS_PREFIX}/*"]}},
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
            description=f"optigate gate decision for {self.plan.prefix}",
        )

    # ------------------------------------------------------------------ definition

    # Over 80 lines: the gate's state machine, read top to bottom as the console draws it.
    def _state_machine(self) -> sfn.StateMachine:
        plan, resources = self.plan, self.resources
        bucket_name = resources.bucket.bucket_name
        ending = stages.cleanup_and_end(
            self, plan, self.topic.topic_arn, resources.key.key_arn, cross_check_jobs=self.cross_check_jobs
        )
        deletes = ending.cleanup
        # A failure before the first create (a refused archive, no capture, no traffic history) has nothing to
        # delete or restore: it is notified and ends.
        before_creation = CleanupPath(self, ending.nothing_created)
        restore_path: tuple[sfn.Choice, sfn.Choice] | None = None  # (the restore, where it leads on)
        live = resources.live_config
        if plan.shadow and live is not None:
            # With a shadow, every path first returns the live endpoint to its CloudFormation
            # config; AfterRestore then leads on (wired below, once the decision exists).
            after_restore = sfn.Choice(self, "AfterRestore")
            restore = shadow.restore_live(self, plan, live, then=after_restore)
            restore_path = (restore, after_restore)
            cleanup = CleanupPath(
                self,
                sfn.Pass(self, "Cleanup", result=sfn.Result.from_boolean(True), result_path="$.cleaning").next(restore),
            )
        else:
            cleanup = CleanupPath(self, deletes)
        start_candidate, candidate_ready = candidate_source(self, plan, resources, self.stager, cleanup)

        # ---- stage on a temporary endpoint
        create_model = stages.candidate_model(self, plan, cleanup, resources.model_role_arn)
        create_config, create_endpoint = stages.temporary_endpoint(
            self, plan, cleanup, "cand", "Candidate", {"ModelName.$": run_name(plan, "cand")}, resources.model_role_arn
        )

        # ---- the baseline's twin: the live model, the candidate's instance type and count, no users
        create_twin_config, create_twin = stages.baseline_twin(
            self, plan, cleanup, resources.baseline_model_name, resources.model_role_arn
        )

        # ---- benchmark, evaluate, (mirror live traffic,) decide, record
        benchmark = stages.benchmark_rounds(
            self, plan, resources.fleet, cleanup, self.decider, bucket_name, resources.workload_uri
        )
        # The server's own figures are read over the benchmark, where the containers publish any (none on LMI).
        reads_server = bool(plan.server_series)
        window_starts: sfn.IChainable = benchmark
        if reads_server:
            window_starts = server_metrics.mark_benchmark_start(self).next(benchmark)
        evaluate = cleanup.guarded(
            sdk_task(
                self,
                "Evaluate",
                "sagemaker:createProcessingJob.sync",
                resources.evaluation.request(
                    run_name(plan, "eval"),
                    run_name(plan, "twin"),
                    run_name(plan, "cand"),
                    adapters=component_stages.evaluated(plan),
                ),
                grants=[grants.run_evaluation(plan, resources.evaluation)],
                result_path=sfn.JsonPath.DISCARD,
            )
        )
        decide = cleanup.guarded(stages.decide(self, plan, self.decider, bucket_name, live))
        # An adapter team's endpoints then get their inference components, which the benchmark loads.
        loaded: sfn.IChainable = (
            component_stages.stage_components(self, plan, cleanup, resources.baseline_model_name, then=window_starts)
            if plan.components is not None
            else window_starts
        )
        twin_ready = stages.endpoint_ready(self, plan, cleanup, "twin", then=loaded)
        candidate_in_service = stages.endpoint_ready(self, plan, cleanup, "cand", then=twin_ready)
        candidate_ready.next(create_model).next(create_config).next(create_endpoint).next(create_twin_config).next(
            create_twin
        ).next(candidate_in_service)
        # The benchmark's end is kept; the server's own figures are read after the evaluation (server_metrics).
        after_evaluation: sfn.IChainable = (
            cross_check.cross_check_states(
                self, plan, self.cross_check_role, self.cross_check_jobs, bucket_name, then=evaluate
            )
            if self.cross_check_role is not None and self.cross_check_jobs is not None
            else evaluate
        )
        if reads_server:
            benchmark.next(server_metrics.mark_benchmark_end(self).next(after_evaluation))
        else:
            benchmark.next(after_evaluation)
        evaluated = evaluate.next(server_metrics.read_server_metrics(self, plan, cleanup)) if reads_server else evaluate
        if restore_path is not None and live is not None:
            restore, after_restore = restore_path
            # After the restore: the deletes when cleaning up or failed, else on to the decision.
            cleaning_or_failed = sfn.Condition.or_(
                sfn.Condition.is_present("$.cleaning"), sfn.Condition.is_present("$.failure")
            )
            after_restore.when(cleaning_or_failed, deletes).otherwise(decide)
            evaluated.next(shadow.mirror_live_traffic(self, plan, live, cleanup, then=restore))
        else:
            evaluated.next(decide)
        decide.next(proof.record_verdict(self, plan, self.group_name, bucket_name, cleanup))

        # The capture an EAGLE head trains from, a captured workload and new adapter versions are checked before
        # anything is created or paid for.
        checked = benchmark_workload.check_training_data(
            self,
            plan,
            resources.fleet,
            before_creation,
            resources.training_data_uri,
            then=benchmark_workload.check_capture(
                self,
                plan,
                resources.fleet,
                before_creation,
                resources.workload_uri,
                then=check_adapter_archives(
                    self,
                    plan,
                    self.stager,
                    before_creation,
                    then=read_adapter_mix(self, plan, self.stager, before_creation, start_candidate),
                ),
            ),
        )
        definition = sfn.Chain.start(start_run(self)).next(
            proof.unless_proven(self, plan, self.group_name, before_creation, checked)
        )
        log_group = logs.LogGroup(
            self, "Logs", retention=logs.RetentionDays.THREE_MONTHS, removal_policy=RemovalPolicy.DESTROY
        )
        return sfn.StateMachine(
            self,
            "StateMachine",
            state_machine_name=naming.gate_state_machine_name(plan.team, plan.environment),
            definition_body=sfn.DefinitionBody.from_chainable(definition),
            state_machine_type=sfn.StateMachineType.STANDARD,
            tracing_enabled=True,
            logs=sfn.LogOptions(destination=log_group, level=sfn.LogLevel.ALL, include_execution_data=True),
            timeout=Duration.hours(24),
        )
