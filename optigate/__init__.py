"""optigate: SageMaker-native infrastructure as code for tuned, gated LLM endpoints."""

__version__ = "0.1.0"
