"""Resource names (optigate.naming): every name fits its service, names stay as distinct as the
(team, environment) pairs they are made of, and every IAM pattern a synthesized stack carries
matches every name its gate, benchmark fleet and evaluation job use at run time, with the longest
valid team and environment names."""

from __future__ import annotations

import copy
import json
import re
import shutil
from fnmatch import fnmatchcase
from pathlib import Path

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from optigate import naming
from optigate.config.models import ResourceName
from optigate.constructs.gate.cross_check import SIDES as CROSS_CHECK_SIDES
from optigate.rehearse.template import render
from tests.conftest import CONFIG, resources_of

NAME_PATTERN = ResourceName.__metadata__[0].pattern  # the config's pattern for team and environment names
names = st.from_regex(NAME_PATTERN, fullmatch=True)
run_ids = st.text("0123456789abcdef", min_size=naming.RUN_ID_LENGTH, max_size=naming.RUN_ID_LENGTH)
LONGEST = 32


def _limit_and_pattern(kind: str) -> tuple[int, re.Pattern[str]]:
    if kind == "stack":
        return naming.STACK_NAME_MAX, naming.STACK_NAME_PATTERN
    if kind == "gate_state_machine":
        return naming.STATE_MACHINE_NAME_MAX, naming.SAGEMAKER_NAME_PATTERN  # letters, digits, hyphens
    if kind == "gate_invoker_role":
        return naming.IAM_ROLE_NAME_MAX, naming.IAM_ROLE_NAME_PATTERN
    return naming.SAGEMAKER_NAME_MAX, naming.SAGEMAKER_NAME_PATTERN


# --------------------------------------------------------------------------- pure


def test_limits_are_botocores():
    """The limits naming.py budgets for are the service models' (see its docstring)."""
    import botocore.session

    session = botocore.session.get_session()

    def member(service: str, operation: str, name: str):
        return session.get_service_model(service).operation_model(operation).input_shape.members[name].metadata

    for operation, name in [
        ("CreateEndpoint", "EndpointName"),
        ("CreateEndpointConfig", "EndpointConfigName"),
        ("CreateModel", "ModelName"),
        ("CreateOptimizationJob", "OptimizationJobName"),
        ("CreateProcessingJob", "ProcessingJobName"),
        ("CreateModelPackageGroup", "ModelPackageGroupName"),
        ("CreateInferenceComponent", "InferenceComponentName"),
    ]:
        shape = member("sagemaker", operation, name)
        assert shape["max"] == naming.SAGEMAKER_NAME_MAX, (operation, shape)
        for sample in ("a", "a-b--c0", "A9", "a-", "-a", "a_b", "a.b"):
            assert bool(re.fullmatch(shape["pattern"], sample)) == bool(naming.SAGEMAKER_NAME_PATTERN.fullmatch(sample))
    assert member("stepfunctions", "CreateStateMachine", "name")["max"] == naming.STATE_MACHINE_NAME_MAX
    role = member("iam", "CreateRole", "RoleName")
    assert role["max"] == naming.IAM_ROLE_NAME_MAX and role["pattern"] == naming.IAM_ROLE_NAME_PATTERN.pattern[1:-1]


def test_run_id_is_the_first_group_of_a_uuid():
    import uuid

    assert "States.UUID()" in naming.RUN_ID_EXPRESSION and "States.StringSplit" in naming.RUN_ID_EXPRESSION
    assert len(str(uuid.uuid4()).split("-")[0]) == naming.RUN_ID_LENGTH


@given(team=names, environment=names, run_id=run_ids)
def test_every_name_fits_its_limit_and_pattern(team, environment, run_id):
    for kind, name in naming.all_names(team, environment, run_id).items():
        limit, pattern = _limit_and_pattern(kind)
        assert len(name) <= limit and pattern.fullmatch(name), (kind, name, len(name))


@given(team=names, environment=names, run_id=run_ids)
def test_names_that_fit_are_not_changed(team, environment, run_id):
    joined = f"{team}-{environment}"
    if len(joined) <= naming.RUN_PREFIX_MAX:
        assert naming.run_name(team, environment, "shadow", run_id) == f"{joined}-shadow-{run_id}"
    if len(joined) <= naming.SAGEMAKER_NAME_MAX:
        assert naming.endpoint_name(team, environment) == joined
    assert naming.stack_name(environment, team) == f"optigate-{environment}-{team}"


