"""The promotion pipelines (`cdk synth -c pipeline=true`): one per team, stages in environments.yaml order,
the team's gate after its deploy, a manual approval only where required, explicit invoke roles (no
cross-account support stack), the EventBridge trigger, the platform's pipeline; cfn-lint and cdk-nag clean."""

from __future__ import annotations

import json
import shutil
import tomllib
from pathlib import Path

import pytest
import yaml

from tests.conftest import CONFIG, REPO, resources_of

# Every test here reads the pipeline's assembly (half a minute to synthesize): the slow tier (tests/tiers.py).
pytestmark = pytest.mark.slow

ENVIRONMENTS = yaml.safe_load((CONFIG / "environments.yaml").read_text())
PIPELINE_ACCOUNT = ENVIRONMENTS["pipeline"]["account"]


def _template(path: Path) -> dict:
    return json.loads(path.read_text())


TEAMS = ("chat", "research", "support")


def _pipeline(assembly: Path, stack: str = "optigate-pipeline-chat") -> dict:
    template = _template(assembly / f"{stack}.template.json")
    (pipeline,) = resources_of(template, "AWS::CodePipeline::Pipeline").values()
    return pipeline["Properties"]


def _actions(stage: dict, provider: str) -> list[dict]:
    return [a for a in stage["Actions"] if a["ActionTypeId"]["Provider"] == provider]


def test_stages_follow_the_order_of_environments_yaml(assembly):
    names = [stage["Name"] for stage in _pipeline(assembly)["Stages"]]
    assert names[:2] == ["Source", "Build"]
    environments = [e["name"] for e in ENVIRONMENTS["environments"]]
    assert [n for n in names if n in environments] == environments == names[-len(environments) :]


def test_each_teams_stage_deploys_only_that_team_then_runs_its_gate(assembly):
    for team in TEAMS:
        stages = {stage["Name"]: stage for stage in _pipeline(assembly, f"optigate-pipeline-{team}")["Stages"]}
        for environment in ENVIRONMENTS["environments"]:
            stage = stages[environment["name"]]
            deploys = [a for a in _actions(stage, "CloudFormation") if a["Name"].endswith(".Deploy")]
            assert [a["Name"] for a in deploys] == [f"optigate-{environment['name']}-{team}.Deploy"]
            (gate,) = _actions(stage, "StepFunctions")
            assert gate["Name"] == f"Gate-{team}" and gate["RunOrder"] > deploys[0]["RunOrder"]
            arn = json.dumps(gate["Configuration"]["StateMachineArn"])
            assert (
                f":states:{environment['region']}:{environment['account']}:stateMachine:optigate-{team}-{environment['name']}-gate"
                in arn
            )


def _actions_granted(template: dict, role_name: str) -> set[str]:
    """Every IAM action the stack's policies grant to the role of that name."""
    (logical,) = [
        k for k, r in resources_of(template, "AWS::IAM::Role").items() if r["Properties"].get("RoleName") == role_name
    ]
    actions: set[str] = set()
    for policy in resources_of(template, "AWS::IAM::Policy").values():
        if {"Ref": logical} in policy["Properties"].get("Roles", []):
            for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
                listed = statement["Action"]
                actions.update([listed] if isinstance(listed, str) else listed)
    return actions


def test_a_manual_approval_precedes_only_the_environments_that_require_one(assembly):
    stages = {stage["Name"]: stage for stage in _pipeline(assembly, "optigate-pipeline-research")["Stages"]}
    for environment in ENVIRONMENTS["environments"]:
        stage = stages[environment["name"]]
        approvals = _actions(stage, "Manual")
        if environment.get("requires_approval"):
            assert len(approvals) == 1
            assert approvals[0]["RunOrder"] < min(a["RunOrder"] for a in _actions(stage, "CloudFormation"))
        else:
            assert approvals == []
    assert any(e.get("requires_approval") for e in ENVIRONMENTS["environments"])


