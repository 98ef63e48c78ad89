"""`optigate summary --gate`: what each team's gate will measure, from its plan (no synth), and nothing more
without the flag."""

from __future__ import annotations

from dataclasses import replace

from rich.console import Console

from optigate.cli import main, summary_command
from tests.conftest import CONFIG, edited_config

WIDTH = 100


def _summary(monkeypatch, *flags: str) -> str:
    recorded = Console(width=WIDTH, record=True, file=open("/dev/null", "w"))  # noqa: SIM115
    monkeypatch.setattr(summary_command, "console", recorded)
    main(["summary", "--config", str(CONFIG), "--env", "dev", *flags])
    text = recorded.export_text()
    assert not [line for line in text.splitlines() if len(line) > WIDTH]
    return text


def test_summary_gate_prints_each_gates_plan(monkeypatch):
    from optigate.deployment import load_resolved_project
    from optigate.promote.lock import default_locks_dir

    text = _summary(monkeypatch, "--gate")
    deployments = load_resolved_project(CONFIG).deployments("dev", default_locks_dir(CONFIG))
    plans = [d.gate for d in deployments if d.gate is not None]
    assert plans and text.count("gate (what it measures):") == len(plans)
    for plan in plans:
        assert f"fingerprint: {plan.fingerprint}" in text
        benchmark = plan.benchmark
        levels = ", ".join(str(c) for c in benchmark.measured_concurrency)
        assert f"levels (measured concurrency): {levels} (" in text
        requests = ", ".join(str(benchmark.shards * r) for r in benchmark.requests_per_level)
        assert f"requests per level and round: {requests} (" in text
        assert f"prompt/output tokens: {benchmark.prompt_tokens}/{benchmark.max_new_tokens}" in text
        # Priced: both endpoints an hour, at the instance's list price.
        assert f"benchmark cost: ${2 * plan.instance_count * plan.price_per_hour_usd:,.2f} an hour (twin and " in text


def test_a_benchmark_in_rounds_is_priced_by_its_budget(monkeypatch):
    from optigate.cli.summary_command import budget_line, rounds_line
    from optigate.deployment import load_resolved_project
    from optigate.promote.lock import default_locks_dir

    deployments = load_resolved_project(CONFIG).deployments("dev", default_locks_dir(CONFIG))
    plan = next(d.gate for d in deployments if d.gate is not None)
    rounds = replace(plan, benchmark=replace(plan.benchmark, max_rounds=12, min_rounds=4, max_minutes=90))
    assert rounds_line(rounds.benchmark) == (
        "rounds: 4 to 12 or 90 minutes (baseline twin, then candidate, at every level), judged after each from "
        "round 4, stopping once decided: 9 looks at 99.4 % each"
    )
    per_minute = 2 * plan.instance_count * plan.price_per_hour_usd / 60
    line = budget_line(rounds)
    assert line.endswith(f"at most ${90 * per_minute:,.2f} by max_minutes")
    # A round's lower bound: each level's requests per stream at the planner's batch-1 request time, both sides.
    request_s = (
        plan.prediction["prefill_ms"] + plan.prediction["decode_tpot_ms_batch1"] * plan.benchmark.max_new_tokens
    ) / 1000
    per_stream = sum(r / c for c, r in zip(plan.benchmark.levels, plan.benchmark.requests_per_level, strict=True))
    assert rounds.round_seconds_at_least() == 2 * request_s * per_stream
    no_price = replace(rounds, price_per_hour_usd=None)
    assert budget_line(no_price) == "benchmark cost: unknown (no list price for the instance type)"


def test_summary_without_the_flag_prints_no_gate(monkeypatch):
    assert "gate (what it measures)" not in _summary(monkeypatch)


# --------------------------------------------------------------------------- adapter teams (issue 26)


def _support(deployments):
    return next(d for d in deployments if d.team.adapters)


def _adapter_section(text: str, start: str, end: str) -> list[str]:
    lines = text.splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith(start))
    last = next(i for i, line in enumerate(lines[first + 1 :], first + 1) if line.startswith(end))
    return lines[first:last]


def test_summary_shows_an_adapter_teams_components_and_its_rollout(monkeypatch):
    from optigate.deployment import load_resolved_project
    from optigate.promote.lock import default_locks_dir

    text = _summary(monkeypatch)
    support = _support(load_resolved_project(CONFIG).deployments("dev", default_locks_dir(CONFIG)))
    endpoint, region = support.endpoint_name, support.environment.region
    assert "  inference components (the base model, each adapter on it):" in text
    assert f"    {endpoint}-base: the base model, " in text
    assert f"      {support.resolved.tensor_parallel_degree} GPU" in text
    for adapter in support.team.adapters:
        assert f"    {endpoint}-{adapter.name}: adapter {adapter.name} on the base" in text
        assert f"      {adapter.s3_uri.replace('{region}', region)}" in text
    rollout = support.team.rollout
    assert "  rollout (the live base component's rolling update; adapter components get none):" in text
    assert f"    team file: strategy {rollout.strategy}; canary: traffic_percentage " in text
    # Model-backed teams print no components.
    assert text.count("inference components (the base model") == 1


