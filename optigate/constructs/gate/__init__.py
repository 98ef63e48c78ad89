"""OptimizationGate: a Standard state machine that optimizes a model and proves it faster and
equally good before anything reaches users, failing closed.

optimize (when configured) → stage the candidate on a temporary endpoint → benchmark baseline and
candidate (BenchmarkFleet) → evaluate both (EvaluationJob) → with a shadow stage, mirror live
traffic to the candidate on the live endpoint and restore it → decide (Lambda over optigate.gate)
→ record the verdict as an Approved or Rejected model package → clean up → notify → Succeed or Fail.
Every task retries throttling and catches every error into the cleanup, so no temporary endpoint,
config or model outlives an execution, and what CloudFormation owns is never touched.

- `spec`: what a gate proves (GateSpec, ShadowStage, the candidate's fingerprint); no CDK.
- `tasks`: the SDK task, the way to the cleanup, and the one poll loop the gate's waits share.
- `stages`: the candidate's source (optimization), the benchmark, the decision, the cleanup.
- `shadow`: mirror live traffic and restore the live endpoint.
- `proof`: verdicts recorded as model packages; a candidate proven before is not proven again.
- `access`: the state machine's grants, the pipeline's invoker role, the group policy.
- `construct`: the OptimizationGate construct that wires them.
Names come from optigate.naming.
"""

from optigate.constructs.gate.access import approval_event_pattern
from optigate.constructs.gate.construct import OptimizationGate
from optigate.constructs.gate.spec import GateSpec, ShadowStage, TrainedHead
from optigate.naming import gate_invoker_role_name, gate_state_machine_name

__all__ = [
    "GateSpec",
    "OptimizationGate",
    "ShadowStage",
    "TrainedHead",
    "approval_event_pattern",
    "gate_invoker_role_name",
    "gate_state_machine_name",
]
