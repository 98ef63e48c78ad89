"""A team resolved once: every variant it deploys or proves, made concrete, with its plan.

`resolve_team` is the one place a team's serving blocks meet the catalog, the image tables and the
capacity planner. The config loader calls it (through `optigate.deployment.project`) to report
problems at file lines; the summary, the stacks, the gate and rehearsal read the same result.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from pydantic import ValidationError

from optigate.config.models import EagleTraining, Serving, TeamConfig
from optigate.config.rule_registry import Found, rule_check
from optigate.config.rules import (
    GATE_CANDIDATE,
    SHADOW_CANDIDATE,
    PathT,
    Problem,
    Severity,
    quantization_problems,
)
from optigate.config.rules.adapter_candidate_rules import candidate_adapters
from optigate.config.rules.team_rules import candidates_own
from optigate.deployment import compilation, placement, pools, reference_gaps, rules
from optigate.deployment.adapter_archive import (
    ATTENTION_MODULES,
    DENSE_DECODER_MODULES,
    AdapterLimits,
    BaseArchitecture,
)
from optigate.deployment.checkpoint import Checkpoint, resolve_checkpoint, served_precision
from optigate.deployment.gate_workload import shared_prefix_fits
from optigate.deployment.serving import ResolvedServing, resolve_serving
from optigate.plan import catalog
from optigate.plan.architecture import ModelArchitecture, builtin_entries
from optigate.plan.checkpoints import stored_gb
from optigate.plan.team_plan import architecture_for

SERVING: PathT = ("serving",)


@dataclass(frozen=True)
class ResolvedTeam:
    """The team's baseline, shadow and gate candidate, each concrete; `problems` if any cannot work."""

    team: TeamConfig
    baseline: ResolvedServing | None
    shadow: ResolvedServing | None = None
    candidate: ResolvedServing | None = None
    problems: tuple[Problem, ...] = field(default_factory=tuple)
    # Not problems: combinations the SageMaker docs neither allow nor forbid, said by `optigate validate`.
    advisories: tuple[Problem, ...] = field(default_factory=tuple)

    @property
    def change(self) -> dict[str, Any]:
        """The overrides the gate proves (`gate.candidate`), as written."""
        return dict(self.team.gate.candidate)

    @property
    def optimization_configs(self) -> list[dict[str, Any]] | None:
        """The SageMaker optimization job the gate runs for its candidate (CreateOptimizationJob's
        OptimizationConfigs), or None: a new quantization and an EAGLE head to train are made by a job; other
        speculation needs none. A compiled candidate's job compiles it for what it serves (its environment)."""
        return optimization_configs(self.team, self.candidate.environment if self.candidate else None)

    @property
    def trained_head(self) -> EagleTraining | None:
        """The EAGLE head the gate's optimization job trains for the candidate, if it does."""
        return trained_head(self.team)

    @property
    def candidate_adapters(self) -> dict[str, str]:
        """The new adapter versions the gate's candidate serves (`gate.candidate.adapters`), by adapter name, with
        `{region}` left for the environment to fill; empty: the candidate serves the team file's adapters."""
        return candidate_adapters(self.team)

    @property
    def adapter_limits(self) -> AdapterLimits:
        """What the candidate serves adapters with, for the stager's archive check: its resolved serving.lora's
        max_lora_rank, the team's base model (base_models: its Hugging Face ids; base_architecture: its shape) and
        the modules vLLM serves LoRA on."""
        variant = self.candidate or self.baseline
        if variant is None or variant.lora is None:
            raise ValueError(f"team {self.team.team}: the candidate serves no adapters (no serving.lora)")
        arch = architecture_for(self.team.model.architecture)
        return AdapterLimits(
            variant.lora.max_lora_rank,
            base_models(self.team),
            ATTENTION_MODULES if arch.is_moe else DENSE_DECODER_MODULES,
            base_architecture(self.team, arch),
        )


def base_architecture(team: TeamConfig, arch: ModelArchitecture) -> BaseArchitecture:
    """The team's base as an adapter archive can show it (adapter_archive.BaseArchitecture): hidden_size and
    num_hidden_layers always; intermediate_size where the team's model gives it (a catalog architecture, or
    architecture fields that state it: one derived from num_parameters is an estimate) and the model is dense (an
    MoE's MLP modules take no LoRA here); model_type where the catalog gives it (architecture fields have none)."""
    spec = team.model.architecture
    stated = isinstance(spec, str) or spec.intermediate_size is not None
    return BaseArchitecture(
        hidden_size=arch.hidden_size,
        num_hidden_layers=arch.num_hidden_layers,
        intermediate_size=arch.intermediate_size if stated and not arch.is_moe else None,
        model_type=arch.model_type or None,
    )


