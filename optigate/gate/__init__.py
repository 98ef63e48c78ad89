"""The optimization gate's decision logic (pure: numpy and `optigate.bench`, no AWS):
`decide` judges a candidate against its baseline, `report` renders the verdict."""

from optigate.gate.decide import Check, GateInputs, GateVerdict, Thresholds, decide
from optigate.gate.report import render_html, render_json

__all__ = ["Check", "GateInputs", "GateVerdict", "Thresholds", "decide", "render_html", "render_json"]
