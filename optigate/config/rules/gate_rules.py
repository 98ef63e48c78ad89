"""Gate rules: the gate candidate, its benchmark and SageMaker's managed cross-check, compilation and trained heads."""

from __future__ import annotations

from collections.abc import Iterator

from pydantic import ValidationError

from optigate.config import models
from optigate.config.models import Serving, TeamConfig, serving_with
from optigate.config.rule_registry import Found, PathT, Problem, rule_check

GATE_CANDIDATE: PathT = ("gate", "candidate")


def gate_problems(team: TeamConfig) -> list[Problem]:
    """What a gate candidate needs beside the candidate itself (checked by `team.candidate_problems`), one rule
    function each, in the order they are reported."""
    return [*adapter_gate_limits(team), *gate_needs_dataset(team)]


@rule_check("OG401", "an adapter team's gate candidate trains no EAGLE head and takes no managed cross-check")
def adapter_gate_limits(team: TeamConfig) -> Iterator[Found]:
    """The gate candidate of a team with adapters trains no EAGLE head (`gate.candidate.speculative_decoding.method:
    eagle`), and its gate asks for no managed cross-check (`gate.benchmark.cross_check: sagemaker`); each is
    reported on its own.

    Why: SageMaker's optimization job documents EAGLE training for a base model alone, not for a base that serves
    LoRA adapters, whose outputs the head was not trained on. The gate's own benchmark spreads requests over the
    adapters' inference components by the team's mix, while SageMaker's managed benchmark targets components one job
    each, so its figures would not be the same workload.
    """
    if not team.gate.candidate or not team.adapters:
        return
    speculative = team.gate.candidate.get("speculative_decoding")
    if isinstance(speculative, dict) and speculative.get("method") == "eagle":
        yield (
            (*GATE_CANDIDATE, "speculative_decoding", "method"),
            "SageMaker's optimization job documents EAGLE training for a base model alone, not for a base "
            "that serves LoRA adapters (whose outputs the head was not trained on); prove the adapters' "
            "base change without a trained head, or use a head trained elsewhere (method: eagle3 with `model`)",
        )
    if team.gate.benchmark.cross_check == "sagemaker":
        yield (
            CROSS_CHECK,
            "the gate's own benchmark spreads requests over the adapters' inference components by the "
            "team's mix; SageMaker's managed benchmark targets components one job each, so its figures would "
            "not be the same workload: set cross_check: none for a team with adapters",
        )


@rule_check("OG402", "a gate candidate comes with an evaluation dataset")
def gate_needs_dataset(team: TeamConfig) -> Iterator[Found]:
    """A team with a gate candidate gives the gate an evaluation dataset (`gate.evaluation.dataset_s3_uri`).

    Why: the gate promotes nothing without quality numbers beside the speed numbers, and without a dataset it would
    measure speed alone.
    """
    if team.gate.candidate and team.gate.evaluation.dataset_s3_uri is None:
        yield (
            ("gate", "evaluation", "dataset_s3_uri"),
            "a gate candidate needs an evaluation dataset: "
            "nothing is promoted without quality numbers beside the speed numbers",
        )


#: Container families whose endpoint answers the OpenAI chat completions schema (`messages`) SageMaker's managed
#: benchmark sends: "A SageMaker AI endpoint in InService status hosting an LLM that supports the OpenAI-compatible
#: chat completions API" (https://docs.aws.amazon.com/sagemaker/latest/dg/generative-ai-inference-recommendations-benchmark.html).
#: LMI's vLLM backend serves it (https://docs.djl.ai/master/docs/serving/serving/docs/lmi/user_guides/chat_input_output_schema.html;
#: optigate's own client sends it, optigate/bench/core/client.py). For TensorRT-LLM and Neuron the LMI pages do not say
#: it for the versions optigate pins, so they are refused (fail closed) rather than paid for and failed.
CROSS_CHECK_FAMILIES = frozenset({"lmi"})
CROSS_CHECK: PathT = ("gate", "benchmark", "cross_check")