def base_models(team: TeamConfig) -> tuple[str, ...]:
    """The Hugging Face ids the team's base model is, to compare an adapter's base_model_name_or_path with:
    model.source.hugging_face's id; for an S3 or JumpStart source, which names no id, the hf_repo of its catalog
    architecture (the checkpoint whose config.json the catalog's figures come from). Architecture fields without a
    Hugging Face source name none: an adapter's base_model_name_or_path is then not compared (the stager's base
    check is "unknown", said in the gate report, and `optigate validate` notes it: OG456); its architecture is still
    compared with base_architecture's. A team whose S3 copy is another checkpoint than the catalog's (the base, not
    the -Instruct) says which with model.source.hugging_face."""
    source = team.model.source.hugging_face
    if source is not None:
        return (source.model_id,)
    spec = team.model.architecture
    repo = builtin_entries().get(spec, {}).get("hf_repo") if isinstance(spec, str) else None
    return (repo,) if repo else ()


@rule_check(
    "OG456",
    "an adapter team whose model names no Hugging Face id: adapters' base is checked by its architecture only",
    Severity.NOTE,
)
def adapter_base_notes(team: TeamConfig) -> Iterator[Found]:
    """A team with adapters whose model names no Hugging Face id (`base_models` is empty: no
    `model.source.hugging_face`, and architecture fields rather than a catalog name) is noted.

    Why: the gate's stager then cannot compare a new adapter version's base_model_name_or_path with the team's base
    model, so it checks the base's architecture alone (`base_architecture`), and its base check is "unknown" in the
    gate report.
    """
    if team.adapters and not base_models(team):
        yield (
            ("model", "source"),
            "the model names no Hugging Face id (no model.source.hugging_face, and architecture fields rather than a "
            "catalog name): adapters' base_model_name_or_path cannot be compared; the gate checks their architecture "
            "only; set model.source.hugging_face to have the id compared",
        )


def trained_head(team: TeamConfig) -> EagleTraining | None:
    speculative = team.gate.candidate.get("speculative_decoding")
    if not isinstance(speculative, dict) or speculative.get("method") != "eagle":
        return None
    try:
        return EagleTraining.model_validate(speculative)
    except ValidationError:
        return None  # the config rules report it


#: Techniques SageMaker's Python SDK never combines with speculative decoding (sagemaker ModelBuilder.optimize,
#: model_builder.py: sharding is exclusive with every other technique; "Compilation is not supported with
#: speculative decoding with a GPU instance"). optigate's candidates never ask for either today; a job that would
#: is refused where it is built.
NOT_WITH_SPECULATIVE_DECODING = ("ModelCompilationConfig", "ModelShardingConfig")


def refused_combination(configs: list[dict[str, Any]]) -> str | None:
    """Why SageMaker would not run these OptimizationConfigs in one job, or None."""
    kinds = [kind for config in configs for kind in config]
    if "ModelSpeculativeDecodingConfig" in kinds:
        clash = [kind for kind in kinds if kind in NOT_WITH_SPECULATIVE_DECODING]
        if clash:
            return (
                f"{' and '.join(clash)} cannot run with ModelSpeculativeDecodingConfig in one optimization job "
                "(the SageMaker Python SDK's ModelBuilder.optimize refuses sharding with any other technique and "
                "compilation with speculative decoding on GPUs)"
            )
    return None


def compiled_family(team: TeamConfig) -> str | None:
    """The container family the gate's job compiles the candidate for (`compile: true`), or None."""
    if team.gate.candidate.get("compile") is not True:
        return None
    try:
        candidate = team.gate_serving()
    except ValidationError:
        return None  # the config rules report it
    return candidate.container.family if candidate is not None else None


