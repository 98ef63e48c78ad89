"""Notes where the references leave open what a first run depends on: said by `optigate validate`, not refused.

Each note names the question, what the sources do say, and what to check; a team that has checked it acknowledges
the note (`acknowledge`, OG7xx). When a source settles a question, its note becomes a refusal or goes.
"""

from __future__ import annotations

from collections.abc import Iterator

from optigate.config.models import EagleTraining, TeamConfig
from optigate.config.rule_registry import Found, rule_check
from optigate.config.rules import GATE_CANDIDATE, SHADOW_CANDIDATE, PathT, Problem, Severity
from optigate.deployment.serving import ResolvedServing
from optigate.serving import images

SPECULATION: PathT = (*GATE_CANDIDATE, "speculative_decoding")


@rule_check("OG331", "a CUDA 13 image on a GPU family the SDK names no CUDA 13 host AMI for", Severity.NOTE)
def cuda13_host_notes(variants: dict[PathT, ResolvedServing | None]) -> Iterator[Found]:
    """A variant (the serving block, the shadow or the gate candidate; each of its instance pools) that runs a CUDA 13
    (cu130) LMI image on a GPU family outside the SageMaker SDK's CUDA 13 list is noted, once per image and instance
    types (a candidate on the baseline's image and types is said once).

    Why: such a variant runs on SageMaker's default host AMI, which optigate cannot name for that family. The SDK
    pins al2023-ami-sagemaker-inference-gpu-4-1 (NVIDIA driver 580, CUDA 13.0: botocore's ProductionVariant
    InferenceAmiVersion) for the families "documented for the GPU 4.1 AMI" only (sagemaker-serve
    model_builder_servers.py, _CUDA_13_INFERENCE_AMI_COMPATIBLE_FAMILIES: "Add new families only after SageMaker
    documents support for them"). The default hosts listed run driver 470, 535 or 550
    (https://docs.aws.amazon.com/sagemaker/latest/dg/inference-gpu-drivers.html); the LMI image carries
    cuda-compat-13-0 and uses it on an older driver (djl-serving serving/docker/lmi.Dockerfile,
    dockerd-entrypoint-with-cuda-compat.sh), which works only on the driver branches NVIDIA's forward compatibility
    supports. Whether the family's default host starts the image is not documented.
    """
    said: set[tuple[str, tuple[str, ...]]] = set()  # a candidate on the baseline's image and types is said once
    for path, variant in variants.items():
        tag = variant.image_tag if variant is not None else ""
        if variant is None or images.cuda_version(tag) != (13, 0):
            continue
        types = [pool.instance for pool in variant.pools] or [variant.instance]
        unnamed = [
            instance.instance_type
            for instance in types
            if not instance.is_neuron and images.inference_ami_version(tag, instance.instance_type) is None
        ]
        if unnamed and (tag, tuple(unnamed)) not in said:
            said.add((tag, tuple(unnamed)))
            yield (
                (*path, "instance_type"),
                f"undocumented: {tag} is a CUDA 13 image, and the SageMaker SDK names no CUDA 13 host "
                f"AMI for {', '.join(unnamed)} (it pins al2023-ami-sagemaker-inference-gpu-4-1, driver 580, only "
                "for families SageMaker documents on it), so the endpoint runs on the family's default host, "
                "whose driver the docs do not give; the image falls back to CUDA forward compatibility on an "
                "older driver. Deploy to a non-production environment first, or pin container.version to a "
                "CUDA 12 image (e.g. 0.35.0, cu128)",
            )


@rule_check(
    "OG422", "the managed cross-check's tokenizer defaults to the model's repository, which may be gated", Severity.NOTE
)
def cross_check_tokenizer_notes(team: TeamConfig) -> Iterator[Found]:
    """With the managed cross-check (`gate.benchmark.cross_check: sagemaker`) and no
    `gate.benchmark.cross_check_tokenizer`, the tokenizer defaulted to the model's own Hugging Face repository is
    noted (no Hugging Face source at all is OG406's refusal); an explicit tokenizer is the team's statement.

    Why: the managed benchmark's AIPerf loads its tokenizer from the Hugging Face Hub ("errors like gated repos" fail
    the run: https://docs.nvidia.com/aiperf/reference/pre-flight-tokenizer-auto-detection.md); the SDK passes a
    token for "gated tokenizers" as the workload's `secrets.hf_token`, a Secrets Manager ARN (sagemaker-serve
    ai_inference_recommender/workload.py, Workload.synthetic and to_inline), which optigate does not send. Neither
    CreateAIBenchmarkJob nor CreateAIWorkloadConfig has a tokenizer member (botocore): it is the Inline spec's
    `parameters.tokenizer`. optigate cannot see whether a repository is gated (nothing is fetched from a hub).
    """
    if team.gate.benchmark.cross_check != "sagemaker" or team.gate.benchmark.cross_check_tokenizer is not None:
        return
    source = team.model.source.hugging_face
    if source is not None:  # no tokenizer at all: OG406 refuses
        yield (
            ("gate", "benchmark", "cross_check"),
            f"the managed cross-check's AIPerf downloads the tokenizer {source.model_id} (the model's repository, by "
            "default) without a token, and a gated repository fails the job (optigate sends no hf_token secret); "
            "if it is gated, set gate.benchmark.cross_check_tokenizer to an ungated repository with the same "
            "tokenizer",
        )


