"""`optigate summary`: every resource a stack creates, read from the resolved config, proven against the synthesized
templates; monthly costs from the price table; the fleet's totals; `--json`; redirected output that fits 100
columns without trailing spaces (issue 28)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter

import pytest

from tests.conftest import CONFIG, REPO, edited_config

WIDTH = 100


def _stacks(config=CONFIG):
    from optigate.deployment import load_resolved_project
    from optigate.deployment.inventory import inventory
    from optigate.promote.lock import default_locks_dir

    deployments = load_resolved_project(config).deployments(None, default_locks_dir(config))
    return deployments, [inventory(deployment) for deployment in deployments]


def _run(*args: str, config=CONFIG) -> subprocess.CompletedProcess:
    """The CLI as a user runs it with its output redirected: a pipe, no COLUMNS, not a terminal."""
    env = {key: value for key, value in os.environ.items() if key not in {"COLUMNS", "LINES"}}
    env["PYTHONPATH"] = str(REPO)
    return subprocess.run(
        [sys.executable, "-m", "optigate.cli", "summary", "--config", str(config), *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=env,
        timeout=900,
    )


def test_summary_counts_are_the_synthesized_templates_counts(example_app):
    """For every team and environment, each resource type the summary counts is the template's count, so the
    summary cannot drift from the stacks."""
    _, stacks = _stacks()
    team_templates = {name: template for name, template in example_app.templates.items() if name != "optigate-pipeline"}
    assert {stack.stack for stack in stacks} == set(team_templates)
    fleet: Counter[str] = Counter()
    for stack in stacks:
        resources = team_templates[stack.stack]["Resources"].values()
        synthesized = Counter(resource["Type"] for resource in resources)
        counted = stack.resource_counts()
        assert counted == {kind: synthesized.get(kind, 0) for kind in counted}, stack.stack
        fleet.update(counted)
    # The example exercises every kind the summary counts (else a count could be wrong unseen).
    assert all(fleet[kind] > 0 for kind in fleet), fleet


def test_costs_come_from_the_price_table_at_minimum_and_maximum_capacity():
    from optigate.plan import catalog
    from optigate.plan.cost import HOURS_PER_MONTH

    deployments, stacks = _stacks()
    seen = set()
    for deployment, stack in zip(deployments, stacks, strict=True):
        price = catalog.get_instance(stack.instance_type).price_per_hour_usd
        assert price is not None
        cost, scaling, month = stack.cost, stack.scaling, price * HOURS_PER_MONTH
        if scaling is not None and scaling.scale_to_zero:
            seen.add("scale to zero")
            assert (cost.min_instances, cost.min_usd) == (0, 0.0)
            # the instances the copies need, packed: support's four one-GPU copies fit one 4-GPU instance (issue 37)
            copies = deployment.placement.copies
            assert copies is not None and copies.managed
            per_instance = (
                catalog.get_instance(stack.instance_type).tp_units // deployment.resolved.tensor_parallel_degree
            )
            assert cost.max_instances == -(-scaling.max_capacity // per_instance) == 1
        elif scaling is not None:
            seen.add("autoscaling")
            assert (cost.min_instances, cost.max_instances) == (scaling.min_capacity, scaling.max_capacity)
        elif len(stack.variants) == 2:
            seen.add("shadow")  # the shadow variant's instance runs beside the production fleet
            assert cost.min_instances == cost.max_instances == deployment.instance_count + 1
            shadow_type = deployment.shadow.serving.instance_type
            shadow_price = catalog.get_instance(shadow_type).price_per_hour_usd
            assert cost.min_usd == pytest.approx(month * deployment.instance_count + shadow_price * HOURS_PER_MONTH)
            continue
        assert cost.min_usd == pytest.approx(month * cost.min_instances, abs=0.01)
        assert cost.max_usd == pytest.approx(month * cost.max_instances, abs=0.01)
    assert seen == {"scale to zero", "autoscaling", "shadow"}
    # dev's override (autoscaling_max_capacity: 1) caps chat there; staging keeps the team file's maximum.
    chat = {stack.environment: stack for stack in stacks if stack.team == "chat"}
    assert chat["dev"].scaling.max_capacity == 1 < chat["staging"].scaling.max_capacity


@pytest.mark.slow
def test_summary_json_has_every_stack_and_the_fleets_totals():
    result = _run("--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    _, stacks = _stacks()
    assert set(data) == {"price_source", "stacks", "environments", "teams", "fleet", "resource_counts"}
    assert "on-demand" in data["price_source"] and "instances.csv" in data["price_source"]
    assert [stack["stack"] for stack in data["stacks"]] == [stack.stack for stack in stacks]
    for written, stack in zip(data["stacks"], stacks, strict=True):
        assert written["resource_counts"] == stack.resource_counts()
        assert written["cost"]["max_usd"] == stack.cost.max_usd
    for name, totals in data["environments"].items():
        mine = [stack for stack in stacks if stack.environment == name]
        assert totals["stacks"] == len(mine)
        assert totals["max_usd"] == pytest.approx(sum(stack.cost.max_usd for stack in mine))
        assert totals["min_instances"] == sum(stack.cost.min_instances for stack in mine)
    for name, totals in data["teams"].items():
        mine = [stack for stack in stacks if stack.team == name]
        assert totals["stacks"] == len(mine) and totals["max_usd"] == pytest.approx(sum(s.cost.max_usd for s in mine))
    assert data["fleet"]["max_usd"] == pytest.approx(sum(t["max_usd"] for t in data["environments"].values()))
    assert data["fleet"]["max_usd"] == pytest.approx(sum(t["max_usd"] for t in data["teams"].values()))
    assert data["fleet"]["min_usd"] <= data["fleet"]["max_usd"]
    assert data["resource_counts"]["AWS::StepFunctions::StateMachine"] == sum(
        stack.resource_counts()["AWS::StepFunctions::StateMachine"] for stack in stacks
    )


@pytest.mark.slow
def test_redirected_summary_fits_100_columns_without_trailing_spaces_and_shows_what_gets_deployed():
    result = _run("--gate")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert [line for line in lines if len(line) > WIDTH] == []
    assert [line for line in lines if line != line.rstrip()] == []
    text = " ".join(result.stdout.split())  # phrases may wrap
    _, stacks = _stacks()
    for stack in stacks:
        assert f"{stack.stack}: team {stack.team} in {stack.environment} ({stack.region}" in text
        assert f"endpoint {stack.endpoint}: {stack.cost.runs}" in text
    support = next(stack for stack in stacks if stack.inference_components and stack.environment == "staging")
    assert f"autoscaling: 0-{support.scaling.max_capacity} copies, target " in text
    assert "scale to zero: yes" in text and "scale to zero: no" in text
    chat = next(stack for stack in stacks if stack.team == "chat" and stack.environment == "staging")
    assert f"gate: state machines {chat.gate.state_machines[0]}, " in text
    assert f"model package group {chat.gate.package_group}" in text
    assert "2 state machines, 5 functions, 1 model package group" in text
    assert "fleet: cost per month at minimum and maximum capacity" in text
    fleet_row = next(line for line in lines if line.startswith("  fleet "))  # the table's rows never wrap
    assert fleet_row.split()[1] == str(len(stacks))


@pytest.mark.slow
def test_an_instance_without_a_list_price_is_said_not_guessed(tmp_path):
    from optigate.plan import catalog

    assert catalog.get_instance("ml.g6e.16xlarge").price_per_hour_usd is None
    config = edited_config(tmp_path, "teams/support.yaml", "ml.g6e.12xlarge", "ml.g6e.16xlarge")
    _, stacks = _stacks(config)
    support = [stack for stack in stacks if stack.team == "support"]
    assert support and all(
        stack.cost.min_usd is None and stack.cost.unpriced == ("ml.g6e.16xlarge",) for stack in support
    )
    result = _run("--env", "dev", config=config)
    assert result.returncode == 0, result.stderr
    assert "cost per month: unknown (no list price for ml.g6e.16xlarge)" in result.stdout
    assert "not priced (no list price for their instance type): optigate-dev-support" in " ".join(result.stdout.split())


@pytest.mark.slow
def test_an_adapter_teams_copies_are_what_the_environment_deploys():
    """dev caps support's autoscaling at 1 (environments.yaml): the components' line says so, as scaling does."""
    result = _run("--env", "dev")
    assert result.returncode == 0, result.stderr
    block = result.stdout.split("optigate-dev-support", 1)[1]
    assert "support-dev-base: the base model, 0-1 copies" in block and "autoscaling: 0-1 copies" in block
