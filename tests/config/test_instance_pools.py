"""Instance pools (serving.instance_pools): the shape of the list, every single-instance rule on every pool with
the one shared environment (refusals name the pool), settings derived for the smallest pool, the combinations
the docs are silent on, and what `optigate plan` shows per pool."""

from __future__ import annotations

import json
import textwrap

import pytest
from rich.console import Console

from optigate.cli import main, plan_command, validate_command
from optigate.config.loader import ConfigError
from optigate.deployment import load_resolved_team
from optigate.plan.catalog import get_instance
from optigate.plan.team_plan import derive_settings
from tests.fixtures.config_files import minimal_team


def _team(tmp_path, architecture, primary, pools, serving_extra="", tail=""):
    lines = "".join(f"  - {{instance_type: {t}, priority: {p}}}\n" for t, p in pools)
    return minimal_team(
        tmp_path, architecture, primary, "instance_pools:\n" + lines + textwrap.dedent(serving_extra), tail
    )


def _issues(path) -> list:
    with pytest.raises(ConfigError) as caught:
        load_resolved_team(path)
    return caught.value.issues


def _only(path):
    (issue,) = _issues(path)
    return issue


# --------------------------------------------------------------------------- the list's shape


def test_the_primary_must_be_the_first_pool_with_priority_1(tmp_path):
    path = _team(tmp_path, "llama-3.1-8b", "ml.g6e.2xlarge", [("ml.g6.2xlarge", 1), ("ml.g6e.2xlarge", 2)])
    issue = _only(path)
    assert issue.path == "serving.instance_pools[0]"
    assert "must be serving.instance_type (ml.g6e.2xlarge) with priority 1, got ml.g6.2xlarge" in issue.message


def test_a_type_listed_twice_is_refused_at_the_second(tmp_path):
    pools = [("ml.g6e.2xlarge", 1), ("ml.g6.2xlarge", 2), ("ml.g6.2xlarge", 3)]
    issue = _only(_team(tmp_path, "llama-3.1-8b", "ml.g6e.2xlarge", pools))
    assert issue.path == "serving.instance_pools[2].instance_type"
    assert "ml.g6.2xlarge is already pool 1; each type once" in issue.message


def test_a_priority_given_twice_is_refused(tmp_path):
    pools = [("ml.g6e.2xlarge", 1), ("ml.g6.2xlarge", 2), ("ml.g6e.4xlarge", 2)]
    issue = _only(_team(tmp_path, "llama-3.1-8b", "ml.g6e.2xlarge", pools))
    assert issue.path == "serving.instance_pools[2].priority"
    assert "priority 2 is already pool 1's" in issue.message and "1 to 3" in issue.message


def test_priorities_with_a_gap_are_refused(tmp_path):
    issue = _only(_team(tmp_path, "llama-3.1-8b", "ml.g6e.2xlarge", [("ml.g6e.2xlarge", 1), ("ml.g6.2xlarge", 3)]))
    assert issue.path == "serving.instance_pools"
    assert "priorities must be 1 to 2 without gaps; 2 is missing" in issue.message


def test_a_single_pool_is_refused_as_instance_type_alone(tmp_path):
    issue = _only(_team(tmp_path, "llama-3.1-8b", "ml.g6e.2xlarge", [("ml.g6e.2xlarge", 1)]))
    assert issue.path == "serving.instance_pools"
    assert "one pool is serving.instance_type alone" in issue.message and "remove instance_pools" in issue.message


def test_six_pools_exceed_the_apis_five(tmp_path):
    types = ["ml.g6e.2xlarge", "ml.g6e.4xlarge", "ml.g6e.8xlarge", "ml.g6e.16xlarge", "ml.g6.2xlarge", "ml.g6.4xlarge"]
    issue = _only(_team(tmp_path, "llama-3.1-8b", "ml.g6e.2xlarge", [(t, i + 1) for i, t in enumerate(types)]))
    assert issue.path.startswith("serving.instance_pools") and "at most 5" in issue.message


def test_the_provisioning_timeout_needs_pools(tmp_path):
    path = minimal_team(tmp_path, "llama-3.1-8b", "ml.g6e.2xlarge", "instance_provision_timeout_seconds: 900\n")
    issue = _only(path)
    assert issue.path == "serving.instance_provision_timeout_seconds"
    assert "add instance_pools, or remove instance_provision_timeout_seconds" in issue.message


def test_the_provisioning_timeout_keeps_to_sagemakers_range(tmp_path):
    pools = [("ml.g6e.2xlarge", 1), ("ml.g6.2xlarge", 2)]
    issue = _only(_team(tmp_path, "llama-3.1-8b", "ml.g6e.2xlarge", pools, "instance_provision_timeout_seconds: 60\n"))
    assert issue.path == "serving.instance_provision_timeout_seconds" and "300" in issue.message


# --------------------------------------------------------------------------- every rule on every pool


