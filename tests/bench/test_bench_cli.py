"""`optigate bench`, `optigate bench compare` and the report, against emulator processes."""

from __future__ import annotations

import argparse
import json

import pytest

from optigate.cli import main
from optigate.emulator.process import emulator_process

BASELINE = {"default": {"ttft_ms": 60, "itl_ms": 6, "itl_ms_per_active_stream": 0.5}}
CANDIDATE = {"default": {"ttft_ms": 40, "itl_ms": 4, "tokens_per_chunk": [1, 2]}}
RUN_KEYS = {
    "concurrency",
    "requests",
    "ttft_ms",
    "itl_ms",
    "tpot_ms",
    "e2e_ms",
    "output_tokens_per_s",
    "requests_per_s",
    "achieved_concurrency",
    "tokens_per_chunk",
    "errors",
}


def _bench(url: str, out, *extra: str) -> dict:
    code = main(
        [
            "bench",
            "--endpoint",
            "chat-dev",
            "--endpoint-url",
            url,
            "--concurrency",
            "1,4",
            "--requests",
            "12",
            "--max-new-tokens",
            "10",
            "--prompt-tokens",
            "16",
            "--json",
            str(out),
            *extra,
        ]
    )
    assert code == 0
    return json.loads(out.read_text())


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    folder = tmp_path_factory.mktemp("bench")
    with emulator_process(BASELINE) as baseline_url, emulator_process(CANDIDATE) as candidate_url:
        baseline = _bench(baseline_url, folder / "baseline.json", "--report", str(folder / "report"))
        candidate = _bench(candidate_url, folder / "candidate.json")
    return folder, baseline, candidate


def test_bench_json_follows_the_contract(results):
    _, baseline, _ = results
    assert [run["concurrency"] for run in baseline["runs"]] == [1, 4]
    for run in baseline["runs"]:
        assert run.keys() >= RUN_KEYS
        assert set(run["ttft_ms"]) == {"p50", "p90", "p95", "p99", "mean", "max"}
        assert run["requests"] == 12 and run["errors"] == {}
    assert baseline["runs"][1]["achieved_concurrency"] > 3.5


def test_bench_report_has_the_four_plots_and_a_page(results):
    import matplotlib.image

    folder, _, _ = results
    report = folder / "report"
    for name in ("ttft_cdf.png", "itl_cdf.png", "throughput_vs_concurrency.png", "latency_vs_throughput.png"):
        pixels = matplotlib.image.imread(report / name)
        assert pixels.shape[0] > 300 and pixels.shape[1] > 500
        assert pixels.std() > 0.05  # something was drawn
    page = (report / "index.html").read_text()
    assert "<table>" in page and "ttft_cdf.png" in page and "chat-dev" in page


def test_compare_finds_the_faster_candidate_with_intervals(results, capsys, tmp_path):
    folder, _, _ = results
    assert (
        main(
            [
                "bench",
                "compare",
                str(folder / "baseline.json"),
                str(folder / "candidate.json"),
                "--json",
                str(tmp_path / "d.json"),
                "--report",
                str(tmp_path / "r"),
            ]
        )
        == 0
    )
    deltas = json.loads((tmp_path / "d.json").read_text())["deltas"]
    ttft_p50 = [d for d in deltas if d["metric"] == "ttft_ms" and d["statistic"] == "p50"]
    assert ttft_p50 and all(d["verdict"] == "better" and d["high"] < 0 for d in ttft_p50)
    throughput = [d for d in deltas if d["metric"] == "output_tokens_per_s"]
    assert all(d["delta"] > 0 for d in throughput)
    assert (tmp_path / "r" / "index.html").read_text().count("better") > 3


def test_a_run_compared_with_itself_is_never_better_or_worse(results, tmp_path):
    folder, _, _ = results
    code = main(
        [
            "bench",
            "compare",
            str(folder / "baseline.json"),
            str(folder / "baseline.json"),
            "--json",
            str(tmp_path / "same.json"),
        ]
    )
    deltas = json.loads((tmp_path / "same.json").read_text())["deltas"]
    assert code == 0 and deltas
    assert {d["verdict"] for d in deltas} <= {"equivalent", "inconclusive"}
    assert all(d["delta"] == 0 for d in deltas)


