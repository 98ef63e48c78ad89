"""The package's structure, checked: no import cycle between optigate's packages, pure layers free
of CDK, and each team resolved once when the sample app is built."""

from __future__ import annotations

import ast
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

import optigate
from tests.conftest import edited_config

PACKAGE = Path(optigate.__file__).resolve().parent


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> set[str]:
    """Every optigate module `path` imports, at any depth (function-level imports included),
    except under `if TYPE_CHECKING:`."""
    tree = ast.parse(path.read_text())
    module = _module_name(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skipped |= {id(child) for stmt in node.body for child in ast.walk(stmt)}
    found = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names if alias.name.startswith("optigate")}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                name = ".".join(base + ([node.module] if node.module else []))
            else:
                name = node.module or ""
            if name.startswith("optigate"):
                found.add(name)
    return found


def _package_of(module: str) -> str:
    """The first-level package (`optigate.config`), or the module for top-level modules (`optigate.stats`)."""
    parts = module.split(".")
    return ".".join(parts[:2])


def package_graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = defaultdict(set)
    for path in PACKAGE.rglob("*.py"):
        source = _package_of(_module_name(path))
        for target in _imports(path):
            target_package = _package_of(target)
            if target_package != source and target_package != "optigate":
                graph[source].add(target_package)
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    cycles, state, stack = [], {}, []

    def visit(node: str) -> None:
        state[node] = "open"
        stack.append(node)
        for following in sorted(graph.get(node, ())):
            if state.get(following) == "open":
                cycles.append([*stack[stack.index(following) :], following])
            elif following not in state:
                visit(following)
        stack.pop()
        state[node] = "done"

    for node in sorted(graph):
        if node not in state:
            visit(node)
    return cycles


def test_the_walk_sees_function_level_imports():
    """config.rules once imported plan inside a function; the walk must see such imports."""
    graph = package_graph()
    assert "optigate.plan" in graph["optigate.deployment"]
    assert "optigate.config" in graph["optigate.plan"]
    fake = {"a": {"b"}, "b": {"c"}, "c": {"a"}}
    assert _cycles(fake) == [["a", "b", "c", "a"]]


def test_no_import_cycle_between_packages():
    assert _cycles(package_graph()) == []


def test_config_imports_no_later_layer():
    """Data flows one way: config (what the user said) imports no other optigate package."""
    assert package_graph().get("optigate.config", set()) == set()


def test_pure_layers_never_import_cdk():
    pure = ("config", "plan", "serving", "deployment", "bench", "emulator", "evaluate", "gate", "promote", "advise")
    pure_modules = ("stats.py", "judge.py", "jsonsafe.py", "naming.py")
    paths = [path for name in pure for path in (PACKAGE / name).rglob("*.py")] + [PACKAGE / m for m in pure_modules]
    assert all(path.exists() for path in paths)
    offenders = []
    for path in paths:
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            if any(n.split(".")[0] in ("aws_cdk", "constructs", "cdk_nag", "moto") for n in names):
                offenders.append(str(path.relative_to(PACKAGE)))
    assert offenders == []


def test_the_rehearsal_is_a_late_layer_only_the_cli_imports():
    """optigate.rehearse executes what the stacks synthesize (it reads a synthesized template, runs the Lambda
    handlers and the evaluation job's own verdict writer, and synthesizes a team itself with a lock's approvals): it
    may import those layers, and only the CLI imports it."""
    graph = package_graph()
    # serving: which container each side's emulator stands for (optigate.serving.surfaces); emulator: the endpoints a
    # rehearsal's benchmark streams from (optigate.emulator.process).
    below = {
        "config",
        "deployment",
        "constructs",
        "stacks",
        "bench",
        "emulator",
        "evaluate",
        "lambdas",
        "promote",
        "serving",
    }
    assert graph["optigate.rehearse"] <= {f"optigate.{name}" for name in below}
    assert {source for source, targets in graph.items() if "optigate.rehearse" in targets} == {"optigate.cli"}