@given(first=st.tuples(names, names), second=st.tuples(names, names), run_id=run_ids)
def test_names_are_as_distinct_as_their_pairs(first, second, run_id):
    """Two pairs share a name only when `<team>-<env>` (or, for stacks, `<env>-<team>`) is the same
    string, which naming.clashes reports; shortening never merges two names."""
    assume(first != second)
    a, b = naming.all_names(*first, run_id), naming.all_names(*second, run_id)
    same_join = "-".join(first) == "-".join(second)
    same_stack_join = "-".join(reversed(first)) == "-".join(reversed(second))
    for kind in a:
        if kind == "stack":
            assert (a[kind] == b[kind]) == same_stack_join, kind
        else:
            assert (a[kind] == b[kind]) == same_join, kind
    assert bool(naming.clashes([first, second])) == (same_join or same_stack_join)


@given(team=names, environment=names, run_id=run_ids)
def test_run_patterns_match_their_kind_only(team, environment, run_id):
    for kind in naming.RUN_KINDS:
        name = naming.run_name(team, environment, kind, run_id)
        assert name.startswith(naming.run_prefix(team, environment))
        assert name == naming.run_name_template(team, environment, kind).format(run_id)
        for other in naming.RUN_KINDS:
            assert fnmatchcase(name, naming.run_name_pattern(team, environment, other)) == (other == kind), (
                name,
                other,
            )
    twins, candidates = naming.invocable_endpoints(team, environment)
    assert fnmatchcase(naming.run_name(team, environment, "twin", run_id), twins)
    assert fnmatchcase(naming.run_name(team, environment, "cand", run_id), candidates)
    # The live endpoint is never among what the gate's fleet and evaluation may invoke.
    live = naming.endpoint_name(team, environment)
    assert not any(fnmatchcase(live, pattern) for pattern in naming.invocable_endpoints(team, environment))


@given(team=names, environment=names, components=st.lists(names, min_size=1, max_size=4, unique=True))
def test_inference_components_fit_and_stay_distinct(team, environment, components):
    assume("base" not in components)
    endpoint = naming.endpoint_name(team, environment)
    named = [naming.inference_component_name(endpoint, c) for c in [*components, "base"]]
    assert len(set(named)) == len(named)
    assert all(len(n) <= naming.SAGEMAKER_NAME_MAX and naming.SAGEMAKER_NAME_PATTERN.fullmatch(n) for n in named)


@given(
    head=st.from_regex(r"[a-z0-9][a-z0-9-]{30}", fullmatch=True),
    ends=st.lists(st.sampled_from("abcdefghijklmnopqrstuvwxyz0123456789"), min_size=2, max_size=2, unique=True),
    environment=st.from_regex(r"[a-z0-9][a-z0-9-]{30}[a-z0-9]", fullmatch=True),
)
def test_shortened_names_that_share_their_head_stay_apart(head, ends, environment):
    first, second = (naming.all_names(f"{head}{end}", environment) for end in ends)
    assert all(first[kind] != second[kind] for kind in first), (first, second)


def test_the_longest_names_are_shortened_by_a_hash_of_the_whole_name():
    team, environment = "customer-support-assistant-large", "eu-central-1-production-canary-b"
    assert len(team) == len(environment) == LONGEST
    endpoint = naming.endpoint_name(team, environment)
    assert len(endpoint) == naming.SAGEMAKER_NAME_MAX and endpoint != f"{team}-{environment}"[:63]
    # Two teams that differ only in their last character keep apart everywhere.
    other = naming.all_names("customer-support-assistant-small", environment)
    assert not set(naming.all_names(team, environment).values()) & set(other.values())
    with pytest.raises(ValueError, match="run id"):
        naming.run_name(team, environment, "cand", "abc")
    with pytest.raises(ValueError, match="unknown run resource kind"):
        naming.run_name_pattern(team, environment, "bench")  # type: ignore[arg-type]


