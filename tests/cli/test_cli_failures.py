"""Every CLI failure of issue 15 is one line on stderr and an exit code, never a traceback.

Each test runs `python -m optigate.cli` as a user would (a fresh process, stderr captured) and checks
the exit code (2 usage or input error, 3 cannot resolve), that stderr is exactly one line, and that no
traceback is shown; `OPTIGATE_DEBUG=1` shows it.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from optigate.emulator.process import emulator_process
from tests.conftest import CONFIG

REPO = Path(__file__).resolve().parents[2]


def _offline_env(**extra: str) -> dict[str, str]:
    """No AWS credentials anywhere botocore looks (and no instance metadata to wait for)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(
        AWS_SHARED_CREDENTIALS_FILE=os.devnull,
        AWS_CONFIG_FILE=os.devnull,
        AWS_EC2_METADATA_DISABLED="true",
        OPTIGATE_DEBUG="",
    )
    env.update(extra)
    return env


def optigate(*args: str, env: dict[str, str] | None = None, timeout: float = 900) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "optigate.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=REPO,
        env=env or _offline_env(),
    )


def one_line(result: subprocess.CompletedProcess, code: int) -> str:
    """The single stderr line of a failure that exited with `code`."""
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.returncode == code, (result.returncode, result.stderr)
    assert "Traceback" not in result.stderr
    assert len(lines) == 1, result.stderr
    return lines[0]


def _strict_json(text: str):
    def refuse(constant: str):
        raise ValueError(f"not JSON: {constant}")

    return json.loads(text, parse_constant=refuse)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_bench_against_a_port_with_nothing_listening_keeps_its_json_and_exits_2(tmp_path):
    out = tmp_path / "refused.json"
    url = f"http://127.0.0.1:{_free_port()}"
    result = optigate(
        "bench", "--endpoint", "x", "--endpoint-url", url, "--concurrency", "1,4", "--requests", "3", "--json", str(out)
    )
    line = one_line(result, 2)
    assert "every request failed (ConnectionError 3 of 3" in line and "Connection refused" in line
    assert str(out) in line  # says where the measured levels are
    data = _strict_json(out.read_text())
    (run,) = data["runs"]  # nothing reached the server at c=1: c=4 was not run, and the JSON says why
    assert run["errors"] == {"ConnectionError": 3} and run["successful_requests"] == 0
    assert "c=4" not in json.dumps(data["runs"]) and "levels after it were not run" in data["error"]


@pytest.mark.slow
def test_bench_exits_2_when_every_request_was_throttled(tmp_path):
    out = tmp_path / "throttled.json"
    with emulator_process({"default": {"ttft_ms": 5, "itl_ms": 1, "throttle_rate": 1.0}}) as url:
        result = optigate(
            "bench",
            "--endpoint",
            "x",
            "--endpoint-url",
            url,
            "--concurrency",
            "2",
            "--requests",
            "6",
            "--json",
            str(out),
        )
    line = one_line(result, 2)
    assert "ThrottlingException 6 of 6" in line and "lower --concurrency" in line
    assert _strict_json(out.read_text())["runs"][0]["errors"] == {"ThrottlingException": 6}


def test_bench_without_endpoint_url_or_credentials_cannot_resolve_and_exits_3():
    line = one_line(optigate("bench", "--endpoint", "chat-dev", "--requests", "2"), 3)
    assert "no AWS credentials" in line and "--endpoint-url" in line


def test_bench_without_endpoint_url_to_a_host_that_does_not_resolve_exits_2():
    """socket.gaierror: the real runtime's host name of a region that does not exist."""
    env = _offline_env(AWS_ACCESS_KEY_ID="AKIDEXAMPLE", AWS_SECRET_ACCESS_KEY="secret")
    result = optigate(
        "bench", "--endpoint", "x", "--region", "nowhere-9", "--concurrency", "1", "--requests", "2", env=env
    )
    line = one_line(result, 2)
    assert "ConnectionError 2 of 2" in line and "runtime.sagemaker.nowhere-9.amazonaws.com" in line


def test_open_loop_without_rate_is_a_usage_error():
    line = one_line(optigate("bench", "--endpoint", "x", "--endpoint-url", "http://127.0.0.1:9", "--mode", "open"), 2)
    assert "--mode open needs --rate" in line


def test_bench_without_endpoint_is_a_usage_error():
    assert "--endpoint is required" in one_line(optigate("bench", "--endpoint-url", "http://127.0.0.1:9"), 2)


def test_an_unknown_option_is_one_line_and_exit_2():
    line = one_line(optigate("bench", "--endpoint", "x", "--levels"), 2)
    assert "unrecognized arguments: --levels" in line and "--help" in line


