"""What the emulated SageMaker does: how each kind of resource progresses, and the hooks a test
or a rehearsal uses to write results as a job "runs"."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

DEFAULT_IMAGE: Final = "763104351884.dkr.ecr.us-east-1.amazonaws.com/djl-inference:0.31.0-lmi13.0.0-cu124"


@dataclass(frozen=True)
class Outcome:
    """How a resource's status progresses.

    ``after`` Describe calls report the in-progress status (Creating / Updating / InProgress / INPROGRESS);
    the next Describe reports ``status``. ``after=0`` means the first Describe already sees ``status``;
    ``after=None`` means the resource never leaves the in-progress status.
    """

    status: str
    after: int | None = 1
    failure_reason: str | None = None

    @classmethod
    def never(cls) -> Outcome:
        return cls(status="", after=None)


OutcomeSpec = Outcome | Callable[[dict], Outcome]


def _in_service() -> Outcome:
    return Outcome("InService", after=1)


@dataclass
class Scenario:
    """What the emulated SageMaker does. Each field is an :class:`Outcome` or ``f(request) -> Outcome``
    (``request`` is the Create/Update request, so a test can vary the outcome by name)."""

    endpoint: OutcomeSpec = field(default_factory=_in_service)  # CreateEndpoint
    endpoint_update: OutcomeSpec = field(default_factory=_in_service)  # UpdateEndpoint; "Failed" or "RolledBack"
    processing_job: OutcomeSpec = field(default_factory=lambda: Outcome("Completed", after=0))
    optimization_job: OutcomeSpec = field(default_factory=lambda: Outcome("COMPLETED", after=1))
    inference_component: OutcomeSpec = field(default_factory=lambda: Outcome("InService", after=0))
    # UpdateInferenceComponent: Updating for `after` Describes, then "InService" (the new specification serves),
    # "RolledBack" (InService again with the previous specification and a FailureReason, as an alarm in
    # DeploymentConfig.AutoRollbackConfiguration being in ALARM in CloudWatch at that moment also does) or "Failed".
    inference_component_update: OutcomeSpec = field(default_factory=_in_service)
    # CreateAIBenchmarkJob (SageMaker's managed benchmark): InProgress for `after` Describes, then Completed or Failed.
    ai_benchmark_job: OutcomeSpec = field(default_factory=lambda: Outcome("Completed", after=1))
    # DescribeOptimizationJob's OptimizationOutput.RecommendedInferenceImage once COMPLETED; None: no
    # OptimizationOutput at all (both are optional in the API's output).
    recommended_inference_image: str | None = DEFAULT_IMAGE
    # Called when a processing job "runs" (on the Describe that makes it terminal), with the
    # CreateProcessingJob request; may write results to moto S3. It may return a dict of Describe fields
    # to override (e.g. {"ProcessingJobStatus": "Failed", "FailureReason": "..."}); raising fails the job.
    on_processing_job: Callable[[dict], dict | None] | None = None
    # Same, for an optimization job reaching COMPLETED (e.g. to write artifacts under S3OutputLocation).
    on_optimization_job: Callable[[dict], dict | None] | None = None
    # An EAGLE-training optimization job (ModelSpeculativeDecodingConfig) reaching COMPLETED writes these files
    # as its head, and registers its OutputConfig.SageMakerModel in `trained_head_layout` ("job_output" or "sdk",
    # optigate.rehearse.sagemaker.jobs.TRAINED_HEAD_LAYOUTS) with this environment (None: the layout's). The real
    # layout is not documented; the emulated ones are assumptions until a live run records it.
    eagle_head_files: dict[str, bytes] = field(
        default_factory=lambda: {
            "config.json": b'{"architectures": ["LlamaForCausalLMEagle3"]}',
            "model.safetensors": b"eagle head",
        }
    )
    eagle_model_environment: dict[str, str] | None = None
    trained_head_layout: str = "job_output"
    # What a Completed managed benchmark job's AIPerf reports, by its CreateAIBenchmarkJob request: any of
    # {"ttft_p99_ms", "itl_p99_ms", "output_tokens_per_s"} (the rest from benchmarks.DEFAULT_FIGURES); and an offset
    # added to every job's figures (e.g. {"ttft_p99_ms": 2000.0}), to make the two benchmarks disagree.
    ai_benchmark_figures: Callable[[dict], dict[str, float]] | None = None
    ai_benchmark_offset: dict[str, float] = field(default_factory=dict)
    # CloudWatch traffic of endpoint variants (AWS/SageMaker, dimensions EndpointName and VariantName):
    # variant name -> {"Invocations": count, "Invocation5XXErrors": count, "ModelLatency": [microseconds, ...]}.
    # Published for a variant that is on an InService endpoint when GetMetricData reads it, timestamped
    # inside the requested window, as if the traffic had happened during it.
    variant_traffic: dict[str, dict[str, Any]] = field(default_factory=dict)
    # CloudWatch traffic of inference components (AWS/SageMaker, dimension InferenceComponentName): component name
    # -> {"Invocations": count, ...}, published as variant_traffic is, for a component that is InService (or
    # Updating) on an InService endpoint when GetMetricData reads it.
    component_traffic: dict[str, dict[str, Any]] = field(default_factory=dict)
    # SageMaker operation (e.g. "CreateEndpoint") -> how many of its first calls are throttled (HTTP 400
    # ThrottlingException "Rate exceeded"), before any other check: what a busy account answers. Only
    # once an execution has started: the setup before it plays CloudFormation.
    throttle: dict[str, int] = field(default_factory=dict)
    # Instance types without capacity (insufficient capacity): a variant with InstancePools lands its instances
    # on the highest-priority pool not listed here; DescribeEndpoint says so in ProductionVariantSummary.InstancePools.
    no_capacity: frozenset[str] = frozenset()


def resolve_outcome(spec: OutcomeSpec, request: dict) -> Outcome:
    """The Outcome a Scenario field gives for this Create/Update request."""
    return spec(request) if callable(spec) and not isinstance(spec, Outcome) else spec
