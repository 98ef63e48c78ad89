"""`optigate advise`: the next optimization step for a team, in the order of issue 17 (pure logic, no AWS)."""

from optigate.advise.admission import Admission, admit
from optigate.advise.steps import Advice, CannotAdvise, Figure, Finding, advise

__all__ = ["Admission", "Advice", "CannotAdvise", "Figure", "Finding", "admit", "advise"]