def optimization_configs(
    team: TeamConfig, candidate_environment: dict[str, str] | None = None
) -> list[dict[str, Any]] | None:
    """One OptimizationConfigs item per technique (what the SageMaker SDK does, model_builder_utils.py): a new
    quantization first, then a compilation (its OverrideEnvironment from `candidate_environment`, the candidate's
    rendered environment: the TP, maximum length and batch it serves), then an EAGLE head to train. Quantization
    and compilation in one job on TensorRT-LLM: the SDK's optimize does the same (fp8/awq, config rules). Quantization
    and EAGLE in one job: the API's shape allows it (a list of single-technique items) and no document forbids it, but
    no run has confirmed it (see README, "EAGLE heads trained by the gate"). The TrainingDataSource depends on the
    environment (its capture bucket): GatePlan.optimization_job_configs adds it."""
    configs: list[dict[str, Any]] = []
    quantize = team.gate.candidate.get("quantization")
    if quantize and quantize != team.serving.quantization:
        configs.append({"ModelQuantizationConfig": {"OverrideEnvironment": {"OPTION_QUANTIZE": str(quantize)}}})
    family = compiled_family(team)
    if family in compilation.COMPILED_OPTIONS:
        override = compilation.compilation_override_environment(family, candidate_environment or {})
        configs.append({"ModelCompilationConfig": {"OverrideEnvironment": override}})
    if trained_head(team) is not None:
        configs.append({"ModelSpeculativeDecodingConfig": {"Technique": "EAGLE"}})
    refusal = refused_combination(configs)
    if refusal:
        raise ValueError(f"team {team.team}: {refusal}")
    return configs or None


@rule_check("OG413", "an optimization job runs on an instance type CreateOptimizationJob takes")
def optimization_job_problems(team: TeamConfig, candidate: Serving) -> Iterator[Found]:
    """When the gate runs an optimization job for its candidate (`optimization_configs`: a new quantization, a
    compilation or an EAGLE head to train), the candidate's instance type is one the job takes; reported at the key
    that makes the job (compile, else quantization, else speculative_decoding).

    Why: the job runs on the candidate's instance type, and CreateOptimizationJob accepts fewer types than endpoints
    (its DeploymentInstanceType in botocore's model); SageMaker would refuse the job once the gate runs.
    """
    configs = optimization_configs(team)
    if configs is None:
        return
    import botocore.session

    model = botocore.session.get_session().get_service_model("sagemaker")
    allowed = model.operation_model("CreateOptimizationJob").input_shape.members["DeploymentInstanceType"].enum
    if candidate.instance_type in allowed:
        return
    quantizes = any("ModelQuantizationConfig" in config for config in configs)
    compiles = any("ModelCompilationConfig" in config for config in configs)
    what, key = (
        ("compiles the candidate", "compile")
        if compiles
        else ("quantizes the candidate", "quantization")
        if quantizes
        else ("trains the candidate's EAGLE head", "speculative_decoding")
    )
    yield (
        (*GATE_CANDIDATE, key),
        f"the SageMaker optimization job that {what} cannot run on {candidate.instance_type} "
        "(CreateOptimizationJob's DeploymentInstanceType); give the candidate an instance type it takes, "
        "e.g. ml.p5.48xlarge, or prove a candidate that needs no job",
    )


#: Hardware problems after which nothing can be planned (the first key under the serving block).
BLOCKING = {("instance_type",), ("container",), ("tensor_parallel_degree",)}


def job_quantizes(team: TeamConfig) -> bool:
    """Whether the gate's optimization job quantizes the candidate (a new quantization: optimization_configs)."""
    quantize = team.gate.candidate.get("quantization")
    return bool(quantize) and quantize != team.serving.quantization


def _job_writes_weights(team: TeamConfig) -> bool:
    """Whether the candidate downloads weights the gate's optimization job wrote (quantized or compiled), not the
    team's checkpoint (an EAGLE-only job leaves the base weights at the source)."""
    return job_quantizes(team) or compiled_family(team) in compilation.COMPILED_OPTIONS


@dataclass(frozen=True)
class _Weights:
    """What a variant downloads: the team's checkpoint, or (`downloads`) what the optimization job wrote."""

    checkpoint: Checkpoint
    downloads: str | None = None
    by_job: bool = False


def _variant(
    team: TeamConfig, arch: ModelArchitecture, serving: Serving, path: PathT, weights: _Weights
) -> tuple[ResolvedServing | None, list[Problem]]:
    single = partial(_single_variant, weights=weights)
    if pools.has_pools(serving):  # every pool through the rules below, with the one shared environment
        return pools.resolve_pooled(team, arch, serving, path, single)
    return single(team, arch, serving, path)


