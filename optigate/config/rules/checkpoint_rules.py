"""Checkpoint rules: a serving quantization must be one the engine (or the gate's optimization job) can apply to
the weights as stored, and the weights as stored must be known consistently.

The weights are resolved once per team by `optigate.deployment.checkpoint` (the catalog, a local config.json, or
model.weights); these checks take the result, so they stay pure and apply to every variant the same way.
"""

from __future__ import annotations

from collections.abc import Iterator

from optigate.config.models import UNQUANTIZED_WEIGHTS
from optigate.config.rule_registry import Found, PathT, rule_check

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


@rule_check(
    "OG112", "serving.quantization is one the engine or the gate's optimization job can apply to the stored weights"
)
def quantization_problems(
    weights: str, known_from: str, quantization: str | None, family: str, path: PathT, *, by_job: bool = False
) -> Iterator[Found]:
    """`serving.quantization`, when it differs from the weights as stored (`model.weights`, the catalog or
    local_dir's config.json: `optigate.deployment.checkpoint`), is one the container family's engine applies at
    start-up to 16- or 32-bit weights (lmi: fp8; lmi-trtllm: fp8 or awq), or, for a gate candidate whose
    optimization job writes the weights first, one the job makes (awq or fp8). Not checked on lmi-neuronx (OG306).

    Why: weights stored quantized are served as stored: vLLM refuses a quantization other than the checkpoint's
    ("Quantization method specified in the model config ... does not match ...": vllm/config/model.py,
    ModelConfig._verify_quantization), and a job quantizes 16 bits. Any other quantization needs weights quantized
    ahead of time, so the endpoint would not start: LMI's vLLM quantizes at start-up to fp8 only, "other
    quantization techniques supported by vLLM require ahead of time quantization to be served with LMI"
    (djl-serving serving/docs/lmi/user_guides/vllm_user_guide.md, "Runtime Quantization"); LMI's TensorRT-LLM
    quantizes awq and fp8 while it compiles (trt_llm_user_guide.md, "Quantization Support"); the job quantizes
    with AutoAWQ or llm-compressor FP8 (djl-serving serving/docker/partition/partition.py).
    """
    if quantization is None or quantization == weights or family == "lmi-neuronx":
        return  # served as stored; Neuron refuses every quantization (OG306)
    where = (*path, "quantization")
    stored = f"the weights are stored as {weights} ({known_from})"
    if weights not in UNQUANTIZED_WEIGHTS:
        # vLLM refuses a quantization other than the checkpoint's ("Quantization method specified in the model config
        # ... does not match ...": vllm/config/model.py, ModelConfig._verify_quantization); a job quantizes 16 bits.
        yield (
            where,
            f"{stored}: they are served as {weights} and cannot be quantized again to {quantization}; set "
            f"quantization: {weights} or remove it to serve them as stored, or point model.source at a 16-bit "
            "checkpoint",
        )
        return
    if by_job:
        if quantization not in JOB_QUANTIZATIONS:
            yield (
                where,
                f"{stored}, and the gate's optimization job quantizes them to awq or fp8 only (djl-serving "
                f"partition.py); for {quantization}, point model.source at a pre-quantized {quantization} checkpoint "
                f"and set model.weights: {quantization}",
            )
        return
    if quantization in START_UP_QUANTIZATIONS.get(family, frozenset()):
        return
    engine = "LMI's vLLM quantizes at start-up only to fp8" if family == "lmi" else f"{family} cannot"
    job = (
        f"let the gate's optimization job make the {quantization} weights once (gate.candidate: "
        f"{{quantization: {quantization}}}), or "
        if quantization in JOB_QUANTIZATIONS
        else ""
    )
    yield (
        where,
        f"{quantization} needs weights quantized ahead of time: {stored}, and {engine}, so the endpoint would not "
        f"start; {job}point model.source at a pre-quantized {quantization} checkpoint and set model.weights: "
        f"{quantization}",
    )


@rule_check("OG113", "model.weights agrees with the catalog or local_dir's config.json")
def weights_agree(stated: str | None, known: str, known_from: str) -> Iterator[Found]:
    """`model.weights`, when stated, is the format the weights are known to be stored in: from `model.local_dir`'s
    config.json (its quantization_config or torch_dtype), or the catalog's entry for a Hugging Face id
    (optigate/plan/data/models.yaml).

    Why: the stored format sizes the download and the timeouts and decides which quantization can be served
    (OG112); two answers to it would leave optigate to guess which is true, so the contradiction is refused.
    """
    if stated is not None and stated != known:
        yield (
            ("model", "weights"),
            f"{stated} contradicts {known_from}, which stores {known}; remove model.weights or correct it",
        )


@rule_check("OG114", "model.local_dir holds a config.json whose stored weights optigate can read")
def local_config_readable(local_dir: str, why: str) -> Iterator[Found]:
    """`model.local_dir` holds a config.json that says how the weights are stored, unless `model.weights` states
    it. Reported with what reading it (`optigate.deployment.checkpoint`) found instead (`why`): no config.json, an
    unreadable one, or, with model.weights unset, a quantization_config optigate has no name for.

    Why: the stored format sizes the download and the timeouts and decides which quantization can be served
    (OG112); a local_dir is read, never guessed past, and nothing is fetched from a hub.
    """
    yield (
        ("model", "local_dir"),
        f"{why} in {local_dir}; give a folder with the model's config.json, or state model.weights "
        "(bf16, fp16, fp32, fp8, awq, gptq or nvfp4)",
    )


#: This module's rules, in ID order: optigate.deployment.all_rules collects them (every_rule).
RULES = (
    quantization_problems,
    weights_agree,
    local_config_readable,
)
