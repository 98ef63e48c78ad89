"""optigate as users install it: a wheel, outside any checkout, synthesizes a config folder.

Nothing in the package may read files above itself (Lambda handlers, Dockerfiles and requirements
ship as package data). The wheel is built offline from this checkout and installed into a folder
of its own; the synth runs from a copy of the sample config in an empty directory, with the wheel's
optigate shadowing the checkout's editable install (asserted).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

SYNTH = """
import json, sys
from pathlib import Path
import optigate
from optigate.stacks.app import build_app

app = build_app("config", outdir="cdk.out")
app.synth()
templates = sorted(p.name for p in Path("cdk.out").glob("*.template.json"))
print(json.dumps({"package": optigate.__file__, "templates": templates}))
"""


def test_an_installed_wheel_synthesizes_a_config_outside_the_checkout(tmp_path):
    wheels, site, work = tmp_path / "wheels", tmp_path / "site", tmp_path / "work"
    build = [
        sys.executable,
        "-m",
        "pip",
        "wheel",
        "--quiet",
        "--no-deps",
        "--no-build-isolation",
        "-w",
        str(wheels),
        str(REPO),
    ]
    subprocess.run(build, check=True, capture_output=True, timeout=300)
    (wheel,) = wheels.glob("optigate-*.whl")
    install = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(site), str(wheel)]
    subprocess.run(install, check=True, capture_output=True, timeout=300)
    assert (site / "optigate" / "containers" / "gate-decide" / "Dockerfile").exists()
    assert (site / "optigate" / "lambdas" / "benchmark" / "handler.py").exists()

    work.mkdir()
    shutil.copytree(REPO / "config", work / "config", ignore=shutil.ignore_patterns("locks"))
    environment = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path),
        "PYTHONPATH": str(site),
        "AWS_EC2_METADATA_DISABLED": "true",
    }
    result = subprocess.run(
        [sys.executable, "-c", SYNTH], cwd=work, env=environment, capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert Path(report["package"]).is_relative_to(site)  # the wheel's optigate, not the checkout's
    assert len(report["templates"]) == 9
    assets = json.loads((work / "cdk.out" / "optigate-dev-chat.assets.json").read_text())
    assert len(assets["dockerImages"]) == 2 and assets["files"]  # image contexts and Lambda code staged