def cross_check_tokenizer(team: TeamConfig) -> str | None:
    """The Hugging Face tokenizer the managed benchmark downloads: gate.benchmark.cross_check_tokenizer, else the
    model's Hugging Face id; None when neither says (an S3 or JumpStart source names no tokenizer)."""
    source = team.model.source.hugging_face
    return team.gate.benchmark.cross_check_tokenizer or (source.model_id if source else None)


def cross_check_problems(team: TeamConfig) -> list[Problem]:
    """Where SageMaker's managed benchmark cannot target the gate's endpoints, say why and what to change: one rule
    function each, in the order they are reported (without a gate candidate, that alone).

    The gate's two endpoints are its own temporary single-model endpoints (a candidate and the baseline's
    twin, one container each, no inference components, outside any VPC: optigate configures none), so the
    job needs no InferenceComponents, TargetContainerHostname or NetworkConfig; what is left is the API the
    container speaks and the tokenizer AIPerf must download."""
    return [
        *cross_check_needs_candidate(team),
        *cross_check_family(team),
        *cross_check_has_tokenizer(team),
    ]


def _cross_checks_a_gate(team: TeamConfig) -> bool:
    """Whether the managed cross-check runs: asked for, beside a gate candidate's benchmark."""
    return team.gate.benchmark.cross_check == "sagemaker" and bool(team.gate.candidate)


@rule_check("OG404", "a managed cross-check only with a gate candidate")
def cross_check_needs_candidate(team: TeamConfig) -> Iterator[Found]:
    """`gate.benchmark.cross_check: sagemaker` is set only with a `gate.candidate`; without one, the other
    cross-check rules are not checked.

    Why: the managed cross-check benchmarks the gate's endpoints beside the gate's own benchmark; without a candidate
    there is no gate, and nothing for it to benchmark.
    """
    if team.gate.benchmark.cross_check == "sagemaker" and not team.gate.candidate:
        yield (
            CROSS_CHECK,
            "a cross-check runs beside the gate's benchmark; without gate.candidate there is "
            "no gate: set cross_check: none or give a candidate",
        )


@rule_check("OG405", "a managed cross-check only for container family lmi on both sides")
def cross_check_family(team: TeamConfig) -> Iterator[Found]:
    """With the managed cross-check, the serving block and the gate candidate both run container family lmi
    (`CROSS_CHECK_FAMILIES`); reported for each side that does not. A candidate that is not a valid serving block is
    left out (its own problems are reported at gate.candidate).

    Why: SageMaker's managed benchmark sends OpenAI chat completions (`messages`) to "an LLM that supports the
    OpenAI-compatible chat completions API"
    (https://docs.aws.amazon.com/sagemaker/latest/dg/generative-ai-inference-recommendations-benchmark.html). LMI's
    vLLM backend serves it
    (https://docs.djl.ai/master/docs/serving/serving/docs/lmi/user_guides/chat_input_output_schema.html); for
    TensorRT-LLM and Neuron the LMI pages do not say it for the versions optigate pins, so they are refused (fail
    closed) rather than paid for and failed.
    """
    if not _cross_checks_a_gate(team):
        return
    try:
        sides = {"serving": team.serving, "gate.candidate": serving_with(team.serving, team.gate.candidate)}
    except ValidationError:  # the candidate's own problems are reported at gate.candidate
        sides = {"serving": team.serving}
    for where, serving in sides.items():
        family = serving.container.family
        if family not in CROSS_CHECK_FAMILIES:
            yield (
                CROSS_CHECK,
                f"SageMaker's managed benchmark sends OpenAI chat completions (`messages`), which optigate knows "
                f"only LMI's vLLM backend (family lmi) to answer; {where} runs {family}. Use container family "
                "lmi, or set cross_check: none",
            )