def test_weights_that_do_not_fit_a_fallback_pool_are_refused_naming_the_pool(tmp_path):
    pools = [("ml.g6e.12xlarge", 1), ("ml.g6.12xlarge", 2)]
    issue = _only(_team(tmp_path, "llama-3.3-70b", "ml.g6e.12xlarge", pools, "max_model_len: 4096\n"))
    assert issue.path == "serving.instance_pools[1]"
    assert issue.message.startswith("ml.g6.12xlarge (priority 2): ")
    assert "ml.g6.12xlarge leaves" in issue.message and "or remove this pool" in issue.message


def test_a_tensor_parallel_degree_that_does_not_divide_a_pool_is_refused_there(tmp_path):
    pools = [("ml.g6e.12xlarge", 1), ("ml.g6e.2xlarge", 2)]
    issue = _only(_team(tmp_path, "llama-3.1-8b", "ml.g6e.12xlarge", pools, "tensor_parallel_degree: 4\n"))
    assert issue.path == "serving.instance_pools[1]"
    assert "ml.g6e.2xlarge (priority 2) with the tensor_parallel_degree every pool shares" in issue.message
    assert "4 does not divide the 1 GPUs of ml.g6e.2xlarge" in issue.message


def test_fp8_w8a8_is_refused_when_one_pool_lacks_fp8_tensor_cores(tmp_path):
    pools = [("ml.g6.2xlarge", 1), ("ml.g5.2xlarge", 2)]
    issue = _only(_team(tmp_path, "llama-3.1-8b", "ml.g6.2xlarge", pools, "quantization: fp8\n"))
    assert issue.path == "serving.instance_pools[1]"
    assert "with the quantization every pool shares" in issue.message
    assert "FP8 W8A8 needs compute capability >= 8.9, and A10G on ml.g5.2xlarge has 8.6" in issue.message


def test_a_neuron_pool_cannot_share_a_gpu_container(tmp_path):
    pools = [("ml.g6e.2xlarge", 1), ("ml.inf2.8xlarge", 2)]
    issues = _issues(_team(tmp_path, "llama-3.1-8b", "ml.g6e.2xlarge", pools))
    assert {i.path for i in issues} == {"serving.instance_pools[1]"}
    assert any(
        "with the container.family every pool shares: ml.inf2.8xlarge has Inferentia2 accelerators, which only the "
        "lmi-neuronx container can use" in i.message
        for i in issues
    )


def test_nvme_and_ebs_pools_are_not_mixed(tmp_path):
    pools = [("ml.inf2.48xlarge", 1), ("ml.trn1.32xlarge", 2)]
    extra = "container: {family: lmi-neuronx}\ntensor_parallel_degree: 8\n"
    issues = _issues(_team(tmp_path, "llama-3.1-8b", "ml.inf2.48xlarge", pools, extra))
    assert [i.path for i in issues] == ["serving.instance_pools[1]"]
    assert "ml.trn1.32xlarge stores the model on NVMe instance storage and ml.inf2.48xlarge on EBS" in issues[0].message


def test_pools_that_need_different_host_amis_for_the_image_are_refused(tmp_path):
    """The default LMI image is a CUDA 13 build: the SDK runs it on its CUDA 13 AMI on p5 but lists no AMI for
    p6-b200, and a variant has one InferenceAmiVersion."""
    pools = [("ml.p5.48xlarge", 1), ("ml.p6-b200.48xlarge", 2)]
    issues = _issues(_team(tmp_path, "llama-3.3-70b", "ml.p5.48xlarge", pools, "tensor_parallel_degree: 8\n"))
    assert [i.path for i in issues] == ["serving.instance_pools[1]"]
    assert "ml.p6-b200.48xlarge runs" in issues[0].message
    expected = "on SageMaker's default AMI and ml.p5.48xlarge on al2023-ami-sagemaker-inference-gpu-4-1"
    assert expected in issues[0].message
    assert "a variant has one InferenceAmiVersion" in issues[0].message


def test_a_volume_size_is_refused_for_a_pool_with_instance_storage(tmp_path):
    pools = [("ml.inf2.48xlarge", 1), ("ml.trn1.32xlarge", 2)]
    extra = "container: {family: lmi-neuronx}\ntensor_parallel_degree: 8\nvolume_size_gb: 100\n"
    messages = [i.message for i in _issues(_team(tmp_path, "llama-3.1-8b", "ml.inf2.48xlarge", pools, extra))]
    assert any("ml.trn1.32xlarge (priority 2) with the volume_size_gb every pool shares" in m for m in messages)


def test_an_explicit_length_that_one_pool_cannot_hold_is_refused_naming_that_pool(tmp_path):
    pools = [("ml.g6e.2xlarge", 1), ("ml.g6.2xlarge", 2)]
    issue = _only(_team(tmp_path, "llama-3.1-8b", "ml.g6e.2xlarge", pools, "max_model_len: 65536\n"))
    assert issue.path == "serving.instance_pools[1]"
    assert "ml.g6.2xlarge (priority 2) with the max_model_len every pool shares" in issue.message
    assert "KV cache" in issue.message