def _single_variant(
    team: TeamConfig, arch: ModelArchitecture, serving: Serving, path: PathT, *, weights: _Weights
) -> tuple[ResolvedServing | None, list[Problem]]:
    checkpoint = weights.checkpoint
    served = served_precision(weights.downloads or checkpoint.weights, serving.quantization)
    hardware = rules.hardware_problems(serving, path, has_adapters=bool(team.adapters), served=served)
    if any(p.path[len(path) : len(path) + 1] in BLOCKING for p in hardware):
        return None, hardware  # no plan without a known instance, a container for it and a valid degree
    instance = catalog.get_instance(serving.instance_type)  # known: else an instance_type problem is BLOCKING
    if hardware and instance.is_neuron:
        return None, hardware
    structural = rules.serving_architecture_problems(arch, serving, path)
    structural += [
        p for p in rules.tensor_parallel_problems(arch, serving, path) if p.path not in {q.path for q in structural}
    ]
    structural += rules.timeout_problems(stored_gb(arch, weights.downloads or checkpoint.weights), serving, path)
    if structural:
        return None, hardware + structural
    hardware += rules.engine_switch_problems(arch, serving, path)
    if (*path, "quantization") not in {p.path for p in hardware}:  # one message per field: the hardware's first
        hardware += quantization_problems(
            checkpoint.weights,
            checkpoint.known_from,
            serving.quantization,
            serving.container.family,
            path,
            by_job=weights.by_job,
        )
    resolved = resolve_serving(team, serving, checkpoint=checkpoint, downloads=weights.downloads, instance=instance)
    capacity = rules.capacity_problems(resolved.plan, serving, path)
    # The other hardware problems (precision, speculation, adapters, volume) leave the plan meaningful:
    # reported with what the plan finds, one run shows all of them.
    return (None, hardware + capacity) if hardware else (resolved, capacity)


def _candidate(
    team: TeamConfig, arch: ModelArchitecture, merge: Callable[[], Serving | None], path: PathT, weights: _Weights
) -> tuple[ResolvedServing | None, list[Problem]]:
    try:
        serving = merge()
    except ValidationError:
        return None, []  # the config rules report a candidate that is not a valid serving block
    if serving is None:
        return None, []
    if path == GATE_CANDIDATE and _job_writes_weights(team):
        downloads = serving.quantization or weights.checkpoint.weights
        weights = _Weights(weights.checkpoint, downloads, by_job=job_quantizes(team))
    return _variant(team, arch, serving, path, weights)


def resolve_team(team: TeamConfig) -> ResolvedTeam:
    """Resolve every variant of `team` once; problems are reported at the YAML path of their variant."""
    source = team.model.source
    if sum(x is not None for x in (source.s3_uri, source.jumpstart, source.hugging_face)) != 1:
        return ResolvedTeam(team, None)  # the config rules report the source
    arch, problems = rules.architecture_problems(team)
    checkpoint, checkpoint_problems = resolve_checkpoint(team)  # once: every variant downloads from this source
    if arch is None or checkpoint_problems:
        hardware = rules.hardware_problems(team.serving, SERVING, has_adapters=bool(team.adapters))
        return ResolvedTeam(team, None, problems=tuple(hardware + problems + checkpoint_problems))
    weights = _Weights(checkpoint)
    baseline, problems = _variant(team, arch, team.serving, SERVING, weights)
    shadow, shadow_problems = _candidate(team, arch, team.shadow_serving, SHADOW_CANDIDATE, weights)
    candidate, candidate_problems = _candidate(team, arch, team.gate_serving, GATE_CANDIDATE, weights)
    if candidate is not None:
        candidate_problems += optimization_job_problems(team, candidate.serving)
        if baseline is not None:
            candidate_problems += compilation.compilation_problems(baseline, candidate)
    if problems or baseline is None:  # a candidate inherits the serving block: reported once, where it is written
        shadow_own = team.rollout.shadow.candidate if team.rollout.shadow is not None else {}
        problems += candidates_own(shadow_problems, problems, shadow_own, SHADOW_CANDIDATE)
        problems += candidates_own(candidate_problems, problems, team.gate.candidate, GATE_CANDIDATE)
        return ResolvedTeam(team, baseline, problems=tuple(problems + shared_prefix_fits(team)))
    placed = placement.copy_placement(
        team, baseline.instance, baseline.tensor_parallel_degree, team.serving.instance_count
    )
    found = placement.placement_problems(placed, placement.team_file_path(team))
    refused = [p for p in found if p.rule is not None and p.rule.severity is Severity.REFUSAL]
    problems = refused + shadow_problems + candidate_problems + shared_prefix_fits(team)
    advisories = pools.pool_advisories(team) + compilation.compile_advisories(team, candidate)
    advisories += [p for p in found if p not in refused]
    advisories += reference_gaps.reference_gap_notes(team, baseline, shadow, candidate, trained_head(team))
    advisories += adapter_base_notes(team)
    return ResolvedTeam(team, baseline, shadow, candidate, tuple(problems), tuple(advisories))


#: This module's rules, in ID order: optigate.deployment.all_rules collects them (every_rule).
RULES = (
    optimization_job_problems,
    adapter_base_notes,
)
