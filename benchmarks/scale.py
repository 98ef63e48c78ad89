"""Scale as a measured property (issue 28): N teams synthesize, lint and fit AWS's quotas.

Generates N teams into a temporary config by cloning the example team files (chat, research, support as the test
suite keeps them in tests/fixtures/project, not the repository's config/: renamed `<kind>-NNN`, environments.yaml's
per-team settings cloned with them), then, each as `cdk synth`
runs the app (`python app.py`, CDK_CONTEXT_JSON, CDK_OUTDIR; cdk-nag fails the synth on any
unacknowledged finding):

- the whole app (every team in every environment), and one team alone with `-c team=`;
- every pipeline (`-c pipeline=true`: the platform's and one per team), and one team's pipeline alone;
- cfn-lint once over every template (errors only), and the cdk-nag report;
- template sizes, IAM policy sizes per role, pipeline stages and actions, and resources per account,
  each against the AWS quota that binds, with its headroom and the page that states it.

    python benchmarks/scale.py [--teams 10,200] [--keep DIR]
"""

from __future__ import annotations

import argparse
import collections
import copy
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
#: The example kinds cloned: the suite's own project (config/ is the user's, which may hold other teams).
EXAMPLE_CONFIG = ROOT / "tests" / "fixtures" / "project" / "config"
KINDS = ("chat", "research", "support")

IAM = "https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_iam-quotas.html"
CFN = "https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/cloudformation-limits.html"
CODEPIPELINE = "https://docs.aws.amazon.com/codepipeline/latest/userguide/limits.html"
CODEBUILD = "https://docs.aws.amazon.com/codebuild/latest/userguide/limits.html"
S3 = "https://docs.aws.amazon.com/AmazonS3/latest/userguide/BucketRestrictions.html"
KMS = "https://docs.aws.amazon.com/kms/latest/developerguide/resource-limits.html"
EVENTS = "https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-quota.html"

# (what, default quota, source): per template, per role, per pipeline, per account (and region).
TEMPLATE_BYTES = ("template body (S3 URL), bytes", 1_000_000, CFN)
TEMPLATE_RESOURCES = ("resources per template", 500, CFN)
ROLE_INLINE = ("inline policies per role, characters", 10_240, IAM)
MANAGED_POLICY = ("managed policy, characters", 6_144, IAM)
MANAGED_PER_ROLE = ("managed policies per role", 10, IAM)
STAGES = ("stages per pipeline", 50, CODEPIPELINE)
ACTIONS = ("actions per stage", 50, CODEPIPELINE)
ACCOUNT_QUOTAS = {
    "AWS::IAM::Role": ("IAM roles per account", 1_000, IAM),
    "AWS::IAM::ManagedPolicy": ("customer managed policies per account", 1_500, IAM),
    "AWS::CodePipeline::Pipeline": ("pipelines per region", 1_000, CODEPIPELINE),
    "AWS::CodeBuild::Project": ("build projects per region", 5_000, CODEBUILD),
    "AWS::S3::Bucket": ("general purpose buckets per account", 10_000, S3),
    "AWS::KMS::Key": ("customer managed KMS keys per region", 100_000, KMS),
    "AWS::Events::Rule": ("rules per event bus", 300, EVENTS),
    "stacks": ("CloudFormation stacks per region", 2_000, CFN),
}
# Quotas that AWS raises on request (Service Quotas), to the maximum the same page states.
ADJUSTABLE_TO = {"AWS::IAM::Role": 5_000, "AWS::IAM::ManagedPolicy": 5_000}


def say(text: str) -> None:
    print(text, flush=True)


def generate(config: Path, teams: int) -> list[str]:
    """N teams cloned from the example kinds into `config`; returns their names."""
    source = EXAMPLE_CONFIG
    (config / "teams").mkdir(parents=True)
    environments = yaml.safe_load((source / "environments.yaml").read_text())
    names = []
    for index in range(teams):
        kind = KINDS[index % len(KINDS)]
        name = f"{kind}-{index:03d}"
        text = (source / "teams" / f"{kind}.yaml").read_text()
        text = re.sub(rf"^team:\s*{kind}\s*$", f"team: {name}", text, count=1, flags=re.MULTILINE)
        (config / "teams" / f"{name}.yaml").write_text(text)
        names.append(name)
        for environment in environments["environments"]:
            settings = (environment.get("teams") or {}).get(kind)
            if settings is not None:
                environment.setdefault("_clones", {})[name] = copy.deepcopy(settings)  # no YAML aliases
    for environment in environments["environments"]:
        clones = environment.pop("_clones", {})
        if "teams" in environment:
            environment["teams"] = clones
    (config / "environments.yaml").write_text(yaml.safe_dump(environments, sort_keys=False))
    return names