def test_a_gate_candidate_is_checked_on_every_pool_it_would_be_promoted_to(tmp_path):
    pools = [("ml.g6.2xlarge", 1), ("ml.g5.2xlarge", 2)]
    tail = "gate:\n  candidate: {quantization: fp8}\n  evaluation: {dataset_s3_uri: s3://acme-eval/demo/}\n"
    issue = _only(_team(tmp_path, "llama-3.1-8b", "ml.g6.2xlarge", pools, tail=tail))
    assert issue.path == "gate.candidate.instance_pools[1]"
    assert "compute capability >= 8.9" in issue.message and "ml.g5.2xlarge" in issue.message


# --------------------------------------------------------------------------- derived for the smallest pool


def test_length_and_batch_are_derived_for_the_pool_that_holds_least_and_it_is_named(tmp_path):
    pools = [("ml.g6e.2xlarge", 1), ("ml.g6.2xlarge", 2)]
    resolved = load_resolved_team(_team(tmp_path, "llama-3.1-8b", "ml.g6e.2xlarge", pools)).baseline
    team = load_resolved_team(_team(tmp_path, "llama-3.1-8b", "ml.g6e.2xlarge", pools)).team
    alone = {
        t: derive_settings(
            team,
            team.serving.model_copy(update={"instance_type": t}),
            weight_precision="bf16",
            instance=get_instance(t),
        )
        for t, _ in pools
    }
    assert resolved.max_model_len == min(d.max_model_len for d in alone.values())
    assert alone["ml.g6.2xlarge"].max_batch_size < alone["ml.g6e.2xlarge"].max_batch_size
    assert resolved.max_batch_size <= alone["ml.g6.2xlarge"].max_batch_size
    assert resolved.environment["OPTION_MAX_ROLLING_BATCH_SIZE"] == str(resolved.max_batch_size)
    by_type = {pool.instance_type: pool for pool in resolved.pools}
    assert "max_batch_size" in by_type["ml.g6.2xlarge"].decides and not by_type["ml.g6e.2xlarge"].decides
    assert any(
        n.startswith(f"max_batch_size={resolved.max_batch_size}: ml.g6.2xlarge (priority 2)") for n in resolved.notes
    )
    assert all(pool.plan is not None and pool.plan.fits for pool in resolved.pools)


def test_an_unset_tensor_parallel_degree_is_one_every_pool_runs(tmp_path):
    pools = [("ml.g6e.12xlarge", 1), ("ml.g6e.2xlarge", 2)]
    resolved = load_resolved_team(_team(tmp_path, "llama-3.1-8b", "ml.g6e.12xlarge", pools)).baseline
    assert resolved.tensor_parallel_degree == 1 and resolved.environment["OPTION_TENSOR_PARALLEL_DEGREE"] == "1"
    assert any("ml.g6e.12xlarge alone would take 4" in note for note in resolved.notes)


# --------------------------------------------------------------------------- undocumented combinations, CLI


def test_validate_notes_combinations_the_docs_are_silent_on(tmp_path, monkeypatch):
    pools = [("ml.g6e.2xlarge", 1), ("ml.g6.2xlarge", 2)]
    tail = "rollout:\n  strategy: shadow\n  shadow: {sampling_percentage: 10}\n"
    path = _team(tmp_path, "llama-3.1-8b", "ml.g6e.2xlarge", pools, tail=tail)
    assert load_resolved_team(path).advisories
    recorded = Console(width=100, record=True, file=open("/dev/null", "w"))  # noqa: SIM115
    monkeypatch.setattr(validate_command, "console", recorded)
    assert main(["validate", str(path)]) == 0
    text = recorded.export_text()
    assert "note" in text and "serving.instance_pools [OG261]: undocumented: a shadow variant" in text
    assert "1 config file(s) valid" in text


def test_plan_shows_one_row_per_pool_and_json_carries_them(tmp_path, monkeypatch, capsys):
    pools = [("ml.g6e.2xlarge", 1), ("ml.g6.2xlarge", 2)]
    path = _team(tmp_path, "llama-3.1-8b", "ml.g6e.2xlarge", pools)
    recorded = Console(width=100, record=True, file=open("/dev/null", "w"))  # noqa: SIM115
    monkeypatch.setattr(plan_command, "console", recorded)
    main(["plan", str(path)])
    text = recorded.export_text()
    assert not [line for line in text.splitlines() if len(line) > 100]
    rows = [line for line in text.splitlines() if "ml.g6e.2xlarge " in line or "ml.g6.2xlarge " in line]
    assert any(line.split()[:2] == ["2", "ml.g6.2xlarge"] and "max_batch_size" in line for line in rows)
    main(["plan", str(path), "--json"])
    data = json.loads(capsys.readouterr().out)
    assert [p["instance_type"] for p in data["instance_pools"]] == ["ml.g6e.2xlarge", "ml.g6.2xlarge"]
    second = data["instance_pools"][1]
    assert "max_batch_size" in second["decides"] and second["fits"] is True
    assert second["kv_capacity_tokens"] < data["instance_pools"][0]["kv_capacity_tokens"]
    assert {"decode_tpot_ms_batch1", "cost_per_million_output_tokens", "weights_gib_per_accelerator"} <= set(second)
