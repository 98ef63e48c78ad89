"""Gate rules: the gate candidate, its benchmark and SageMaker's managed cross-check, compilation and trained heads."""

from __future__ import annotations

from pydantic import ValidationError

from optigate.config import models
from optigate.config.models import Serving, TeamConfig, serving_with
from optigate.config.rules.registry import PathT, Problem, rule

GATE_CANDIDATE: PathT = ("gate", "candidate")

ADAPTER_GATE_LIMITS = rule(
    "OG401", "an adapter team's gate candidate trains no EAGLE head and takes no managed cross-check"
)
GATE_NEEDS_DATASET = rule("OG402", "a gate candidate comes with an evaluation dataset")
CONCURRENCY_LEVELS = rule("OG403", "gate.benchmark.concurrency lists distinct positive levels in increasing order")
CROSS_CHECK_NEEDS_CANDIDATE = rule("OG404", "a managed cross-check only with a gate candidate")
CROSS_CHECK_FAMILY = rule("OG405", "a managed cross-check only for container family lmi on both sides")
CROSS_CHECK_TOKENIZER = rule("OG406", "a managed cross-check has a Hugging Face tokenizer to download")
EAGLE_TRAINING_IN_GATE = rule("OG407", "method eagle (a head to train) only under gate.candidate")
COMPILE_IN_GATE = rule("OG408", "compile only under gate.candidate")
COMPILE_FAMILY = rule("OG409", "compile only for a container family that reads compiled engines")
COMPILE_WITHOUT_SPECULATION = rule("OG410", "compile without speculative decoding")
COMPILE_QUANTIZATION = rule("OG411", "compile only with a quantization SageMaker compiles")
TRTLLM_QUANTIZES_BY_COMPILING = rule("OG412", "a new quantization on lmi-trtllm comes with compile")


def gate_problems(team: TeamConfig) -> list[Problem]:
    """What a gate candidate needs beside the candidate itself (checked by `team.candidate_problems`)."""
    if not team.gate.candidate:
        return []
    problems: list[Problem] = []
    if team.adapters:
        speculative = team.gate.candidate.get("speculative_decoding")
        if isinstance(speculative, dict) and speculative.get("method") == "eagle":
            problems.append(
                Problem(
                    (*GATE_CANDIDATE, "speculative_decoding", "method"),
                    "SageMaker's optimization job documents EAGLE training for a base model alone, not for a base "
                    "that serves LoRA adapters (whose outputs the head was not trained on); prove the adapters' "
                    "base change without a trained head, or use a head trained elsewhere (method: eagle3 with `model`)",
                    ADAPTER_GATE_LIMITS,
                )
            )
        if team.gate.benchmark.cross_check == "sagemaker":
            problems.append(
                Problem(
                    CROSS_CHECK,
                    "the gate's own benchmark spreads requests over the adapters' inference components by the "
                    "team's mix; SageMaker's managed benchmark targets components one job each, so its figures would "
                    "not be the same workload: set cross_check: none for a team with adapters",
                    ADAPTER_GATE_LIMITS,
                )
            )
    if team.gate.evaluation.dataset_s3_uri is None:
        problems.append(
            Problem(
                ("gate", "evaluation", "dataset_s3_uri"),
                "a gate candidate needs an evaluation dataset: "
                "nothing is promoted without quality numbers beside the speed numbers",
                GATE_NEEDS_DATASET,
            )
        )
    return problems


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
    """Where SageMaker's managed benchmark cannot target the gate's endpoints, say why and what to change.

    The gate's two endpoints are its own temporary single-model endpoints (a candidate and the baseline's
    twin, one container each, no inference components, outside any VPC: optigate configures none), so the
    job needs no InferenceComponents, TargetContainerHostname or NetworkConfig; what is left is the API the
    container speaks and the tokenizer AIPerf must download."""
    if team.gate.benchmark.cross_check != "sagemaker":
        return []
    if not team.gate.candidate:
        return [
            Problem(
                CROSS_CHECK,
                "a cross-check runs beside the gate's benchmark; without gate.candidate there is "
                "no gate: set cross_check: none or give a candidate",
                CROSS_CHECK_NEEDS_CANDIDATE,
            )
        ]
    problems: list[Problem] = []
    try:
        sides = {"serving": team.serving, "gate.candidate": serving_with(team.serving, team.gate.candidate)}
    except ValidationError:  # the candidate's own problems are reported at gate.candidate
        sides = {"serving": team.serving}
    for where, serving in sides.items():
        family = serving.container.family
        if family not in CROSS_CHECK_FAMILIES:
            problems.append(
                Problem(
                    CROSS_CHECK,
                    f"SageMaker's managed benchmark sends OpenAI chat completions (`messages`), which optigate knows "
                    f"only LMI's vLLM backend (family lmi) to answer; {where} runs {family}. Use container family "
                    "lmi, or set cross_check: none",
                    CROSS_CHECK_FAMILY,
                )
            )
    if cross_check_tokenizer(team) is None:
        problems.append(
            Problem(
                (*CROSS_CHECK[:-1], "cross_check_tokenizer"),
                "AIPerf downloads a Hugging Face tokenizer to size prompts and count tokens, and this model's source "
                "names none: set gate.benchmark.cross_check_tokenizer to the id of an ungated repository with this "
                "model's tokenizer (e.g. the model's own Hugging Face id)",
                CROSS_CHECK_TOKENIZER,
            )
        )
    return problems


