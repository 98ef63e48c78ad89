# Over 400 lines: the gate's one plan and its one resolution (every number of the gate is made here, once).
"""What one team's gate will measure and prove in one environment, resolved from its config (no CDK here).

`resolve_gate` is the one place the gate's numbers are made: the benchmark fleet's shards and the streams
per worker at each level, the requests per level, the thresholds at the concurrency actually measured,
the optimization job, the trained head, the shadow stage, the cross-check's workloads and the fingerprint.
The stack only creates the resources and passes the plan on (optigate.constructs.gate); `optigate summary
--gate` prints it. What is only known as a CloudFormation token (the model role, the live model and
config, the buckets) is not here: the constructs add it (optigate.constructs.gate.resources).
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field
from typing import Any

from optigate import naming
from optigate.config.models import BenchmarkGate, Environment, TeamConfig
from optigate.config.rules import cross_check_tokenizer
from optigate.deployment.compilation import compiled_for
from optigate.deployment.cross_check import CrossCheck, CrossCheckLevel, workload_levels
from optigate.deployment.gate_components import GateComponents, adapter_version_margin, resolve_components
from optigate.deployment.gate_parts import BenchmarkPlan, Side, Thresholds
from optigate.deployment.gate_workload import resolve_capture, resolve_synthetic
from optigate.deployment.optimization import TrainedHead, configs_with_image, job_serving_options
from optigate.deployment.serving import ResolvedServing
from optigate.deployment.source_keys import source_keys
from optigate.deployment.speculation_proof import SpeculationProof, resolve_speculation
from optigate.deployment.team import ResolvedTeam
from optigate.plan.catalog import Instance
from optigate.plan.cost import CostBasis
from optigate.promote.lock import ServedPackage
from optigate.serving import images, surfaces
from optigate.serving.engine_mode import container_mode
from optigate.serving.lmi import MODEL_DIR

#: What one Lambda worker of the benchmark fleet holds accurately: a level above it is split over workers.
STREAMS_PER_WORKER = 64


@dataclass(frozen=True)
class ShadowPlan:
    """Mirror live traffic to the candidate: a shadow variant on the live endpoint for a window.

    The gate puts a temporary endpoint config (the live production variants, unchanged, plus the
    candidate as shadow) on the live endpoint and afterwards returns the endpoint to the config
    CloudFormation created, on every path (that config is a token: GateResources.live_config). A shadow's
    responses are discarded and it cannot be invoked directly, so the benchmark and the evaluation run on
    a temporary endpoint first.

    :param sampling_percentage: share of live requests mirrored, 1-100.
    :param window_minutes: how long traffic is mirrored before the metrics are read.
    """

    sampling_percentage: int
    window_minutes: int
    variant_name: str = "GateCandidate"

    @property
    def variant_weight(self) -> float:
        """The shadow variant's weight, relative to the production variant's weight of 1: the mirrored share."""
        return self.sampling_percentage / 100

    @property
    def window_seconds(self) -> int:
        """The window as one metric period: each variant's figures over the whole window."""
        return self.window_minutes * 60


