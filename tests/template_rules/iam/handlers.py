"""The AWS calls a Lambda function's handler makes, read from its source in the assembly's assets."""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any, Final

import botocore.session
from botocore import xform_name

from optigate.rehearse.template import render
from tests.template_rules.assembly import Stack, token_values

#: Requests a handler's imports sign by hand instead of through a boto3 client (module -> calls):
#: optigate.bench.core.client streams InvokeEndpointWithResponseStream over raw SigV4. Its API reference
#: says the caller also needs sagemaker:InvokeEndpoint.
SIGNED_CALLS: Final = {
    "optigate.bench.core.client": (
        ("sagemaker", "InvokeEndpointWithResponseStream"),
        ("sagemaker", "InvokeEndpoint"),
    )
}


def handler_source(stack: Stack, function: dict[str, Any]) -> Path | None:
    """The handler file a function runs, from the assembly's assets: `<asset>/handler.py` for a zip,
    what the image's Dockerfile copies to `${LAMBDA_TASK_ROOT}/<module>.py` for an image."""
    properties = function.get("Properties", {})
    code = properties.get("Code", {})
    module = str(properties.get("Handler", "handler.handler")).rsplit(".", 1)[0]
    if "S3Key" in code:
        folder = stack.assets.get(str(code["S3Key"]).removesuffix(".zip"))
        return folder / f"{module.replace('.', '/')}.py" if folder else None
    if "ImageUri" in code:
        image = str(render(code["ImageUri"], token_values(stack)))
        folder = stack.assets.get(image.rsplit(":", 1)[-1])
        if folder is None or not (folder / "Dockerfile").exists():
            return None
        dockerfile = (folder / "Dockerfile").read_text()
        command = re.search(r'^CMD\s*\[\s*"([\w.]+)"', dockerfile, re.M)
        module = command.group(1).rsplit(".", 1)[0] if command else module
        copy = re.search(rf"^COPY\s+(\S+)\s+\$\{{LAMBDA_TASK_ROOT\}}/{re.escape(module)}\.py\s*$", dockerfile, re.M)
        return folder / copy.group(1) if copy else None
    return None


def _imports(tree: ast.AST) -> set[str]:
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            out.add(node.module)
        elif isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
    return out


def handler_calls(source: Path, package_root: Path | None = None) -> set[tuple[str, str]]:
    """(botocore service, operation) for each AWS call a handler file makes: a method of a client its
    `boto3.client("<service>")` calls create, and the calls of modules it imports (transitively, within
    the bundled `optigate` package) that sign requests by hand (:data:`SIGNED_CALLS`)."""
    tree = ast.parse(source.read_text())
    services = {
        str(node.args[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "client"
        and node.args
        and isinstance(node.args[0], ast.Constant)
    }
    session = botocore.session.get_session()
    methods = {
        node.func.attr for node in ast.walk(tree) if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
    }
    calls = set()
    for service in services:
        operations = {xform_name(op): op for op in session.get_service_model(service).operation_names}
        calls |= {(service, operations[m]) for m in methods if m in operations}
    root = package_root or source.parent
    seen: set[str] = set()
    pending = [m for m in _imports(tree) if m.startswith("optigate")]
    while pending:
        module = pending.pop()
        if module in seen:
            continue
        seen.add(module)
        calls |= set(SIGNED_CALLS.get(module, ()))
        path = root / f"{module.replace('.', '/')}.py"
        if path.exists():
            pending += [m for m in _imports(ast.parse(path.read_text())) if m.startswith("optigate")]
    return calls