def concurrency_problems(team: TeamConfig) -> list[Problem]:
    concurrency = team.gate.benchmark.concurrency
    if any(c < 1 for c in concurrency) or sorted(set(concurrency)) != concurrency:
        return [
            Problem(
                ("gate", "benchmark", "concurrency"),
                f"list distinct positive levels in increasing order, got {concurrency}",
                CONCURRENCY_LEVELS,
            )
        ]
    return []

    return []


def trained_head_problems(serving: Serving, path: PathT) -> list[Problem]:
    """`method: eagle` is a head the gate's optimization job trains: it exists only as a gate candidate, which a
    promotion then deploys as the package the gate recorded (head included)."""
    if not isinstance(serving.speculative_decoding, models.EagleTraining):
        return []
    return [
        Problem(
            (*path, "speculative_decoding", "method"),
            "eagle trains a head in the gate's optimization job, so it is a gate.candidate setting only; here use "
            "method: eagle3 with a model_s3_uri of an existing head, or put method: eagle under gate.candidate and "
            "let the gate train, prove and promote it",
            EAGLE_TRAINING_IN_GATE,
        )
    ]


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
    container that reads compiled artifacts, without what such a container or SageMaker's job does not take.

    Rules from the SageMaker Python SDK's ModelBuilder.optimize (sagemaker/serve/model_builder.py and
    sagemaker/serve/validations/optimization.py): compilation only for TensorRT-LLM (GPU) and Neuron; "Compilation is
    not supported with speculative decoding with a GPU instance", and never with speculative decoding on Neuron;
    sharding is exclusive with every other technique (optigate never shards); on TensorRT-LLM a quantization is made
    by compilation ("Quantization ... must be provided with Compilation"). The typed vLLM engine switches are refused
    on these families by switch_read_by_family (OG206)."""
    problems: list[Problem] = []
    family = serving.container.family
    candidate = path == GATE_CANDIDATE
    if serving.compile and not candidate:
        problems.append(
            Problem(
                (*path, "compile"),
                "compile is a gate.candidate setting only: the gate's optimization job compiles the engine for the "
                "instance it proves it on, and a promotion deploys the package the gate recorded; remove it here and "
                "put compile: true under gate.candidate",
                COMPILE_IN_GATE,
            )
        )
        return problems
    if not candidate:
        return problems
    overrides = team.gate.candidate
    if serving.compile and family not in COMPILED_BY:
        problems.append(
            Problem(
                (*path, "compile"),
                f"container family {family} (vLLM) takes no ahead-of-time compiled engine: vLLM captures its CUDA "
                "graphs and picks its kernels when it starts (see enforce_eager, attention_backend). To compile, "
                "switch the candidate to TensorRT-LLM with container: {family: lmi-trtllm} beside compile: true "
                "(Neuron: lmi-neuronx on inf2/trn1), or remove compile",
                COMPILE_FAMILY,
            )
        )
        return problems
    if serving.compile and serving.speculative_decoding is not None:
        problems.append(
            Problem(
                (*path, "compile"),
                "SageMaker compiles no speculative decoding (the SDK: 'Compilation is not supported with speculative "
                f"decoding'), and {family} reads no OPTION_SPECULATIVE_CONFIG: prove speculative decoding and "
                "compilation in separate gate runs (remove speculative_decoding from serving and the candidate, or "
                "remove compile)",
                COMPILE_WITHOUT_SPECULATION,
            )
        )
    quantization = serving.quantization
    new_quantization = "quantization" in overrides and overrides["quantization"] != team.serving.quantization
    if serving.compile and quantization is not None and quantization not in COMPILED_QUANTIZATIONS[family]:
        allowed = sorted(COMPILED_QUANTIZATIONS[family])
        problems.append(
            Problem(
                (*path, "quantization"),
                f"SageMaker does not compile {quantization} into {COMPILED_BY[family]} (the SDK's optimize rules); "
                + (f"use {' or '.join(allowed)}, or remove compile" if allowed else "remove quantization, or compile")
                + " in a separate step",
                COMPILE_QUANTIZATION,
            )
        )
    if not serving.compile and family == "lmi-trtllm" and new_quantization and quantization is not None:
        problems.append(
            Problem(
                (*path, "quantization"),
                "on lmi-trtllm SageMaker's optimization job quantizes by compiling a TensorRT-LLM engine (the SDK: "
                "'Quantization ... must be provided with Compilation'); add compile: true to the candidate, or "
                "quantize on container family lmi",
                TRTLLM_QUANTIZES_BY_COMPILING,
            )
        )
    return problems


#: This module's rules, in ID order: optigate.deployment.all_rules collects them (every_rule).
RULES = (
    ADAPTER_GATE_LIMITS,
    GATE_NEEDS_DATASET,
    CONCURRENCY_LEVELS,
    CROSS_CHECK_NEEDS_CANDIDATE,
    CROSS_CHECK_FAMILY,
    CROSS_CHECK_TOKENIZER,
    EAGLE_TRAINING_IN_GATE,
    COMPILE_IN_GATE,
    COMPILE_FAMILY,
    COMPILE_WITHOUT_SPECULATION,
    COMPILE_QUANTIZATION,
    TRTLLM_QUANTIZES_BY_COMPILING,
)