def synth(config: Path, outdir: Path, context: dict[str, str], what: str) -> float:
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "OPTIGATE_CONFIG": str(config),
        "CDK_OUTDIR": str(outdir),
        "CDK_CONTEXT_JSON": json.dumps(context),
    }
    say(f"  synthesizing {what}…")
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "app.py"], cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{what}: synth failed ({done.returncode}); its last lines:\n{done.stderr[-3000:]}")
    say(f"  {what}: {elapsed:.1f} s")
    return elapsed


def stacks(assembly: Path) -> list[tuple[str, str, dict]]:
    """(stack name, account, template) of every stack, nested stage assemblies included."""
    found = []
    manifest = json.loads((assembly / "manifest.json").read_text())
    for artifact_id, artifact in manifest.get("artifacts", {}).items():
        if artifact["type"] == "aws:cloudformation:stack":
            account = artifact["environment"].removeprefix("aws://").split("/")[0]
            template = assembly / artifact["properties"]["templateFile"]
            name = artifact["properties"].get("stackName", artifact_id)
            found.append((name, account, json.loads(template.read_text())))
        elif artifact["type"] == "cdk:cloud-assembly":
            found += stacks(assembly / artifact["properties"]["directoryName"])
    return found


def cfn_lint(paths: list[Path], regions: list[str]) -> int:
    say(f"  cfn-lint over {len(paths)} templates…")
    done = subprocess.run(
        [sys.executable, "-m", "cfnlint", "--format", "parseable", "--regions", *regions, "--", *map(str, paths)],
        capture_output=True,
        text=True,
        check=False,
    )
    errors = [line for line in done.stdout.splitlines() if re.search(r":E\d{4}:", line)]
    for line in errors[:10]:
        say(f"    {line}")
    return len(errors)


def nag_findings(assembly: Path) -> int:
    report = json.loads((assembly / "validation-report.json").read_text())
    return sum(len(plugin.get("violations", [])) for plugin in report.get("pluginReports", []))


def row(what: tuple[str, int, str], used: float, where: str = "") -> None:
    name, quota, source = what
    headroom = 1 - used / quota
    flag = "" if headroom >= 0.2 else ("  <- within 20 %" if headroom >= 0 else "  <- OVER")
    say(f"  {name:<42} {used:>10,.0f} / {quota:>9,}  headroom {headroom:>6.1%}{flag}  {where}")
    say(f"  {'':<42} source: {source}")


def policy_sizes(template: dict) -> tuple[int, int, int]:
    """Largest inline policy total per role, largest managed policy, most managed policies on one role
    (characters without whitespace, as IAM counts them)."""
    inline: dict[str, int] = collections.Counter()
    attached: dict[str, int] = collections.Counter()
    largest_managed = 0
    resources = template.get("Resources", {})
    for resource in resources.values():
        properties = resource.get("Properties", {})
        size = len(re.sub(r"\s", "", json.dumps(properties.get("PolicyDocument", {}))))
        if resource["Type"] == "AWS::IAM::Policy":
            for role in properties.get("Roles", []):
                inline[json.dumps(role)] += size
        elif resource["Type"] == "AWS::IAM::ManagedPolicy":
            largest_managed = max(largest_managed, size)
            for role in properties.get("Roles", []):
                attached[json.dumps(role)] += 1
    for resource in resources.values():
        if resource["Type"] == "AWS::IAM::Role":
            attached_here = len(resource.get("Properties", {}).get("ManagedPolicyArns", []))
            attached["max"] = max(attached["max"], attached_here)
    return max(inline.values(), default=0), largest_managed, max(attached.values(), default=0)


def teams_within(kind: str, used: int, teams: int) -> None:
    """What the per-team rate of an account quota means for a platform: teams it holds by default, and raised."""
    _, quota, _ = ACCOUNT_QUOTAS[kind]
    per_team = used / teams
    if per_team <= 0:
        return
    raised = ADJUSTABLE_TO.get(kind)
    line = f"  {'':<42} {per_team:.1f} per team: {int(quota / per_team):,} teams per account at the default quota"
    if raised:
        line += f", {int(raised / per_team):,} raised to {raised:,} (Service Quotas)"
    say(line)


def report(found: list[tuple[str, str, dict]], label: str, teams: int) -> None:
    say(f"\n{label}: {len(found)} stacks")
    biggest = max(found, key=lambda s: len(json.dumps(s[2])))
    row(TEMPLATE_BYTES, len(json.dumps(biggest[2])), biggest[0])
    most = max(found, key=lambda s: len(s[2].get("Resources", {})))
    row(TEMPLATE_RESOURCES, len(most[2]["Resources"]), most[0])
    sizes = [(policy_sizes(template), name) for name, _, template in found]
    row(ROLE_INLINE, *max(((s[0], n) for s, n in sizes), key=lambda x: x[0]))
    row(MANAGED_POLICY, *max(((s[1], n) for s, n in sizes), key=lambda x: x[0]))
    row(MANAGED_PER_ROLE, *max(((s[2], n) for s, n in sizes), key=lambda x: x[0]))
    by_account: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for _, account, template in found:
        by_account[account]["stacks"] += 1
        for resource in template.get("Resources", {}).values():
            by_account[account][resource["Type"]] += 1
    for account, counts in sorted(by_account.items()):
        say(f" account {account}:")
        for kind, what in ACCOUNT_QUOTAS.items():
            if counts[kind]:
                row(what, counts[kind], kind)
                teams_within(kind, counts[kind], teams)