def test_clashes_name_the_ambiguous_pairs():
    assert naming.clashes([("chat", "dev"), ("research", "dev")]) == []
    found = naming.clashes([("a-b", "c"), ("a", "b-c"), ("chat", "dev")])
    assert {kind for *_, kind in found} >= {"endpoint", "package_group", "run_cand"}
    assert all({first, second} == {("a-b", "c"), ("a", "b-c")} for first, second, _ in found)


# --------------------------------------------------------------------------- synthesized


LONG_ENVIRONMENT = "eu-central-1-production-canary-b"
LONG_TEAMS = {  # every example team renamed to 32 characters; they share their first 27
    "chat": "customer-support-assistant-large",
    "research": "customer-support-assistant-small",
    "support": "customer-support-assistant-lora1",
}
RUN_ID = "1a2b3c4d"


def _long_config(target: Path) -> Path:
    """The example config with every team renamed to 32 characters and a 32-character environment."""
    import yaml

    shutil.copytree(CONFIG, target)
    shutil.rmtree(target / "locks", ignore_errors=True)
    for old, new in LONG_TEAMS.items():
        path = target / "teams" / f"{old}.yaml"
        team = yaml.safe_load(path.read_text())
        assert team["team"] == old
        (target / "teams" / f"{new}.yaml").write_text(yaml.safe_dump({**team, "team": new}, sort_keys=False))
        path.unlink()
    environments = yaml.safe_load((target / "environments.yaml").read_text())
    for environment in environments["environments"]:
        if environment.get("teams"):  # per-team overrides follow the renamed teams
            environment["teams"] = {LONG_TEAMS[name]: overrides for name, overrides in environment["teams"].items()}
    # chat's gate trains its EAGLE head from the capture of the environment it runs in: the long environment
    # captures for the teams as dev does (the first environment's per-team overrides, renamed above).
    long_environment = {"name": LONG_ENVIRONMENT, "account": "444444444444", "region": "eu-central-1"}
    teams = copy.deepcopy(environments["environments"][0]["teams"])  # no YAML aliases: config files refuse them
    environments["environments"].append({**long_environment, "teams": teams})
    (target / "environments.yaml").write_text(yaml.safe_dump(environments, sort_keys=False))
    return target


@pytest.fixture(scope="module")
def long_app(tmp_path_factory) -> dict[str, dict]:
    """Synthesized once (slow): every long team in every environment, with cdk-nag."""
    from optigate.stacks.app import build_app

    config = _long_config(tmp_path_factory.mktemp("long") / "config")
    outdir = tmp_path_factory.mktemp("long-cdk.out")
    build_app(config, environments="", outdir=str(outdir)).synth()  # raises on an unacknowledged cdk-nag finding
    return {p.name.removesuffix(".template.json"): json.loads(p.read_text()) for p in outdir.glob("*.template.json")}


def _environments() -> list[tuple[str, str, str]]:
    """(name, account, region) of every environment of the long config."""
    import yaml

    listed = yaml.safe_load((CONFIG / "environments.yaml").read_text())["environments"]
    listed.append({"name": LONG_ENVIRONMENT, "account": "444444444444", "region": "eu-central-1"})
    return [(e["name"], e["account"], e["region"]) for e in listed]


def _render(value, region: str, account: str) -> str:
    """A CloudFormation string value with the pseudo parameters filled in and other references as `<token>`
    (optigate's one renderer, optigate.rehearse.template)."""
    pseudo = {
        "AWS::Partition": "aws",
        "AWS::Region": region,
        "AWS::AccountId": account,
        "AWS::URLSuffix": "amazonaws.com",
    }

    def lookup(logical: str, attribute: str | None) -> str:
        return pseudo.get(logical, "<token>") if attribute is None else "<token>"

    return str(render(value, lookup))


def _statements(template: dict, role_logical_id: str, region: str, account: str) -> list[tuple[list[str], list[str]]]:
    """(actions, rendered resources) of every Allow statement attached to one role."""
    found = []
    for policy in resources_of(template, "AWS::IAM::Policy").values():
        if {"Ref": role_logical_id} not in policy["Properties"].get("Roles", []):
            continue
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
            if statement["Effect"] != "Allow":
                continue
            actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
            resources = statement["Resource"] if isinstance(statement["Resource"], list) else [statement["Resource"]]
            found.append((actions, [_render(r, region, account) for r in resources]))
    return found


