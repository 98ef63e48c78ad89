"""Build inputs that ship inside the package, staged for CDK without Docker.

Lambda code (a handler folder of `optigate/lambdas` plus the pure-Python modules it imports) and
container build contexts (a Dockerfile folder of `optigate/containers` plus the optigate package)
are copied into folders named by the hash of their content. Everything is read from the installed
package, never from a checkout around it, so `pip install optigate` can synthesize.
"""

from __future__ import annotations

import hashlib
import shutil
import tempfile
from pathlib import Path

from aws_cdk import aws_lambda as lambda_

from optigate.lambdas import handler_source

PACKAGE = Path(__file__).resolve().parents[1]
CONTAINERS = PACKAGE / "containers"
#: What the benchmark handlers import besides the standard library and botocore/boto3 (in the Lambda runtime): the
#: benchmark client's core (optigate.bench.core), shipped whole, every module of the folder.
BENCH_CORE = PACKAGE / "bench" / "core"
# Never part of an image: the offline rehearsal (moto) and caches.
_NOT_SHIPPED = ("rehearse", "__pycache__")


def _lambda_files(handler: str, extra_modules: tuple[str, ...] = ()) -> dict[str, Path]:
    files = {"handler.py": handler_source(handler)}
    for path in [PACKAGE / "__init__.py", PACKAGE / "bench" / "__init__.py", *sorted(BENCH_CORE.rglob("*.py"))]:
        files[f"optigate/{path.relative_to(PACKAGE).as_posix()}"] = path
    for module in extra_modules:
        files[f"optigate/{module}"] = PACKAGE / module
    # The handlers' events (optigate.lambdas.events, standard library only), beside the handler.
    files["events.py"] = PACKAGE / "lambdas" / "events.py"
    return files


def _package_files() -> dict[str, Path]:
    """The optigate package as an image copies it: sources and package data, without the offline rehearsal."""
    files = {}
    for path in sorted(PACKAGE.rglob("*")):
        relative = path.relative_to(PACKAGE)
        if path.is_file() and not any(part in _NOT_SHIPPED for part in relative.parts) and path.suffix != ".pyc":
            files[f"optigate/{relative.as_posix()}"] = path
    return files


def stage(kind: str, files: dict[str, Path]) -> Path:
    """Copy `files` (destination -> source) into a folder named by the hash of their names and content."""
    digest = hashlib.sha256()
    for name, path in sorted(files.items()):
        digest.update(name.encode() + b"\0" + path.read_bytes())
    staged = Path(tempfile.gettempdir(), "optigate-assets", f"{kind}-{digest.hexdigest()[:16]}")
    if not staged.exists():
        staged.parent.mkdir(parents=True, exist_ok=True)
        partial = Path(tempfile.mkdtemp(prefix=f".{kind}-", dir=staged.parent))
        for name, path in files.items():
            (partial / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, partial / name)
        try:
            partial.rename(staged)
        except OSError:  # another process staged the same content first
            shutil.rmtree(partial, ignore_errors=True)
    return staged


def bench_lambda_code(handler: str, extra_modules: tuple[str, ...] = ()) -> lambda_.Code:
    """`optigate/lambdas/<handler>/handler.py` and its events (events.py) at the root, with optigate.bench.core
    (and `extra_modules`, paths under optigate/), as an asset whose folder name is the hash of its content."""
    return lambda_.Code.from_asset(str(stage(handler, _lambda_files(handler, extra_modules))))


def image_context(image: str) -> str:
    """A Docker build context for `optigate/containers/<image>`: its Dockerfile and requirements.txt at
    the root and the optigate package beside them (build with file="Dockerfile")."""
    folder = CONTAINERS / image
    files = {path.name: path for path in sorted(folder.iterdir()) if path.is_file()}
    files.update(_package_files())
    return str(stage(f"image-{image}", files))


#: The SDK and everything it imports, bundled whole: the Lambda guide warns that a package mixing its own SDK with
#: the runtime's dependencies (urllib3, say) breaks when Lambda updates the runtime's copies.
SDK_PACKAGES = ("boto3", "botocore", "s3transfer", "jmespath", "dateutil", "urllib3", "six")
#: What botocore reads besides a service's own model (its endpoints, partitions, retry and default configuration).
_BOTOCORE_DATA = ("_retry.json", "endpoints.json", "partitions.json", "sdk-default-configuration.json")


def bundled_sdk(operations: dict[str, tuple[str, ...]]) -> dict[str, Path]:
    """boto3, botocore and their dependencies as installed with optigate, to stage at a Lambda function's root
    (destination -> source), botocore's data trimmed to the services of `operations`. The Python runtime "searches
    the $LAMBDA_TASK_ROOT (/var/task) directory first. If you include a version of a runtime-included library
    ..., your version will take precedence" (https://docs.aws.amazon.com/lambda/latest/dg/python-image.html), so the
    handler imports these, not the runtime's possibly older SDK. Raises if the installed botocore's model lacks an
    operation of `operations` ({service: (Operation, ...)}): no asset ships without it."""
    import importlib

    import botocore
    import botocore.session

    session = botocore.session.get_session()
    for service, names in operations.items():
        missing = sorted(set(names) - set(session.get_service_model(service).operation_names))
        if missing:
            raise ValueError(f"botocore {botocore.__version__} has no {service} {missing}: upgrade boto3")
    files: dict[str, Path] = {}
    for name in SDK_PACKAGES:
        module = Path(str(importlib.import_module(name).__file__)).resolve()
        if module.name != "__init__.py":  # a single-file module (six)
            files[module.name] = module
            continue
        root = module.parent
        for path in sorted(root.rglob("*")):
            relative = path.relative_to(root)
            parts = relative.parts
            if not path.is_file() or "__pycache__" in parts or path.suffix == ".pyc":
                continue
            trimmed = name == "botocore" and parts[0] == "data" and len(parts) > 1
            if trimmed and parts[1] not in _BOTOCORE_DATA and parts[1] not in operations:
                continue
            files[f"{name}/{relative.as_posix()}"] = path
    return files
