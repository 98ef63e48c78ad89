"""How long does the whole app take to synthesize, against a bare CDK app with the same stacks?

The app is run as `cdk synth` runs it (`python app.py` with the environment the installed CDK CLI
gives its app: CDK_CONTEXT_JSON with cdk.json's context and the CLI's defaults, CDK_OUTDIR), for
every team in every environment and, with `-c pipeline=true`, for the promotion pipeline. The bare
app is generated: the same number of stacks, with the same names and environments, each holding
one trivial resource (AWS::CloudFormation::WaitConditionHandle), same CDK, same context. Runs
alternate between the two (the machine is shared: medians of several runs). The target is a ratio
of at most 2.0; the script also prints anything the app wrote to stderr besides its own progress
lines (stray output).

`--anatomy` adds the same comparison with CDK's built-in CloudFormation validation turned off on
both sides (CDK_VALIDATION=false): aws-cdk-lib 2.275 runs a WebAssembly validation engine on every
synth, and its start-up is most of what the bare app costs, so this row shows what the app itself
adds over CDK.

    python benchmarks/synth_time.py [--runs 3] [--no-pipeline] [--anatomy]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TARGET_RATIO = 2.0
ENV_DUMP = """import json, os, sys
json.dump({k: v for k, v in os.environ.items() if k.startswith("CDK_")}, open(sys.argv[1], "w"))
"""
BARE_APP = """import json, sys
import aws_cdk as cdk

app = cdk.App()
for name, account, region in json.loads(sys.argv[1]):
    stack = cdk.Stack(app, name, env=cdk.Environment(account=account, region=region))
    cdk.CfnWaitConditionHandle(stack, "Trivial")
app.synth()
"""


def cli_environment(work: Path, context: list[str]) -> dict[str, str]:
    """The CDK_* variables the installed CDK CLI sets for its app (cdk.json context included)."""
    dump = work / "env.json"
    script = work / "dump_env.py"
    script.write_text(ENV_DUMP)
    # The CLI then fails (the dumper writes no cloud assembly); only the environment matters.
    subprocess.run(
        ["cdk", "synth", "--app", f"{sys.executable} {script} {dump}", "-o", str(work / "dump.out"), "-q", *context],
        cwd=ROOT,
        capture_output=True,
        timeout=300,
    )
    if not dump.exists():
        raise SystemExit("the CDK CLI did not run the app: is node_modules/.bin on PATH (. scripts/setup.sh)?")
    found = json.loads(dump.read_text())
    return {k: v for k, v in found.items() if k not in ("CDK_OUTDIR", "CDK_ERROR_FILE", "CDK_PERF_COUNTERS_FILE")}


def synth(command: list[str], cli_env: dict[str, str], outdir: Path) -> tuple[float, list[str]]:
    """Wall time of one synth into a fresh outdir, and the stderr lines that are not progress lines."""
    shutil.rmtree(outdir, ignore_errors=True)
    env = {**os.environ, **cli_env, "CDK_OUTDIR": str(outdir)}
    started = time.perf_counter()
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    elapsed = time.perf_counter() - started
    if done.returncode != 0 or not (outdir / "manifest.json").exists():
        raise SystemExit(f"{' '.join(command)} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    stray = [line for line in done.stderr.splitlines() if line.strip() and not line.startswith("optigate: ")]
    return elapsed, stray


def stacks_of(assembly: Path) -> list[tuple[str, str, str]]:
    """(stack name, account, region) of every stack in the cloud assembly, nested stages included."""
    found = []
    manifest = json.loads((assembly / "manifest.json").read_text())
    for artifact in manifest.get("artifacts", {}).values():
        if artifact["type"] == "aws:cloudformation:stack":
            _, _, where = artifact["environment"].partition("aws://")
            account, _, region = where.partition("/")
            found.append((artifact.get("properties", {}).get("stackName", artifact["displayName"]), account, region))
        elif artifact["type"] == "cdk:cloud-assembly":
            found += stacks_of(assembly / artifact["properties"]["directoryName"])
    return found


def compare(label: str, context: list[str], runs: int, work: Path, extra_env: dict[str, str] | None = None) -> float:
    cli_env = {**cli_environment(work, context), **(extra_env or {})}
    app_out, bare_out = work / "app.out", work / "bare.out"
    app_times, stray = [], []
    elapsed, stray = synth([sys.executable, "app.py"], cli_env, app_out)  # warm-up (file caches), not counted
    stacks = stacks_of(app_out)
    bare_script = work / "bare_app.py"
    bare_script.write_text(BARE_APP)
    bare_command = [sys.executable, str(bare_script), json.dumps(stacks)]
    synth(bare_command, cli_env, bare_out)  # warm-up
    bare_times = []
    for _ in range(runs):
        elapsed, stray = synth([sys.executable, "app.py"], cli_env, app_out)
        app_times.append(elapsed)
        bare_times.append(synth(bare_command, cli_env, bare_out)[0])
    app, bare = statistics.median(app_times), statistics.median(bare_times)
    ratio = app / bare
    print(
        f"{label:<24} {len(stacks):>6} {app:>9.2f} {bare:>9.2f} {ratio:>6.2f}  "
        f"{'met' if ratio <= TARGET_RATIO else 'NOT met'}  "
        f"(app {', '.join(f'{t:.1f}' for t in app_times)}; bare {', '.join(f'{t:.1f}' for t in bare_times)})"
    )
    for line in stray:
        print(f"  stray output: {line}")
    return ratio


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3, help="timed runs of each app (default: 3; median)")
    parser.add_argument("--no-pipeline", action="store_true", help="skip the `-c pipeline=true` synth")
    parser.add_argument(
        "--anatomy",
        action="store_true",
        help="also compare with CDK's built-in template validation off on both sides (default: off)",
    )
    args = parser.parse_args()
    if shutil.which("cdk") is None:
        raise SystemExit("no `cdk` on PATH: run `. scripts/setup.sh` first")
    node = subprocess.run(["node", "--version"], capture_output=True, text=True).stdout.strip()
    print(f"node {node}, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}; median of {args.runs} runs each")
    print(f"{'synth':<24} {'stacks':>6} {'app s':>9} {'bare s':>9} {'ratio':>6}  target <= {TARGET_RATIO}")
    variants = [("whole app", [])] + ([] if args.no_pipeline else [("-c pipeline=true", ["-c", "pipeline=true"])])
    worst = 0.0
    with tempfile.TemporaryDirectory(prefix="synth-time-") as tmp:
        for label, context in variants:
            work = Path(tmp, label.replace(" ", "_").replace("=", "_"))
            work.mkdir()
            worst = max(worst, compare(label, context, args.runs, work))
        if args.anatomy:
            work = Path(tmp, "no_validation")
            work.mkdir()
            # Not part of the target: shows what the app adds once CDK's own fixed cost is taken out.
            compare("whole app, no CDK valid.", [], args.runs, work, {"CDK_VALIDATION": "false"})
    print(f"worst ratio {worst:.2f}; target <= {TARGET_RATIO}: {'met' if worst <= TARGET_RATIO else 'NOT met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