def test_emulate_on_a_port_in_use_exits_2():
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        line = one_line(optigate("emulate", "--port", str(port), timeout=900), 2)
    assert f"port {port} on 127.0.0.1 is in use" in line and "--port" in line


def test_emulate_with_a_missing_config_file_exits_2(tmp_path):
    line = one_line(optigate("emulate", "--port", "0", "--config", str(tmp_path / "nope.yaml")), 2)
    assert "nope.yaml: no such file" in line


def test_emulate_with_an_unknown_setting_exits_2(tmp_path):
    config = tmp_path / "emulator.yaml"
    config.write_text("default:\n  ttft: 150\n")
    line = one_line(optigate("emulate", "--port", "0", "--config", str(config)), 2)
    assert "unknown emulator setting(s) ['ttft']" in line


def test_compare_with_a_missing_file_exits_2(tmp_path):
    (tmp_path / "b.json").write_text(json.dumps({"runs": []}))
    line = one_line(optigate("bench", "compare", str(tmp_path / "missing.json"), str(tmp_path / "b.json")), 2)
    assert "missing.json: no such file" in line and "optigate bench --json" in line


def test_compare_of_an_empty_object_exits_2(tmp_path):
    empty = tmp_path / "empty.json"
    empty.write_text("{}")
    line = one_line(optigate("bench", "compare", str(empty), str(empty)), 2)
    assert "runs: expected a `runs` list" in line


def test_compare_of_runs_without_samples_exits_2(tmp_path):
    stripped = tmp_path / "stripped.json"
    stripped.write_text(json.dumps({"runs": [{"concurrency": 1, "requests": 3, "errors": {}}]}))
    line = one_line(optigate("bench", "compare", str(stripped), str(stripped)), 2)
    assert "runs[0].samples: expected the run's raw samples" in line


def test_compare_writes_strict_json_and_passes_nothing_when_every_request_failed(tmp_path):
    """Both sides failed every request: no figure exists, the JSON says null, never NaN, and the compare is
    inconclusive (3): nothing measured is never a pass."""
    failed = tmp_path / "failed.json"
    url = f"http://127.0.0.1:{_free_port()}"
    optigate(
        "bench",
        "--endpoint",
        "x",
        "--endpoint-url",
        url,
        "--concurrency",
        "1",
        "--requests",
        "3",
        "--json",
        str(failed),
    )
    out = tmp_path / "deltas.json"
    result = optigate("bench", "compare", str(failed), str(failed), "--json", str(out))
    assert result.returncode == 3 and "Traceback" not in result.stderr, result.stderr
    assert "neither side completed a request at c=1" in result.stdout
    assert _strict_json(out.read_text())["exit_code"] == 3
    deltas = _strict_json(out.read_text())["deltas"]
    assert deltas and all(d["delta"] is None and d["baseline"] is None for d in deltas)


def test_resolve_without_credentials_cannot_resolve_and_exits_3(tmp_path):
    line = one_line(optigate("resolve", "--env", "dev", "--config", str(CONFIG), "--out", str(tmp_path)), 3)
    assert "no AWS credentials" in line and "dev" in line
    assert not list(tmp_path.iterdir())  # no lock written


def test_resolve_of_an_unknown_environment_lists_the_known_ones(tmp_path):
    line = one_line(optigate("resolve", "--env", "qa", "--config", str(CONFIG), "--out", str(tmp_path)), 2)
    assert "--env qa" in line and "known: dev, staging, prod" in line


def test_rehearse_an_unknown_team_says_so_without_quotes():
    line = one_line(optigate("rehearse", "--team", "chatt", "--config", str(CONFIG)), 2)
    assert line.startswith("✗ --team chatt: no file in"), line
    assert "defines team 'chatt'; did you mean 'chat'? known: chat, research, support" in line
    assert '"' not in line


@pytest.mark.slow
def test_rehearse_an_unknown_environment_lists_the_known_ones():
    line = one_line(optigate("rehearse", "--team", "chat", "--env", "qa", "--config", str(CONFIG)), 2)
    assert "no environment 'qa'; known: dev, staging, prod" in line and '"' not in line


def _without(module: str, *args: str) -> subprocess.CompletedProcess:
    """`optigate *args` in a fresh process where `module` cannot be imported, as if it were not installed."""
    code = (
        "import runpy, sys\n"
        f"sys.modules[{module!r}] = None  # import raises ModuleNotFoundError, as for a package not installed\n"
        f"sys.argv = ['optigate', *{list(args)!r}]\n"
        "runpy.run_module('optigate.cli', run_name='__main__')\n"
    )
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=900, cwd=REPO, env=_offline_env()
    )