@dataclass(frozen=True)
class GatePlan:
    """What one team's gate measures and proves in one environment (see the module docstring)."""

    team: str
    environment: str
    live_endpoint: str
    # The instance type both endpoints run on (the candidate's, which the gate measures), resolved from the catalog.
    instance: Instance
    baseline_model_uri: str
    # The candidate's container as rendered, and the baseline's twin: the live model's image (the team's, or an
    # approved package's), its engine mode as the live model's environment makes it (a package an earlier optigate
    # rendered may run the rolling batch), its AMI on `instance` and its start-up timeouts (sized for its weights).
    candidate: Side
    twin: Side
    candidate_environment: dict[str, str]
    change: dict[str, Any]
    # The decision's thresholds, their `concurrency` the total streams each level measures (shards x levels).
    thresholds: Thresholds
    benchmark: BenchmarkPlan = field(default_factory=BenchmarkPlan)
    optimization_configs: list[dict[str, Any]] | None = None
    # Instances of the candidate's and the baseline twin's endpoints (the same type and count on both
    # sides); the decision's costs use it.
    instance_count: int = 1
    price_per_hour_usd: float | None = None
    # What the decision prices the measured tokens at: both endpoints' instances, or (an adapter team) the one base
    # copy each side stages, at its share of the instance (optigate.plan.cost.CostBasis). Not in the fingerprint.
    cost_basis: CostBasis | None = None
    prediction: dict[str, Any] = field(default_factory=dict)
    shadow: ShadowPlan | None = None
    # The promotion pipeline's (account, region): it may run this gate, read its model packages,
    # and hears of every approval.
    pipeline: tuple[str, str] | None = None
    # SageMaker's managed benchmark beside the gate's own (gate.benchmark.cross_check: sagemaker); None: none.
    cross_check: CrossCheck | None = None
    # The candidate's instance pools, priority 1 (`instance_type`, which the gate measures) first; () without pools.
    instance_pools: tuple[str, ...] = ()
    # An EAGLE head the optimization job trains (its optimization_configs then hold ModelSpeculativeDecodingConfig).
    trained_head: TrainedHead | None = None
    # The evaluation's dataset, region resolved.
    evaluation_dataset_uri: str = ""
    # A team with adapters: both endpoints serve through inference components (optigate.deployment.gate_components).
    components: GateComponents | None = None
    # A speculative candidate: what its acceptance is read from and the acceptance it must reach per level.
    speculation: SpeculationProof | None = None
    # The server series the candidate's container publishes for the gate to read from CloudWatch (detailed
    # observability); empty for every LMI container (optigate.serving.surfaces): the gate then reads none.
    server_series: tuple[str, ...] = ()
    # The customer-managed KMS key of baseline_model_uri's objects (model.source.kms_key_arn), None: none. Not in the
    # fingerprint: it changes who may read the weights, not what is proven.
    baseline_model_key_arn: str | None = None

    def __post_init__(self) -> None:
        speculative = any("ModelSpeculativeDecodingConfig" in c for c in self.optimization_configs or [])
        if speculative != (self.trained_head is not None):
            raise ValueError(f"{self.prefix}: an EAGLE item in the optimization job needs a trained_head, and back")

    def side(self, kind: str) -> Side:
        """The run's `kind` endpoint ("cand" or "twin"; a shadow is the candidate)."""
        return self.twin if kind == "twin" else self.candidate

    @property
    def instance_type(self) -> str:
        return self.instance.instance_type

    @property
    def prefix(self) -> str:
        return naming.gate_prefix(self.team, self.environment)

    def run_name_template(self, kind: naming.RunKind) -> str:
        """The name a run gives its `kind` of resource, `{}` for the run id."""
        return naming.run_name_template(self.team, self.environment, kind)

    def run_name_pattern(self, kind: naming.RunKind) -> str:
        """The IAM pattern matching every run's `kind` of resource."""
        return naming.run_name_pattern(self.team, self.environment, kind)

    # ------------------------------------------------------------------ the candidate

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
        options = job_serving_options(self.optimization_configs, self.candidate.image)
        return dict(sorted({**self.candidate_environment, **options}.items()))

    def optimization_job_configs(self, training_data_uri: str | None = None) -> list[dict[str, Any]] | None:
        """The optimization configs as the job gets them: each that can name its image runs on the
        candidate's (the team's pinned LMI), so the job writes what that image serves. Speculative
        decoding names no image (botocore); the candidate still serves the candidate's image.
        `training_data_uri`: the capture's S3 URI when a trained head trains from data capture."""
        if not self.optimization_configs:
            return None
        pinned = []
        for config in self.optimization_configs:
            out = {}
            for kind, settings in config.items():
                if kind in configs_with_image():
                    image = settings.get("Image", self.candidate.image)
                    if image != self.candidate.image:
                        raise ValueError(
                            f"{self.prefix}: {kind} runs {image}, but the candidate serves {self.candidate.image}"
                        )
                    settings = {**settings, "Image": image}
                if kind == "ModelSpeculativeDecodingConfig" and self.trained_head is not None:
                    settings = {**settings, "TrainingDataSource": self.trained_head.training_data(training_data_uri)}
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
            "Image": self.candidate.image,
            **environment,
            "ModelDataSource": {
                "S3DataSource": {
                    "S3Uri.$": "$.candidate.model_uri",
                    "S3DataType": "S3Prefix",
                    "CompressionType": "None",
                }
            },
        }

    @property
    def supported_instance_types(self) -> list[str]:
        """Where the promoted model may run: every instance pool, else the one type the gate measured on."""
        return list(self.instance_pools) or [self.instance_type]

    def component_template(self, side: naming.RunKind, index: int) -> str:
        """A run's component `index` (0 the base) on its `side` endpoint ("twin" or "cand"), `{}` for the run id."""
        return naming.run_component_template(self.team, self.environment, side, index)

    # ------------------------------------------------------------------ the cross-check

    def cross_check_levels(self) -> tuple[CrossCheckLevel, ...]:
        """The managed benchmark's workload per level (:func:`optigate.deployment.cross_check.workload_levels`)."""
        if self.cross_check is None:
            return ()
        benchmark = self.benchmark
        requests = [benchmark.shards * per_shard for per_shard in benchmark.requests_per_level]
        return workload_levels(
            self.cross_check,
            self.team,
            self.environment,
            zip(benchmark.measured_concurrency, requests, strict=True),
            benchmark.prompt_tokens,
            benchmark.max_new_tokens,
        )

    def cross_check_job_template(self, side: str, concurrency: int) -> str:
        """A run's managed benchmark job of `side` at `concurrency` (total streams), `{}` for the run id."""
        return naming.cross_check_job_template(self.team, self.environment, side, concurrency)

    # ------------------------------------------------------------------ what the benchmark costs

    @property
    def usd_per_benchmark_minute(self) -> float | None:
        """Both endpoints the benchmark keeps (the candidate and the twin, `instance_count` instances each) for a
        minute, at the instance's list price; None without one."""
        if self.price_per_hour_usd is None:
            return None
        return 2 * self.instance_count * self.price_per_hour_usd / 60

    def round_seconds_at_least(self) -> float | None:
        """A round's benchmark time at the planner's batch-1 figures: each level's requests per stream, each
        request its prefill and its tokens at batch-1 speed. A lower bound (load only slows a request; start-up
        and the looks add to it); None without the planner's figures."""
        prefill, tpot = self.prediction.get("prefill_ms"), self.prediction.get("decode_tpot_ms_batch1")
        if not isinstance(prefill, int | float) or not isinstance(tpot, int | float):
            return None
        request_s = (prefill + tpot * self.benchmark.max_new_tokens) / 1000
        per_stream = [r / c for c, r in zip(self.benchmark.levels, self.benchmark.requests_per_level, strict=True)]
        return 2 * request_s * sum(per_stream)  # both sides, one after the other

    # ------------------------------------------------------------------ the proof

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
            "image": self.candidate.image,
            "container_environment": self.candidate_environment,
            "change": self.change,
            "optimization": self.optimization_configs,
            "thresholds": self.thresholds.to_dict(),
            "benchmark": self.benchmark.proof
            + ([self.instance_count] if self.instance_count != 1 else [])
            + ([{"blocks": self.benchmark.blocks}] if self.benchmark.blocks != 1 else [])
            + ([{"rounds": self.benchmark.looks()}] if self.benchmark.max_rounds is not None else []),
            "shadow": [self.shadow.sampling_percentage, self.shadow.window_minutes] if self.shadow else None,
        }
        if self.trained_head is not None:  # only then, so that every other fingerprint stays as it was
            proof["trained_head"] = self.trained_head.proof
        if self.instance_pools:  # where the promoted model may run: a new pool is checked and proven again
            proof["instance_pools"] = list(self.instance_pools)
        if self.components is not None:
            proof["components"] = self.components.proof
        workloads = (self.benchmark.workload, self.benchmark.synthetic)
        if any(w is not None for w in workloads):  # only then: other fingerprints stay as they were
            proof["workload"] = [w.proof if w else None for w in workloads]
        return hashlib.sha256(json.dumps(proof, sort_keys=True, default=str).encode()).hexdigest()[:32]


