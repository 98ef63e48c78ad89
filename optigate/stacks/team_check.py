"""The template checks of one team of a config repository (`optigate check`, once its files validate): its stacks in
every environment synthesized as `cdk synth -c team=<team>` builds them, cdk-nag AwsSolutions inside the synth, then
cfn-lint over each template in its environment's region. Each finding is one line of text (the caller names the
team's file before it); nothing is printed here.

cfn-lint is the `check` extra (`pip install 'optigate[check]'`): `cfn_lint_missing()` says so before anything runs.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class Template:
    stack: str
    file: Path
    region: str


@dataclass
class TeamSynth:
    """What one team's synth left: its templates, or the findings that failed it (each one line)."""

    templates: list[Template] = field(default_factory=list)
    findings: list[str] = field(default_factory=list)


def cfn_lint_missing() -> bool:
    return importlib.util.find_spec("cfnlint") is None


def synthesize_team(config_dir: str | Path, team: str, outdir: Path, locks_dir: str | Path | None = None) -> TeamSynth:
    """`team`'s stacks in every environment into `outdir`, with cdk-nag. A ConfigError (the team's file, or
    environments.yaml) is raised for the caller to report at its lines; any other failure is a finding: one per
    cdk-nag violation (rule, construct, why), else the synth's error on one line."""
    from optigate.config.loader import ConfigError
    from optigate.stacks.app import build_app

    console = io.StringIO()  # jsii forwards node's console here: cdk-nag's own report, Node's notices
    try:
        with contextlib.redirect_stdout(console), contextlib.redirect_stderr(console):
            app = build_app(config_dir, teams=team, environments="", outdir=str(outdir), locks_dir=locks_dir)
            app.synth()
    except ConfigError:
        raise
    except Exception as error:
        text = " ".join(str(error).split()) or type(error).__name__
        return TeamSynth(findings=nag_findings(outdir) or [f"cdk synth failed: {text}"])
    return TeamSynth(templates=templates_of(outdir))


def nag_findings(outdir: Path) -> list[str]:
    """The violations of CDK's validation report (cdk-nag's findings that failed the synth), one line each."""
    report = outdir / "validation-report.json"
    if not report.is_file():
        return []
    try:
        plugins = json.loads(report.read_text()).get("pluginReports", [])
    except (OSError, ValueError):
        return []
    findings = []
    for plugin in plugins:
        for violation in plugin.get("violations", []):
            if violation.get("severity", "error") != "error":
                continue
            for construct in violation.get("violatingConstructs", []):
                findings.append(
                    f"cdk-nag {violation.get('ruleName')} at {construct.get('constructPath')}: "
                    f"{' '.join(str(violation.get('description', '')).split())}"
                )
    return findings


def templates_of(outdir: Path) -> list[Template]:
    """Every stack template of the cloud assembly in `outdir`, with its environment's region."""
    manifest = json.loads((outdir / "manifest.json").read_text())
    found = []
    for name, artifact in manifest.get("artifacts", {}).items():
        if artifact.get("type") != "aws:cloudformation:stack":
            continue
        region = str(artifact.get("environment", "")).rsplit("/", 1)[-1]
        properties = artifact.get("properties", {})
        template = outdir / properties.get("templateFile", f"{name}.template.json")
        found.append(Template(properties.get("stackName", name), template, region))
    return sorted(found, key=lambda template: template.stack)


def lint(template: Template) -> list[str]:
    """cfn-lint's errors (E rules; warnings are not failures, as in optigate's own tests) of one template."""
    from cfnlint.api import ManualArgs
    from cfnlint.api import lint as cfn_lint

    matches = cfn_lint(template.file.read_text(), config=ManualArgs(regions=[template.region]))
    return [
        f"cfn-lint {match.rule.id} in {template.stack} at {'/'.join(map(str, match.path))}: "
        f"{' '.join(str(match.message).split())}"
        for match in matches
        if match.rule.id.startswith("E")
    ]
