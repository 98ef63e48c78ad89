from optigate.stacks.team_inference_stack import Deployment, TeamInferenceStack, plan_deployment

__all__ = ["Deployment", "TeamInferenceStack", "plan_deployment"]
