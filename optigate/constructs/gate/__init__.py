"""OptimizationGate: a Standard state machine that optimizes a model and proves it faster and
equally good before anything reaches users, failing closed.

optimize (when configured) → stage the candidate on a temporary endpoint → benchmark baseline and
candidate (BenchmarkFleet) → evaluate both (EvaluationJob) → with a shadow stage, mirror live
traffic to the candidate on the live endpoint and restore it → decide (Lambda over optigate.gate)
→ record the verdict as an Approved or Rejected model package → clean up → notify → Succeed or Fail.
Every task retries throttling and catches every error into the cleanup, so no temporary endpoint,
config or model outlives an execution, and what CloudFormation owns is never touched; a failure before the
first create (the checks of the capture, the training data and adapter archives) is notified without one.

What the gate measures and proves is its GatePlan (optigate.deployment.gate, no CDK): these modules
only turn it into states and resources.
- `resources`: what the stack created that the gate uses (GateResources, the live endpoint's config).
- `tasks`: the SDK task and the grant it carries, the way to the cleanup, and the one poll loop every wait uses.
- `grants`: the IAM statements the tasks carry, built once for the tasks that share them.
- `candidate`: the candidate's source (the baseline, or an optimization job and the staging function).
- `stages`: the temporary endpoints and their waits, the benchmark, the decision, the cleanup.
- `shadow`: mirror live traffic and restore the live endpoint.
- `cross_check`: SageMaker's managed benchmark beside the gate's own.
- `proof`: verdicts recorded as model packages; a candidate proven before is not proven again.
- `access`: the pipeline's invoker role, the approvals forwarded to it, the group policy.
- `construct`: the OptimizationGate construct that wires them.
Names come from optigate.naming.
"""

from optigate.constructs.gate.access import approval_event_pattern
from optigate.constructs.gate.construct import OptimizationGate
from optigate.constructs.gate.resources import GateResources, LiveConfig

__all__ = [
    "GateResources",
    "LiveConfig",
    "OptimizationGate",
    "approval_event_pattern",
]