def test_gate_actions_assume_an_explicit_role_in_the_target_account_and_no_support_stack_is_added(
    assembly, stage_templates
):
    stacks = stage_templates
    for team in TEAMS:
        for stage in _pipeline(assembly, f"optigate-pipeline-{team}")["Stages"]:
            for gate in _actions(stage, "StepFunctions"):
                env = next(e for e in ENVIRONMENTS["environments"] if e["name"] == stage["Name"])
                role_name = f"optigate-{team}-{env['name']}-gate-invoker"
                assert f":iam::{env['account']}:role/{role_name}" in json.dumps(gate["RoleArn"])
                # The team stack deployed just before defines that role, trusting the team's own pipeline role.
                (role,) = [
                    r
                    for r in resources_of(stacks[f"optigate-{env['name']}-{team}"], "AWS::IAM::Role").values()
                    if r["Properties"].get("RoleName") == role_name
                ]
                trust = json.dumps(role["Properties"]["AssumeRolePolicyDocument"])
                assert f":iam::{PIPELINE_ACCOUNT}:root" in trust and "Service" not in trust
                assert f":iam::{PIPELINE_ACCOUNT}:role/optigate-pipeline-{team}" + '"' in trust
                # The action describes the state machine, then starts it (CDK grants both to roles it creates).
                granted = _actions_granted(stacks[f"optigate-{env['name']}-{team}"], role_name)
                assert {"states:StartExecution", "states:DescribeStateMachine", "states:DescribeExecution"} <= granted
    stack_files = [p.name for p in assembly.glob("*.template.json")]
    assert not [name for name in stack_files if "-support-" in name], stack_files
    # Another region needs only CodePipeline's artifact replication bucket, one per team pipeline (a shared one
    # would be redeployed by each team's self-mutation with only that team's grants).
    assert sorted(stack_files) == sorted(
        [f"cross-region-stack-optigate-pipeline-{team}_us-west-2.template.json" for team in TEAMS]
        + [f"optigate-pipeline-{team}.template.json" for team in TEAMS]
        + ["optigate-platform.template.json"]
    )


def test_each_pipeline_runs_as_the_role_its_teams_gates_trust(assembly):
    for team in TEAMS:
        template = _template(assembly / f"optigate-pipeline-{team}.template.json")
        (pipeline,) = resources_of(template, "AWS::CodePipeline::Pipeline").values()
        assert pipeline["Properties"]["Name"] == f"optigate-pipeline-{team}"
        roles = resources_of(template, "AWS::IAM::Role")
        logical = pipeline["Properties"]["RoleArn"]["Fn::GetAtt"][0]
        assert roles[logical]["Properties"]["RoleName"] == f"optigate-pipeline-{team}"


def test_a_team_pipeline_is_a_v2_pipeline_started_by_pushes_that_change_what_it_reads(assembly):
    """V2 (billed per action-minute; CDK warns when the type is left to its default). A push starts a team's
    pipeline when it changes that team's file or what every team reads, never for another team's file alone
    (every pipeline started by every push would queue past CodeBuild's concurrent builds); the platform's
    pipeline starts on every push (no trigger: the source's default change detection)."""
    branch = ENVIRONMENTS["pipeline"]["source"]["branch"]
    for team in TEAMS:
        pipeline = _pipeline(assembly, f"optigate-pipeline-{team}")
        assert pipeline["PipelineType"] == "V2"
        (trigger,) = pipeline["Triggers"]
        (push,) = trigger["GitConfiguration"]["Push"]
        assert push["Branches"]["Includes"] == [branch]
        paths = push["FilePaths"]["Includes"]
        assert f"config/teams/{team}.yaml" in paths and "config/environments.yaml" in paths and "optigate/**" in paths
        assert not [p for p in paths if p.startswith("config/teams/") and p != f"config/teams/{team}.yaml"]
        assert len(paths) <= 8  # CodePipeline's limit per filter
        assert trigger["GitConfiguration"]["SourceActionName"] == pipeline["Stages"][0]["Actions"][0]["Name"]
    assert "Triggers" not in _pipeline(assembly, "optigate-platform")


