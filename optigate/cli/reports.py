"""Reading a gate report a user names on the command line (`advise --from-report`, `plan --calibrate`)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from optigate.cli.errors import UsageError


def load_gate_report(path: Path) -> Mapping[str, Any]:
    """The report's JSON object (the verdict the gate's decision wrote); a file that is not one is a usage error
    (exit 2) saying why."""
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise UsageError(f"{path}: no such file") from None
    except UnicodeDecodeError:
        raise UsageError(f"{path}: not a gate report (not UTF-8 text)") from None
    except json.JSONDecodeError as error:
        raise UsageError(f"{path}: not JSON ({error.msg} at line {error.lineno})") from None
    if not isinstance(data, dict):
        raise UsageError(f"{path}: not a gate report (a JSON object is expected)")
    return data