def resolve_gate(
    resolved_team: ResolvedTeam,
    environment: Environment,
    *,
    served: ServedPackage | None = None,
    pipeline: tuple[str, str] | None = None,
) -> GatePlan | None:
    """The gate of `resolved_team` in `environment`, None without a gate candidate. `served`: the package the
    environment's lock names (the live model, which the baseline's twin runs); `pipeline`: the promotion
    pipeline's (account, region)."""
    team, candidate = resolved_team.team, resolved_team.candidate
    if candidate is None:
        return None
    region = environment.region
    dataset = team.gate.evaluation.dataset_s3_uri
    if dataset is None:  # the config rules refuse a gate candidate without a dataset
        raise ValueError(f"{team.team}: a gate needs a resolved candidate and an evaluation dataset")
    dataset = dataset.replace("{region}", region)
    benchmark = resolve_benchmark(team.gate.benchmark, region)
    candidate_side = candidate_of(candidate, region)
    keys = source_keys(team, region)
    components = resolve_components(resolved_team, region, dataset, served, keys)
    return GatePlan(
        team=team.team,
        environment=environment.name,
        live_endpoint=naming.endpoint_name(team.team, environment.name),
        instance=candidate.instance,
        instance_pools=tuple(pool.instance_type for pool in candidate.pools),
        baseline_model_uri=team.model.source.artifact_uri.replace("{region}", region),
        candidate=candidate_side,
        twin=twin_of(resolved_team, candidate_side, candidate.instance, region, served),
        candidate_environment=candidate.environment,
        change=json.loads(json.dumps(resolved_team.change, default=str)),
        thresholds=Thresholds.of(
            team.gate.benchmark, list(benchmark.measured_concurrency), **adapter_version_margin(resolved_team)
        ),
        benchmark=benchmark,
        optimization_configs=resolved_team.optimization_configs,
        price_per_hour_usd=candidate.price_per_hour_usd,
        cost_basis=_cost_basis(candidate, components),
        prediction=candidate.prediction(),
        shadow=_shadow(team),
        pipeline=pipeline,
        trained_head=_trained_head(resolved_team, region),
        cross_check=_cross_check(team),
        evaluation_dataset_uri=dataset,
        components=components,
        speculation=resolve_speculation(
            resolved_team,
            candidate_side.image,
            candidate_side.engine_mode,
            list(benchmark.measured_concurrency),
            prompt_tokens=benchmark.prompt_tokens,
            max_new_tokens=benchmark.max_new_tokens,
        ),
        server_series=tuple(sorted(surfaces.server_series(surfaces.Container.from_image(candidate_side.image)))),
        baseline_model_key_arn=keys.model,
    )


