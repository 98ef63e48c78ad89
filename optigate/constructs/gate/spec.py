"""What one team's gate proves, resolved from its config at synth time (no CDK here)."""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from optigate import naming
from optigate.deployment.compilation import compiled_for
from optigate.serving.images import FIRST_COMPRESSED_TENSORS_LMI, lmi_version
from optigate.serving.lmi import MODEL_DIR

#: The optimization job's own bounds (its StoppingCondition): at most 10 h of work, and at most 2 h
#: waiting for capacity (a p5 may not be free). SageMaker stops the job at either; the gate polls it
#: for that long plus a grace for the stop, so the job's bound, not the gate's poll count, ends a
#: slow or queued job.
OPTIMIZATION_MAX_RUNTIME_SECONDS = 36_000
OPTIMIZATION_MAX_PENDING_SECONDS = 7_200
OPTIMIZATION_STOP_GRACE_SECONDS = 1_800
OPTIMIZATION_POLL_SECONDS = 300
OPTIMIZATION_MAX_POLLS = math.ceil(
    (OPTIMIZATION_MAX_RUNTIME_SECONDS + OPTIMIZATION_MAX_PENDING_SECONDS + OPTIMIZATION_STOP_GRACE_SECONDS)
    / OPTIMIZATION_POLL_SECONDS
)


@cache
def _configs_with_image() -> frozenset[str]:
    """The members of SageMaker's OptimizationConfig that name the image their job runs (botocore's model):
    quantization, compilation and sharding do; speculative decoding has no Image."""
    import botocore.session

    union = botocore.session.get_session().get_service_model("sagemaker").shape_for("OptimizationConfig")
    return frozenset(name for name, shape in union.members.items() if "Image" in getattr(shape, "members", {}))


def job_serving_options(optimization_configs: list[dict[str, Any]] | None, image: str) -> dict[str, str]:
    """The `OPTION_*` values an optimization job run on `image` freezes into its output's serving.properties,
    which the candidate then serves with, over its environment ("Configurations specified in the
    serving.properties files will override configurations specified in environment variables":
    djl-serving serving/docs/lmi/deployment_guide/configurations.md).

    The job's container writes every `OPTION_*` variable it saw as `option.*` (djl-serving
    serving/docker/partition/properties_manager.py and utils.update_kwargs_with_env_vars), and since LMI
    0.35.0 `option.quantize=fp8` as `compressed-tensors` (:data:`FIRST_COMPRESSED_TENSORS_LMI`). The gate
    passes only each config's OverrideEnvironment, so those are the options. A compiling job (ModelCompilationConfig:
    TensorRT-LLM or Neuron) writes its options as it read them (sm_neo_trt_llm_partition.py generate_properties_file,
    sm_neo_neuron_partition.py write_properties): an fp8 engine stays `fp8`; the llm-compressor rewrite is the vLLM
    container's quantization step only."""
    options: dict[str, str] = {}
    for config in optimization_configs or []:
        for settings in config.values():
            options |= {
                k: str(v) for k, v in settings.get("OverrideEnvironment", {}).items() if k.startswith("OPTION_")
            }
    compiles = any("ModelCompilationConfig" in config for config in optimization_configs or [])
    if options.get("OPTION_QUANTIZE") == "fp8" and not compiles:
        version = lmi_version(image)
        if version is None:
            raise ValueError(
                f"cannot tell which quantize option an fp8 optimization job on {image} writes (not an LMI DLC tag)"
            )
        if version >= FIRST_COMPRESSED_TENSORS_LMI:
            options["OPTION_QUANTIZE"] = "compressed-tensors"
    return options


#: Where the gate puts a trained head the optimization job left outside its optimized model's prefix, under the
#: candidate's prefix (the head must be under the model prefix: AWS::SageMaker::Model has no
#: AdditionalModelDataSources, so CloudFormation can deploy one prefix only).
TRAINED_HEAD_DIR = "speculative_head"


@dataclass(frozen=True)
class TrainedHead:
    """An EAGLE head the gate's optimization job trains (ModelSpeculativeDecodingConfig, Technique EAGLE).

    :param train_from: what the team configured, region resolved: "data_capture" or an S3 URI. Part of the
        fingerprint (the capture bucket's name is a CloudFormation token and is not).
    :param training_data: TrainingDataSource as the job gets it, {S3Uri, S3DataType}; S3Uri may be a token.
    :param num_speculative_tokens: vLLM's num_speculative_tokens in OPTION_SPECULATIVE_CONFIG.
    :param method: "eagle", as configured; vLLM's method (eagle or eagle3) is read from the trained head, because
        the service chooses EAGLE-2 or EAGLE-3 per architecture.
    """

    train_from: str
    training_data: dict[str, str]
    num_speculative_tokens: int = 3
    method: str = "eagle"

    @property
    def proof(self) -> dict[str, Any]:
        return {
            "method": self.method,
            "train_from": self.train_from,
            "data_type": self.training_data["S3DataType"],
            "num_speculative_tokens": self.num_speculative_tokens,
        }


