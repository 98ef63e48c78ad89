"""TeamInferenceStack: one team's endpoint in one environment, built from its validated config."""

from __future__ import annotations

from aws_cdk import Aws, CfnOutput, Stack, Tags
from aws_cdk import Environment as CdkEnvironment
from aws_cdk import aws_kms as kms
from constructs import Construct

from optigate import naming
from optigate.config.models import DataCapture
from optigate.constructs import nag
from optigate.constructs.benchmark_fleet import BenchmarkFleet, CaptureAccess, FleetTarget
from optigate.constructs.common import secure_bucket
from optigate.constructs.data_capture import CaptureSettings
from optigate.constructs.evaluation_job import EvaluationJob
from optigate.constructs.gate import GateResources, LiveConfig, OptimizationGate
from optigate.constructs.lmi_model import LmiModel
from optigate.constructs.lora_adapters import LoraAdapters
from optigate.constructs.shadow_variant import ShadowVariant
from optigate.constructs.tuned_endpoint import TunedEndpoint
from optigate.deployment import Deployment
from optigate.deployment.endpoint import EndpointPlan, LiveComponents
from optigate.deployment.gate import GatePlan

#: Where an optimization job (running as the model role) writes its logs. No page names the group: SageMaker
#: jobs log to /aws/sagemaker/<Kind>Jobs, one stream per job named after it, and the LMI optimization runs
#: the Neo compilation entry points, so both candidates are granted (streams of this gate's jobs only).
OPTIMIZATION_JOB_LOG_GROUPS = ("/aws/sagemaker/OptimizationJobs", "/aws/sagemaker/CompilationJobs")


