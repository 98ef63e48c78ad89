"""Reading a gate report a user names on the command line (`advise --from-report`, `plan --calibrate`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from optigate.cli.errors import UsageError

WRITTEN_BY = "give the report.json the gate wrote (or one `optigate rehearse --report FILE` writes offline)"


def load_gate_report(path: Path) -> dict[str, Any]:
    """The report's JSON object (the verdict the gate's decision wrote), checked by optigate.gate.report_file; a file
    that is not one is a usage error (exit 2) saying where and what is wrong."""
    from optigate.gate.report_file import GateReportError, read_gate_report

    try:
        return read_gate_report(path)
    except FileNotFoundError:
        raise UsageError(f"{path}: no such file; give the gate's report.json") from None
    except GateReportError as error:  # what to do, as `bench compare` says it for a result file
        raise UsageError(f"{error}; {WRITTEN_BY}") from None
    except OSError as error:
        raise UsageError(f"{path}: cannot be read ({error.strerror or error}); give the gate's report.json") from None
