"""A compiled gate candidate (`gate.candidate: {compile: true}`): what SageMaker's optimization job compiles it for,
and what cannot work.

The job gets a ModelCompilationConfig (botocore: {Image, OverrideEnvironment}); GatePlan pins its Image to the
candidate's LMI image, whose container picks the compiler (djl-serving serving/docker/partition/sm_neo_dispatcher.py:
TensorRT-LLM in the TensorRT-LLM container, Neuron in the Neuron one). The compile step reads every `OPTION_*` variable
as `option.*` (utils.update_kwargs_with_env_vars) and writes them into the output's serving.properties
(sm_neo_trt_llm_partition.py generate_properties_file, sm_neo_neuron_partition.py write_properties), next to the
engines (TensorRT-LLM) or under `optimized_model/` (Neuron, which then names `option.model_id=./optimized_model`). An
engine is built for one GPU architecture or Neuron generation, one tensor-parallel degree, one maximum length and one
maximum batch ("Each engine must be compiled for a given set of: GPU architecture, maximum batch size, maximum input
length...": https://huggingface.co/docs/text-generation-inference/backends/trtllm; the Neuron compile step refuses a
missing tensor_parallel_degree). https://docs.aws.amazon.com/sagemaker/latest/dg/model-optimize.html
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

from optigate.config.models import TeamConfig
from optigate.config.rule_registry import Found, rule_check
from optigate.config.rules import GATE_CANDIDATE, Problem, Severity
from optigate.deployment.serving import ResolvedServing

#: The options an engine is compiled for, by container family, as optigate renders them
#: (optigate.serving.lmi.render_environment; LMI's TensorRT-LLM and Neuron option names).
COMPILED_OPTIONS = {
    "lmi-trtllm": ("OPTION_TENSOR_PARALLEL_DEGREE", "OPTION_MAX_INPUT_LEN", "OPTION_MAX_ROLLING_BATCH_SIZE"),
    "lmi-neuronx": ("OPTION_TENSOR_PARALLEL_DEGREE", "OPTION_N_POSITIONS", "OPTION_MAX_ROLLING_BATCH_SIZE"),
}
#: Further options the compile step must see to build what the candidate serves: the rolling-batch backend and the
#: quantization it compiles in (TensorRT-LLM builds an fp8/awq engine from option.quantize).
CARRIED_OPTIONS = ("OPTION_ROLLING_BATCH", "OPTION_QUANTIZE")


def compilation_override_environment(family: str, environment: Mapping[str, str]) -> dict[str, str]:
    """ModelCompilationConfig.OverrideEnvironment: what the candidate serves with, of what an engine is compiled for."""
    keys = (*COMPILED_OPTIONS[family], *CARRIED_OPTIONS)
    return {key: environment[key] for key in keys if key in environment}


def compiled_for(instance_type: str, environment: Mapping[str, str]) -> dict[str, str] | None:
    """What a compiled candidate's engine is built for (instance type, TP, max length, batch), None if it is not a
    compiled candidate's environment. Recorded with the model package (CustomerMetadataProperties `compiled_for`)
    so that a later team file can be compared with it."""
    family = next((f for f, keys in COMPILED_OPTIONS.items() if keys[1] in environment), None)
    if family is None:
        return None
    return {"instance_type": instance_type} | {k: environment[k] for k in COMPILED_OPTIONS[family] if k in environment}


def instance_family(instance_type: str) -> str:
    """`ml.g6e.12xlarge` -> `g6e`: the generation an engine is pinned to (GPU architecture or Neuron generation)."""
    parts = instance_type.split(".")
    return parts[1] if len(parts) == 3 else instance_type


def compilation_problems(baseline: ResolvedServing, candidate: ResolvedServing) -> list[Problem]:
    """A compiled candidate must be the engine the team file then serves: one rule function each, in the order they
    are reported."""
    return [*compiled_on_served_family(baseline, candidate), *compiled_as_served(baseline, candidate)]


@rule_check("OG414", "a compiled candidate runs on the instance family the team serves")
def compiled_on_served_family(baseline: ResolvedServing, candidate: ResolvedServing) -> Iterator[Found]:
    """A compiled gate candidate (`compile: true`) runs on the instance family the team serves (`ml.g6e.12xlarge`:
    `g6e`), with its own `instance_type` or the one it inherits.

    Why: an engine is built for one GPU architecture or Neuron generation ("Each engine must be compiled for a given
    set of: GPU architecture, maximum batch size, maximum input length...":
    https://huggingface.co/docs/text-generation-inference/backends/trtllm), and a promotion deploys the package's
    environment on serving.instance_type.
    """
    if not candidate.serving.compile:
        return
    here, there = baseline.serving.instance_type, candidate.serving.instance_type
    if instance_family(here) != instance_family(there):
        yield (
            (*GATE_CANDIDATE, "instance_type"),
            f"a compiled engine is pinned to the instance family it is compiled on ({instance_family(there)}: "
            f"{candidate.instance.accelerator}), and the team serves {here} ({baseline.instance.accelerator}): a "
            "promotion would deploy it there. Compile on the family you serve (remove instance_type from the "
            "candidate), or move serving.instance_type first, prove that, then compile",
        )


@rule_check("OG415", "a compiled candidate has the tensor-parallel degree and length the team serves")
def compiled_as_served(baseline: ResolvedServing, candidate: ResolvedServing) -> Iterator[Found]:
    """A compiled gate candidate (`compile: true`) has the tensor-parallel degree and the maximum length the team
    serves, as resolved (set, or chosen by the planner); each is reported on its own.

    Why: an engine serves only the tensor-parallel degree and the maximum length it is compiled for ("Each engine
    must be compiled for a given set of: GPU architecture, maximum batch size, maximum input length...":
    https://huggingface.co/docs/text-generation-inference/backends/trtllm), and a promotion deploys the package's
    environment on the team file's serving block: the engine and the serving config are one.
    """
    if not candidate.serving.compile:
        return
    for what, field, ours, theirs in (
        ("tensor-parallel degree", "tensor_parallel_degree", candidate.tensor_parallel_degree,
         baseline.tensor_parallel_degree),
        ("maximum length", "max_model_len", candidate.max_model_len, baseline.max_model_len),
    ):  # fmt: skip
        if ours != theirs:
            yield (
                (*GATE_CANDIDATE, field),
                f"the compiled engine's {what} ({ours}) differs from the serving config's ({theirs}): an engine "
                f"serves only the {what} it is compiled for, so the engine and the serving config are one. Set "
                f"serving.{field}: {ours} and prove that first, or pin serving.{field} so both sides agree, then "
                "compile",
            )


def recompile_note(served_compiled_for: Mapping[str, str] | None, resolved: ResolvedServing) -> str | None:
    """Why the served package's compiled engine no longer fits the team file (a changed instance type, TP, maximum
    length or batch), or None. The gate's fingerprint holds the same, so the gate proves a recompiled candidate."""
    if not served_compiled_for:
        return None
    now = compiled_for(resolved.serving.instance_type, resolved.environment)
    if now is None:  # the team file serves vLLM now: the compiled package is no longer what it describes
        return (
            f"the served package is an engine compiled for {_target(served_compiled_for)}, and the team file now "
            f"serves {resolved.image_family}: deploy only after the gate proves the team file's candidate"
        )
    changed = {k: (v, now.get(k)) for k, v in served_compiled_for.items() if now.get(k) != v}
    if not changed:
        return None
    what = ", ".join(f"{_name(k)} {old} → {new}" for k, (old, new) in changed.items())
    return (
        f"the served engine was compiled for {_target(served_compiled_for)}; the team file now says {what}: the "
        "engine must be recompiled (run the gate: its fingerprint includes the compile target, so it re-proves)"
    )


def _name(key: str) -> str:
    return {
        "instance_type": "instance type",
        "OPTION_TENSOR_PARALLEL_DEGREE": "TP",
        "OPTION_MAX_INPUT_LEN": "max length",
        "OPTION_N_POSITIONS": "max length",
        "OPTION_MAX_ROLLING_BATCH_SIZE": "batch",
    }.get(key, key)


def _target(target: Mapping[str, Any]) -> str:
    return ", ".join(f"{_name(k)} {v}" for k, v in target.items())


#: The SageMaker Python SDK's client-side check before an optimization job (sagemaker/serve/model_builder.py,
#: ModelBuilder.optimize): a model id matching this, compiled on a GPU instance, is refused with "Compilation is not
#: supported for models greater than Llama-3.0 with a GPU instance".
SDK_LLAMA_3_PLUS = re.compile(r"llama-3[\.\-][1-9]\d*")


@rule_check("OG421", "the SDK (not the API) refuses compiling Llama 3.1+ on GPUs", Severity.NOTE)
def compile_advisories(team: TeamConfig, candidate: ResolvedServing | None) -> Iterator[Found]:
    """A gate candidate compiled on a GPU instance (not Neuron) whose model is Llama 3.1 or newer (`SDK_LLAMA_3_PLUS`
    in its architecture name, or its Hugging Face or JumpStart id) is noted by `optigate validate`, not refused.

    Why: the SageMaker Python SDK refuses it in its own client (sagemaker/serve/model_builder.py,
    ModelBuilder.optimize: "Compilation is not supported for models greater than Llama-3.0 with a GPU instance"), but
    the API reference states no such limit and LMI's TensorRT-LLM guide lists Llama 3.1 among the architectures it
    compiles (trt_llm_user_guide.md): the gate runs the job, and a job that fails fails the gate closed with the job's
    reason.
    """
    if candidate is None or not candidate.serving.compile or candidate.instance.is_neuron:
        return
    source = team.model.source
    names = [team.model.architecture if isinstance(team.model.architecture, str) else ""]
    names += [
        source.hugging_face.model_id if source.hugging_face else "",
        source.jumpstart.model_id if source.jumpstart else "",
    ]
    if any(SDK_LLAMA_3_PLUS.search(name.lower()) for name in names if name):
        yield (
            (*GATE_CANDIDATE, "compile"),
            "undocumented: the SageMaker Python SDK refuses compiling Llama 3.1 and newer on GPU instances in its own "
            "client ('Compilation is not supported for models greater than Llama-3.0 with a GPU instance'); the API "
            "reference states no such limit and LMI's TensorRT-LLM guide lists Llama 3.1, so the gate runs the job, "
            "and a failed compilation fails the gate with the job's reason",
        )


#: This module's rules, in ID order: optigate.deployment.all_rules collects them (every_rule).
RULES = (
    compiled_on_served_family,
    compiled_as_served,
    compile_advisories,
)
