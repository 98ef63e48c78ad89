"""What the commands print: tables that fit 100 columns with names whole, help with every default,
and states of a gate reported while it runs."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import pytest
from rich.console import Console

from optigate.cli import bench_command, bench_compare_command, build_parser, main, plan_command, summary_command
from tests.conftest import CONFIG

REPO = Path(__file__).resolve().parents[2]
WIDTH = 100


def _render(monkeypatch, module, argv: list[str]) -> str:
    """Run a command with its module's console 100 columns wide; the text it printed."""
    recorded = Console(width=WIDTH, record=True, file=open("/dev/null", "w"))  # noqa: SIM115
    monkeypatch.setattr(module, "console", recorded)
    main(argv)
    text = recorded.export_text()
    too_wide = [line for line in text.splitlines() if len(line) > WIDTH]
    assert not too_wide, too_wide
    return text


def test_summary_fits_100_columns_with_stack_names_whole(monkeypatch):
    text = _render(monkeypatch, summary_command, ["summary", "--config", str(CONFIG)])
    for env in ("dev", "staging", "prod"):
        for team in ("chat", "research", "support"):
            assert f"optigate-{env}-{team}" in text and f"{team}-{env}" in text
    assert "ml.g6e.12xlarge" in text and "MAX_MODEL_LEN=" in text


def test_plan_compare_fits_100_columns_with_instance_names_whole(monkeypatch):
    argv = ["plan", "--model", "llama-3.1-8b", "--compare", "--max-model-len", "8192", "--tpot-ms", "30"]
    text = _render(monkeypatch, plan_command, argv)
    for instance in plan_command.DEFAULT_COMPARE_INSTANCES:
        assert instance in text
    assert "◀ cheapest:" in text


def test_plan_table_fits_100_columns(monkeypatch):
    text = _render(monkeypatch, plan_command, ["plan", str(CONFIG / "teams" / "chat.yaml")])
    assert "cost per million output tokens" in text
    assert "inference components" not in text  # a model-backed team


def test_plan_of_an_adapter_team_shows_its_components_and_the_mix(monkeypatch):
    from optigate.config.loader import load_team

    team = load_team(CONFIG / "teams" / "support.yaml")
    text = _render(monkeypatch, plan_command, ["plan", str(CONFIG / "teams" / "support.yaml")])
    assert "  inference components: base, 1 GPU, 2 CPU cores, " in text
    assert "    adapters on it: " + ", ".join(adapter.name for adapter in team.adapters) in text
    mix = team.gate.benchmark.adapter_mix
    total = sum(mix.values())
    shares = ", ".join(f"{label} {mix[label] / total:.0%}" for label in ("base", *[a.name for a in team.adapters]))
    assert f"  benchmark mix (gate.benchmark.adapter_mix): {shares}" in text


def _result(concurrency: int, errors: dict[str, int]) -> dict:
    figures = {"p50": 123.456, "p90": 150.0, "p95": 160.0, "p99": 1234.5, "mean": 130.0, "max": 2000.0}
    return {
        "concurrency": concurrency,
        "requests": 1000,
        "successful_requests": 1000 - sum(errors.values()),
        "ttft_ms": figures,
        "itl_ms": figures,
        "tpot_ms": figures,
        "e2e_ms": figures,
        "tokens_per_chunk": {**figures, "mean": 1.5},
        "output_tokens_per_s": 12345.6,
        "requests_per_s": 45.67,
        "achieved_concurrency": 63.9,
        "coalesced_frame_share": 0.012,
        "errors": errors,
        "warnings": [],
    }


def test_bench_table_fits_100_columns_with_error_names_whole(monkeypatch):
    data = {"runs": [_result(1, {}), _result(64, {"ThrottlingException": 12, "ModelStreamError": 3})]}
    console = Console(width=WIDTH, record=True, file=open("/dev/null", "w"))  # noqa: SIM115
    monkeypatch.setattr(bench_command, "console", console)
    console.print(bench_command._bench_table(data, "optigate bench: optigate-prod-chat-endpoint"))
    bench_command._print_errors(data)
    text = console.export_text()
    assert all(len(line) <= WIDTH for line in text.splitlines())
    assert "optigate-prod-chat-endpoint" in text and "12,345.6" in text
    assert "c=64: errors ModelStreamError 3, ThrottlingException 12 of 1000 requests" in text or (
        "c=64: errors ThrottlingException 12, ModelStreamError 3 of 1000 requests" in text
    ), text