def test_only_the_teams_own_approvals_start_its_pipeline(assembly, stage_templates):
    for team in TEAMS:
        template = _template(assembly / f"optigate-pipeline-{team}.template.json")
        (rule,) = resources_of(template, "AWS::Events::Rule").values()
        assert rule["Properties"]["EventPattern"] == {
            "source": ["aws.sagemaker"],
            "detail-type": ["SageMaker Model Package State Change"],
            "detail": {
                "ModelApprovalStatus": ["Approved"],
                "ModelPackageGroupName": sorted(f"optigate-{team}-{e['name']}" for e in ENVIRONMENTS["environments"]),
            },
        }
        (pipeline_id,) = resources_of(template, "AWS::CodePipeline::Pipeline")
        (target,) = rule["Properties"]["Targets"]
        assert pipeline_id in json.dumps(target["Arn"]) and "role/optigate-platform-trigger" in json.dumps(target)
        # No team pipeline defines the account's event bus policy (one fixed StatementId): the platform does.
        assert resources_of(template, "AWS::Events::EventBusPolicy") == {}
    platform = _template(assembly / "optigate-platform.template.json")
    (policy,) = resources_of(platform, "AWS::Events::EventBusPolicy").values()
    senders = json.dumps(policy["Properties"]["Statement"]["Principal"])
    assert all(f":iam::{e['account']}:root" in senders for e in ENVIRONMENTS["environments"])
    (trigger,) = [
        r
        for r in resources_of(platform, "AWS::IAM::Role").values()
        if r["Properties"].get("RoleName") == "optigate-platform-trigger"
    ]
    assert "events.amazonaws.com" in json.dumps(trigger["Properties"]["AssumeRolePolicyDocument"])
    # Each gated team stack forwards its group's approvals to the pipeline account's default bus.
    for stack in stage_templates.values():
        forwards = [
            r
            for r in resources_of(stack, "AWS::Events::Rule").values()
            if "ModelPackageGroupName" in json.dumps(r["Properties"]["EventPattern"])
        ]
        (forward,) = forwards  # every example team has a gate
        assert f":events:{ENVIRONMENTS['pipeline']['region']}:{PIPELINE_ACCOUNT}:event-bus/default" in json.dumps(
            forward["Properties"]["Targets"]
        )


def test_the_pipeline_account_may_resolve_each_gate_group(stage_templates):
    for stack in stage_templates.values():
        groups = resources_of(stack, "AWS::SageMaker::ModelPackageGroup").values()
        for group in groups:
            policy = group["Properties"]["ModelPackageGroupPolicy"]
            (statement,) = policy["Statement"]
            assert statement["Principal"] == {
                "AWS": {"Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"}, f":iam::{PIPELINE_ACCOUNT}:root"]]}
            }
            assert set(statement["Action"]) == {
                "sagemaker:DescribeModelPackageGroup",
                "sagemaker:DescribeModelPackage",
                "sagemaker:ListModelPackages",
            }


def _synth_spec(template: dict, marker: str) -> dict:
    buildspecs = [
        p["Properties"]["Source"].get("BuildSpec", "")
        for p in resources_of(template, "AWS::CodeBuild::Project").values()
    ]
    (spec,) = [json.loads(b) for b in buildspecs if marker in b]
    return spec


def _synth_commands(template: dict, marker: str) -> list[str]:
    return _synth_spec(template, marker)["phases"]["build"]["commands"]