@rule_check("OG406", "a managed cross-check has a Hugging Face tokenizer to download")
def cross_check_has_tokenizer(team: TeamConfig) -> Iterator[Found]:
    """With the managed cross-check, the gate names a Hugging Face tokenizer (`cross_check_tokenizer`):
    `gate.benchmark.cross_check_tokenizer`, else the model's Hugging Face id (`model.source.hugging_face`).

    Why: the managed benchmark's AIPerf loads a tokenizer from the Hugging Face Hub to size prompts and count tokens
    (https://docs.nvidia.com/aiperf/reference/pre-flight-tokenizer-auto-detection.md), and an S3 or JumpStart source
    names none.
    """
    if _cross_checks_a_gate(team) and cross_check_tokenizer(team) is None:
        yield (
            (*CROSS_CHECK[:-1], "cross_check_tokenizer"),
            "AIPerf downloads a Hugging Face tokenizer to size prompts and count tokens, and this model's source "
            "names none: set gate.benchmark.cross_check_tokenizer to the id of an ungated repository with this "
            "model's tokenizer (e.g. the model's own Hugging Face id)",
        )


@rule_check("OG403", "gate.benchmark.concurrency lists distinct positive levels in increasing order")
def concurrency_problems(team: TeamConfig) -> Iterator[Found]:
    """`gate.benchmark.concurrency` lists positive levels, each once, in increasing order.

    Why: the gate benchmarks the baseline's twin and the candidate at each level, one level after the other, and
    judges every check at each level: a level below one stream sends nothing (and a level not measured fails), a
    repeated one would be run and judged twice.
    """
    concurrency = team.gate.benchmark.concurrency
    if any(c < 1 for c in concurrency) or sorted(set(concurrency)) != concurrency:
        yield (
            ("gate", "benchmark", "concurrency"),
            f"list distinct positive levels in increasing order, got {concurrency}",
        )


@rule_check("OG407", "method eagle (a head to train) only under gate.candidate")
def trained_head_problems(serving: Serving, path: PathT) -> Iterator[Found]:
    """`speculative_decoding.method: eagle`, a head the gate's optimization job trains, is set only under
    `gate.candidate` (not in `serving` nor a shadow candidate).

    Why: the head exists only once the gate's optimization job has trained it, so it can only be a gate candidate,
    which a promotion then deploys as the package the gate recorded (head included). An existing head is served
    with method eagle3 and its `model_s3_uri`.
    """
    if isinstance(serving.speculative_decoding, models.EagleTraining):
        yield (
            (*path, "speculative_decoding", "method"),
            "eagle trains a head in the gate's optimization job, so it is a gate.candidate setting only; here use "
            "method: eagle3 with a model_s3_uri of an existing head, or put method: eagle under gate.candidate and "
            "let the gate train, prove and promote it",
        )


#: What `compile: true` builds, by container family (the job's LMI container picks the compiler by its features:
#: djl-serving serving/docker/partition/sm_neo_dispatcher.py runs sm_neo_trt_llm_partition.py in the TensorRT-LLM
#: container and sm_neo_neuron_partition.py in the Neuron one; the vLLM container only quantizes or shards).
COMPILED_BY = {
    "lmi-trtllm": "TensorRT-LLM engines for the candidate's NVIDIA GPU",
    "lmi-neuronx": "Neuron artifacts for the candidate's Inferentia2/Trainium instance",
}
#: Quantizations SageMaker compiles into a TensorRT-LLM engine in one optimization job (the SageMaker Python SDK's
#: ModelBuilder.optimize rules, sagemaker/serve/validations/optimization.py TRT_CONFIGURATION: awq, fp8,
#: smoothquant; optigate offers fp8 and awq on lmi-trtllm). Neuron compiles no quantization (NEURON_CONFIGURATION).
COMPILED_QUANTIZATIONS = {"lmi-trtllm": frozenset({"fp8", "awq"}), "lmi-neuronx": frozenset()}