def test_the_emulator_is_a_room_only_the_rehearsal_and_the_cli_import():
    """optigate.emulator stands in for SageMaker runtime and the containers: the tests, benchmarks/ (outside the
    package), the rehearsal and `optigate emulate` use it, never the benchmark client it stands in for (optigate.bench,
    whose core ships in the benchmark Lambda). It reads the client's core (captures, payloads, the event stream's
    framing, the event loop; the metrics its truth is judged with) and the surfaces it serves (optigate.serving)."""
    graph = package_graph()
    assert {source for source, targets in graph.items() if "optigate.emulator" in targets} <= {
        "optigate.cli",
        "optigate.rehearse",
    }
    assert "optigate.emulator" in graph["optigate.cli"]  # the rule is about something: `optigate emulate`
    assert "optigate.emulator" not in graph["optigate.bench"]
    assert graph["optigate.emulator"] <= {"optigate.bench", "optigate.serving"}


def test_only_the_rehearsal_imports_moto():
    """moto comes with the rehearse extra: the rest of the package runs without it."""
    offenders = []
    for path in PACKAGE.rglob("*.py"):
        if path.relative_to(PACKAGE).parts[0] == "rehearse":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                names = [node.module or ""]
            else:
                continue
            if any(name.split(".")[0] == "moto" for name in names):
                offenders.append(str(path.relative_to(PACKAGE)))
    assert offenders == []


@pytest.mark.slow
def test_sample_app_resolves_each_team_once(tmp_path, monkeypatch):
    from optigate.deployment import project, serving
    from optigate.stacks.app import build_app

    resolved, derived = [], []
    resolve, derive = project.resolve_team, serving.derive_settings
    monkeypatch.setattr(project, "resolve_team", lambda t: resolved.append(t.team) or resolve(t))
    monkeypatch.setattr(
        serving, "derive_settings", lambda t, s=None, **kw: derived.append(t.team) or derive(t, s, **kw)
    )
    # The example's teams, chat with a fallback pool (no example team has pools since support's adapters need
    # one instance type, OG530), so a pooled team's passes are counted too.
    pooled = "  instance_type: ml.g6.2xlarge\n  instance_pools:\n"
    pooled += "    - {instance_type: ml.g6.2xlarge, priority: 1}\n    - {instance_type: ml.g6.4xlarge, priority: 2}\n"
    config = edited_config(tmp_path, "teams/chat.yaml", "  instance_type: ml.g6.2xlarge\n", pooled)
    app = build_app(config, environments="", outdir=str(tmp_path / "out"), nag=False)

    stacks = [child for child in app.node.children if hasattr(child, "deployment")]
    teams = {stack.deployment.team.team: stack.deployment.resolved_team for stack in stacks}
    assert len(stacks) == 3 * len(teams) == 9  # every team in each of the three environments
    assert sorted(resolved) == sorted(teams)  # each team once, whatever the number of environments

    # Once per variant (the baseline, and the shadow and the gate candidate where a team has them); a variant
    # with instance pools once per pool in each of at most three passes (the shared degree, then the length,
    # then the batch each pool holds: optigate.deployment.pools).
    def most(variant) -> int:
        return 3 * len(variant.pools) if variant.pools else 1

    variants = {name: [v for v in (r.baseline, r.shadow, r.candidate) if v is not None] for name, r in teams.items()}
    for name, planned in variants.items():
        if any(v.pools for v in planned):
            assert len(planned) <= derived.count(name) <= sum(most(v) for v in planned), name
        else:
            assert derived.count(name) == len(planned), name
    assert any(v.pools for v in variants["chat"])  # the pooled team is counted as one
    assert sum(len(v) for v in variants.values()) > len(teams)  # the sample has candidates, so this counts something
    # Every environment's stack reads the same resolution of its team.
    for stack in stacks:
        assert stack.deployment.resolved_team is teams[stack.deployment.team.team]


def test_summary_does_not_start_node():
    code = (
        "import sys\n"
        "from optigate.cli import main\n"
        "code = main(['summary', '--env', 'dev'])\n"
        "loaded = sorted(m for m in sys.modules if m.split('.')[0] in ('aws_cdk', 'jsii', 'constructs'))\n"
        "print('LOADED', loaded)\n"
        "sys.exit(code)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=PACKAGE.parent, timeout=900
    )
    assert result.returncode == 0, result.stderr
    assert "LOADED []" in result.stdout
    assert "optigate-dev-chat" in result.stdout