def _allowed(statements, action: str, arn: str) -> bool:
    return any(
        any(fnmatchcase(action, a) for a in actions) and any(fnmatchcase(arn, r) for r in resources)
        for actions, resources in statements
    )


def _logical_id(template: dict, resource_type: str, construct_path: str) -> str:
    """The logical id of the one resource of `resource_type` at this construct path (ids concatenated)."""
    (logical,) = [
        logical
        for logical in resources_of(template, resource_type)
        if re.fullmatch(f"{construct_path}[0-9A-F]{{8}}", logical)
    ]
    return logical


def _role_of(template: dict, resource_type: str, construct_path: str | None = None, **properties) -> str:
    """The logical id of the role of the one resource of `resource_type` (at `construct_path`) with these properties."""
    (resource,) = [
        r
        for logical, r in resources_of(template, resource_type).items()
        if (construct_path is None or re.fullmatch(f"{construct_path}[0-9A-F]{{8}}", logical))
        and all(r["Properties"].get(k) == v for k, v in properties.items())
    ]
    key = "RoleArn" if resource_type == "AWS::StepFunctions::StateMachine" else "Role"
    return resource["Properties"][key]["Fn::GetAtt"][0]


def _definition(template: dict, machine_name: str, region: str, account: str) -> dict:
    (machine,) = [
        m
        for m in resources_of(template, "AWS::StepFunctions::StateMachine").values()
        if m["Properties"].get("StateMachineName") == machine_name
    ]
    return json.loads(_render(machine["Properties"]["DefinitionString"], region, account))


def _strings(value):
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def _gated_stacks(long_app):
    for environment, account, region in _environments():
        for team in LONG_TEAMS.values():
            template = long_app[naming.stack_name(environment, team)]
            if resources_of(template, "AWS::SageMaker::ModelPackageGroup"):
                yield team, environment, account, region, template


@pytest.mark.slow
def test_the_long_names_synthesize_in_every_environment(long_app):
    expected = {
        naming.stack_name(environment, team) for environment, *_ in _environments() for team in LONG_TEAMS.values()
    }
    assert set(long_app) == expected
    assert len(list(_gated_stacks(long_app))) == 3 * len(_environments())  # chat's, research's and support's gates
    assert (
        naming.endpoint_name(LONG_TEAMS["chat"], LONG_ENVIRONMENT) != f"{LONG_TEAMS['chat']}-{LONG_ENVIRONMENT}"
    )  # shortened


@pytest.mark.slow
def test_explicit_names_fit_and_are_unique_across_stacks(long_app):
    properties = {
        "AWS::SageMaker::Endpoint": "EndpointName",
        "AWS::SageMaker::ModelPackageGroup": "ModelPackageGroupName",
        "AWS::SageMaker::InferenceComponent": "InferenceComponentName",
        "AWS::StepFunctions::StateMachine": "StateMachineName",
        "AWS::IAM::Role": "RoleName",
    }
    limits = {
        "RoleName": naming.IAM_ROLE_NAME_MAX,
        "StateMachineName": naming.STATE_MACHINE_NAME_MAX,
    }
    seen: dict[tuple[str, str], str] = {}
    for stack, template in long_app.items():
        assert len(stack) <= naming.STACK_NAME_MAX and naming.STACK_NAME_PATTERN.fullmatch(stack)
        for resource_type, key in properties.items():
            for resource in resources_of(template, resource_type).values():
                name = resource["Properties"].get(key)
                if not isinstance(name, str):
                    continue  # generated by CloudFormation, or a token
                assert len(name) <= limits.get(key, naming.SAGEMAKER_NAME_MAX), (stack, key, name)
                assert seen.setdefault((key, name), stack) == stack, f"{name} in {stack} and {seen[(key, name)]}"