def _synth_environment(template: dict, marker: str) -> dict[str, str]:
    """The synth step's environment variables (CDK Pipelines puts them on the CodeBuild project)."""
    (project,) = [
        p
        for p in resources_of(template, "AWS::CodeBuild::Project").values()
        if marker in p["Properties"]["Source"].get("BuildSpec", "")
    ]
    return {v["Name"]: v["Value"] for v in project["Properties"]["Environment"].get("EnvironmentVariables", [])}


def test_a_teams_synth_step_checks_resolves_and_synthesizes_that_team_alone(assembly):
    template = _template(assembly / "optigate-pipeline-support.template.json")
    commands = _synth_commands(template, "cdk synth -c pipeline=true")
    assert commands == [
        ". scripts/setup.sh",
        "optigate check --team support",  # its own file only: another team's broken file does not fail it
        *(f"optigate resolve --env {e['name']} --team support" for e in ENVIRONMENTS["environments"]),
        "cdk synth -c pipeline=true -c team=support",
    ]
    assert not [c for c in commands if "test" in c]  # optigate's test suite is optigate's CI, not the config's


def test_the_platform_pipeline_checks_every_team_and_synthesizes_itself(assembly):
    """The config repository is checked by `optigate check` (every team file, what spans them), never by optigate's
    test suite, which would fail on a team the suite does not know (issue 37)."""
    template = _template(assembly / "optigate-platform.template.json")
    commands = _synth_commands(template, "cdk synth -c pipeline=platform")
    assert commands == [". scripts/setup.sh", "optigate check", "cdk synth -c pipeline=platform"]
    stages = [stage["Name"] for stage in _pipeline(assembly, "optigate-platform")["Stages"]]
    assert stages == ["Source", "Build", "UpdatePipeline"]  # it deploys no team


def test_the_synth_steps_install_what_the_check_needs_and_no_test_kit(assembly):
    """setup.sh's pipeline mode: optigate with its `check` extra (cfn-lint) and the CDK CLI; not the dev extra nor
    the fmeval environment (no CPU torch index either)."""
    for stack, marker in [("optigate-platform", "pipeline=platform"), ("optigate-pipeline-chat", "team=chat")]:
        environment = _synth_environment(_template(assembly / f"{stack}.template.json"), marker)
        assert environment.get("OPTIGATE_SETUP") == "pipeline" and "PIP_EXTRA_INDEX_URL" not in environment, stack
    setup = (REPO / "scripts" / "setup.sh").read_text()
    assert 'pipeline) extras="check"' in setup and '[ "$mode" = dev ] &&' in setup
    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert [r for r in extras["check"] if r.startswith("cfn-lint")] and "optigate[check]" in extras["dev"]


# A template check: slow, and kept by --fast (tests/tiers.py).
@pytest.mark.slow
@pytest.mark.fast_tier
def test_every_template_passes_cfn_lint(assembly, stage_templates):
    from cfnlint.api import ManualArgs, lint

    templates = {p.name: _template(p) for p in assembly.glob("*.template.json")} | stage_templates
    assert len(templates) == 1 + 2 * 3 + 3 * 3  # the platform, each team's pipeline and support stack, stages
    regions = sorted({ENVIRONMENTS["pipeline"]["region"], *(e["region"] for e in ENVIRONMENTS["environments"])})
    errors = {
        name: [
            f"{m.rule.id} {m.message}"
            for m in lint(json.dumps(template), config=ManualArgs(regions=regions))
            if m.rule.id.startswith("E")
        ]
        for name, template in templates.items()
    }
    assert {name: found for name, found in errors.items() if found} == {}


