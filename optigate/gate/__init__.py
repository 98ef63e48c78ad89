"""The optimization gate's decision logic (pure: numpy, pydantic, `optigate.bench` and
`optigate.stats`; no AWS): `decision` judges a candidate against its baseline, `report` renders
the verdict."""

from optigate.gate.decision import Check, GateInputs, GateVerdict, decide
from optigate.gate.report import render_html, render_json

__all__ = ["Check", "GateInputs", "GateVerdict", "decide", "render_html", "render_json"]