@pytest.mark.slow
def test_the_gate_uses_the_names_naming_gives(long_app):
    for team, environment, account, region, template in _gated_stacks(long_app):
        definition = _definition(template, naming.gate_state_machine_name(team, environment), region, account)
        used = {
            m
            for s in _strings(definition)
            for m in re.findall(r"States\.Format\('([^']*)', \$\.run\.id\)", s)
            if "/" not in m
        }
        kinds = {"cand", "twin", "eval"} | ({"opt"} if "CreateOptimizationJob" in definition["States"] else set())
        kinds |= {"shadow"} if "CreateShadowConfig" in definition["States"] else set()
        # An EAGLE-training job registers its output model under its own run name (OutputConfig.SageMakerModel).
        kinds |= {"optm"} if "DescribeOptimizedModel" in definition["States"] else set()
        expected = {naming.run_name_template(team, environment, kind) for kind in kinds}
        # An adapter team's components on each side: the base (00) and one per adapter.
        components = sum(
            1 for name in definition["States"] if re.fullmatch(r"CreateTwin(Base|Adapter\d\d)Component", name)
        )
        expected |= {
            naming.run_component_template(team, environment, side, index)
            for side in ("twin", "cand")
            for index in range(components)
        }
        # The managed benchmark's jobs (gate.benchmark.cross_check), one per level and side.
        for config in resources_of(template, "AWS::SageMaker::AIWorkloadConfig").values():
            workload = json.loads(config["Properties"]["AIWorkloadConfigs"]["WorkloadSpec"]["Inline"])
            level = workload["parameters"]["concurrency"]
            expected |= {
                naming.cross_check_job_template(team, environment, side, level) for side, *_ in CROSS_CHECK_SIDES
            }
        assert used == expected, (team, environment)
        assert all(len(name.format(RUN_ID)) <= naming.SAGEMAKER_NAME_MAX for name in used)
        (endpoint,) = resources_of(template, "AWS::SageMaker::Endpoint").values()
        assert endpoint["Properties"]["EndpointName"] == naming.endpoint_name(team, environment)


def _needed(
    team: str, environment: str, region: str, account: str, *, shadow: bool, optimize: bool, trained_head: bool = False
) -> dict[str, list]:
    """(action, ARN) pairs each role needs at run time, by role: what the gate, the fleet's workers,
    the evaluation job and the model role (which the candidate runs as) do during one run."""

    def arn(resource: str, name: str) -> str:
        return f"arn:aws:sagemaker:{region}:{account}:{resource}/{name.lower()}"

    def each(actions: tuple[str, ...], resource: str, name: str) -> list[tuple[str, str]]:
        return [(f"sagemaker:{action}", arn(resource, name)) for action in actions]

    live = naming.endpoint_name(team, environment)
    run = {kind: naming.run_name(team, environment, kind, RUN_ID) for kind in naming.RUN_KINDS}
    group = naming.package_group(team, environment)
    gate = [
        *each(("CreateModel", "DeleteModel"), "model", run["cand"]),
        *each(("CreateEndpointConfig", "DeleteEndpointConfig"), "endpoint-config", run["cand"]),
        *each(("CreateEndpoint", "DeleteEndpoint", "DescribeEndpoint"), "endpoint", run["cand"]),
        *each(("CreateEndpointConfig", "DeleteEndpointConfig"), "endpoint-config", run["twin"]),
        *each(("CreateEndpoint", "DeleteEndpoint", "DescribeEndpoint"), "endpoint", run["twin"]),
        *each(("CreateProcessingJob", "DescribeProcessingJob", "StopProcessingJob"), "processing-job", run["eval"]),
        *each(("CreateModelPackage",), "model-package-group", group),
        *each(("DescribeModelPackage",), "model-package", f"{group}/1"),
    ]
    if optimize:
        jobs = ("CreateOptimizationJob", "DescribeOptimizationJob", "StopOptimizationJob")
        gate += each(jobs, "optimization-job", run["opt"])
    if trained_head:  # the model the EAGLE job registers: created by the job, read and deleted by the gate
        gate += each(("CreateModel", "DescribeModel", "DeleteModel"), "model", run["optm"])
    if shadow:
        gate += each(
            ("CreateEndpointConfig", "DeleteEndpointConfig", "UpdateEndpoint"), "endpoint-config", run["shadow"]
        )
        gate += each(("DescribeEndpoint", "UpdateEndpoint"), "endpoint", live)
    logs = f"arn:aws:logs:{region}:{account}:log-group:/aws/sagemaker/Endpoints"
    return {
        "gate": gate,
        "fleet": [
            pair
            for name in (run["twin"], run["cand"])
            for pair in each(("InvokeEndpointWithResponseStream",), "endpoint", name)
        ],
        "evaluation": [
            pair for name in (run["twin"], run["cand"]) for pair in each(("InvokeEndpoint",), "endpoint", name)
        ],
        "model": [
            (action, f"{logs}/{name}:log-stream:x")
            for name in (live, run["cand"], run["twin"])
            for action in ("logs:CreateLogStream", "logs:PutLogEvents")
        ],
    }


