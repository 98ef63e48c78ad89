"""The gate's numbers are made in one place, optigate.deployment.gate, without CDK; the stack and the gate's
constructs only pass them on. Checked twice: the plan built in a process where aws_cdk cannot be imported is
what the synthesized state machines carry, and the wiring's source holds no gate arithmetic."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

import optigate
from tests.conftest import CONFIG

PACKAGE = Path(optigate.__file__).resolve().parent
#: Every teams' plans in every environment, as the pipeline deploys them, built with CDK unimportable.
PLANS_WITHOUT_CDK = textwrap.dedent(
    """
    import json, sys
    for name in ("aws_cdk", "constructs", "cdk_nag", "jsii"):
        sys.modules[name] = None  # any import of them raises ImportError
    from optigate.deployment import load_resolved_project
    from optigate.promote.lock import default_locks_dir

    project = load_resolved_project(sys.argv[1])
    plans = {}
    for deployment in project.deployments(None, default_locks_dir(sys.argv[1])):
        plan = deployment.gate
        if plan is not None:
            plans[deployment.stack_name] = {
                "team": plan.team,
                "environment": plan.environment,
                "shards": plan.benchmark.shards,
                "items": plan.benchmark.items,
                "measured": list(plan.benchmark.measured_concurrency),
                "thresholds": plan.thresholds.to_dict(),
                "fingerprint": plan.fingerprint,
                "cross_check": [level.concurrency for level in plan.cross_check_levels()],
                "speculation": plan.speculation.event() if plan.speculation is not None else None,
                "server_series": list(plan.server_series),
            }
    print(json.dumps(plans))
    """
)


@pytest.fixture(scope="module")
def plans() -> dict[str, dict[str, Any]]:
    done = subprocess.run(
        [sys.executable, "-c", PLANS_WITHOUT_CDK, str(CONFIG)], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_the_plan_needs_no_cdk():
    """The subprocess's guard works: with aws_cdk set to None, importing it raises."""
    probe = "import sys; sys.modules['aws_cdk'] = None; import optigate.constructs.gate"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=False)
    assert done.returncode != 0 and "import of aws_cdk halted" in done.stderr


def _gate_definition(template: dict[str, Any], name: str) -> dict[str, Any]:
    from optigate.rehearse.template import placeholder_definition, state_machines

    for logical, machine in state_machines(template).items():
        if machine["Properties"].get("StateMachineName") == name:
            return placeholder_definition(template, logical)
    raise AssertionError(f"no state machine {name}")


def _fleet_shards(template: dict[str, Any]) -> set[int]:
    from optigate.rehearse.template import placeholder_definition, state_machines

    shards = set()
    for logical in state_machines(template):
        indexes = placeholder_definition(template, logical)["States"].get("ShardIndexes")
        if indexes is None:
            continue
        parameters = indexes["Parameters"]  # States.ArrayRange(0, shards - 1, 1), or [0] for one shard
        shards.add(
            int(parameters["shards.$"].split(",")[1]) + 1 if "shards.$" in parameters else len(parameters["shards"])
        )
    return shards


@pytest.mark.slow
def test_the_state_machines_carry_the_plan(plans, stage_templates):
    from optigate import naming
    from optigate.rehearse.template import resources_of_type

    assert len(plans) >= 3  # a gate in every environment of at least one team
    for stack, plan in plans.items():
        template = stage_templates[stack]
        states = _gate_definition(template, naming.gate_state_machine_name(plan["team"], plan["environment"]))["States"]
        assert states["BenchmarkLevels"]["Result"] == plan["items"], stack
        # A threshold the team leaves unset (None) is absent from the payload: CDK drops nulls from state JSON.
        unset_dropped = {k: v for k, v in plan["thresholds"].items() if v is not None}
        assert states["DecideVerdict"]["Parameters"]["Payload"]["thresholds"] == unset_dropped, stack
        assert plan["thresholds"]["concurrency"] == plan["measured"], stack
        for record in ("RecordApproved", "RecordRejected", "RecordInconclusive"):
            metadata = states[record]["Parameters"]["CustomerMetadataProperties"]
            assert metadata["fingerprint"] == plan["fingerprint"], (stack, record)
        assert _fleet_shards(template) == {plan["shards"]}, stack
        workloads = resources_of_type(template, "AWS::SageMaker::AIWorkloadConfig").values()
        concurrency = sorted(
            json.loads(w["Properties"]["AIWorkloadConfigs"]["WorkloadSpec"]["Inline"])["parameters"]["concurrency"]
            for w in workloads
        )
        assert concurrency == plan["cross_check"], stack


# --------------------------------------------------------------------------- no gate arithmetic in the wiring

#: Names that only gate arithmetic reads: the fleet's capacity, the requests' floor, the requests per stream.
ARITHMETIC_NAMES = frozenset(
    {
        "STREAMS_PER_WORKER",
        "MIN_REQUESTS_PER_LEVEL",
        "MIN_REQUESTS_PER_STREAM_FACTOR",
        "requests_per_slot",
        "ceil",
        "floor",
    }
)
#: The gate's own wiring in the stack (the rest of the stack sizes endpoints, which is not the gate's).
STACK_GATE_METHODS = ("_gate", "_training_data", "_live_config")


