"""`optigate advise`: the next optimization step for a team, in the order of issue 17 (pure logic, no AWS)."""

from optigate.advise.admission import Admission, admit
from optigate.advise.findings import Advice, Figure, Finding
from optigate.advise.steps import CannotAdvise, advise

__all__ = ["Admission", "Advice", "CannotAdvise", "Figure", "Finding", "admit", "advise"]
