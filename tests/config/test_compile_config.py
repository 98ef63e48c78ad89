"""`gate.candidate: {compile: true}`: the gate's optimization job compiles the candidate for its container family
(ModelCompilationConfig). Which job it builds, where the key may be written, and each combination that cannot work,
refused at the key to change with the reason; the gate's fingerprint holds what an engine is compiled for, and the
summary says when a served engine no longer fits the team file."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from optigate.config.loader import ConfigError
from optigate.deployment import load_resolved_team
from optigate.deployment.compilation import compiled_for, recompile_note
from optigate.deployment.team import ResolvedTeam
from tests.fixtures.config_files import minimal_team

TRTLLM = "container: {family: lmi-trtllm}\n"


def _tail(candidate: str) -> str:
    return f"""
gate:
  candidate: {candidate}
  evaluation:
    dataset_s3_uri: s3://acme-eval/demo/
"""


def _team(tmp_path: Path, candidate: str, *, instance: str = "ml.g6.2xlarge", serving: str = "") -> Path:
    return minimal_team(tmp_path, "llama-3.1-8b", instance, serving, _tail(candidate))


def _resolved(tmp_path: Path, candidate: str, **kwargs) -> ResolvedTeam:
    return load_resolved_team(_team(tmp_path, candidate, **kwargs))


def _messages(tmp_path: Path, candidate: str, **kwargs) -> list[str]:
    with pytest.raises(ConfigError) as error:
        _resolved(tmp_path, candidate, **kwargs)
    return [str(issue) for issue in error.value.issues]


# --------------------------------------------------------------------------- the job


def test_switching_to_trtllm_and_compiling_sends_a_compilation_for_what_the_candidate_serves(tmp_path):
    team = _resolved(tmp_path, "{container: {family: lmi-trtllm}, compile: true}", instance="ml.g6.12xlarge")
    environment = team.candidate.environment
    (config,) = team.optimization_configs
    override = config["ModelCompilationConfig"]["OverrideEnvironment"]
    # The TP, maximum length and batch the candidate serves, as LMI's TensorRT-LLM container reads them.
    assert override == {
        "OPTION_TENSOR_PARALLEL_DEGREE": environment["OPTION_TENSOR_PARALLEL_DEGREE"],
        "OPTION_MAX_INPUT_LEN": environment["OPTION_MAX_INPUT_LEN"],
        "OPTION_MAX_ROLLING_BATCH_SIZE": environment["OPTION_MAX_ROLLING_BATCH_SIZE"],
        "OPTION_ROLLING_BATCH": "trtllm",
    }
    assert override["OPTION_TENSOR_PARALLEL_DEGREE"] == "4"  # the four L4s of ml.g6.12xlarge
    assert team.candidate.image_family == "lmi-trtllm"


def test_a_neuron_candidate_compiles_for_its_positions_and_degree(tmp_path):
    team = _resolved(
        tmp_path, "{compile: true}", instance="ml.inf2.24xlarge", serving="container: {family: lmi-neuronx}\n"
    )
    (config,) = team.optimization_configs
    override = config["ModelCompilationConfig"]["OverrideEnvironment"]
    assert set(override) == {
        "OPTION_TENSOR_PARALLEL_DEGREE",
        "OPTION_N_POSITIONS",
        "OPTION_MAX_ROLLING_BATCH_SIZE",
        "OPTION_ROLLING_BATCH",
    }
    assert override["OPTION_N_POSITIONS"] == str(team.candidate.max_model_len)


def test_fp8_compiled_into_a_trtllm_engine_is_one_job_quantizing_then_compiling(tmp_path):
    team = _resolved(tmp_path, "{compile: true, quantization: fp8}", serving=TRTLLM)
    kinds = [next(iter(config)) for config in team.optimization_configs]
    assert kinds == ["ModelQuantizationConfig", "ModelCompilationConfig"]  # the SDK's order
    # The engine is built fp8: the compile step reads option.quantize.
    assert team.optimization_configs[1]["ModelCompilationConfig"]["OverrideEnvironment"]["OPTION_QUANTIZE"] == "fp8"


# --------------------------------------------------------------------------- refusals


def test_compile_in_serving_is_refused_as_a_gate_candidate_setting(tmp_path):
    messages = _messages(tmp_path, "{quantization: fp8}", serving=TRTLLM + "compile: true\n")
    assert any("serving.compile: compile is a gate.candidate setting only" in m for m in messages), messages


def test_compile_on_vllm_is_refused_with_the_family_switch_to_make(tmp_path):
    (message,) = _messages(tmp_path, "{compile: true}")
    assert "gate.candidate.compile: container family lmi (vLLM) takes no ahead-of-time compiled engine" in message
    assert "container: {family: lmi-trtllm} beside compile: true" in message


def test_compile_with_speculative_decoding_is_refused_as_the_sdk_does(tmp_path):
    messages = _messages(tmp_path, "{compile: true, speculative_decoding: {method: ngram}}", serving=TRTLLM)
    assert any(
        "gate.candidate.compile: SageMaker compiles no speculative decoding" in m
        and "Compilation is not supported with speculative decoding" in m
        for m in messages
    ), messages


def test_compile_with_an_eagle_head_to_train_is_refused(tmp_path):
    candidate = '{compile: true, speculative_decoding: {method: eagle, train_from: "s3://acme-traffic/demo/"}}'
    messages = _messages(tmp_path, candidate, serving=TRTLLM)
    assert any("gate.candidate.compile: SageMaker compiles no speculative decoding" in m for m in messages), messages


def test_vllm_engine_switches_on_a_compiled_candidate_are_refused(tmp_path):
    (message,) = _messages(tmp_path, "{compile: true, enforce_eager: true}", serving=TRTLLM)
    assert "gate.candidate.enforce_eager: enforce_eager is vLLM's --enforce-eager" in message
    assert "lmi-trtllm does not read" in message


def test_a_compiled_engine_on_another_instance_family_is_refused(tmp_path):
    (message,) = _messages(tmp_path, "{compile: true, instance_type: ml.g6e.2xlarge}", serving=TRTLLM)
    assert (
        "gate.candidate.instance_type: a compiled engine is pinned to the instance family it is compiled on" in message
    )
    assert "the team serves ml.g6.2xlarge (L4)" in message


def test_a_compiled_engine_with_another_tensor_parallel_degree_is_refused(tmp_path):
    (message,) = _messages(
        tmp_path, "{compile: true, tensor_parallel_degree: 2}", serving=TRTLLM, instance="ml.g6.12xlarge"
    )
    assert "gate.candidate.tensor_parallel_degree: the compiled engine's tensor-parallel degree (2) differs" in message
    assert "the engine and the serving config are one" in message


def test_a_compiled_engine_with_another_maximum_length_is_refused(tmp_path):
    (message,) = _messages(tmp_path, "{compile: true, max_model_len: 2048}", serving=TRTLLM)
    assert "gate.candidate.max_model_len: the compiled engine's maximum length (2048) differs" in message


def test_a_raw_length_option_is_refused_as_a_second_source_of_the_compiled_length(tmp_path):
    (message,) = _messages(tmp_path, "{compile: true, environment: {OPTION_MAX_INPUT_LEN: '2048'}}", serving=TRTLLM)
    assert "OPTION_MAX_INPUT_LEN is rendered from serving.max_model_len" in message


def test_quantizing_on_trtllm_without_compiling_is_refused_as_the_sdk_does(tmp_path):
    (message,) = _messages(tmp_path, "{quantization: fp8}", serving=TRTLLM)
    assert "gate.candidate.quantization: on lmi-trtllm SageMaker's optimization job quantizes by compiling" in message
    assert "add compile: true" in message


def test_a_compile_target_the_optimization_api_does_not_list_is_refused_at_compile(tmp_path):
    """CreateOptimizationJob's DeploymentInstanceType (botocore) lists every type in optigate's catalog today;
    ml.p5.4xlarge is an endpoint type it does not list, so the rule is called with it directly."""
    from optigate.config.loader import load_team
    from optigate.config.models import Serving
    from optigate.deployment.team import optimization_job_problems

    team = load_team(_team(tmp_path, "{compile: true}", serving=TRTLLM), rules=False)
    (problem,) = optimization_job_problems(team, Serving(instance_type="ml.p5.4xlarge"))
    assert problem.path == ("gate", "candidate", "compile")
    assert "the SageMaker optimization job that compiles the candidate cannot run on ml.p5.4xlarge" in problem.message
    assert optimization_job_problems(team, Serving(instance_type="ml.g6.2xlarge")) == []


def test_the_shadow_candidate_cannot_compile(tmp_path):
    path = _team(tmp_path, "{compile: true}", serving=TRTLLM)
    text = (
        path.read_text()
        + "rollout:\n  strategy: shadow\n  shadow:\n    sampling_percentage: 10\n    candidate: {compile: true}\n"
    )
    path.write_text(text)
    with pytest.raises(ConfigError) as error:
        load_resolved_team(path)
    assert any(
        "rollout.shadow.candidate.compile: compile is a gate.candidate setting only" in str(i)
        for i in error.value.issues
    ), error.value.issues


# --------------------------------------------------------------------------- the proof and a later team file


def _spec(team: ResolvedTeam):
    from optigate.deployment.gate import GatePlan
    from optigate.deployment.gate_parts import Side, Thresholds

    candidate = team.candidate
    side = Side(image=candidate.image_uri("us-east-1"), engine_mode=candidate.engine_mode.name)
    return GatePlan(
        team="demo",
        environment="dev",
        live_endpoint="demo-dev",
        instance=candidate.instance,
        baseline_model_uri="s3://acme-models/m/",
        candidate=side,
        twin=side,
        candidate_environment=candidate.environment,
        change=team.change,
        thresholds=Thresholds.from_dict({}),
        optimization_configs=team.optimization_configs,
    )


@pytest.mark.parametrize(
    ("instance", "serving"),
    [
        ("ml.g6.48xlarge", ""),
        ("ml.g6.12xlarge", "tensor_parallel_degree: 2\n"),
        ("ml.g6.12xlarge", "max_model_len: 2048\n"),
        ("ml.g6.12xlarge", "max_batch_size: 8\n"),
    ],
    ids=["instance-type", "tp", "max-length", "batch"],
)
def test_the_fingerprint_of_a_compiled_candidate_holds_what_it_is_compiled_for(tmp_path, instance, serving):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    base = _spec(_resolved(tmp_path / "a", "{compile: true}", instance="ml.g6.12xlarge", serving=TRTLLM))
    spec = _spec(_resolved(tmp_path / "b", "{compile: true}", instance=instance, serving=TRTLLM + serving))
    assert spec.compiled_for != base.compiled_for
    assert spec.fingerprint != base.fingerprint  # the gate re-proves: the engine is recompiled


def test_a_compiled_job_freezes_fp8_as_the_engine_reads_it(tmp_path):
    """The llm-compressor rewrite (fp8 -> compressed-tensors) is the vLLM container's; TensorRT-LLM keeps fp8."""
    spec = _spec(_resolved(tmp_path, "{compile: true, quantization: fp8}", serving=TRTLLM))
    assert spec.container_environment["OPTION_QUANTIZE"] == "fp8"
    assert spec.compiled_for is not None and spec.compiled_for["instance_type"] == "ml.g6.2xlarge"


