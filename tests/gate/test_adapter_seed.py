"""A rehearsal's new adapter versions (optigate.rehearse.adapter_seed): a local archive or folder, or one generated to
match the candidate's rank, base and architecture, which the gate's own archive check accepts; and the adapter
`adapter-quality` degrades, which its expectation names (issue 37: it degraded the file's first adapter)."""

from __future__ import annotations

import io
import json
import tarfile
from dataclasses import replace

import pytest

from optigate.deployment import adapter_archive as aa
from optigate.rehearse.adapter_seed import (
    adapter_seeds,
    generated_archive,
    local_archive,
    packed_folder,
    parse_adapter_options,
)
from tests.fixtures.adapter_archives import LIMITS, adapter, adapter_config, lora_tensors, safetensors
from tests.fixtures.adapter_teams import REDLINE_V2, legal_config

MISTRAL = aa.BaseArchitecture(hidden_size=4096, num_hidden_layers=32, intermediate_size=14336, model_type="mistral")


@pytest.fixture(scope="module")
def deployments(example_config, tmp_path_factory):
    """legal's and support's deployments in dev (resolved, not synthesized)."""
    from optigate.deployment import deploy, load_resolved_project

    config = legal_config(tmp_path_factory.mktemp("legal"), example_config)
    project = load_resolved_project(config, teams=["legal", "support"])
    dev = project.environments[0]
    return {name: deploy(project.teams[name], dev) for name in ("legal", "support")}


@pytest.mark.parametrize(
    "limits",
    [
        LIMITS,  # Qwen2.5-7B by its id
        aa.AdapterLimits(16, ("mistralai/Mistral-7B-Instruct-v0.3",), aa.DENSE_DECODER_MODULES, MISTRAL),
        aa.AdapterLimits(64, (), aa.ATTENTION_MODULES, aa.BaseArchitecture(4096, 32, None, "mixtral")),  # no id, MoE
    ],
    ids=["qwen", "mistral", "moe-without-id"],
)
def test_a_generated_archive_passes_the_gates_check_at_the_declared_rank(limits):
    facts = aa.check_archive(generated_archive(limits), limits)
    assert facts.rank == limits.max_lora_rank
    assert facts.base_model_check == (aa.SAME if limits.base_models else aa.UNKNOWN)
    assert facts.architecture_checked == (aa.SAFETENSORS,)
    assert set(facts.target_modules) <= limits.modules
    # It adapts the base's last layer too: a base with fewer layers would refuse it.
    fewer = replace(limits, architecture=replace(limits.architecture, num_hidden_layers=2))
    with pytest.raises(aa.AdapterRefused, match=f"^{aa.ARCHITECTURE}: "):
        aa.check_archive(generated_archive(limits), fewer)


def test_a_folder_is_packed_with_its_files_at_the_top_and_a_file_is_taken_as_it_is(tmp_path):
    folder = tmp_path / "redline"
    folder.mkdir()
    (folder / aa.ADAPTER_CONFIG).write_text(json.dumps(adapter_config()))
    (folder / aa.SAFETENSORS).write_bytes(safetensors(lora_tensors()))
    packed = local_archive(folder)
    assert packed == packed_folder(folder)
    with tarfile.open(fileobj=io.BytesIO(packed), mode="r:gz") as tar:
        assert sorted(tar.getnames()) == [aa.ADAPTER_CONFIG, aa.SAFETENSORS]
    assert aa.check_archive(packed, LIMITS).rank == 16
    archive = tmp_path / "redline.tar.gz"
    archive.write_bytes(adapter())
    assert local_archive(archive) == adapter()
    with pytest.raises(ValueError, match="no such file or folder"):
        local_archive(tmp_path / "nothing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="empty folder"):
        local_archive(tmp_path / "empty")


def test_adapter_options_are_name_equals_path():
    assert {k: str(v) for k, v in parse_adapter_options(["redline=a/b.tar.gz"]).items()} == {"redline": "a/b.tar.gz"}
    for bad in ("redline", "=x", "redline="):
        with pytest.raises(ValueError, match="give NAME=PATH"):
            parse_adapter_options([bad])
    with pytest.raises(ValueError, match="given twice"):
        parse_adapter_options(["redline=a", "redline=b"])


def test_the_candidates_new_version_is_seeded_where_its_uri_says(deployments, tmp_path):
    legal = deployments["legal"]
    seeds, said = adapter_seeds(legal, {})
    assert (
        list(seeds) == [REDLINE_V2] and "generated (rank 16, base mistralai/Mistral-7B-Instruct-v0.3" in said["redline"]
    )
    assert aa.check_archive(seeds[REDLINE_V2], legal.resolved_team.adapter_limits).rank == 16
    supplied = tmp_path / "redline-v2.tar.gz"
    supplied.write_bytes(b"not checked here: the gate checks it")
    assert adapter_seeds(legal, {"redline": supplied})[0] == {REDLINE_V2: supplied.read_bytes()}
    assert adapter_seeds(legal, {}, ["redline"]) == (
        {},
        {"redline": f"{REDLINE_V2}: left out (the gate must refuse it as missing)"},
    )
    with pytest.raises(
        ValueError, match=r"^review: team legal's candidate brings no new version of it; it changes: redline$"
    ):
        adapter_seeds(legal, {"review": supplied})
    with pytest.raises(ValueError, match=r"it changes: none \(its gate.candidate.adapters is not set\)"):
        adapter_seeds(deployments["support"], {"reply": supplied})
    assert adapter_seeds(deployments["support"], {}) == ({}, {})


def test_adapter_quality_degrades_the_adapter_the_candidate_changes_and_its_expectation_names_it(deployments):
    from optigate.rehearse.rehearsal import degraded_adapter, expectation

    assert degraded_adapter(deployments["legal"]) == "redline"  # the file's first is review
    assert degraded_adapter(deployments["support"]) == "triage"  # nothing changed: the first
    expected = expectation("adapter-quality", deployments["legal"])
    assert str(expected) == "REJECTED on quality[redline]"

    def checks(failing: str) -> list[dict]:
        return [
            {"name": "quality", "adapter": name, "outcome": "fail" if name == failing else "pass"}
            for name in ("base", "review", "clauses", "redline")
        ]

    assert expected.met("REJECTED", checks("redline"))
    assert not expected.met("REJECTED", checks("review"))  # rejected, but not for what was rehearsed
    assert not expected.met("REJECTED", [{"name": "p99_ttft", "outcome": "fail"}])
    assert expectation("faster", deployments["legal"]) == expectation("faster", deployments["support"])


def test_a_left_out_archive_is_expected_refused_by_name_before_any_decision(deployments):
    from optigate.rehearse.rehearsal import expectation

    expected = expectation("faster", deployments["legal"], ["redline"])
    assert str(expected) == "REJECTED on archive-missing: redline"
    refused = f"GateFailed: AdapterRefused: archive-missing: redline ({REDLINE_V2}): no bucket acme-ml-adapters"
    assert expected.met("REJECTED", [], refused)
    # Refused for another reason, or another adapter, or not refused at all: not what was rehearsed.
    assert not expected.met("REJECTED", [], refused.replace("archive-missing", "rank-too-high"))
    assert not expected.met("REJECTED", [], refused.replace("redline", "review"))
    assert not expected.met("REJECTED", [{"name": "p99_ttft", "outcome": "fail"}], "CandidateRejected: 1 of 9")
    assert not expected.met("APPROVED", [], None)
    assert expectation("adapter-quality", deployments["legal"], ["redline"]) == expected
