"""The harness lives in the package (optigate.testing.moto_gate) so that `optigate rehearse` can use it."""

from optigate.testing.moto_gate import *  # noqa: F401,F403
from optigate.testing.moto_gate import DEFAULT_IMAGE, GateHarness, Outcome, Scenario, check_definition, validate_request  # noqa: F401