def test_several_runs_per_side_and_a_decision(results, tmp_path, capsys):
    folder, _, _ = results
    base, cand = folder / "baseline.json", folder / "candidate.json"
    out = tmp_path / "blocks.json"
    # Two runs a side; a decision on TTFT, which the candidate improves by a third: decided, exit 0.
    code = main(["bench", "compare", f"{base},{base}", f"{cand},{cand}", "--json", str(out), "--decide", "ttft_ms:p50"])
    payload = json.loads(out.read_text())
    assert payload["baseline_runs"] == [str(base)] * 2 and payload["error_rates"]["1"] == {
        "baseline": 0.0,
        "candidate": 0.0,
    }
    decided = [d for d in payload["deltas"] if d["metric"] == "ttft_ms" and d["statistic"] == "p50"]
    assert all(d["verdict"] == "better" for d in decided) and code == 0 == payload["exit_code"]
    # A decision on every metric: some p99 with a dozen requests cannot be told, and nothing is worse: 3.
    assert main(["bench", "compare", str(base), str(cand), "--decide"]) == 3
    # The other way round the candidate is slower: exit 1.
    assert main(["bench", "compare", str(cand), str(base)]) == 1
    assert "error rate baseline 0.0%, candidate 0.0%" in capsys.readouterr().out


def test_different_workloads_are_refused_unless_allowed(results, tmp_path, capsys):
    folder, baseline, candidate = results
    longer = dict(candidate, load={**candidate["load"], "max_new_tokens": 20})
    (tmp_path / "longer.json").write_text(json.dumps(longer))
    args = ["bench", "compare", str(folder / "baseline.json"), str(tmp_path / "longer.json")]
    assert main(args) == 2
    message = capsys.readouterr()
    line = (message.err + message.out).strip()
    assert "max_new_tokens 10 vs 20" in line and "--allow-different-workloads" in line and "\n" not in line
    assert main([*args, "--allow-different-workloads"]) in (0, 1, 3)
    fewer = dict(baseline, runs=baseline["runs"][:1])
    (tmp_path / "fewer.json").write_text(json.dumps(fewer))
    assert main(["bench", "compare", str(tmp_path / "fewer.json"), str(folder / "baseline.json")]) == 2
    message = capsys.readouterr()
    assert "levels [1] vs [1, 4]" in message.err + message.out


def test_a_side_that_failed_every_request_is_failed_not_a_number(results, tmp_path, capsys):
    folder, baseline, _ = results
    failed = json.loads(json.dumps(baseline))
    for run in failed["runs"]:
        run["errors"] = {"ModelError": run["requests"]}
        run["successful_requests"] = 0
        for key in ("ttft_ms", "itl_ms", "chunk_gap_ms", "tpot_ms", "e2e_ms", "tokens_per_chunk", "completions"):
            run["samples"][key] = []
        run["samples"]["itl_counts"], run["samples"]["finishes"], run["samples"]["token_arrivals"] = [], [], []
    (tmp_path / "failed.json").write_text(json.dumps(failed))
    out = tmp_path / "d.json"
    code = main(["bench", "compare", str(folder / "baseline.json"), str(tmp_path / "failed.json"), "--json", str(out)])
    text = out.read_text()
    assert code == 1 and "NaN" not in text
    deltas = json.loads(text)["deltas"]
    assert all(d["verdict"] == "worse" and d["candidate"] is None for d in deltas)
    shown = capsys.readouterr().out
    assert "failed" in shown and "candidate 100.0%" in shown


