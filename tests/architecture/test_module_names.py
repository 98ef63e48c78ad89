"""Names that say what they are: no two modules of optigate share a file name (two `compare.py` in two meanings
make every import and every traceback ambiguous), except where one name means one thing in each place."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "optigate"

#: File names several modules may share, each with why the one name is right in every place.
SHARED_NAMES = {
    "__init__.py": "Python's: a package's own module",
    "__main__.py": "Python's: what `python -m <package>` runs",
    "handler.py": "each Lambda's entry point (optigate/lambdas/<function>/handler.py), named as the runtime calls it",
    "cross_check.py": "SageMaker's managed benchmark, in each layer that handles it (plan, resources, reading)",
    "server_metrics.py": "the server's own metrics, in each layer that handles them (table and reading, the "
    "gate's state, the verdict)",
}


def name_collisions(package: Path = PACKAGE) -> dict[str, list[str]]:
    """Each file name more than one module of `package` has, with those modules (paths from the package's parent)."""
    by_name: dict[str, list[str]] = defaultdict(list)
    for path in sorted(package.rglob("*.py")):
        if path.name in SHARED_NAMES:
            continue
        by_name[path.name].append(path.relative_to(package.parent).as_posix())
    return {name: paths for name, paths in by_name.items() if len(paths) > 1}


def test_no_two_modules_share_a_file_name() -> None:
    collisions = name_collisions()
    assert not collisions, f"rename these to say what each is: {collisions}"


def test_the_check_finds_a_collision(tmp_path: Path) -> None:
    package = tmp_path / "optigate"
    for folder in ("bench", "evaluate", "lambdas/a", "lambdas/b", "config/rules"):
        (package / folder).mkdir(parents=True)
        (package / folder / "__init__.py").write_text("")
    for module in ("bench/compare.py", "evaluate/compare.py", "lambdas/a/handler.py", "lambdas/b/handler.py"):
        (package / module).write_text("")
    (package / "config" / "rules" / "team.py").write_text("")
    (package / "team.py").write_text("")
    assert name_collisions(package) == {
        "compare.py": ["optigate/bench/compare.py", "optigate/evaluate/compare.py"],
        "team.py": ["optigate/config/rules/team.py", "optigate/team.py"],
    }
    (package / "evaluate" / "compare.py").rename(package / "evaluate" / "quality_verdict.py")
    (package / "config" / "rules" / "team.py").rename(package / "config" / "rules" / "team_rules.py")
    assert name_collisions(package) == {}
