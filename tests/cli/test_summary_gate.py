"""`optigate summary --gate`: what each team's gate will measure, from its plan (no synth), and nothing more
without the flag."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from optigate.cli import main, summary_command

CONFIG = Path(__file__).resolve().parents[2] / "config"
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
        levels = ", ".join(str(c) for c in plan.measured_concurrency)
        assert f"levels (measured concurrency): {levels} (" in text
        requests = ", ".join(str(plan.shards * r) for r in plan.requests_per_level)
        assert f"requests per level and block: {requests} (" in text
        assert f"prompt/output tokens: {plan.prompt_tokens}/{plan.max_new_tokens}" in text


def test_summary_without_the_flag_prints_no_gate(monkeypatch):
    assert "gate (what it measures)" not in _summary(monkeypatch)