def _roles(template: dict, team: str, environment: str) -> dict[str, str]:
    """The logical ids of the roles of the gate, the fleet's workers, the evaluation job and the model."""
    gate_machine = naming.gate_state_machine_name(team, environment)
    model = resources_of(template, "AWS::SageMaker::Model")[_logical_id(template, "AWS::SageMaker::Model", "Model")]
    return {
        "gate": _role_of(template, "AWS::StepFunctions::StateMachine", StateMachineName=gate_machine),
        "fleet": _role_of(template, "AWS::Lambda::Function", "BenchmarkWorker"),
        "evaluation": _logical_id(template, "AWS::IAM::Role", "EvaluationRole"),
        "model": model["Properties"]["ExecutionRoleArn"]["Fn::GetAtt"][0],
    }


def test_every_iam_pattern_matches_every_name_used_at_run_time(long_app):
    """The gate, the fleet's workers, the evaluation job and the model role may act on the live
    endpoint and on every run's resources, under the names naming.py gives them."""
    for team, environment, account, region, template in _gated_stacks(long_app):
        states = _definition(template, naming.gate_state_machine_name(team, environment), region, account)["States"]
        shadow, optimize = "CreateShadowConfig" in states, "CreateOptimizationJob" in states
        trained_head = "DescribeOptimizedModel" in states
        needed = _needed(
            team, environment, region, account, shadow=shadow, optimize=optimize, trained_head=trained_head
        )
        roles = _roles(template, team, environment)
        missing = [
            (who, action, target)
            for who, accesses in needed.items()
            for action, target in accesses
            if not _allowed(_statements(template, roles[who], region, account), action, target)
        ]
        assert missing == [], f"{team} in {environment}: {missing}"


def test_the_live_endpoint_is_never_load_tested(long_app):
    """Neither the fleet's workers nor the evaluation job may invoke the live endpoint: the gate loads
    its own baseline twin, so production users never receive its load."""
    for team, environment, account, region, template in _gated_stacks(long_app):
        roles = _roles(template, team, environment)
        live = f"arn:aws:sagemaker:{region}:{account}:endpoint/{naming.endpoint_name(team, environment).lower()}"
        for who, action in (("fleet", "InvokeEndpointWithResponseStream"), ("evaluation", "InvokeEndpoint")):
            statements = _statements(template, roles[who], region, account)
            assert not _allowed(statements, f"sagemaker:{action}", live), (team, environment, who)


def test_no_gate_pattern_outlives_the_names(long_app):
    """Every SageMaker pattern with a wildcard in a gate's role is one of naming's run patterns (or
    the versions of its group): no permission is left for a name nothing uses."""
    for team, environment, account, region, template in _gated_stacks(long_app):
        role = _roles(template, team, environment)["gate"]
        allowed = {naming.run_name_pattern(team, environment, kind) for kind in naming.RUN_KINDS}
        allowed |= {f"{naming.package_group(team, environment)}/*", "*"}
        allowed |= {naming.cross_check_job_pattern(team, environment)}
        allowed |= set(naming.run_component_patterns(team, environment))
        for _, resources in _statements(template, role, region, account):
            for resource in resources:
                if resource.startswith(f"arn:aws:sagemaker:{region}:{account}:") and "*" in resource:
                    assert resource.split("/", 1)[1] in allowed, (team, environment, resource)