@pytest.mark.slow
def test_heartbeat_lines_reach_a_pipe_while_the_run_goes_on(tmp_path):
    """Not a terminal (CI logs): each level's line is on stdout as it ends, not only at the exit."""
    import subprocess
    import sys
    import time

    with emulator_process({"default": {"ttft_ms": 5, "itl_ms": 2, "output_tokens": 4}}) as url:
        arguments = ["--concurrency", "1,2", "--duration", "2", "--max-new-tokens", "4", "--prompt-tokens", "8"]
        process = subprocess.Popen(
            [sys.executable, "-m", "optigate.cli", "bench", "--endpoint", "x", "--endpoint-url", url, *arguments],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            assert process.stdout is not None
            first_level_at = None
            for line in process.stdout:
                if line.startswith("c=1: done"):
                    first_level_at = time.monotonic()
                    break
            rest, err = process.communicate(timeout=900)
            ended = time.monotonic()
        finally:
            process.kill()
    assert process.returncode == 0, err
    assert first_level_at is not None and "c=2: done" in rest
    assert ended - first_level_at >= 1.5  # the c=2 level (2 s) still ran after c=1's line was read
    assert err == ""  # progress on a pipe goes to stdout; stderr is for failures


def test_a_level_s_elapsed_time_stops_when_the_level_ends():
    import time

    from optigate.bench.core.load import LoadSpec
    from optigate.cli.bench_command import _LevelProgress

    progress = _LevelProgress(interactive=True)  # the terminal bar, not started: its tasks keep time all the same
    assert progress.bar is not None
    progress.start_level(1, LoadSpec(concurrency=1, requests=None, duration_s=0.1))
    time.sleep(0.05)
    progress.end_level(1, {"errors": {}, "requests": 3, "successful_requests": 3})
    (task,) = progress.bar.tasks
    stopped = task.elapsed
    time.sleep(0.2)
    assert stopped is not None and task.elapsed == stopped


def test_emulate_offers_the_settings_with_a_help_text_as_options(monkeypatch):
    """The options are read from the emulator's settings: each overrides --config's default, typed as the setting."""
    from dataclasses import fields

    from optigate.cli import build_parser, emulate_command
    from optigate.emulator.config import Behaviour, EmulatorConfig, command_line_options

    options = command_line_options()
    with_help = [setting.name for setting in fields(Behaviour) if "help" in setting.metadata]
    assert [option.name for option in options] == with_help and "frames_per_write" not in with_help
    commands = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    emulate = commands.choices["emulate"]
    offered = {action.dest: action for action in emulate._actions}
    for option in options:
        assert offered[option.name].help == option.help and offered[option.name].type is option.type
    assert offered["engine_mode"].choices == ("async", "rolling-batch")  # LMI's modes, each its own stream
    assert "(default: 150)" in offered["ttft_ms"].help and "(default: 1)" in offered["tokens_per_chunk"].help

    served = {}
    monkeypatch.setattr(
        "optigate.emulator.sagemaker_runtime.serve", lambda config, **kw: served.setdefault("config", config)
    )
    args = build_parser().parse_args(["emulate", "--ttft-ms", "90", "--tokens-per-chunk", "3", "--reset-rate", "0.1"])
    assert emulate_command.cmd_emulate(args) == 0
    config: EmulatorConfig = served["config"]
    assert config.default.ttft_ms.mean == 90.0 and config.default.tokens_per_chunk == (3,)
    assert config.default.reset_rate == 0.1 and config.default.itl_ms == Behaviour().itl_ms


def test_bench_refuses_to_measure_async_mode_through_lmis_inputs_schema(capsys):
    args = ["bench", "--endpoint", "chat-dev", "--endpoint-url", "http://127.0.0.1:9", "--engine-mode", "async"]
    assert main([*args, "--schema", "inputs"]) == 2
    assert "async mode is measured with messages requests" in capsys.readouterr().err


def test_bench_against_the_wrong_engine_mode_fails_every_request_loudly(tmp_path, capsys):
    """The endpoint runs async mode (the emulator's default); told rolling-batch, nothing is counted as measured."""
    with emulator_process({"default": {"ttft_ms": 5, "itl_ms": 1}}) as url:
        target = ["bench", "--endpoint", "chat-dev", "--endpoint-url", url, "--concurrency", "1", "--requests", "3"]
        code = main(
            [*target, "--max-new-tokens", "5", "--engine-mode", "rolling-batch", "--json", str(tmp_path / "r.json")]
        )
    assert code == 2
    assert "StreamFormatMismatch" in capsys.readouterr().err
    (run,) = json.loads((tmp_path / "r.json").read_text())["runs"]
    assert run["successful_requests"] == 0 and run["errors"] == {"StreamFormatMismatch": 3}
