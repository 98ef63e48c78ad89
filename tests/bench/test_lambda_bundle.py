"""The benchmark Lambdas ship the benchmark client's core whole (optigate/bench/core, every module of the folder:
optigate.constructs.assets.BENCH_CORE): each handler must import from its staged folder alone, or the deployed
function fails at its first invocation."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from optigate.constructs.assets import _lambda_files, stage


@pytest.mark.parametrize("handler", ["benchmark", "benchmark_merge"])
def test_handler_imports_from_its_staged_bundle_alone(handler):
    staged = stage(f"test-{handler}", _lambda_files(handler))
    # Only the bundle on the path (and the interpreter's site-packages: boto3 is in the Lambda runtime):
    # an optigate module missing from the bundle is an ImportError here.
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    env["PYTHONPATH"] = str(staged)
    probe = f"import handler, optigate; assert optigate.__file__.startswith({str(staged)!r}), optigate.__file__"
    result = subprocess.run(
        [sys.executable, "-c", probe], cwd=staged, env=env, capture_output=True, text=True, timeout=900
    )
    assert result.returncode == 0, result.stderr[-2000:]
