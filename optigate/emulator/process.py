"""Run the SageMaker-runtime emulator (optigate.emulator.sagemaker_runtime) in its own process (its own core and event
loop), for tests, demos and benchmarks: the measured client and the emulated server must not share one event loop."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any


@contextmanager
def emulator_process(config: dict[str, Any], *, startup_timeout: float = 120.0) -> Iterator[str]:
    """Start `optigate emulate` on a free loopback port; yields its URL; stops it on exit."""
    with tempfile.TemporaryDirectory() as folder:
        config_path = Path(folder, "emulator.json")
        config_path.write_text(json.dumps(config))
        port_file, log_path = Path(folder, "port"), Path(folder, "emulator.log")
        # A file, never a pipe nobody reads while the emulator runs: a full pipe would block the emulator's
        # event loop on its next log line, and every stream it serves with it.
        with log_path.open("wb") as log:
            process = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "optigate.cli",
                    "emulate",
                    "--port",
                    "0",
                    "--config",
                    str(config_path),
                    "--port-file",
                    str(port_file),
                ],
                stdout=subprocess.DEVNULL,
                stderr=log,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )
            try:
                deadline = time.monotonic() + startup_timeout
                while not (port_file.exists() and port_file.read_text().strip()):
                    if process.poll() is not None:
                        raise RuntimeError(f"emulator exited: {log_path.read_text(errors='replace')[-4000:]}")
                    if time.monotonic() > deadline:
                        raise TimeoutError("emulator did not start")
                    time.sleep(0.05)
                yield f"http://127.0.0.1:{int(port_file.read_text())}"
            finally:
                process.terminate()
                try:
                    process.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()


def fetch_trace(url: str, clear: bool = False) -> dict[str, Any]:
    with urllib.request.urlopen(f"{url}/_emulator/trace", timeout=30) as response:
        trace = json.loads(response.read())
    if clear:
        request = urllib.request.Request(f"{url}/_emulator/trace", method="DELETE")
        urllib.request.urlopen(request, timeout=30).close()
    return trace
