"""Lambda code assets without Docker: the handler folder plus the pure-Python optigate
modules it imports, staged into a folder named by the hash of its content."""

from __future__ import annotations

import hashlib
import shutil
import tempfile
from pathlib import Path

from aws_cdk import aws_lambda as lambda_

REPO = Path(__file__).resolve().parents[2]
# What the benchmark handlers import: the standard library, botocore/boto3 (in the Lambda
# runtime) and these modules, none of which needs a compiled dependency.
BENCH_MODULES = ("__init__.py", "client.py", "eventstream.py", "load.py", "metrics.py", "payloads.py", "runner.py")


def _files(handler: str, extra_modules: tuple[str, ...] = ()) -> dict[str, Path]:
    files = {f"{path.name}": path for path in sorted((REPO / "lambdas" / handler).glob("*.py"))}
    files["optigate/__init__.py"] = REPO / "optigate" / "__init__.py"
    for module in BENCH_MODULES:
        files[f"optigate/bench/{module}"] = REPO / "optigate" / "bench" / module
    for module in extra_modules:
        files[f"optigate/{module}"] = REPO / "optigate" / module
    return files


def bench_lambda_code(handler: str, extra_modules: tuple[str, ...] = ()) -> lambda_.Code:
    """`lambdas/<handler>/*.py` with optigate.bench (and `extra_modules`, paths under optigate/),
    as an asset whose folder name is the hash of its content."""
    files = _files(handler, extra_modules)
    digest = hashlib.sha256()
    for name, path in files.items():
        digest.update(name.encode() + b"\0" + path.read_bytes())
    staged = Path(tempfile.gettempdir(), "optigate-lambda", f"{handler}-{digest.hexdigest()[:16]}")
    if not staged.exists():
        staged.parent.mkdir(parents=True, exist_ok=True)
        partial = Path(tempfile.mkdtemp(prefix=f".{handler}-", dir=staged.parent))
        for name, path in files.items():
            (partial / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, partial / name)
        try:
            partial.rename(staged)
        except OSError:  # another process staged the same content first
            shutil.rmtree(partial, ignore_errors=True)
    return lambda_.Code.from_asset(str(staged))