def test_compare_table_fits_100_columns_with_metric_names_whole(monkeypatch, tmp_path):
    # A run whose every request failed: compare shows "failed" and the error rates; enough to lay out every row.
    run = _result(4, {"ConnectionError": 3})
    run["samples"] = {key: [] for key in ("ttft_ms", "itl_ms", "chunk_gap_ms", "tpot_ms", "e2e_ms", "queue_ms")}
    run["samples"].update(
        tokens_per_chunk=[], completions=[], intervals=[], token_arrivals=[], finishes=[], itl_counts=[]
    )
    run["samples"]["coalesced_counts"] = []
    run["successful_requests"], run["requests"] = 0, 3
    path = tmp_path / "r.json"
    path.write_text(json.dumps({"load": {}, "runs": [run]}))
    text = _render(
        monkeypatch, bench_compare_command, ["bench", "compare", str(path), str(path), "--allow-different-workloads"]
    )
    for metric in ("ttft_ms", "itl_ms", "tpot_ms", "output_tokens_per_s", "inconclusive"):
        assert metric in text


def _parsers(parser: argparse.ArgumentParser, name: str = "optigate"):
    yield name, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub, child in action.choices.items():
                yield from _parsers(child, f"{name} {sub}")


def test_every_option_has_a_description_and_its_default():
    from optigate.evaluate.job import build_parser as evaluate_parser  # `optigate evaluate` re-runs it in .venv-eval

    missing = []
    for name, parser in [*_parsers(build_parser()), ("optigate evaluate (job)", evaluate_parser())]:
        formatter = parser._get_formatter()
        for action in parser._actions:
            if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)):
                continue
            required_positional = not action.option_strings and action.nargs is None
            text = formatter._expand_help(action) if action.help else ""
            flag = isinstance(action, argparse._StoreTrueAction)
            says_default = "default" in text or "required" in text or action.nargs == argparse.REMAINDER
            if not text or not (flag or required_positional or says_default):
                missing.append(f"{name} {'/'.join(action.option_strings) or action.dest}: {text!r}")
            if action.default not in (None, False) and "default" not in text and not flag:
                missing.append(f"{name} {'/'.join(action.option_strings)}: default {action.default!r} not shown")
    assert not missing, missing


def test_the_default_formatter_catches_an_option_without_a_shown_default():
    """The check above is not vacuous: an option added with a default and help shows it; one without help is found."""
    parser = build_parser()
    plan = dict(_parsers(parser))["optigate plan"]
    plan.add_argument("--seeded", type=int, default=7, help="a seeded option")
    assert "a seeded option (default: 7)" in plan.format_help()
    plan.add_argument("--undescribed", type=int, default=3)
    action = plan._actions[-1]
    assert not action.help  # what the check above reports as missing


@pytest.mark.parametrize(
    "command", ["advise", "plan", "bench", "emulate", "rehearse", "resolve", "summary", "validate"]
)
def test_help_is_printed_and_exits_0(command, capsys):
    with pytest.raises(SystemExit) as exited:
        main([command, "--help"])
    assert exited.value.code == 0
    out = capsys.readouterr().out
    assert f"optigate {command}" in out and "sagemaker.config" not in out


def test_evaluate_help_comes_without_the_evaluation_environment(capsys, monkeypatch):
    monkeypatch.setenv("OPTIGATE_EVAL_PYTHON", "/nonexistent/python")
    assert main(["evaluate", "--help"]) == 0
    out = capsys.readouterr().out
    assert "--dataset" in out and "--max-new-tokens" in out and "sagemaker.config" not in out


@pytest.mark.slow
def test_a_gate_reports_each_state_as_it_is_entered():
    """The rehearsal's harness tells its caller each state while the execution still runs."""
    from optigate.rehearse.harness import GateHarness

    definition = {
        "StartAt": "First",
        "States": {
            "First": {"Type": "Pass", "Next": "Hold"},
            "Hold": {"Type": "Wait", "Seconds": 2, "Next": "Last"},
            "Last": {"Type": "Pass", "End": True},
        },
    }
    seen: list[tuple[str, float]] = []
    with GateHarness() as harness:
        arn = harness.start(harness.create_state_machine(definition))
        described = harness.wait(arn, timeout=900, on_state=lambda state: seen.append((state, time.monotonic())))
        ended = time.monotonic()
    assert described["status"] == "SUCCEEDED"
    assert [state for state, _ in seen] == ["First", "Hold", "Last"]
    assert ended - seen[0][1] >= 1.0  # "First" was told before the 2-second wait was over, not at the end


@pytest.mark.slow
@pytest.mark.parametrize("argv", [["advise", "--team", "chat"], ["plan", "config/teams/support.yaml"]])
def test_redirected_output_has_no_line_ending_in_spaces(argv, example_project):
    """Results piped to a file or a CI log: no line ends in the spaces rich pads padded renderables with."""
    import os
    import subprocess
    import sys

    result = subprocess.run(
        [sys.executable, "-m", "optigate.cli", *argv],
        cwd=example_project,  # `config`, the default, is the suite's own project
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert len(lines) > 5
    assert [line for line in lines if line != line.rstrip()] == []
