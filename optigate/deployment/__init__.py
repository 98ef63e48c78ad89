"""A team resolved once (config → plan → concrete settings), and what it deploys per environment.

Pure logic (no aws_cdk): the CLI's `summary` and `validate`, the stacks, the gate and rehearsal all
read the same resolution.
"""

from optigate.deployment.endpoint import EndpointPlan, resolve_endpoint
from optigate.deployment.environment import Deployment, deploy, effective_overrides
from optigate.deployment.gate import GatePlan, resolve_gate
from optigate.deployment.project import ResolvedProject, load_resolved_project, load_resolved_team
from optigate.deployment.serving import ResolvedServing, resolve_serving
from optigate.deployment.team import ResolvedTeam, resolve_team

__all__ = [
    "Deployment",
    "EndpointPlan",
    "GatePlan",
    "ResolvedProject",
    "ResolvedServing",
    "ResolvedTeam",
    "deploy",
    "effective_overrides",
    "load_resolved_project",
    "load_resolved_team",
    "resolve_endpoint",
    "resolve_gate",
    "resolve_serving",
    "resolve_team",
]
