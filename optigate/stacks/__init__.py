from optigate.stacks.team_inference_stack import TeamInferenceStack

__all__ = ["TeamInferenceStack"]
