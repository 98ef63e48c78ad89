"""Checkpoint rules: a serving quantization must be one the engine (or the gate's optimization job) can apply to
the weights as stored, and the weights as stored must be known consistently.

The weights are resolved once per team by `optigate.deployment.checkpoint` (the catalog, a local config.json, or
model.weights); these checks take the result, so they stay pure and apply to every variant the same way.
"""

from __future__ import annotations

from optigate.config.models import UNQUANTIZED_WEIGHTS
from optigate.config.rules.registry import PathT, Problem, rule

START_UP_QUANTIZATION = rule(
    "OG112", "serving.quantization is one the engine or the gate's optimization job can apply to the stored weights"
)
WEIGHTS_AGREE = rule("OG113", "model.weights agrees with the catalog or local_dir's config.json")
LOCAL_CONFIG_READABLE = rule("OG114", "model.local_dir holds a config.json whose stored weights optigate can read")

#: What each container family quantizes to at start-up from 16- or 32-bit weights (serving.quantization's names).
#: LMI's vLLM: fp8 (and bitsandbytes, which optigate does not offer); "other quantization techniques supported by
#: vLLM require ahead of time quantization to be served with LMI" (djl-serving
#: serving/docs/lmi/user_guides/vllm_user_guide.md, "Runtime Quantization", commit c1ac412). LMI's TensorRT-LLM
#: quantizes awq and fp8 while it compiles just in time (trt_llm_user_guide.md, "Quantization Support" and the
#: option.quantize rows). lmi-neuronx serves no quantization (OG306).
START_UP_QUANTIZATIONS: dict[str, frozenset[str]] = {
    "lmi": frozenset({"fp8"}),
    "lmi-trtllm": frozenset({"fp8", "awq"}),
    "lmi-neuronx": frozenset(),
}
#: What the gate's optimization job quantizes 16-bit weights to in the LMI container: AutoAWQ or llm-compressor FP8
#: (djl-serving serving/docker/partition/partition.py, PartitionService.run_quantization).
JOB_QUANTIZATIONS = frozenset({"awq", "fp8"})


def quantization_problems(
    weights: str, known_from: str, quantization: str | None, family: str, path: PathT, *, by_job: bool = False
) -> list[Problem]:
    """Why `quantization` cannot be served from `weights` (stored; `known_from` says how that is known) on
    `family`: at start-up, or (`by_job`) made by the gate's optimization job first."""
    if quantization is None or quantization == weights or family == "lmi-neuronx":
        return []  # served as stored; Neuron refuses every quantization (OG306)

    def refuse(message: str) -> list[Problem]:
        return [Problem((*path, "quantization"), message, START_UP_QUANTIZATION)]

    stored = f"the weights are stored as {weights} ({known_from})"
    if weights not in UNQUANTIZED_WEIGHTS:
        # vLLM refuses a quantization other than the checkpoint's ("Quantization method specified in the model config
        # ... does not match ...": vllm/config/model.py, ModelConfig._verify_quantization); a job quantizes 16 bits.
        return refuse(
            f"{stored}: they are served as {weights} and cannot be quantized again to {quantization}; set "
            f"quantization: {weights} or remove it to serve them as stored, or point model.source at a 16-bit "
            "checkpoint"
        )
    if by_job:
        if quantization in JOB_QUANTIZATIONS:
            return []
        return refuse(
            f"{stored}, and the gate's optimization job quantizes them to awq or fp8 only (djl-serving partition.py); "
            f"for {quantization}, point model.source at a pre-quantized {quantization} checkpoint and set "
            f"model.weights: {quantization}"
        )
    if quantization in START_UP_QUANTIZATIONS.get(family, frozenset()):
        return []
    engine = "LMI's vLLM quantizes at start-up only to fp8" if family == "lmi" else f"{family} cannot"
    job = (
        f"let the gate's optimization job make the {quantization} weights once (gate.candidate: "
        f"{{quantization: {quantization}}}), or "
        if quantization in JOB_QUANTIZATIONS
        else ""
    )
    return refuse(
        f"{quantization} needs weights quantized ahead of time: {stored}, and {engine}, so the endpoint would not "
        f"start; {job}point model.source at a pre-quantized {quantization} checkpoint and set model.weights: "
        f"{quantization}"
    )


def disagreement(stated: str, known: str, known_from: str) -> Problem:
    """model.weights says one thing and the catalog or the config.json another."""
    return Problem(
        ("model", "weights"),
        f"{stated} contradicts {known_from}, which stores {known}; remove model.weights or correct it",
        WEIGHTS_AGREE,
    )


def unreadable(local_dir: str, why: str) -> Problem:
    """model.local_dir's config.json cannot say how the weights are stored."""
    return Problem(
        ("model", "local_dir"),
        f"{why} in {local_dir}; give a folder with the model's config.json, or state model.weights "
        "(bf16, fp16, fp32, fp8, awq, gptq or nvfp4)",
        LOCAL_CONFIG_READABLE,
    )


#: This module's rules, in ID order: optigate.deployment.all_rules collects them (every_rule).
RULES = (
    START_UP_QUANTIZATION,
    WEIGHTS_AGREE,
    LOCAL_CONFIG_READABLE,
)
