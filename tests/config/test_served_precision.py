"""The precision the engine serves (issue 25, finding 6, after review): serving.quantization if set, else the stored
format of a pre-quantized checkpoint, else 16 bit, resolved once in optigate.deployment.checkpoint. The plan, the
served GB and the precision rules read it, and OPTION_QUANTIZE is rendered only when the engine must quantize
16-bit weights at start-up: vLLM reads a pre-quantized checkpoint's quantization_config and refuses another method."""

from __future__ import annotations

from pathlib import Path

import pytest

from optigate.advise import advise
from optigate.advise.findings import DONE
from optigate.cli import main
from optigate.config.loader import ConfigError
from optigate.deployment import load_resolved_project, load_resolved_team
from optigate.plan.architecture import load_architecture
from optigate.plan.memory import weight_footprint
from tests.conftest import edited_config
from tests.fixtures.config_files import minimal_team

FP8_CHECKPOINT = "RedHatAI/Meta-Llama-3.1-8B-Instruct-FP8"  # stored as compressed-tensors FP8 (the catalog)
# chat's length and batch removed, so the plan derives them
UNSET_LENGTH_AND_BATCH = "  max_model_len: 8192\n  max_batch_size: 32\n"


def _gb(architecture: str, precision: str) -> float:
    return weight_footprint(load_architecture(architecture), precision).total / 1e9


def _team(tmp_path: Path, serving: str, weights: str | None = None, architecture: str = "llama-3.1-8b") -> Path:
    folder = tmp_path / (weights or "unstated") / str(abs(hash(serving)))
    folder.mkdir(parents=True)
    path = minimal_team(folder, architecture, serving.split("\n")[0], "\n".join(serving.split("\n")[1:]))
    if weights is not None:
        path.write_text(path.read_text().replace("  architecture:", f"  weights: {weights}\n  architecture:"))
    return path


def test_fp8_weights_with_quantization_fp8_are_served_as_stored(tmp_path, capsys):
    config = edited_config(tmp_path, "teams/chat.yaml", "meta-llama/Llama-3.1-8B-Instruct", FP8_CHECKPOINT)
    chat = load_resolved_project(config).teams["chat"].baseline
    assert chat.serving.quantization == "fp8" and chat.downloaded_weights == "fp8"
    # vLLM reads the compressed-tensors config; option.quantize=fp8 would not match it and the endpoint not start.
    assert "OPTION_QUANTIZE" not in chat.environment
    assert chat.served_weights == "fp8" and chat.plan.weight_precision == "fp8"
    assert chat.weights_gb == pytest.approx(_gb("llama-3.1-8b", "fp8"))
    assert main(["plan", str(config / "teams" / "chat.yaml")]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "served as stored" in out and "quantized at start-up" not in out


def test_fp8_weights_without_quantization_are_planned_at_fp8(tmp_path):
    stored = load_resolved_team(_team(tmp_path, "ml.g6.2xlarge\nkv_cache_dtype: fp8\n", weights="fp8")).baseline
    made_at_start = load_resolved_team(_team(tmp_path, "ml.g6.2xlarge\nkv_cache_dtype: fp8\nquantization: fp8\n"))
    sixteen = load_resolved_team(_team(tmp_path, "ml.g6.2xlarge\nkv_cache_dtype: fp8\n", weights="bf16")).baseline
    assert stored.serving.quantization is None and "OPTION_QUANTIZE" not in stored.environment
    assert stored.plan.weight_precision == "fp8"
    assert stored.weights_gb == pytest.approx(_gb("llama-3.1-8b", "fp8"))
    assert stored.served_weights == "fp8"
    # The same engine as bf16 weights quantized to fp8 at start-up: the same length and batch.
    at_start = made_at_start.baseline
    assert (stored.max_model_len, stored.max_batch_size) == (at_start.max_model_len, at_start.max_batch_size)
    assert stored.max_batch_size > sixteen.max_batch_size


def test_a_70b_stored_as_awq_is_planned_as_awq_on_one_l40s(tmp_path):
    path = _team(tmp_path, "ml.g6e.2xlarge\nmax_model_len: 2048\n", weights="awq", architecture="llama-3.3-70b")
    resolved = load_resolved_team(path).baseline  # refused before: "bf16 weights need 131.4 GiB"
    assert resolved.served_weights == "awq" and resolved.plan.weight_precision == "awq" and resolved.plan.fits
    assert resolved.weights_gb == pytest.approx(_gb("llama-3.3-70b", "awq"))
    assert "OPTION_QUANTIZE" not in resolved.environment


def test_bf16_weights_with_quantization_fp8_are_still_quantized_at_start_up(example_config):
    chat = load_resolved_project(example_config).teams["chat"].baseline
    assert chat.downloaded_weights == "bf16" and chat.environment["OPTION_QUANTIZE"] == "fp8"
    assert chat.served_weights == "fp8" and chat.startup_quantization_seconds is not None
    assert any(note.startswith("quantized at start-up") for note in chat.weights_notes)


def test_fp8_weights_on_a10g_meet_the_fp8_rule_as_if_quantized(tmp_path):
    with pytest.raises(ConfigError) as caught:
        load_resolved_team(_team(tmp_path, "ml.g5.2xlarge\nmax_model_len: 4096\n", weights="fp8"))
    assert [issue.rule for issue in caught.value.issues] == ["OG307"]
    allowed = _team(tmp_path, "ml.g5.2xlarge\nmax_model_len: 4096\nallow_weight_only_fp8: true\n", weights="fp8")
    assert load_resolved_team(allowed).baseline.served_weights == "fp8"


def test_og112_leads_to_a_config_that_validates(tmp_path):
    path = _team(tmp_path, "ml.g6.2xlarge\nmax_model_len: 8192\nquantization: awq\n", weights="fp8")
    with pytest.raises(ConfigError) as caught:
        load_resolved_team(path)
    (issue,) = caught.value.issues
    assert issue.rule == "OG112" and "set quantization: fp8 or remove it" in issue.message
    path.write_text(path.read_text().replace("quantization: awq", "quantization: fp8"))
    assert load_resolved_team(path).baseline.served_weights == "fp8"


GATE = "gate:\n  benchmark:\n    concurrency: [1, 16]\n    prompt_tokens: 1024\n    max_new_tokens: 256\n"


def test_advise_counts_fp8_weights_as_stored_as_quantized_and_its_advice_validates(tmp_path):
    folder = tmp_path / "stored"
    folder.mkdir()
    path = minimal_team(folder, "llama-3.1-8b", "ml.g6.2xlarge", "max_model_len: 4096\n", GATE)
    path.write_text(path.read_text().replace("  architecture:", "  weights: fp8\n  architecture:"))
    step = advise(load_resolved_team(path)).findings[1]
    assert step.status == DONE and step.candidate is None and "already fp8" in step.why
    # Quantized at start-up: the advice (the job's output as model.source, model.weights: fp8, quantization kept)
    # resolves, served as stored.
    quantized = minimal_team(
        tmp_path, "llama-3.1-8b", "ml.g6.2xlarge", "max_model_len: 4096\nquantization: fp8\n", GATE
    )
    step = advise(load_resolved_team(quantized)).findings[1]
    assert "model.weights: fp8, and quantization: fp8 kept or removed" in " ".join(step.why.split())
    quantized.write_text(quantized.read_text().replace("  architecture:", "  weights: fp8\n  architecture:"))
    followed = load_resolved_team(quantized).baseline
    assert "OPTION_QUANTIZE" not in followed.environment and followed.startup_quantization_seconds is None
