"""Serving: LMI container images and environment rendering (no aws_cdk)."""
