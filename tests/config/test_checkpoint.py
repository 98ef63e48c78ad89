"""The checkpoint as stored (issue 25, finding 6): `model.weights` known from the catalog, a local config.json or the
team file; a serving quantization the engine cannot apply to those weights at start-up is refused with the fix;
the timeouts are sized on the bytes downloaded; start-up quantization is shown and costed."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from optigate.cli import main
from optigate.config.loader import ConfigError
from optigate.deployment import load_resolved_project, load_resolved_team
from optigate.plan.architecture import load_architecture
from optigate.plan.memory import weight_footprint
from optigate.plan.timeouts import DOWNLOAD_SECONDS_PER_GB, sized_timeouts
from tests.conftest import CONFIG, edited_config
from tests.fixtures.config_files import minimal_team

CHAT = CONFIG / "teams" / "chat.yaml"
AWQ_CHECKPOINT = Path(__file__).parents[1] / "fixtures" / "checkpoints" / "llama-3.1-8b-awq"


def chat_with(tmp_path: Path, old: str, new: str) -> Path:
    text = CHAT.read_text()
    assert old in text
    path = tmp_path / "chat.yaml"
    path.write_text(text.replace(old, new, 1))
    return path


def refusals(path: Path) -> list:
    with pytest.raises(ConfigError) as caught:
        load_resolved_team(path)
    return caught.value.issues


# --------------------------------------------------------------------------- awq on bf16 weights


def test_awq_on_chat_s_bf16_checkpoint_is_refused_with_the_fix(tmp_path):
    path = chat_with(tmp_path, "  quantization: fp8\n", "  quantization: awq\n")
    (issue,) = refusals(path)
    assert (issue.path, issue.rule, issue.line) == ("serving.quantization", "OG112", 19)
    assert "stored as bf16 (the catalog's meta-llama/Llama-3.1-8B-Instruct)" in issue.message
    assert "LMI's vLLM quantizes at start-up only to fp8" in issue.message
    # The fix: the gate's optimization job, or a pre-quantized checkpoint.
    assert "gate.candidate: {quantization: awq}" in issue.message
    assert "model.weights: awq" in issue.message


def test_unknown_weights_are_taken_as_bf16_so_awq_needs_them_stated(tmp_path):
    team = minimal_team(tmp_path, "llama-3.1-8b", "ml.g6.2xlarge", "max_model_len: 8192\nquantization: awq\n")
    (issue,) = refusals(team)
    assert issue.rule == "OG112" and "assumed" in issue.message
    team.write_text(team.read_text().replace("  architecture:", "  weights: awq\n  architecture:"))
    resolved = load_resolved_team(team).baseline
    assert resolved.downloaded_weights == "awq" and resolved.startup_quantization_seconds is None


def test_the_gate_s_optimization_job_makes_awq_but_not_gptq(tmp_path):
    awq = chat_with(tmp_path, "    speculative_decoding:\n", "    quantization: awq\n    speculative_decoding:\n")
    candidate = load_resolved_team(awq).candidate
    # The candidate downloads the job's AWQ weights: nothing is quantized at its start.
    assert candidate.downloaded_weights == "awq" and candidate.startup_quantization_seconds is None
    gptq = chat_with(tmp_path, "    speculative_decoding:\n", "    quantization: gptq\n    speculative_decoding:\n")
    (issue,) = refusals(gptq)
    assert issue.path == "gate.candidate.quantization" and issue.rule == "OG112"
    assert "optimization job quantizes them to awq or fp8 only" in issue.message


def test_quantized_weights_are_not_quantized_again(tmp_path):
    team = minimal_team(tmp_path, "llama-3.1-8b", "ml.g6.2xlarge", "max_model_len: 8192\nquantization: fp8\n")
    team.write_text(team.read_text().replace("  architecture:", f"  local_dir: {AWQ_CHECKPOINT}\n  architecture:"))
    (issue,) = refusals(team)
    assert issue.rule == "OG112" and "stored as awq" in issue.message and "config.json" in issue.message


# --------------------------------------------------------------------------- how the weights are known


def test_the_catalog_knows_pre_quantized_repositories():
    from optigate.plan.checkpoints import weights_in_catalog

    assert weights_in_catalog("meta-llama/Llama-3.1-8B-Instruct")[0] == "bf16"
    assert weights_in_catalog("RedHatAI/Meta-Llama-3.1-8B-Instruct-FP8")[0] == "fp8"
    assert weights_in_catalog("hugging-quants/Meta-Llama-3.1-8B-Instruct-AWQ-INT4")[0] == "awq"
    assert weights_in_catalog("acme/private-llama") is None


def test_a_config_json_names_its_weights():
    from optigate.plan.checkpoints import weights_of_config

    assert weights_of_config({"torch_dtype": "bfloat16"}) == "bf16"
    assert weights_of_config({"dtype": "float16"}) == "fp16"
    assert weights_of_config(json.loads((AWQ_CHECKPOINT / "config.json").read_text())) == "awq"
    fp8 = {
        "quant_method": "compressed-tensors",
        "config_groups": {"group_0": {"weights": {"type": "float", "num_bits": 8}}},
    }
    assert weights_of_config({"quantization_config": fp8}) == "fp8"
    assert weights_of_config({"quantization_config": {"quant_method": "modelopt", "quant_algo": "NVFP4"}}) == "nvfp4"
    int4 = {"quant_method": "compressed-tensors", "config_groups": {"g": {"weights": {"type": "int", "num_bits": 4}}}}
    assert weights_of_config({"quantization_config": int4}) is None  # no name for it: the team says
    assert weights_of_config({}) is None


def test_a_stated_weight_that_contradicts_the_catalog_is_refused(tmp_path):
    path = chat_with(tmp_path, "  architecture: llama-3.1-8b\n", "  weights: fp8\n  architecture: llama-3.1-8b\n")
    (issue,) = refusals(path)
    assert (issue.path, issue.rule) == ("model.weights", "OG113")


def test_a_local_dir_is_read_relative_to_the_team_file(tmp_path):
    folder = tmp_path / "checkpoint"
    folder.mkdir()
    (folder / "config.json").write_text((AWQ_CHECKPOINT / "config.json").read_text())
    team = minimal_team(tmp_path, "llama-3.1-8b", "ml.g6.2xlarge", "max_model_len: 8192\nquantization: awq\n")
    team.write_text(team.read_text().replace("  architecture:", "  local_dir: checkpoint\n  architecture:"))
    assert load_resolved_team(team).baseline.downloaded_weights == "awq"
    (folder / "config.json").unlink()
    (issue,) = refusals(team)
    assert (issue.path, issue.rule) == ("model.local_dir", "OG114")


# --------------------------------------------------------------------------- timeouts on the bytes downloaded


def test_chat_s_timeouts_are_sized_for_the_bf16_checkpoint_it_downloads(example_config):
    chat = load_resolved_project(example_config).teams["chat"]
    baseline = chat.baseline
    downloaded = weight_footprint(load_architecture("llama-3.1-8b"), "bf16").total / 1e9  # all 16 bits
    assert 15.5 < downloaded < 16.5 and baseline.weights_gb < 10  # served as fp8
    assert (
        baseline.model_data_download_timeout_seconds,
        baseline.container_startup_health_check_timeout_seconds,
    ) == sized_timeouts(downloaded)
    assert baseline.model_data_download_timeout_seconds > sized_timeouts(baseline.weights_gb)[0]
    assert "model_data_download_timeout=770s for 16 GB downloaded (bf16 as stored)" in baseline.notes
    # The gate's candidate (an EAGLE head, fp8 inherited) downloads the same checkpoint.
    assert chat.candidate.model_data_download_timeout_seconds == baseline.model_data_download_timeout_seconds
    assert baseline.downloaded_gb == pytest.approx(downloaded)


def test_a_70b_served_as_fp8_gets_at_least_the_minimum_for_its_bf16_download(tmp_path):
    team = minimal_team(tmp_path, "llama-3.3-70b", "ml.p5.48xlarge", "max_model_len: 8192\nquantization: fp8\n")
    resolved = load_resolved_team(team).baseline
    downloaded = weight_footprint(load_architecture("llama-3.3-70b"), "bf16").total / 1e9
    assert downloaded > 140 and resolved.weights_gb < 80
    assert resolved.model_data_download_timeout_seconds >= DOWNLOAD_SECONDS_PER_GB * downloaded


# --------------------------------------------------------------------------- start-up quantization shown


def _startup_seconds(text: str) -> int:
    found = re.search(r"quantized at start-up \(\+(\d+) s per cold start\)", " ".join(text.split()))
    assert found, text
    return int(found.group(1))


def test_plan_and_summary_say_chat_is_quantized_at_start_up(example_config, capsys):
    assert main(["plan", str(example_config / "teams" / "chat.yaml")]) == 0
    plan = capsys.readouterr().out
    assert "weights as stored: bf16" in " ".join(plan.split())
    seconds = _startup_seconds(plan)
    # The extra ~7 GB downloaded and loaded at 10 + 15 s per GB.
    assert 150 <= seconds <= 210
    assert main(["summary", "--config", str(example_config), "--env", "dev"]) == 0
    summary = capsys.readouterr().out
    assert _startup_seconds(summary) == seconds
    assert main(["plan", str(example_config / "teams" / "chat.yaml"), "--json"]) == 0
    weights = json.loads(capsys.readouterr().out)["weights"]
    assert weights["as_stored"] == "bf16" and weights["startup_quantization_seconds"] == seconds


def test_a_pre_quantized_checkpoint_is_not_quantized_at_start_up(tmp_path, capsys):
    config = edited_config(
        tmp_path, "teams/chat.yaml", "meta-llama/Llama-3.1-8B-Instruct", "RedHatAI/Meta-Llama-3.1-8B-Instruct-FP8"
    )
    chat = load_resolved_project(config).teams["chat"].baseline
    assert chat.downloaded_weights == "fp8" and chat.startup_quantization_seconds is None
    assert chat.downloaded_gb < 10
    assert main(["plan", str(config / "teams" / "chat.yaml")]) == 0
    assert "quantized at start-up" not in capsys.readouterr().out