def resolve_benchmark(benchmark: BenchmarkGate, region: str) -> BenchmarkPlan:
    """The fleet's workers and the streams per worker at each level (a level above STREAMS_PER_WORKER is split over
    workers), and what is sent: a replayed capture runs its recorded schedule once per block, at the top level."""
    shards = max(1, math.ceil(max(benchmark.concurrency) / STREAMS_PER_WORKER))
    levels = tuple(sorted({max(1, math.ceil(c / shards)) for c in benchmark.concurrency}))
    workload = resolve_capture(benchmark, region)
    if workload is not None and workload.replayed:  # the recorded schedule is the load: one run per block
        levels = levels[-1:]
    return BenchmarkPlan(
        levels=levels,
        shards=shards,
        requests_per_slot=benchmark.requests_per_stream,
        blocks=benchmark.blocks,
        max_rounds=benchmark.max_rounds,
        min_rounds=benchmark.min_rounds,
        max_minutes=benchmark.max_minutes,
        prompt_tokens=benchmark.prompt_tokens,
        max_new_tokens=benchmark.max_new_tokens,
        workload=workload,
        synthetic=resolve_synthetic(benchmark),
    )


def candidate_of(candidate: ResolvedServing, region: str) -> Side:
    """The candidate's side: its image, engine mode, host AMI and start-up timeouts, as resolved."""
    return Side(
        image=candidate.image_uri(region),
        engine_mode=candidate.engine_mode.name,
        ami_version=candidate.inference_ami_version,
        startup_timeouts=(
            candidate.model_data_download_timeout_seconds,
            candidate.container_startup_health_check_timeout_seconds,
        ),
    )