def test_a_codecommit_source_and_a_single_environment(tmp_path, pipeline_synth):
    config = tmp_path / "config"
    (config / "teams").mkdir(parents=True)
    shutil.copy(CONFIG / "teams" / "chat.yaml", config / "teams" / "chat.yaml")
    environments = {
        "environments": [ENVIRONMENTS["environments"][0]],
        "pipeline": {
            "account": ENVIRONMENTS["environments"][0]["account"],
            "region": "us-east-1",
            "source": {"codecommit": True, "repository": "optigate-config"},
        },
    }
    (config / "environments.yaml").write_text(yaml.safe_dump(environments))
    pipeline_synth(config, tmp_path / "out")
    pipeline = _pipeline(tmp_path / "out", "optigate-pipeline-chat")
    (source,) = pipeline["Stages"][0]["Actions"]
    assert source["ActionTypeId"]["Provider"] == "CodeCommit" and source["Configuration"]["BranchName"] == "main"
    template = _template(tmp_path / "out" / "optigate-platform.template.json")
    # Same account as the environment: nothing to accept from elsewhere.
    assert resources_of(template, "AWS::Events::EventBusPolicy") == {}


def test_every_state_machine_of_every_stage_retries_what_its_integration_raises(assembly):
    """The retry table (optigate.constructs.retries) holds for the stacks the pipeline deploys, too."""
    from optigate.rehearse.asl import retry_problems
    from optigate.rehearse.template import placeholder_definition, state_machines
    from tests.template_rules.assembly import load_stacks

    machines = 0
    for stack in load_stacks(assembly):
        for logical in state_machines(stack.template):
            machines += 1
            assert retry_problems(placeholder_definition(stack.template, logical)) == [], (stack.name, logical)
    assert machines >= 9  # a gate or a fleet in every stage's team stacks


def test_the_synth_step_cannot_deploy_or_start_a_gate(assembly):
    """Synth runs what setup.sh fetches at build time: its role assumes no role (no deploy role, no gate invoker),
    and the pipeline role, which may, is assumed by CodePipeline alone."""
    for team in TEAMS:
        template = _template(assembly / f"optigate-pipeline-{team}.template.json")
        roles = resources_of(template, "AWS::IAM::Role")
        (project,) = [p for k, p in resources_of(template, "AWS::CodeBuild::Project").items() if "Synth" in k]
        synth_role = project["Properties"]["ServiceRole"]["Fn::GetAtt"][0]
        assert roles[synth_role]["Properties"].get("RoleName") != f"optigate-pipeline-{team}"
        granted = set()
        for policy in resources_of(template, "AWS::IAM::Policy").values():
            if {"Ref": synth_role} in policy["Properties"].get("Roles", []):
                for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
                    listed = statement["Action"]
                    granted.update([listed] if isinstance(listed, str) else listed)
        assert granted and not any(action.startswith(("sts:", "states:", "cloudformation:")) for action in granted)
        (pipeline_role,) = [r for r in roles.values() if r["Properties"].get("RoleName") == f"optigate-pipeline-{team}"]
        principals = [s["Principal"] for s in pipeline_role["Properties"]["AssumeRolePolicyDocument"]["Statement"]]
        assert principals == [{"Service": "codepipeline.amazonaws.com"}]


def test_only_this_accounts_team_pipeline_rules_may_pass_the_trigger_role(assembly):
    """EventBridge's confused-deputy guidance: the shared trigger role names the source account and the rules."""
    platform = _template(assembly / "optigate-platform.template.json")
    (trust,) = [
        r["Properties"]["AssumeRolePolicyDocument"]["Statement"]
        for r in resources_of(platform, "AWS::IAM::Role").values()
        if r["Properties"].get("RoleName") == "optigate-platform-trigger"
    ]
    (statement,) = trust
    assert statement["Condition"]["StringEquals"] == {"aws:SourceAccount": PIPELINE_ACCOUNT}
    assert json.dumps(statement["Condition"]["ArnLike"]["aws:SourceArn"]).endswith(':rule/optigate-pipeline-*"]]}')
    for team in TEAMS:
        template = _template(assembly / f"optigate-pipeline-{team}.template.json")
        (rule,) = resources_of(template, "AWS::Events::Rule").values()
        assert rule["Properties"]["Name"] == f"optigate-pipeline-{team}"
