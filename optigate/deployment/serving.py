"""One serving block made concrete: every value the user left unset is chosen (and why is noted),
the capacity plan of exactly what is deployed is kept, and the container environment is rendered.

`resolve_serving` is called once per variant of a team (baseline, shadow, gate candidate) by
`optigate.deployment.team.resolve_team`; every later layer reads the result.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from optigate.config.models import LoraLimits, Serving, TeamConfig
from optigate.deployment import rules
from optigate.deployment.checkpoint import Checkpoint, applied_quantization, resolve_checkpoint, served_precision
from optigate.plan.catalog import Instance, get_instance
from optigate.plan.checkpoints import stored_gb
from optigate.plan.memory import DEFAULT_GPU_MEMORY_UTILIZATION
from optigate.plan.planner import PlanResult
from optigate.plan.team_plan import (
    architecture_for,
    default_tensor_parallel_note,
    deployed_tensor_parallel,
    derive_settings,
    plan_serving,
    weights_gb,
)
from optigate.plan.timeouts import (
    DOWNLOAD_SECONDS_PER_GB,
    STARTUP_SECONDS_PER_GB,
    sized_timeouts,
    startup_quantization_seconds,
)
from optigate.serving import images
from optigate.serving.engine_mode import MODE_NOTE, EngineMode, engine_mode
from optigate.serving.lmi import render_environment

DEFAULT_MAX_BATCH_SIZE = 32
DEFAULT_MAX_MODEL_LEN_CAP = 8192  # without a plan, never default to a 128k context nobody can batch

__all__ = ["ResolvedPool", "ResolvedServing", "get_instance", "resolve_serving", "sized_timeouts", "weights_gb"]


@dataclass(frozen=True)
class ResolvedPool:
    """One instance pool of a variant (ProductionVariant.InstancePools) with the plan of the shared settings on
    its instance type; `decides` names the derived settings this pool holds the least of."""

    priority: int
    instance: Instance
    plan: PlanResult | None
    decides: tuple[str, ...] = ()

    @property
    def instance_type(self) -> str:
        return self.instance.instance_type

    @property
    def price_per_hour_usd(self) -> float | None:
        return self.instance.price_per_hour_usd


@dataclass(frozen=True)
class ResolvedServing:
    """Every serving value concrete, the plan of what is deployed, and notes on what optigate chose."""

    serving: Serving
    instance: Instance
    image_family: str
    image_version: str
    tensor_parallel_degree: int
    max_model_len: int
    max_batch_size: int
    gpu_memory_utilization: float
    lora: LoraLimits | None
    weights_gb: float
    model_data_download_timeout_seconds: int
    container_startup_health_check_timeout_seconds: int
    # The container environment (OPTION_*), rendered once; container paths are region-independent.
    environment: dict[str, str] = field(default_factory=dict)
    # The capacity plan at exactly these settings; None when the planner refuses the settings
    # (the refusal is a problem of the team's resolution).
    plan: PlanResult | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)
    # With serving.instance_pools: every pool in priority order (the first is `instance`), each planned at the
    # settings above; empty for a single instance type.
    pools: tuple[ResolvedPool, ...] = field(default_factory=tuple)
    # The weights the variant downloads as stored (the team's checkpoint, or what the gate's optimization job
    # wrote), their GB (what the timeouts are sized to), and what quantizing them at start-up adds to every cold
    # start (None when the weights are stored as served).
    downloaded_weights: str = "bf16"
    downloaded_gb: float = 0.0
    startup_quantization_seconds: int | None = None
    # What the summary and the plan say about the weights: how they are stored, and whether quantized at start-up.
    weights_notes: tuple[str, ...] = ()
    # The precision the engine serves (planned and sized at), and the quantization the container is told to apply to
    # the team's stored weights (OPTION_QUANTIZE; None when they are served as stored): optigate.deployment.checkpoint.
    served_weights: str = "bf16"
    quantize: str | None = None

    def image_uri(self, region: str) -> str:
        return images.image_uri(self.image_family, self.image_version, region)

    @property
    def image_tag(self) -> str:
        return images.image_tag(self.image_family, self.image_version)

    @property
    def engine_mode(self) -> EngineMode:
        """LMI's engine mode this variant runs, and what a client sends it (optigate.serving.engine_mode)."""
        return engine_mode(self.image_family, self.image_version)

    @property
    def inference_ami_version(self) -> str | None:
        """The host AMI the variant needs for its image (a CUDA 13 image: the SDK's rule), None for the default."""
        return images.inference_ami_version(self.image_tag, self.serving.instance_type)

    def prediction(self) -> dict[str, Any]:
        """What the planner predicts for this variant, for a gate report beside its measurements: the roofline
        bounds, the expected figures, and the plan they come from (which `optigate plan --calibrate` reads)."""
        plan = self.plan.to_dict() if self.plan else {}
        expected = plan.get("expected") or {}
        keys = (
            "decode_tpot_ms_batch1",
            "prefill_ms",
            "cost_per_million_output_tokens",
            "kv_capacity_tokens",
            "expected_tpot_ms_batch1",
            "expected_ttft_ms",
            "expected_cost_per_million_output_tokens",
        )
        origin = {
            "instance_type": self.instance.instance_type,
            "accelerator": self.instance.accelerator,
            "weight_precision": plan.get("weight_precision"),
            "engine": plan.get("engine"),
            "step_overhead_ms": expected.get("step_overhead_ms"),
            "allreduce_ms_per_step": expected.get("allreduce_ms_per_step"),
            "basis": expected.get("basis"),
            # A speculating candidate's TPOT measures acceptance as much as bandwidth: not a calibration.
            "speculative_decoding": (
                self.serving.speculative_decoding.method if self.serving.speculative_decoding else None
            ),
        }
        return {k: plan.get(k) for k in keys} | {"plan": origin if plan else None}

    @property
    def price_per_hour_usd(self) -> float | None:
        """On-demand price of one instance of this variant (None where no public source was found)."""
        return self.instance.price_per_hour_usd


