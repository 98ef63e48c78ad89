#!/usr/bin/env python3
"""Show that a refactoring kept behaviour: the synthesized templates (example app and pipeline) and the
outputs of the CLI commands the README shows, at an earlier commit and now.

    python scripts/same_behaviour.py --against b14ea88      # exit 0: the same; 1: differences, listed
    python scripts/same_behaviour.py --against b14ea88 --keep /tmp/same   # keeps before/ for --before

Run it from the checkout to compare (the working tree there is "after").

Each side runs in its own checkout (the earlier one in a temporary `git worktree`) with this venv.
What is masked, and why:
- asset hashes (64 hex digits, and the publishing destinations named after them): they hash the package's
  source, which a refactoring changes;
- IAM policy documents are compared as the set of grants they make, one (effect, action, resource,
  condition) each: moving a grant beside the task that needs it regroups the statements (CDK's
  minimizePolicies merges them) without changing what any role may do;
- cdk-nag acknowledgements are compared as a set per resource, for the same reason.
Everything else must be equal, key for key.
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
#: An asset's hash, and the publishing destination named after it (`<hash>:<account>-<region>-<8 hex of the hash>`).
ASSET_HASH = re.compile(r"[0-9a-f]{64}(:\d{12}-[a-z0-9-]+?-)?(?(1)[0-9a-f]{8})")
#: The README's commands that print without AWS (resolve needs an account, schema writes files, and advise
#: --team prints the same blocks as the per-team plan for the example config).
COMMANDS: tuple[tuple[str, ...], ...] = (
    ("validate", "config"),
    *(("plan", f"config/teams/{team}.yaml") for team in ("chat", "research", "support")),
    ("plan", "--model", "llama-3.1-8b", "--instance", "ml.g6.2xlarge", "--kv-cache-dtype", "fp8",
     "--max-model-len", "8192", "--json"),
    ("plan", "--model", "llama-3.1-8b", "--compare", "--max-model-len", "8192", "--tpot-ms", "30"),
    *(("advise", "--team", team) for team in ("chat", "research", "support")),
    ("summary",),
    ("summary", "--env", "prod"),
    ("schema", "--check"),
)  # fmt: skip


def _grants(document: dict[str, Any]) -> list[list[Any]]:
    """An IAM policy document as the sorted set of grants it makes."""
    grants = set()
    for statement in document.get("Statement", []):
        actions = statement.get("Action", [])
        resources = statement.get("Resource", ["<none>"])
        for action in actions if isinstance(actions, list) else [actions]:
            for resource in resources if isinstance(resources, list) else [resources]:
                grants.add(
                    json.dumps([statement.get("Effect"), action, resource, statement.get("Condition")], sort_keys=True)
                )
    return [json.loads(grant) for grant in sorted(grants)]


def _normalized(value: Any) -> Any:
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            if key == "PolicyDocument" and isinstance(item, dict) and "Statement" in item:
                out[key] = {"Version": item.get("Version"), "Grants": _grants(item)}
            elif key == "cdk_nag" and isinstance(item, dict):
                rules = item.get("rules_to_suppress", [])
                out[key] = sorted(json.dumps(rule, sort_keys=True) for rule in rules)
            else:
                out[key] = _normalized(item)
        return out
    if isinstance(value, list):
        return [_normalized(item) for item in value]
    if isinstance(value, str):
        return ASSET_HASH.sub("<asset-hash>", value)
    return value


def snapshot(checkout: Path, out: Path) -> None:
    """Synthesize the example app and the pipeline in `checkout`, and record the CLI's outputs, into `out`."""
    out.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "AWS_EC2_METADATA_DISABLED": "true", "CDK_DISABLE_CLI_TELEMETRY": "true"}
    env["PATH"] = f"{ROOT / 'node_modules' / '.bin'}:{Path(sys.executable).parent}:{env['PATH']}"
    env["PYTHONPATH"] = str(checkout)  # this checkout's optigate, not the venv's editable install
    for label, extra in (("app", []), ("pipeline", ["-c", "pipeline=true"])):
        cdk_out = out / f"cdk.out.{label}"
        subprocess.run(
            ["cdk", "synth", "--quiet", "--no-notices", *extra, "--output", str(cdk_out)],
            cwd=checkout,
            env=env,
            check=True,
        )
        for template in sorted(cdk_out.rglob("*.template.json")):
            name = str(template.relative_to(cdk_out)).replace("/", "__")
            normalized = _normalized(json.loads(template.read_text()))
            (out / f"{label}__{name}").write_text(json.dumps(normalized, indent=1, sort_keys=True) + "\n")
        shutil.rmtree(cdk_out)
    for index, command in enumerate(COMMANDS):
        done = subprocess.run(
            [sys.executable, "-m", "optigate.cli", *command],
            cwd=checkout,
            env={**env, "COLUMNS": "100", "NO_COLOR": "1", "TERM": "dumb"},
            capture_output=True,
            text=True,
        )
        record = f"$ optigate {' '.join(command)}\nexit {done.returncode}\n"
        record += f"--- stdout\n{done.stdout}--- stderr\n{done.stderr}"
        (out / f"cli__{index:02d}.txt").write_text(record)


def compare(before: Path, after: Path) -> list[str]:
    """The differences between two snapshots, as unified diffs (empty: the same)."""
    problems = []
    names = sorted({p.name for p in before.iterdir()} | {p.name for p in after.iterdir()})
    for name in names:
        a, b = before / name, after / name
        if not a.exists() or not b.exists():
            problems.append(f"{name}: only {'after' if b.exists() else 'before'}")
            continue
        if a.read_text() != b.read_text():
            diff = difflib.unified_diff(
                a.read_text().splitlines(), b.read_text().splitlines(), f"before/{name}", f"after/{name}", lineterm=""
            )
            problems.append("\n".join(list(diff)[:80]))
    return problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--against", help="the earlier commit (for example the one before a refactor)")
    parser.add_argument("--before", type=Path, help="an earlier snapshot kept with --keep (instead of --against)")
    parser.add_argument("--keep", type=Path, help="keep the snapshots in this folder (before/ and after/)")
    args = parser.parse_args()
    if (args.against is None) == (args.before is None):
        parser.error("give one of --against REV or --before DIR")
    work = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="optigate-same-"))
    before = args.before or work / "before"
    if args.against:
        earlier = work / "checkout"
        if earlier.exists():
            subprocess.run(["git", "worktree", "remove", "--force", str(earlier)], cwd=ROOT, check=False)
        subprocess.run(["git", "worktree", "add", "--detach", str(earlier), args.against], cwd=ROOT, check=True)
        try:
            print(f"same_behaviour: snapshot of {args.against} ...", file=sys.stderr, flush=True)
            snapshot(earlier, before)
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(earlier)], cwd=ROOT, check=False)
    print("same_behaviour: snapshot of the working tree ...", file=sys.stderr, flush=True)
    after = work / "after"
    shutil.rmtree(after, ignore_errors=True)
    snapshot(Path.cwd().resolve(), after)
    problems = compare(before, after)
    count = len(list(after.iterdir()))
    for problem in problems:
        print(problem)
    print(f"same_behaviour: {count - len(problems)} of {count} outputs the same as {args.against or args.before}")
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