def test_summary_gate_shows_the_adapter_gates_components_and_mix(monkeypatch):
    from optigate.deployment import load_resolved_project
    from optigate.promote.lock import default_locks_dir

    text = _summary(monkeypatch, "--gate")
    components = _support(load_resolved_project(CONFIG).deployments("dev", default_locks_dir(CONFIG))).gate.components
    assert components is not None and components.mix is not None
    assert f"components on the baseline twin and the candidate: base and {len(components.adapters)} adapters" in text
    for adapter in components.adapters:
        assert f"      {adapter.name}: {adapter.artifact_uri}" in text
        assert f"        quality on: {adapter.dataset_uri}" in text
    shares = ", ".join(f"{label} {share:.0%}" for label, share in components.mix)
    assert f"    benchmark mix (gate.benchmark.adapter_mix): {shares}" in text
    assert "read from CloudWatch" not in text


def test_without_a_mix_the_summary_says_the_gate_reads_cloudwatch(monkeypatch, tmp_path):
    import re
    import shutil

    config = tmp_path / "config"
    shutil.copytree(CONFIG, config)
    team_file = config / "teams" / "support.yaml"
    team_file.write_text(re.sub(r"\n\s*adapter_mix:[^\n]*", "", team_file.read_text()))
    recorded = Console(width=WIDTH, record=True, file=open("/dev/null", "w"))  # noqa: SIM115
    monkeypatch.setattr(summary_command, "console", recorded)
    main(["summary", "--config", str(config), "--env", "dev", "--gate"])
    text = recorded.export_text()
    assert "    benchmark mix: read from CloudWatch at run time" in text
    assert "(gate.benchmark.adapter_mix)" not in text


def test_the_adapter_lines_are_neither_wrapped_nor_padded_when_redirected(monkeypatch):
    wide = Console(width=180, record=True, file=open("/dev/null", "w"))  # noqa: SIM115
    monkeypatch.setattr(summary_command, "console", wide)
    main(["summary", "--config", str(CONFIG), "--env", "dev", "--gate"])
    text = wide.export_text()
    section = _adapter_section(text, "  inference components", "  decode TPOT")
    section += _adapter_section(text, "    components on the baseline twin", "    benchmark mix")
    assert len(section) > 8
    assert [line for line in section if line != line.rstrip() or len(line) > WIDTH] == []


def test_a_new_adapter_version_is_shown_beside_the_one_served():
    from optigate.cli.adapter_lines import gate_component_lines
    from optigate.deployment.gate_components import ComponentCompute, GateAdapter, GateComponents

    reply = GateAdapter("reply", 1, "s3://b/reply-v2.tar.gz", "s3://b/reply-v3.tar.gz", "s3://e/reply/")
    triage = GateAdapter("triage", 2, "s3://b/triage-v3.tar.gz", "s3://b/triage-v3.tar.gz", "s3://e/")
    lines = gate_component_lines(GateComponents(ComponentCompute(2), (reply, triage), None, "s3://e/"))
    assert "    candidate serves a new version: s3://b/reply-v3.tar.gz" in lines
    assert sum("new version" in line for line in lines) == 1
    assert "  base: 2 GPUs, 4 CPU cores, 4,096 MB host memory per copy, one copy each side" in lines
    assert lines[-2] == "benchmark mix: read from CloudWatch at run time"


def test_a_live_adapter_shows_the_version_the_lock_approved():
    from optigate.cli.adapter_lines import live_component_lines
    from optigate.deployment.component_settings import BaseComponentSettings
    from optigate.deployment.endpoint import LiveAdapter, LiveComponents
    from optigate.deployment.gate_components import ComponentCompute

    adapters = (LiveAdapter("triage", "s3://b/new.tar.gz", approved=True), LiveAdapter("reply", "s3://a/reply.tar.gz"))
    components = LiveComponents(ComponentCompute(1), None, BaseComponentSettings(), adapters)
    lines = live_component_lines("e", components, None)
    assert "e-triage: adapter triage on the base, the gate-approved version" in lines
    assert "  s3://b/new.tar.gz" in lines
    assert "e-reply: adapter reply on the base" in lines
    assert "  s3://a/reply.tar.gz" in lines
    assert "e-base: the base model, 1 copy" in lines


def test_an_adapter_teams_rollout_is_read_from_its_endpoint_plan(tmp_path):
    """The rolling update summary prints is the plan's (LiveComponents.rollout), which carries the team file's
    strategy: `none` shows no traffic_percentage (its batch is the API's largest)."""
    from optigate.cli.adapter_lines import rollout_lines
    from optigate.deployment import load_resolved_project

    config = edited_config(tmp_path, "teams/support.yaml", "strategy: canary", "strategy: none")
    (support,) = [d for d in load_resolved_project(config).deployments("dev") if d.team.team == "support"]
    components = support.endpoint.components
    assert components is not None and components.rollout is not None
    assert (
        rollout_lines(components.rollout)[1]
        == "  team file: strategy none; canary: wait_minutes 10; auto_rollback true"
    )
    canary = replace(components.rollout, strategy="canary", batch_percent=20, wait_seconds=300, auto_rollback=False)
    assert rollout_lines(canary)[1] == (
        "  team file: strategy canary; canary: traffic_percentage 20, wait_minutes 5; auto_rollback false"
    )