def twin_of(
    resolved_team: ResolvedTeam, candidate: Side, instance: Instance, region: str, served: ServedPackage | None
) -> Side:
    """The baseline's twin: the live model (an approved package's, else the team's) on the candidate's `instance`,
    with the AMI its image needs there and the timeouts of the team's serving (else the candidate's)."""
    baseline = resolved_team.baseline
    if served is not None:
        image, mode = served.image, container_mode(served.image, served.environment)
    elif baseline is not None:
        image, mode = baseline.image_uri(region), baseline.engine_mode.name
    else:
        raise ValueError(f"team {resolved_team.team.team} did not resolve: {resolved_team.problems}")
    return Side(
        image=image,
        engine_mode=mode,
        ami_version=images.inference_ami_version(images.tag_of(image), instance.instance_type),
        startup_timeouts=(
            (baseline.model_data_download_timeout_seconds, baseline.container_startup_health_check_timeout_seconds)
            if baseline is not None
            else candidate.startup_timeouts
        ),
    )


def _shadow(team: TeamConfig) -> ShadowPlan | None:
    rollout = team.rollout
    if rollout.strategy != "shadow" or rollout.shadow is None or team.adapters:
        return None  # a team with adapters serves inference components, which take no shadow variant
    return ShadowPlan(rollout.shadow.sampling_percentage, rollout.shadow.window_minutes)


def _trained_head(resolved_team: ResolvedTeam, region: str) -> TrainedHead | None:
    head = resolved_team.trained_head
    if head is None:
        return None
    return TrainedHead(
        train_from=head.train_from.replace("{region}", region),
        s3_data_type=head.s3_data_type,
        num_speculative_tokens=head.num_speculative_tokens,
        min_training_records=head.min_training_records,
    )


def _cross_check(team: TeamConfig) -> CrossCheck | None:
    benchmark = team.gate.benchmark
    tokenizer = cross_check_tokenizer(team)
    if benchmark.cross_check != "sagemaker" or tokenizer is None:
        return None
    return CrossCheck(tokenizer=tokenizer, tolerance=benchmark.cross_check_tolerance.model_dump())


def _cost_basis(candidate: ResolvedServing, components: GateComponents | None) -> CostBasis:
    """Each side's endpoint (GatePlan.instance_count, one, instances), or an adapter team's one base copy of the
    candidate at its share of the instance: the basis the planner prices a replica at (optigate.plan.cost)."""
    instance = candidate.instance
    if components is None:
        return CostBasis.instances(instance.instance_type, instance.price_per_hour_usd, instance.tp_units, 1)
    copy = components.compute
    return CostBasis(
        instance.instance_type, instance.price_per_hour_usd, instance.tp_units, copy.accelerators * copy.copies
    )
