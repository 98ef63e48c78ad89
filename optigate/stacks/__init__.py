"""The CDK stacks (a team's inference stack, the promotion pipelines, the app that builds them, one team's check),
built from a resolved deployment with the constructs: they decide nothing, import only config, constructs, deployment,
naming, promote and serving, and are imported by app.py (cdk's entry point), the CLI and the rehearsal alone."""

from optigate.stacks.team_inference_stack import TeamInferenceStack

__all__ = ["TeamInferenceStack"]