@dataclass(frozen=True)
class ShadowStage:
    """Mirror live traffic to the candidate: a shadow variant on the live endpoint for a window.

    The gate puts a temporary endpoint config (the live production variants, unchanged, plus the
    candidate as shadow) on the live endpoint and afterwards returns the endpoint to the config
    CloudFormation created, on every path. A shadow's responses are discarded and it cannot be
    invoked directly, so the benchmark and the evaluation run on a temporary endpoint first.

    :param live_config_name: the endpoint config CloudFormation created for the live endpoint.
    :param live_config_arn: its ARN (SageMaker lower-cases names in ARNs; CloudFormation's Ref has it right).
    :param live_config_request: that config as a CreateEndpointConfig request without name and
        shadow (TunedEndpoint.config_request()). A shadow CloudFormation runs is replaced for the window.
    :param sampling_percentage: share of live requests mirrored, 1-100.
    :param window_minutes: how long traffic is mirrored before the metrics are read.
    """

    live_config_name: str
    live_config_arn: str
    live_config_request: dict[str, Any]
    sampling_percentage: int
    window_minutes: int
    variant_name: str = "GateCandidate"

    @property
    def production_variant(self) -> str:
        """The live variant whose traffic is mirrored (the first of the live config)."""
        return self.live_config_request["ProductionVariants"][0]["VariantName"]


#: How often and how long the gate polls a managed benchmark job: one level of one side is a few minutes of
#: load plus the job's own start-up; after an hour the gate stops it and reports the cross-check unavailable.
CROSS_CHECK_POLL_SECONDS = 60
CROSS_CHECK_MAX_POLLS = 60


@dataclass(frozen=True)
class CrossCheck:
    """SageMaker's managed benchmark (CreateAIBenchmarkJob, NVIDIA AIPerf) beside the gate's own, per level.

    :param tokenizer: the Hugging Face tokenizer id AIPerf downloads (config rules resolve it).
    :param tolerance: gate.benchmark.cross_check_tolerance, for the report.
    :param shards: the benchmark fleet's workers: a level's concurrency is shards x streams per worker, and
        the managed job loads the endpoint with that total, the same as optigate's benchmark.
    """

    tokenizer: str
    tolerance: dict[str, float]
    shards: int = 1
    poll_seconds: int = CROSS_CHECK_POLL_SECONDS
    max_polls: int = CROSS_CHECK_MAX_POLLS


@dataclass(frozen=True)
class CrossCheckLevel:
    """One benchmarked level as the managed job runs it: one AIWorkloadConfig (one concurrency each)."""

    concurrency: int  # total streams, as optigate's benchmark measures the level
    request_count: int  # one block's requests, every worker's together
    workload: str  # the WorkloadSpec's Inline JSON
    config_name: str  # the AIWorkloadConfig's name (lowercase, with the workload's hash)