def pipelines_report(found: list[tuple[str, str, dict]]) -> None:
    worst_stages, worst_actions = (0, ""), (0, "")
    for name, _, template in found:
        for resource in template.get("Resources", {}).values():
            if resource["Type"] == "AWS::CodePipeline::Pipeline":
                stages = resource["Properties"]["Stages"]
                worst_stages = max(worst_stages, (len(stages), name))
                for stage in stages:
                    worst_actions = max(worst_actions, (len(stage["Actions"]), f"{name}/{stage['Name']}"))
    row(STAGES, worst_stages[0], worst_stages[1])
    row(ACTIONS, worst_actions[0], worst_actions[1])


def growth(work: Path, sizes: list[int]) -> list[tuple[int, int, float, float]]:
    """Synth time of the whole app and of one team alone at each smaller size: (teams, stacks, whole, one)."""
    rows = []
    for teams in sizes:
        say(f"{teams} teams (for the growth of synth time):")
        config = work / f"config-{teams}"
        one = generate(config, teams)[0]
        whole = synth(config, work / f"app-{teams}.out", {}, f"the whole app of {teams} teams")
        alone = synth(config, work / f"one-{teams}.out", {"team": one}, f"the app of {one} alone")
        rows.append((teams, len(stacks(work / f"app-{teams}.out")), whole, alone))
        shutil.rmtree(work / f"app-{teams}.out", ignore_errors=True)
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--teams",
        default="10,200",
        help="teams to generate; with several (comma-separated), the smaller ones time the synth only, for its "
        "growth, and the largest gets every check (default: 10,200)",
    )
    parser.add_argument("--keep", type=Path, help="keep the config and assemblies in this folder (default: a temp dir)")
    args = parser.parse_args()
    sizes = sorted({int(size) for size in str(args.teams).split(",") if size.strip()})
    args.teams = sizes[-1]
    work = args.keep or Path(tempfile.mkdtemp(prefix="optigate-scale-"))
    if args.keep:
        shutil.rmtree(work, ignore_errors=True)
    say(
        f"teams {', '.join(map(str, sizes))} × 3 environments in {work}; "
        f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}"
    )
    grown = growth(work, sizes[:-1])
    config = work / "config"
    say(f"{args.teams} teams (every check):")
    names = generate(config, args.teams)
    one = names[0]
    timings = {
        "app (every team, every environment)": synth(config, work / "app.out", {}, "the whole app"),
        f"app, one team (-c team={one})": synth(config, work / "one.out", {"team": one}, f"the app of {one} alone"),
        "pipelines (platform + every team)": synth(config, work / "pipes.out", {"pipeline": "true"}, "every pipeline"),
        f"one team's pipeline (-c team={one})": synth(
            config, work / "onepipe.out", {"pipeline": "true", "team": one}, f"the pipeline of {one} alone"
        ),
    }
    app, pipes = stacks(work / "app.out"), stacks(work / "pipes.out")
    environments = yaml.safe_load((config / "environments.yaml").read_text())
    regions = sorted({environments["pipeline"]["region"], *(e["region"] for e in environments["environments"])})
    templates = sorted({*(work / "app.out").glob("*.template.json"), *(work / "pipes.out").glob("**/*.template.json")})
    lint_errors = cfn_lint(templates, regions)
    findings = nag_findings(work / "app.out") + nag_findings(work / "pipes.out")

    say(f"\nsynth times, {args.teams} teams ({len(app)} team stacks):")
    for what, seconds in timings.items():
        say(f"  {what:<44} {seconds:>7.1f} s")
    say(f"  {'per team stack (whole app)':<44} {timings['app (every team, every environment)'] / len(app):>7.2f} s")
    grown.append(
        (
            args.teams,
            len(app),
            timings["app (every team, every environment)"],
            timings[f"app, one team (-c team={one})"],
        )
    )
    say("growth: teams, team stacks, whole app, per stack, one team alone")
    for teams, count, whole, alone in grown:
        say(f"  {teams:>5} {count:>6} {whole:>9.1f} s {whole / count:>7.2f} s {alone:>8.1f} s")
    say(f"cfn-lint errors: {lint_errors}; cdk-nag findings: {findings} (an unacknowledged one fails the synth)")
    report(app, "the app (environment accounts)", args.teams)
    report(pipes, "the pipelines (tools account)", args.teams)
    pipelines_report(pipes)
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if lint_errors or findings else 0


if __name__ == "__main__":
    sys.exit(main())
