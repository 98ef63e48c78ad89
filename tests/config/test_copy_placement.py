"""An adapter team's base copies against its instances (optigate.deployment.placement, issue 37): `legal` scales
1-3 copies of one GPU on a single one-GPU ml.g6e.2xlarge, so copies 2-3 would stay pending (OG533) and a rolling
update of its one copy has no free GPU (OG534); managed instance scaling places them; support's four one-GPU copies
fit one 4-GPU instance."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from optigate.config.loader import ConfigError
from optigate.deployment import deploy, load_resolved_project, load_resolved_team
from optigate.deployment.placement import copy_placement

LEGAL = {
    "team": "legal",
    "model": {
        "source": {
            "hugging_face": {
                "model_id": "mistralai/Mistral-7B-Instruct-v0.3",
                "s3_uri": "s3://acme-ml-models-{region}/mistral-7b-v0.3/",
            }
        },
        "architecture": "mistral-7b-v0.3",
    },
    "serving": {
        "instance_type": "ml.g6e.2xlarge",
        "max_model_len": 8192,
        "lora": {"max_loras": 3, "max_lora_rank": 16},
        "autoscaling": {"min_capacity": 1, "max_capacity": 3, "target_invocations_per_instance": 4},
    },
    "adapters": [
        {"name": name, "s3_uri": f"s3://acme-ml-adapters-{{region}}/legal/{name}-v1.tar.gz"}
        for name in ("review", "clauses", "redline")
    ],
    "rollout": {"strategy": "canary"},
    "gate": {"benchmark": {"concurrency": [1, 8]}},
}


def _legal(tmp_path: Path, **autoscaling) -> Path:
    team = yaml.safe_load(yaml.safe_dump(LEGAL))
    team["serving"]["autoscaling"].update(autoscaling)
    path = tmp_path / "legal.yaml"
    path.write_text(yaml.safe_dump(team, sort_keys=False))
    return path


def test_legal_three_copies_on_one_one_gpu_instance_are_refused_with_the_fix(tmp_path):
    with pytest.raises(ConfigError) as error:
        load_resolved_team(_legal(tmp_path))
    (issue,) = error.value.issues
    assert issue.rule == "OG533" and issue.path == "serving.autoscaling.max_capacity"
    assert "copies 2-3 would stay pending forever" in issue.message
    assert "1 × ml.g6e.2xlarge (1 GPU each) hold 1 copy of 1 GPU" in issue.message
    for fix in (
        "managed_instance_scaling: true (instances follow the copies: 3 for the copies packed, MaxInstanceCount 4",
        "raise serving.instance_count to 3",
        "lower max_capacity to 1",
    ):
        assert fix in issue.message


def test_legal_one_copy_on_one_gpu_leaves_a_rolling_batch_no_gpu_a_note(tmp_path):
    resolved = load_resolved_team(_legal(tmp_path, max_capacity=1))
    (note,) = [note for note in resolved.advisories if note.rule_id == "OG534"]
    assert "provisions a batch of 1 copy (10% of 1) before it removes old ones" in note.message
    assert "no room for another copy" in note.message and "raise serving.instance_count to 2" in note.message


def test_legal_with_managed_instance_scaling_places_every_copy_and_the_rolling_batch(tmp_path):
    resolved = load_resolved_team(_legal(tmp_path, managed_instance_scaling=True))
    assert not [note for note in resolved.advisories if note.rule_id in ("OG533", "OG534")]
    assert resolved.baseline is not None
    placed = copy_placement(resolved.team, resolved.baseline.instance, 1, 1)
    assert placed is not None and placed.managed
    # one to three instances as the copies need them; at most four (three copies and a rolling batch's one)
    assert (placed.min_instances, placed.max_instances) == (1, 3)
    assert (placed.managed_min_instances, placed.managed_max_instances) == (1, 4)


def test_a_fixed_base_that_starts_with_more_copies_than_its_instances_hold_is_refused(tmp_path):
    with pytest.raises(ConfigError) as error:
        load_resolved_team(_legal(tmp_path, min_capacity=2))
    (issue,) = error.value.issues
    assert issue.rule == "OG533" and issue.path == "serving.autoscaling.min_capacity"
    assert "starts with 2 copies" in issue.message and "lower min_capacity to 1" in issue.message


def test_an_environment_override_that_outgrows_the_instances_is_refused_at_the_override(tmp_path, example_config):
    config = tmp_path / "config"
    shutil.copytree(example_config, config)
    _legal(config / "teams", max_capacity=1)
    environments = config / "environments.yaml"
    text = environments.read_text().replace(
        "        instance_count: 2\n", "        instance_count: 2\n      legal:\n        autoscaling_max_capacity: 2\n"
    )
    environments.write_text(text)
    with pytest.raises(ConfigError) as error:
        load_resolved_project(config)
    (issue,) = [issue for issue in error.value.issues if issue.rule == "OG533"]
    assert issue.file.endswith("environments.yaml") and issue.path.endswith("teams.legal.autoscaling_max_capacity")
    assert issue.message.startswith("team legal in prod: autoscaling may ask for 2 copies")


def test_support_four_one_gpu_copies_fit_one_four_gpu_instance(example_config):
    project = load_resolved_project(example_config, teams=["support"])
    prod = next(environment for environment in project.environments if environment.name == "prod")
    placement = deploy(project.teams["support"], prod).placement
    copies = placement.copies
    assert copies is not None and copies.managed and copies.copies_per_instance == 4
    assert (placement.min_instances, placement.max_instances) == (0, 1)
    # MaxInstanceCount as before (a copy per instance at most): the template does not change
    assert (copies.managed_min_instances, copies.managed_max_instances) == (0, 4)
    assert placement.described() == (
        "0-1 × ml.g6e.12xlarge (0-4 copies of 1 GPU, 4 per instance; managed instance scaling, MaxInstanceCount 4)"
    )