def compile_problems(team: TeamConfig, serving: Serving, path: PathT) -> list[Problem]:
    """`compile: true` is a gate candidate (the gate's optimization job compiles, proves and records the engine) for a
    container that reads compiled artifacts, without what such a container or SageMaker's job does not take: one
    rule function each, in the order they are reported. Outside gate.candidate only OG408 is checked; a candidate
    whose family compiles nothing (OG409) is checked no further.

    Rules from the SageMaker Python SDK's ModelBuilder.optimize (sagemaker/serve/model_builder.py and
    sagemaker/serve/validations/optimization.py): compilation only for TensorRT-LLM (GPU) and Neuron; "Compilation is
    not supported with speculative decoding with a GPU instance", and never with speculative decoding on Neuron;
    sharding is exclusive with every other technique (optigate never shards); on TensorRT-LLM a quantization is made
    by compilation ("Quantization ... must be provided with Compilation"). The typed vLLM engine switches are refused
    on these families by switch_read_by_family (OG206)."""
    # Read first, as before the split: a family with a schema problem holds every compilation rule back (valid_part).
    family = serving.container.family
    problems = compile_in_gate(serving, path)
    if path != GATE_CANDIDATE:
        return problems
    problems = compile_family(serving, path, family)
    if problems:
        return problems
    return [
        *compile_without_speculation(serving, path, family),
        *compile_quantization(serving, path, family),
        *trtllm_quantizes_by_compiling(team, serving, path, family),
    ]


@rule_check("OG408", "compile only under gate.candidate")
def compile_in_gate(serving: Serving, path: PathT) -> Iterator[Found]:
    """`compile: true` is set only under `gate.candidate` (not in `serving` nor a shadow candidate).

    Why: the gate's optimization job compiles the engine for the instance it proves it on, and a promotion deploys
    the package the gate recorded; a serving block cannot compile an engine of its own.
    """
    if serving.compile and path != GATE_CANDIDATE:
        yield (
            (*path, "compile"),
            "compile is a gate.candidate setting only: the gate's optimization job compiles the engine for the "
            "instance it proves it on, and a promotion deploys the package the gate recorded; remove it here and "
            "put compile: true under gate.candidate",
        )


@rule_check("OG409", "compile only for a container family that reads compiled engines")
def compile_family(serving: Serving, path: PathT, family: str) -> Iterator[Found]:
    """A compiled gate candidate runs a container family that reads compiled engines (`COMPILED_BY`): lmi-trtllm
    (TensorRT-LLM engines for its NVIDIA GPU) or lmi-neuronx (Neuron artifacts for Inferentia2/Trainium).

    Why: the optimization job's LMI container picks the compiler by its features (djl-serving
    serving/docker/partition/sm_neo_dispatcher.py runs sm_neo_trt_llm_partition.py in the TensorRT-LLM container and
    sm_neo_neuron_partition.py in the Neuron one; the vLLM container only quantizes or shards), and the SageMaker
    Python SDK's ModelBuilder.optimize compiles only for TensorRT-LLM and Neuron. vLLM captures its CUDA graphs and
    picks its kernels when it starts.
    """
    if path == GATE_CANDIDATE and serving.compile and family not in COMPILED_BY:
        yield (
            (*path, "compile"),
            f"container family {family} (vLLM) takes no ahead-of-time compiled engine: vLLM captures its CUDA "
            "graphs and picks its kernels when it starts (see enforce_eager, attention_backend). To compile, "
            "switch the candidate to TensorRT-LLM with container: {family: lmi-trtllm} beside compile: true "
            "(Neuron: lmi-neuronx on inf2/trn1), or remove compile",
        )


