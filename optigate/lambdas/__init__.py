"""Lambda handlers shipped with the package: thin shells around optigate.bench and optigate.gate.

Each folder's handler.py is staged at the root of its function's code (see optigate.constructs.assets).
"""

from pathlib import Path

HANDLERS = Path(__file__).resolve().parent


def handler_source(function: str) -> Path:
    """The handler module of a Lambda function folder (`benchmark`, `benchmark_merge`, `gate_decide`)."""
    return HANDLERS / function / "handler.py"