def trained_head_notes(head: EagleTraining | None) -> list[Problem]:
    """What the references do not say about the gate's EAGLE training job: one rule function each, in the order they
    are reported."""
    return [*training_image_unnamed(head), *capture_of_streams(head)]


@rule_check(
    "OG423", "an EAGLE head trained from data capture: whether streamed invocations are captured", Severity.NOTE
)
def capture_of_streams(head: EagleTraining | None) -> Iterator[Found]:
    """An EAGLE head the gate's optimization job trains from the endpoint's data capture
    (`speculative_decoding.train_from: data_capture`) is noted.

    Why: SageMaker's data capture pages (model-monitor-data-capture-endpoint.html) do not say whether
    InvokeEndpointWithResponseStream calls are captured, nor what is stored for a streamed response; a chat endpoint
    whose clients stream may leave the job requests without responses, or nothing.
    """
    if head is not None and head.train_from == "data_capture":
        yield (
            (*SPECULATION, "train_from"),
            "undocumented: SageMaker's data capture pages do not say whether InvokeEndpointWithResponseStream "
            "calls are captured, nor what a streamed response leaves in the capture; if the clients stream, look "
            "at the capture prefix for complete records (request and response) before the gate runs, or "
            "train_from an S3 prefix of exported ShareGPT/OpenAI conversations",
        )


@rule_check("OG424", "an EAGLE head: the image its optimization job trains in is undocumented", Severity.NOTE)
def training_image_unnamed(head: EagleTraining | None) -> Iterator[Found]:
    """An EAGLE head the gate's optimization job trains (`gate.candidate.speculative_decoding.method: eagle`) is
    noted.

    Why: ModelSpeculativeDecodingConfig has no Image (botocore), so SageMaker picks the training image; no API
    reference, SDK source (aws/sagemaker-python-sdk a248126: optimize() builds no EAGLE job, and no
    image_uri_config table names one) or AWS page found names its repository. CreateOptimizationJob's RoleArn
    documentation lists S3 reads and writes, CloudWatch Logs and metrics only; optigate grants the job's role
    pulls of the candidate's LMI repository alone, so the job may fail on an ECR authorization error.
    """
    if head is not None:
        yield (
            (*SPECULATION, "method"),
            "undocumented: the optimization job that trains the EAGLE head runs in an image SageMaker picks "
            "(ModelSpeculativeDecodingConfig has no Image) from a repository no reference names, as the model role, "
            "which optigate lets pull the candidate's LMI repository only; if the job fails on an ECR "
            "authorization error, the error names the repository the model role needs ecr:BatchGetImage and "
            "ecr:GetDownloadUrlForLayer on",
        )


@rule_check(
    "OG425",
    "a speculative candidate whose container publishes its acceptance nowhere a source says: the gate cannot decide it",
    Severity.NOTE,
)
def acceptance_notes(team: TeamConfig, candidate: ResolvedServing | None) -> Iterator[Found]:
    """A speculative gate candidate (`gate.candidate.speculative_decoding`) whose container publishes its acceptance
    nowhere a source says, or only on assumed surfaces, is noted before anything is paid for.

    Why: a speculative candidate's acceptance is read from the surfaces its container publishes
    (optigate.serving.surfaces.acceptance_evidence): LMI's rolling batch publishes it nowhere a client or CloudWatch
    can read, and a container version newer than every source read (LMI 0.38.0) publishes it only by extrapolation.
    Either way the gate's speculative_acceptance check is INCONCLUSIVE, and a person approves or rejects
    (docs/container-surfaces.md).
    """
    from optigate.serving import surfaces

    if candidate is None or not team.gate.candidate.get("speculative_decoding"):
        return
    container = surfaces.Container.from_tag(candidate.image_family, candidate.image_tag)
    evidence = surfaces.acceptance_evidence(container, candidate.engine_mode.name)
    if evidence.source is not None and evidence.assumed is None:
        return
    why = evidence.why_none or f"its acceptance is read from assumed surfaces alone ({evidence.assumed})"
    yield (
        (*SPECULATION, "method"),
        f"the gate cannot decide this speculation: {why}; its speculative_acceptance check will be INCONCLUSIVE "
        "(a person approves or rejects). Pin gate.candidate's container.version to one whose async stream is "
        f"sourced (LMI {'.'.join(map(str, surfaces.LMI_READ_THROUGH))}: docs/container-surfaces.md)",
    )


def reference_gap_notes(
    team: TeamConfig,
    baseline: ResolvedServing | None,
    shadow: ResolvedServing | None,
    candidate: ResolvedServing | None,
    head: EagleTraining | None,
) -> list[Problem]:
    """Every note of this module for a resolved team: one rule function each, in the order they are reported."""
    variants = {("serving",): baseline, SHADOW_CANDIDATE: shadow, GATE_CANDIDATE: candidate}
    return (
        cuda13_host_notes(variants)
        + cross_check_tokenizer_notes(team)
        + trained_head_notes(head)
        + acceptance_notes(team, candidate)
    )


#: This module's rules, in ID order: optigate.deployment.all_rules collects them (every_rule).
RULES = (
    cuda13_host_notes,
    cross_check_tokenizer_notes,
    capture_of_streams,
    training_image_unnamed,
    acceptance_notes,
)