def gate_arithmetic(tree: ast.AST) -> list[str]:
    """What in `tree` computes the gate's numbers: `math`, a max/min with a number, a name of ARITHMETIC_NAMES,
    arithmetic (* / // % **) on anything but strings, or a read of the team config's `gate.benchmark`."""
    found = []
    for node in ast.walk(tree):
        where = f"line {getattr(node, 'lineno', '?')}"
        if isinstance(node, ast.Import | ast.ImportFrom):
            modules = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            names = [a.name for a in node.names]
            if "math" in modules or ARITHMETIC_NAMES & set(names):
                found.append(f"{where}: imports {', '.join(modules + names)}")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("max", "min"):
            if any(isinstance(a, ast.Constant) and isinstance(a.value, int | float) for a in node.args):
                found.append(f"{where}: {ast.unparse(node)}")
        elif isinstance(node, ast.Name | ast.Attribute):
            name = node.id if isinstance(node, ast.Name) else node.attr
            if name in ARITHMETIC_NAMES:
                found.append(f"{where}: {ast.unparse(node)}")
            if (
                isinstance(node, ast.Attribute)
                and node.attr == "benchmark"
                and isinstance(node.value, ast.Attribute)
                and node.value.attr == "gate"
            ):
                found.append(f"{where}: reads the config's {ast.unparse(node)}")
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult | ast.Div | ast.FloorDiv | ast.Mod | ast.Pow):
            operands = (node.left, node.right)
            if not any(isinstance(o, ast.Constant) and isinstance(o.value, str) for o in operands):
                found.append(f"{where}: {ast.unparse(node)}")
    return found


def _stack_gate_methods() -> ast.Module:
    tree = ast.parse((PACKAGE / "stacks" / "team_inference_stack.py").read_text())
    methods = [node for node in ast.walk(tree) if isinstance(node, ast.FunctionDef) and node.name in STACK_GATE_METHODS]
    assert sorted(m.name for m in methods) == sorted(STACK_GATE_METHODS)
    return ast.Module(body=list(methods), type_ignores=[])


def test_a_speculative_gate_reads_acceptance_from_the_client_on_lmi_and_no_server_series(plans):
    """chat's EAGLE head on LMI 0.36.0: djl-serving exports no vLLM series, so the plan names the client's tokens per
    engine step as the evidence (a sourced row), the break-even at every measured level, and nothing to read from
    CloudWatch; teams that do not speculate carry no proof."""
    for stack, plan in plans.items():
        assert plan["server_series"] == [], stack
        speculation = plan["speculation"]
        if not stack.endswith("-chat"):
            assert speculation is None or speculation["evidence"]["source"] == "client", stack
            continue
        assert speculation["method"] == "eagle" and speculation["draft_tokens"] == 3, stack
        evidence = speculation["evidence"]
        assert evidence["source"] == "client" and evidence["assumed"] is None, stack
        assert "@006c49d485f9ca479bf4989cbb694d0ac02f44b5" in evidence["rests_on"][0]["cited"]
        assert set(speculation["break_even"]) == {str(level) for level in plan["thresholds"]["concurrency"]}
        assert all(value >= 0.4 for value in speculation["break_even"].values()), stack
        assert "planner's break-even" in speculation["break_even_source"]


def test_the_stack_and_the_gate_constructs_compute_no_gate_arithmetic():
    stack_file = ast.parse((PACKAGE / "stacks" / "team_inference_stack.py").read_text())
    whole_file = [f for f in gate_arithmetic(stack_file) if "STREAMS_PER_WORKER" in f or "math" in f]
    assert whole_file == [], "team_inference_stack.py"
    assert gate_arithmetic(_stack_gate_methods()) == [], "team_inference_stack.py's gate wiring"
    modules = sorted((PACKAGE / "constructs" / "gate").glob("*.py"))
    assert len(modules) >= 10
    for module in modules:
        assert gate_arithmetic(ast.parse(module.read_text())) == [], module.name


@pytest.mark.parametrize(
    "source",
    [
        "import math",
        "from math import ceil",
        "shards = max(1, ceil(level / workers))",
        "requests = max(32, slots)",
        "n = plan.requests_per_slot",
        "from optigate.deployment.gate import STREAMS_PER_WORKER",
        "total = [shards * c for c in levels]",
        "benchmark = team.gate.benchmark",
        "weight = percentage / 100",
    ],
)
def test_each_kind_of_gate_arithmetic_is_found(source):
    assert gate_arithmetic(ast.parse(source)) != []


def test_the_wiring_may_format_strings():
    assert gate_arithmetic(ast.parse("line = '%s' % name\nstars = '*' * 3\nmost = max(levels)")) == []
