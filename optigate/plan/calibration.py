"""Calibrate the planner's expected latency from a team's own gate runs (`optigate plan --calibrate`).

A gate report records, beside what the candidate measured, the plan it was predicted from: the
instance, accelerator, weight precision and engine, the roofline bound at batch 1, and the per-step
overheads the expected figure assumed (optigate.gate.decision.verdict). The measured p50 TPOT at
concurrency 1 then gives the bandwidth efficiency that instance really reached::

    efficiency = bound / (measured - step_overhead - allreduce)

and that efficiency replaces the literature estimate for the accelerator, format and engine
(optigate.plan.expected). A report that cannot say it (no concurrency-1 level, no plan, a speculating
candidate, a measurement at or below the overheads, an efficiency above 1) is refused with the reason,
never guessed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml

from optigate.config.models import Calibration, CalibrationFile
from optigate.plan.expected import calibration_key


class CalibrationError(ValueError):
    """A gate report that cannot calibrate the planner, and why."""


def from_report(report: Mapping[str, Any], source: str) -> Calibration:
    """The calibration a gate report's verdict supports (see the module docstring)."""
    comparison = report.get("prediction_vs_measurement") or {}
    decode = comparison.get("decode_tpot_ms_batch1") or {}
    plan = comparison.get("plan") or {}
    measured, bound = decode.get("measured"), decode.get("predicted")
    if not plan:
        raise CalibrationError(
            f"{source}: the report records no plan (instance, precision, engine): it predates expected figures; "
            "run the gate again"
        )
    if plan.get("speculative_decoding"):
        raise CalibrationError(
            f"{source}: the candidate speculates ({plan['speculative_decoding']}): its TPOT measures draft acceptance "
            "as much as bandwidth; calibrate from a gate run whose candidate serves no speculative decoding"
        )
    if measured is None:
        raise CalibrationError(f"{source}: no TPOT measured at concurrency 1; give the gate a level of 1")
    if not bound:
        raise CalibrationError(f"{source}: the plan had no roofline bound (no hardware figures for the instance)")
    _check_plan(plan, source)
    # No expected figure in the plan (null overheads): none assumed.
    overhead = float(plan.get("step_overhead_ms") or 0.0) + float(plan.get("allreduce_ms_per_step") or 0.0)
    streaming = float(measured) - overhead
    if streaming <= 0:
        raise CalibrationError(
            f"{source}: the measured TPOT {measured:.2f} ms is not above the assumed per-step overheads "
            f"({overhead:.2f} ms): nothing left to calibrate the bandwidth from"
        )
    efficiency = float(bound) / streaming
    if efficiency > 1:
        raise CalibrationError(
            f"{source}: {measured:.2f} ms per token is faster than the roofline allows ({bound:.2f} ms plus "
            f"{overhead:.2f} ms of overheads); check the report's instance and precision"
        )
    if round(efficiency, 4) <= 0:
        raise CalibrationError(
            f"{source}: {measured:.2f} ms per token against a {bound:.4g} ms bound is a bandwidth efficiency below "
            "0.0001: no instance runs that slowly; check the report's figures"
        )
    return Calibration(
        instance_type=str(plan["instance_type"]),
        accelerator=str(plan["accelerator"]),
        weight_precision=str(plan["weight_precision"]),
        engine=plan["engine"],
        bandwidth_efficiency=round(efficiency, 4),
        measured_tpot_ms=float(measured),
        bound_tpot_ms=float(bound),
        source=source,
    )


def _check_plan(plan: Mapping[str, Any], source: str) -> None:
    """The plan names what a calibration is kept under: an instance the catalog knows, its accelerator, a weight
    precision and an engine."""
    from optigate.plan.catalog import get_instance

    try:
        accelerator = get_instance(str(plan["instance_type"])).accelerator
    except KeyError as error:
        message = error.args[0] if error.args else str(error)
        raise CalibrationError(f"{source}: the report's plan: {message}") from None
    if plan.get("accelerator") != accelerator:
        raise CalibrationError(
            f"{source}: the report's plan puts accelerator {plan.get('accelerator')!r} in {plan['instance_type']}, "
            f"whose accelerator is {accelerator}; check the report's instance"
        )
    missing = [key for key in ("weight_precision", "engine") if not plan.get(key)]
    if missing:
        raise CalibrationError(
            f"{source}: the report's plan names no {' or '.join(missing)}: a calibration is kept by both; "
            "run the gate again"
        )


def merged(existing: Iterable[Calibration], new: Iterable[Calibration]) -> list[Calibration]:
    """`existing` with `new` appended; a new calibration replaces an older one of the same accelerator, format
    and engine (the newest measurement wins)."""
    fresh = list(new)
    replaced = {calibration_key(c) for c in fresh}
    return [c for c in existing if calibration_key(c) not in replaced] + fresh


def write(path: Path, calibrations: Iterable[Calibration]) -> None:
    document = CalibrationFile(calibrations=list(calibrations)).model_dump(mode="json")
    header = (
        "# What the teams' own gate runs measured: the planner's expected figures use these bandwidth\n"
        "# efficiencies instead of the literature's (written by `optigate plan --calibrate <gate-report.json>`).\n"
    )
    path.write_text(header + yaml.safe_dump(document, sort_keys=False))