@dataclass(frozen=True)
class GateSpec:
    """What one team's gate proves, resolved from its config at synth time."""

    team: str
    environment: str
    live_endpoint: str
    model_role_arn: str
    instance_type: str
    baseline_model_uri: str
    candidate_image: str
    candidate_environment: dict[str, str]
    change: dict[str, Any]
    thresholds: dict[str, Any]
    # The live endpoint's model (CloudFormation's; the gate never deletes it): the baseline twin runs it.
    baseline_model_name: str
    optimization_configs: list[dict[str, Any]] | None = None
    # Streams per fleet worker at each benchmarked level, run one level after the other; each
    # worker sends `requests_per_slot` requests per stream (at least 32) at each level.
    levels: tuple[int, ...] = (16,)
    requests_per_slot: int = 4
    # Interleaved blocks per level: the twin then the candidate, `blocks` times (A B A B ...), each
    # block sending the level's requests.
    blocks: int = 1
    prompt_tokens: int = 1024
    max_new_tokens: int = 256
    # Instances of the candidate's and the baseline twin's endpoints (the same type and count on both
    # sides); the decision's costs use it.
    instance_count: int = 1
    price_per_hour_usd: float | None = None
    prediction: dict[str, Any] = field(default_factory=dict)
    startup_timeouts: tuple[int, int] = (1200, 1200)
    shadow: ShadowStage | None = None
    # The promotion pipeline's (account, region): it may run this gate, read its model packages,
    # and hears of every approval.
    pipeline: tuple[str, str] | None = None
    poll_seconds: int = 60
    max_polls: int = 90
    optimization_poll_seconds: int = OPTIMIZATION_POLL_SECONDS
    optimization_max_polls: int = OPTIMIZATION_MAX_POLLS
    # SageMaker's managed benchmark beside the gate's own (gate.benchmark.cross_check: sagemaker); None: none.
    cross_check: CrossCheck | None = None
    # The host AMI (InferenceAmiVersion) each side's image needs on `instance_type`, None for SageMaker's
    # default: the candidate's image and the live model's image (the twin's) may differ.
    candidate_ami_version: str | None = None
    baseline_ami_version: str | None = None
    # The candidate's instance pools, priority 1 (`instance_type`, which the gate measures) first; () without pools.
    instance_pools: tuple[str, ...] = ()
    # An EAGLE head the optimization job trains (its optimization_configs then hold ModelSpeculativeDecodingConfig).
    trained_head: TrainedHead | None = None

    def __post_init__(self) -> None:
        speculative = any("ModelSpeculativeDecodingConfig" in c for c in self.optimization_configs or [])
        if speculative != (self.trained_head is not None):
            raise ValueError(f"{self.prefix}: an EAGLE item in the optimization job needs a trained_head, and back")

    @property
    def prefix(self) -> str:
        return naming.gate_prefix(self.team, self.environment)

    def run_name_template(self, kind: naming.RunKind) -> str:
        """The name a run gives its `kind` of resource, `{}` for the run id."""
        return naming.run_name_template(self.team, self.environment, kind)

    def run_name_pattern(self, kind: naming.RunKind) -> str:
        """The IAM pattern matching every run's `kind` of resource."""
        return naming.run_name_pattern(self.team, self.environment, kind)

    @property
    def compiled_for(self) -> dict[str, str] | None:
        """What the job compiles the candidate's engine for (instance type, TP, maximum length, batch), None when it
        compiles nothing: recorded with the model package, so that a later team file can say it must be recompiled."""
        if not any("ModelCompilationConfig" in c for c in self.optimization_configs or []):
            return None
        return compiled_for(self.instance_type, self.candidate_environment)

    @property
    def container_environment(self) -> dict[str, str]:
        """The environment the candidate runs with: its own, with what an optimization job writes into the
        output's serving.properties (which LMI reads over the environment; :func:`job_serving_options`)."""
        options = job_serving_options(self.optimization_configs, self.candidate_image)
        return dict(sorted({**self.candidate_environment, **options}.items()))

    def optimization_job_configs(self) -> list[dict[str, Any]] | None:
        """The optimization configs as the job gets them: each that can name its image runs on the
        candidate's (the team's pinned LMI), so the job writes what that image serves. Speculative
        decoding names no image (botocore); the candidate still serves the candidate's image."""
        if not self.optimization_configs:
            return None
        pinned = []
        for config in self.optimization_configs:
            out = {}
            for kind, settings in config.items():
                if kind in _configs_with_image():
                    image = settings.get("Image", self.candidate_image)
                    if image != self.candidate_image:
                        raise ValueError(
                            f"{self.prefix}: {kind} runs {image}, but the candidate serves {self.candidate_image}"
                        )
                    settings = {**settings, "Image": image}
                if kind == "ModelSpeculativeDecodingConfig" and self.trained_head is not None:
                    settings = {**settings, "TrainingDataSource": dict(self.trained_head.training_data)}
                out[kind] = settings
            pinned.append(out)
        return pinned

    def staged_paths(self) -> tuple[str, ...]:
        """Folders under the model directory the candidate reads that an optimization job does not write
        (it writes the optimized checkpoint and serving.properties only: djl-serving
        serving/docker/partition/partition.py, run_quantization): a speculative model's folder
        (OPTION_SPECULATIVE_CONFIG's `model`), relative, ending in `/`. The gate copies them from the
        baseline's prefix into the candidate's; without a job the candidate reads the baseline's prefix."""
        if not self.optimization_configs:
            return ()
        raw = self.candidate_environment.get("OPTION_SPECULATIVE_CONFIG")
        model = json.loads(raw).get("model") if raw else None
        if not isinstance(model, str) or not model.startswith(f"{MODEL_DIR}/"):
            return ()
        return (model.removeprefix(f"{MODEL_DIR}/").strip("/") + "/",)

    def candidate_container(self) -> dict[str, Any]:
        """The candidate's container: the candidate's image, the environment it runs with, and the weights
        from `$.candidate.model_uri`. The model the gate stages and the model package it records (which a
        promotion deploys) are this one dict."""
        # With a trained head the environment is completed at run time with its OPTION_SPECULATIVE_CONFIG
        # (optigate/lambdas/stage_candidate renders it from this environment and the head).
        environment: dict[str, Any] = (
            {"Environment.$": "$.candidate.environment"}
            if self.trained_head is not None
            else {"Environment": self.container_environment}
        )
        return {
            "Image": self.candidate_image,
            **environment,
            "ModelDataSource": {
                "S3DataSource": {
                    "S3Uri.$": "$.candidate.model_uri",
                    "S3DataType": "S3Prefix",
                    "CompressionType": "None",
                }
            },
        }

    def cross_check_levels(self) -> tuple[CrossCheckLevel, ...]:
        """The managed benchmark's workload per level: the same prompt and output lengths, streaming, total
        concurrency and one block's requests as optigate's benchmark of that level (stages.benchmark_levels),
        fixed lengths (stddev 0) as optigate sends them. AIPerf parameters: the SageMaker SDK's
        `Workload.synthetic` (sagemaker/serve/ai_inference_recommender/workload.py) and
        https://docs.aws.amazon.com/sagemaker/latest/dg/generative-ai-inference-recommendations-workload-config.html."""
        if self.cross_check is None:
            return ()
        shards = self.cross_check.shards
        levels = []
        for per_shard in self.levels:
            concurrency = shards * per_shard
            requests = shards * max(32, self.requests_per_slot * per_shard)
            spec = {
                "benchmark": {"type": "aiperf"},
                "parameters": {
                    "tokenizer": self.cross_check.tokenizer,
                    "concurrency": concurrency,
                    "request_count": requests,
                    "prompt_input_tokens_mean": self.prompt_tokens,
                    "prompt_input_tokens_stddev": 0,
                    "output_tokens_mean": self.max_new_tokens,
                    "output_tokens_stddev": 0,
                    "streaming": True,
                },
                "tooling": {"api_standard": "openai"},
            }
            workload = json.dumps(spec, sort_keys=True, separators=(",", ":"))
            name = naming.workload_config_name(self.team, self.environment, concurrency, workload)
            levels.append(CrossCheckLevel(concurrency, requests, workload, name))
        return tuple(levels)

    def cross_check_job_template(self, side: str, concurrency: int) -> str:
        """A run's managed benchmark job of `side` at `concurrency` (total streams), `{}` for the run id."""
        return naming.cross_check_job_template(self.team, self.environment, side, concurrency)

    @property
    def supported_instance_types(self) -> list[str]:
        """Where the promoted model may run: every instance pool, else the one type the gate measured on."""
        return list(self.instance_pools) or [self.instance_type]

    @property
    def fingerprint(self) -> str:
        """What makes a proof: the candidate (its source, image, environment, optimization), where
        and how it is measured, and the thresholds. Not what is live: once the candidate is
        promoted the live endpoint serves it, and an unchanged candidate must pass as a no-op
        rather than be compared with itself."""
        proof: dict[str, Any] = {
            "team": self.team,
            "environment": self.environment,
            "instance_type": self.instance_type,
            "source": self.baseline_model_uri,
            "image": self.candidate_image,
            "container_environment": self.candidate_environment,
            "change": self.change,
            "optimization": self.optimization_configs,
            "thresholds": self.thresholds,
            "benchmark": [list(self.levels), self.requests_per_slot, self.prompt_tokens, self.max_new_tokens]
            + ([self.instance_count] if self.instance_count != 1 else [])
            + ([{"blocks": self.blocks}] if self.blocks != 1 else []),
            "shadow": [self.shadow.sampling_percentage, self.shadow.window_minutes] if self.shadow else None,
        }
        if self.trained_head is not None:  # only then, so that every other fingerprint stays as it was
            proof["trained_head"] = self.trained_head.proof
        if self.instance_pools:  # where the promoted model may run: a new pool is checked and proven again
            proof["instance_pools"] = list(self.instance_pools)
        return hashlib.sha256(json.dumps(proof, sort_keys=True, default=str).encode()).hexdigest()[:32]