@rule_check("OG410", "compile without speculative decoding")
def compile_without_speculation(serving: Serving, path: PathT, family: str) -> Iterator[Found]:
    """A compiled gate candidate (of a family that compiles, OG409) sets no `speculative_decoding`, its own or
    inherited from the serving block.

    Why: SageMaker compiles no speculative decoding (the SageMaker Python SDK's ModelBuilder.optimize,
    sagemaker/serve/model_builder.py and sagemaker/serve/validations/optimization.py: "Compilation is not supported
    with speculative decoding with a GPU instance", and never with speculative decoding on Neuron), and the compiled
    families read no OPTION_SPECULATIVE_CONFIG.
    """
    if (
        path == GATE_CANDIDATE
        and serving.compile
        and family in COMPILED_BY
        and serving.speculative_decoding is not None
    ):
        yield (
            (*path, "compile"),
            "SageMaker compiles no speculative decoding (the SDK: 'Compilation is not supported with speculative "
            f"decoding'), and {family} reads no OPTION_SPECULATIVE_CONFIG: prove speculative decoding and "
            "compilation in separate gate runs (remove speculative_decoding from serving and the candidate, or "
            "remove compile)",
        )


@rule_check("OG411", "compile only with a quantization SageMaker compiles")
def compile_quantization(serving: Serving, path: PathT, family: str) -> Iterator[Found]:
    """A compiled gate candidate's quantization, if any, is one SageMaker compiles into the family's engine
    (`COMPILED_QUANTIZATIONS`): fp8 or awq on lmi-trtllm, none on lmi-neuronx.

    Why: the SageMaker Python SDK's ModelBuilder.optimize rules (sagemaker/serve/validations/optimization.py,
    TRT_CONFIGURATION: awq, fp8, smoothquant; optigate offers fp8 and awq on lmi-trtllm) compile those alone into a
    TensorRT-LLM engine in one optimization job, and Neuron compiles no quantization (NEURON_CONFIGURATION).
    """
    quantization = serving.quantization
    if (
        path == GATE_CANDIDATE
        and serving.compile
        and family in COMPILED_QUANTIZATIONS
        and quantization is not None
        and quantization not in COMPILED_QUANTIZATIONS[family]
    ):
        allowed = sorted(COMPILED_QUANTIZATIONS[family])
        yield (
            (*path, "quantization"),
            f"SageMaker does not compile {quantization} into {COMPILED_BY[family]} (the SDK's optimize rules); "
            + (f"use {' or '.join(allowed)}, or remove compile" if allowed else "remove quantization, or compile")
            + " in a separate step",
        )


@rule_check("OG412", "a new quantization on lmi-trtllm comes with compile")
def trtllm_quantizes_by_compiling(team: TeamConfig, serving: Serving, path: PathT, family: str) -> Iterator[Found]:
    """A gate candidate on lmi-trtllm that sets a new quantization (`gate.candidate.quantization`, other than
    `serving.quantization`) also sets `compile: true`.

    Why: on lmi-trtllm SageMaker's optimization job quantizes by compiling a TensorRT-LLM engine (the SageMaker
    Python SDK's ModelBuilder.optimize: "Quantization ... must be provided with Compilation").
    """
    if path != GATE_CANDIDATE:
        return
    overrides = team.gate.candidate
    new_quantization = "quantization" in overrides and overrides["quantization"] != team.serving.quantization
    if not serving.compile and family == "lmi-trtllm" and new_quantization and serving.quantization is not None:
        yield (
            (*path, "quantization"),
            "on lmi-trtllm SageMaker's optimization job quantizes by compiling a TensorRT-LLM engine (the SDK: "
            "'Quantization ... must be provided with Compilation'); add compile: true to the candidate, or "
            "quantize on container family lmi",
        )


#: This module's rules, in ID order: optigate.deployment.all_rules collects them (every_rule).
RULES = (
    adapter_gate_limits,
    gate_needs_dataset,
    concurrency_problems,
    cross_check_needs_candidate,
    cross_check_family,
    cross_check_has_tokenizer,
    trained_head_problems,
    compile_in_gate,
    compile_family,
    compile_without_speculation,
    compile_quantization,
    trtllm_quantizes_by_compiling,
)
