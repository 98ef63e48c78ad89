"""Checks of synthesized CloudFormation templates, offline: a rule pack used by the tests."""