def test_rehearse_without_the_rehearse_extra_names_it_and_exits_2():
    result = _without("moto", "rehearse", "--team", "chat", "--config", str(CONFIG))
    line = one_line(result, 2)
    assert line == "✗ optigate rehearse needs the rehearse extra (moto is missing): pip install 'optigate[rehearse]'"
    assert result.stdout == ""  # nothing synthesized, nothing rehearsed


def test_rehearse_with_a_module_of_optigate_missing_is_not_blamed_on_the_extra():
    result = _without("optigate.rehearse.rehearsal", "rehearse", "--team", "chat", "--config", str(CONFIG))
    line = one_line(result, 2)
    assert "unexpected ModuleNotFoundError" in line and "optigate[rehearse]" not in line


def test_summary_answers_about_the_env_it_was_given():
    line = one_line(optigate("summary", "--env", "production", "--config", str(CONFIG)), 2)
    assert "--env production" in line and "known: dev, staging, prod" in line and "-c env" not in line


def test_plan_without_max_model_len_derives_one_instead_of_printing_a_cost_then_refusing():
    result = optigate("plan", "--model", "llama-3.1-8b", "--instance", "ml.g6.2xlarge")
    assert result.returncode == 0 and result.stderr == "", result.stderr
    assert "max_model_len=30,720: the longest the KV cache holds (the model allows 131,072)" in result.stdout
    assert "cost per million output tokens" in result.stdout


def test_plan_that_does_not_fit_refuses_before_any_cost():
    result = optigate("plan", "--model", "llama-3.1-8b", "--instance", "ml.g6.2xlarge", "--max-model-len", "131072")
    line = one_line(result, 1)
    assert "KV cache on ml.g6.2xlarge holds" in line and "Try:" in line
    assert "cost per million" not in result.stdout and result.stdout.strip() == ""


def test_debug_shows_the_traceback_of_a_failure(tmp_path):
    config = tmp_path / "broken.yaml"
    config.write_text("default: [unclosed\n")
    env = _offline_env(OPTIGATE_DEBUG="1")
    result = optigate("emulate", "--port", "0", "--config", str(config), env=env)
    assert result.returncode == 2
    assert "Traceback" in result.stderr and "yaml" in result.stderr
    assert result.stderr.strip().splitlines()[-1].startswith("✗ emulate --config")


def test_an_unexpected_error_is_one_line_and_debug_raises_it(monkeypatch, capsys):
    from optigate.cli import emulate_command, main

    def broken(args):
        raise RuntimeError("something\nbroke")

    monkeypatch.setattr(emulate_command, "cmd_emulate", broken)
    monkeypatch.setenv("OPTIGATE_DEBUG", "")
    assert main(["emulate", "--port", "0"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "unexpected RuntimeError: something broke" in err and "OPTIGATE_DEBUG=1" in err
    monkeypatch.setenv("OPTIGATE_DEBUG", "1")
    with pytest.raises(RuntimeError, match="something"):
        main(["emulate", "--port", "0"])


def test_plan_of_a_config_json_the_planner_does_not_model_exits_2(tmp_path):
    """A DeepSeek-style (MLA) config.json is refused by the planner: one line, not an 'unexpected' bug."""
    config = tmp_path / "config.json"
    config.write_text(
        json.dumps(
            {"num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4, "vocab_size": 10, "kv_lora_rank": 512}
        )
    )
    line = one_line(optigate("plan", "--model", str(config), "--instance", "ml.p5.48xlarge"), 2)
    assert "MLA attention" in line and "not modelled" in line and "bug" not in line


def test_emulate_capture_dir_reaches_the_emulator(monkeypatch, tmp_path):
    """`optigate emulate --capture-dir D` hands D to the emulator, which writes SageMaker's data capture there."""
    from optigate.cli import main
    from optigate.emulator import sagemaker_runtime

    served = []
    monkeypatch.setattr(sagemaker_runtime, "serve", lambda config, **_: served.append(config))
    assert main(["emulate", "--port", "0", "--capture-dir", str(tmp_path)]) == 0
    assert [config.capture_dir for config in served] == [str(tmp_path)]


@pytest.mark.slow
def test_a_reader_that_goes_away_ends_the_command_quietly_as_sigpipe_would():
    """`optigate summary | head`: the closed pipe is no bug report and no verdict (1), but 141 as from SIGPIPE."""
    read_end, write_end = os.pipe()
    os.close(read_end)  # every write now fails with EPIPE
    try:
        result = subprocess.run(
            [sys.executable, "-m", "optigate.cli", "summary", "--config", str(CONFIG)],
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            cwd=REPO,
            env=_offline_env(),
            timeout=900,
        )
    finally:
        os.close(write_end)
    assert (result.returncode, result.stderr) == (141, "")