# Over 80 lines: every LMI setting of one block resolved in one pass, in the order the container reads them.
def resolve_serving(
    team: TeamConfig,
    serving: Serving,
    *,
    checkpoint: Checkpoint | None = None,
    downloads: str | None = None,
    instance: Instance,
) -> ResolvedServing:
    """Concrete settings for `serving` (the team's production block, or a candidate of it). `checkpoint`: the
    team's stored weights (resolved once by resolve_team; resolved here when not given); `downloads`: the weights
    this variant downloads when the gate's optimization job writes new ones (default: the checkpoint's);
    `instance`: serving.instance_type from the catalog (looked up once, by resolve_team)."""
    checkpoint = checkpoint or resolve_checkpoint(team)[0]
    downloaded = downloads or checkpoint.weights
    served = served_precision(downloaded, serving.quantization)
    notes: list[str] = []
    arch = architecture_for(team.model.architecture)
    family = serving.container.family
    version = serving.container.version or images.default_version(family)
    newest = images.newest_version(family)
    if serving.container.version is None:
        notes.append(f"container: {family} {version}, the newest in the installed SageMaker SDK's image tables")
    elif images.version_tuple(newest) > images.version_tuple(version):
        notes.append(f"container: {family} {version} as pinned; {newest} is the newest in the SageMaker SDK's tables")
    # A fix is offered only if the rules accept it, on the weights this variant downloads.
    admissible = rules.suggestion_admissible(team, arch, serving, Checkpoint(downloaded, checkpoint.known_from))

    plan: PlanResult | None
    if instance.is_neuron:
        # The planner's memory model is not validated on Neuron: fixed defaults, said so; the plan
        # at those settings is kept for the summary and the gate's prediction.
        tp = deployed_tensor_parallel(arch, serving, instance)
        if serving.tensor_parallel_degree is None:
            notes.append(default_tensor_parallel_note(arch, instance, tp))
        max_model_len = serving.max_model_len or min(arch.max_position_embeddings, DEFAULT_MAX_MODEL_LEN_CAP)
        max_batch_size = serving.max_batch_size or DEFAULT_MAX_BATCH_SIZE
        gpu_memory_utilization = serving.gpu_memory_utilization or DEFAULT_GPU_MEMORY_UTILIZATION
        if serving.max_model_len is None or serving.max_batch_size is None:
            notes.append(
                f"Neuron: max_model_len={max_model_len}, max_batch_size={max_batch_size} are defaults, not planned"
            )
        try:
            plan = plan_serving(
                team,
                serving,
                weight_precision=served,
                max_model_len=max_model_len,
                max_batch_size=max_batch_size,
                admissible=admissible,
                instance=instance,
            )
        except ValueError:
            plan = None  # an invalid tensor-parallel degree: reported by the hardware rules
    else:
        derived = derive_settings(team, serving, weight_precision=served, admissible=admissible, instance=instance)
        tp, max_model_len = derived.tensor_parallel_degree, derived.max_model_len
        max_batch_size, gpu_memory_utilization = derived.max_batch_size, derived.gpu_memory_utilization
        notes += derived.notes
        plan = derived.plan

    lora = serving.lora
    if lora is None and team.adapters:
        count = len(team.adapters)
        lora = LoraLimits(max_loras=min(count, 8), max_cpu_loras=max(count, min(count, 8)))
        notes.append(f"lora: max_loras={lora.max_loras}, max_cpu_loras={lora.max_cpu_loras} for {count} adapters")

    size_gb = weights_gb(arch, served)
    fetched_gb = stored_gb(arch, downloaded)
    stored = f"{fetched_gb:.0f} GB downloaded ({downloaded} as stored)"
    weights_notes = [checkpoint.note if downloads is None else f"as stored: {downloaded} (the optimization job's)"]
    quantize_seconds = None
    if applied_quantization(downloaded, serving.quantization) is not None and not instance.is_neuron:
        quantize_seconds = startup_quantization_seconds(fetched_gb, size_gb)
        weights_notes.append(
            f"quantized at start-up (+{quantize_seconds} s per cold start): the {downloaded} weights are served as "
            f"{serving.quantization}, so every cold start and scale-out downloads and loads "
            f"{fetched_gb - size_gb:.0f} GB more than a checkpoint stored as {serving.quantization} "
            f"({DOWNLOAD_SECONDS_PER_GB}+{STARTUP_SECONDS_PER_GB} s per GB, the timeouts' rates); a gate "
            f"candidate with quantization: {serving.quantization} has its optimization job write them quantized once"
        )
    elif downloads is None and serving.quantization is not None and serving.quantization == downloaded:
        weights_notes.append(
            f"served as stored: vLLM reads the {downloaded} quantization from the checkpoint's quantization_config, "
            "so no OPTION_QUANTIZE is set"
        )
    download, startup = sized_timeouts(fetched_gb)
    if serving.model_data_download_timeout_seconds is not None:
        download = serving.model_data_download_timeout_seconds
    else:
        notes.append(f"model_data_download_timeout={download}s for {stored}")
    if serving.container_startup_health_check_timeout_seconds is not None:
        startup = serving.container_startup_health_check_timeout_seconds
    else:
        notes.append(f"container_startup_health_check_timeout={startup}s for {stored}")
    mode = engine_mode(family, version)
    notes.append(f"engine mode: {mode.name} ({MODE_NOTE[mode.name]})")
    ami = images.inference_ami_version(images.image_tag(family, version), instance.instance_type)
    if ami:
        notes.append(f"inference_ami_version={ami}: the host AMI the SageMaker SDK chooses for a CUDA 13 image")

    resolved = ResolvedServing(
        serving=serving,
        instance=instance,
        image_family=family,
        image_version=version,
        tensor_parallel_degree=tp,
        max_model_len=max_model_len,
        max_batch_size=max_batch_size,
        gpu_memory_utilization=gpu_memory_utilization,
        lora=lora,
        weights_gb=size_gb,
        model_data_download_timeout_seconds=download,
        container_startup_health_check_timeout_seconds=startup,
        plan=plan,
        notes=tuple(notes),
        weights_notes=tuple(weights_notes),
        downloaded_weights=downloaded,
        downloaded_gb=fetched_gb,
        startup_quantization_seconds=quantize_seconds,
        served_weights=served,
        # On the team's checkpoint, not on what a job wrote: the job reads the same option (and a compiled candidate
        # carries it into the compile step), and LMI then serves the job's serving.properties over the environment.
        quantize=applied_quantization(checkpoint.weights, serving.quantization),
    )
    # Container paths are relative to the model prefix, so render from the prefix as written.
    environment = render_environment(resolved, team.model.source.artifact_uri)
    return replace(resolved, environment=environment)
