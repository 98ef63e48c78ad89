"""SageMaker instance type names as config files and command lines write them: one form, `ml.<family>.<size>`.

SageMaker's API (ProductionVariant.InstanceType) refuses `g5.2xlarge`; optigate refuses it everywhere too, config
and command line alike, with the name to write instead.
"""

from __future__ import annotations

import re

from optigate.config.reader import shown

INSTANCE_TYPE_PATTERN = r"^ml\.[a-z0-9-]+\.[a-z0-9]+$"
_INSTANCE_TYPE = re.compile(INSTANCE_TYPE_PATTERN)


def instance_type_problem(value: str) -> str | None:
    """None for a well-formed instance type name; else what is wrong, with the name meant when it is clear."""
    if _INSTANCE_TYPE.match(value):
        return None
    meant = value.strip().lower()
    if not meant.startswith("ml."):
        meant = f"ml.{meant}"
    if _INSTANCE_TYPE.match(meant):
        return (
            f"{shown(value)} is not a SageMaker instance type name; did you mean '{meant}'? "
            "(SageMaker's API takes only the ml. form)"
        )
    return f"{shown(value)} is not a SageMaker instance type name; write ml.<family>.<size>, e.g. ml.g6e.2xlarge"