class TeamInferenceStack(Stack):
    """One team's tuned endpoint in one environment: `optigate-<env>-<team>`.

    A team with adapters gets a LoraAdapters endpoint (inference components); otherwise a
    TunedEndpoint, plus a ShadowVariant running the candidate when the rollout is `shadow`.
    """

    def __init__(self, scope: Construct, deployment: Deployment) -> None:
        environment = deployment.environment
        team = deployment.team
        super().__init__(
            scope,
            deployment.stack_name,
            stack_name=deployment.stack_name,  # the same in a pipeline stage as with `cdk deploy`
            env=CdkEnvironment(account=environment.account, region=environment.region),
            description=f"optigate: {team.team} LLM endpoint in {environment.name}",
        )
        self.deployment = deployment
        plan = deployment.endpoint  # every decision about the endpoint (optigate.deployment.endpoint)
        # What the gate approved, when the lock names it: its image, weights and environment. A new
        # package is a new model, so the endpoint cuts over by blue/green with auto-rollback.
        self.model = LmiModel(
            self,
            "Model",
            image_uri=plan.image_uri,
            environment=dict(plan.environment),
            model_data_uri=plan.model_data_uri,
            name_prefix=deployment.endpoint_name,
            accept_eula=plan.accept_eula,
        )
        # SageMaker reads the prefix and every adapter's archives as the model's role (no keys: no grant).
        self.model.grant_decrypt(deployment.source_keys.model_role)
        capture = _capture_settings(deployment.overrides.capture)

        self.endpoint: LoraAdapters | TunedEndpoint
        if plan.components is not None:
            self.endpoint = self._adapters(plan, plan.components, capture)
        else:
            self.endpoint = self._tuned_endpoint(plan, capture)

        if deployment.candidate is not None:
            self.gate = self._gate(deployment)
        CfnOutput(
            self,
            "ServedModel",
            value=plan.served_model,
            description="The gate-approved model package this endpoint serves, or the team file's baseline",
        )
        if plan.served_package_arn is not None:
            Tags.of(self.model).add("optigate:model-package", plan.served_package_arn)

        Tags.of(self).add("optigate:team", team.team)
        Tags.of(self).add("optigate:environment", environment.name)
        for key, value in team.tags.items():
            Tags.of(self).add(key, value)

    def _adapters(
        self,
        plan: EndpointPlan,
        components: LiveComponents,
        capture: CaptureSettings | None,
    ) -> LoraAdapters:
        """An adapter team's endpoint: the base component and every adapter on it, as the plan says."""
        return LoraAdapters(
            self,
            "Adapters",
            model=self.model,
            variant=plan.variant,
            endpoint_name=self.deployment.endpoint_name,
            adapters=list(components.adapters),
            compute=components.compute,
            scaling=plan.scaling,
            rollout=components.rollout,
            base_settings=components.base_settings,
            data_capture=capture,
            detailed_metrics=self.deployment.team.serving.detailed_metrics,
        )

    def _tuned_endpoint(self, plan: EndpointPlan, capture: CaptureSettings | None) -> TunedEndpoint:
        """A model-backed endpoint, updated by blue/green, with its shadow variant when the plan has one."""
        deployment = self.deployment
        endpoint = TunedEndpoint(
            self,
            "Endpoint",
            model=self.model,
            variant=plan.variant,
            endpoint_name=deployment.endpoint_name,
            blue_green=plan.blue_green,
            data_capture=capture,
            detailed_metrics=deployment.team.serving.detailed_metrics,
            scaling_suspended=plan.scaling_suspended,
            scaling=plan.scaling,
        )
        shadow = plan.shadow
        if shadow is not None:
            shadow_model = LmiModel(
                self,
                "ShadowModel",
                image_uri=shadow.image_uri,
                environment=shadow.environment,
                model_data_uri=shadow.model_data_uri,
                name_prefix=deployment.endpoint_name,
                accept_eula=plan.accept_eula,
            )
            shadow_model.grant_decrypt([deployment.source_keys.model] if deployment.source_keys.model else [])
            ShadowVariant(
                self,
                "Shadow",
                endpoint=endpoint,
                model=shadow_model,
                variant=shadow.variant,
                sampling_percentage=shadow.sampling_percentage,
            )
        return endpoint

    # Over 80 lines: the gate's resources wired from its plan, in the order they depend on each other.
    def _gate(self, deployment: Deployment) -> OptimizationGate:
        """The team's gate as its plan says (optigate.deployment.gate): a results bucket and key, the benchmark
        fleet, the evaluation job and the state machine that proves the candidate."""
        plan = deployment.gate
        if plan is None:
            raise ValueError(f"{deployment.team.team}: a gate needs a resolved candidate")
        key = kms.Key(
            self, "GateKey", enable_key_rotation=True, description=f"optigate gate of {deployment.endpoint_name}"
        )
        bucket = secure_bucket(self, "GateResults", key, purpose="optigate's gate (benchmarks, evaluations, reports)")
        # Each run's baseline twin and candidate (optigate.naming), never the live endpoint; both run as
        # the model's role.
        invocable = naming.invocable_endpoints(plan.team, plan.environment)
        self.model.grant_logs(invocable)
        if plan.components is not None:
            # The run's components run as the model role: their logs, and the adapter versions the candidate serves.
            self.model.grant_logs(naming.run_component_patterns(plan.team, plan.environment))
            proposed = [a.candidate_artifact_uri for a in plan.components.adapters if a.changed]
            if proposed:
                self.model.grant_read(proposed)
        # The benchmark's captured workload: the workers read it (and nothing else of the capture's bucket); and the
        # capture an EAGLE head trains from, which a worker counts before the optimization job (one grant when both
        # read this environment's data capture).
        workload_uri, capture = (
            self._capture_access(plan, plan.benchmark.workload.data_location)
            if plan.benchmark.workload is not None
            else (None, None)
        )
        training_uri, training_access = (None, None)
        if plan.trained_head is not None and plan.trained_head.from_capture:
            from_capture = plan.benchmark.workload is not None and plan.benchmark.workload.from_capture
            training_uri, training_access = (
                (workload_uri, capture) if from_capture else self._capture_access(plan, None)
            )
        fleet = BenchmarkFleet(
            self,
            "Benchmark",
            target=FleetTarget(deployment.endpoint_name),
            endpoints=invocable,
            shards=plan.benchmark.shards,
            results_bucket=bucket,
            encryption_key=key,
            components=naming.run_component_patterns(plan.team, plan.environment) if plan.components else (),
            capture=capture,
            varied_lengths=plan.benchmark.synthetic is not None,
            training_data=training_access,
        )
        evaluation = EvaluationJob(
            self,
            "Evaluation",
            endpoints=invocable,
            dataset_uri=plan.evaluation_dataset_uri,
            output_bucket=bucket,
            encryption_key=key,
            thresholds=deployment.team.gate.evaluation,
        )
        resources = GateResources(
            model_role_arn=self.model.role.role_arn,
            baseline_model_name=self.model.model_name,
            bucket=bucket,
            key=key,
            fleet=fleet,
            evaluation=evaluation,
            live_config=self._live_config(plan),
            training_data_uri=self._training_data(plan, training_uri, training_access),
            workload_uri=workload_uri,
        )
        if plan.optimization_configs:
            # The optimization job runs as the model role and writes the candidate's artifacts,
            # which the candidate model (same role) then reads.
            optimized = bucket.arn_for_objects("optimized/*")
            nag.allow(
                self.model.role,
                ["s3:PutObject", "s3:GetObject"],
                [optimized],
                why_wildcard=(
                    "Artifacts the gate's optimization jobs write under optimized/<run>/ and the candidate model reads."
                ),
            )
            nag.allow(
                self.model.role,
                ["s3:ListBucket"],
                [bucket.bucket_arn],
                conditions={"StringLike": {"s3:prefix": ["optimized/*"]}},
            )
            nag.allow(self.model.role, ["kms:Decrypt", "kms:Encrypt", "kms:GenerateDataKey"], [key.key_arn])
            self.model.grant_job_logs(OPTIMIZATION_JOB_LOG_GROUPS, plan.run_name_pattern("opt"))
        return OptimizationGate(self, "Gate", plan=plan, resources=resources)

    def _training_data(self, plan: GatePlan, capture_uri: str | None, capture: CaptureAccess | None) -> str | None:
        """The model role (which the gate's optimization job runs as) may read the EAGLE head's training data, and
        nothing else of it: this environment's data capture (`capture_uri` and `capture`, as the fleet's workers
        read it), or the plan's S3 prefix/manifest folder. Returns the capture's S3 URI (a token) when the head
        trains from data capture."""
        head = plan.trained_head
        if head is None:
            return None
        # The config rules refuse a capture the job cannot read (KMS, base64, off, not OpenAI/ShareGPT).
        uri, access = (capture_uri, capture) if capture is not None else self._capture_access(plan, head.data_location)
        nag.allow(
            self.model.role,
            ["s3:GetObject"],
            [access.objects_arn],
            why_wildcard="The EAGLE head's training data: the records under its prefix, which the gate's "
            "optimization job (running as the model role) reads.",
        )
        nag.allow(
            self.model.role,
            ["s3:ListBucket"],
            [access.bucket_arn],
            conditions={"StringLike": {"s3:prefix": [access.listed]}},
        )
        return uri

    def _capture_access(self, plan: GatePlan, location: tuple[str, str] | None) -> tuple[str | None, CaptureAccess]:
        """Where captured traffic is read from, and what reading it takes: `location` (bucket, key pattern) of an
        S3 source, or None for this environment's data capture, whose S3 URI (a token) comes back too; the key is
        the endpoint's when SageMaker encrypts the capture with it (DataCaptureConfig.KmsKeyId)."""
        if location is not None:
            name, listed = location
            partition = Aws.PARTITION
            return None, CaptureAccess(f"arn:{partition}:s3:::{name}/{listed}", f"arn:{partition}:s3:::{name}", listed)
        endpoint = self.endpoint  # either kind captures the same way (optigate.constructs.data_capture)
        uri = endpoint.capture_prefix()
        if uri is None or endpoint.capture_bucket is None:
            raise ValueError(f"{plan.team}: reads data capture, but {plan.live_endpoint} captures nothing")
        capture = self.deployment.overrides.capture
        listed = f"capture/{plan.live_endpoint}/*"
        return uri, CaptureAccess(
            endpoint.capture_bucket.arn_for_objects(listed),
            endpoint.capture_bucket.bucket_arn,
            listed,
            key_arn=endpoint.key.key_arn if capture is not None and capture.encryption == "kms" else None,
        )

    def _live_config(self, plan: GatePlan) -> LiveConfig | None:
        """The live endpoint's config, which the gate's shadow stage leaves for the window and returns to."""
        if plan.shadow is None:
            return None
        if not isinstance(self.endpoint, TunedEndpoint):
            raise ValueError(f"{plan.team}: a shadow stage needs a TunedEndpoint")
        return LiveConfig(
            name=self.endpoint.config.attr_endpoint_config_name,
            arn=self.endpoint.config.ref,
            request=self.endpoint.config_request(),
        )


def _capture_settings(capture: DataCapture | None) -> CaptureSettings | None:
    if capture is None:
        return None
    return CaptureSettings(capture.percentage, capture.encryption, tuple(capture.json_content_types))