def test_the_summary_says_a_served_engine_must_be_recompiled_when_the_team_file_moves(tmp_path):
    team = _resolved(tmp_path, "{compile: true}", instance="ml.g6.12xlarge", serving=TRTLLM)
    served = compiled_for(team.candidate.serving.instance_type, team.candidate.environment)
    assert recompile_note(served, team.candidate) is None  # what it was compiled for: nothing to say
    moved = dataclasses.replace(
        team.candidate,
        environment={**team.candidate.environment, "OPTION_TENSOR_PARALLEL_DEGREE": "2"},
    )
    note = recompile_note(served, moved)
    assert note is not None and "TP 4 → 2" in note and "must be recompiled" in note
    assert recompile_note(None, moved) is None  # not a compiled package: nothing to compare


def test_the_sdks_llama_31_compile_check_is_a_note_not_a_refusal(tmp_path):
    """minimal_team's model is llama-3.1-8b: the SDK's client refuses compiling it on a GPU; the API does not say."""
    team = _resolved(tmp_path, "{compile: true}", serving=TRTLLM)
    (advisory,) = team.advisories
    assert advisory.path == ("gate", "candidate", "compile")
    assert "Compilation is not supported for models greater than Llama-3.0 with a GPU instance" in advisory.message
    (tmp_path / "q").mkdir()
    other = load_resolved_team(
        minimal_team(tmp_path / "q", "qwen2.5-7b", "ml.g6.2xlarge", TRTLLM, _tail("{compile: true}"))
    )
    assert other.advisories == ()
