"""The seams' fixtures: every Task of the example app's gates that invokes a Lambda function (the helpers, shared by
the test modules, are tests/fixtures/seams.py)."""

from __future__ import annotations

import pytest

from tests.fixtures.seams import InvokingTask, invoking_tasks


@pytest.fixture(scope="session")
def gate_tasks(example_app) -> list[InvokingTask]:
    """Every invoking Task of the example app's gates (every team with a candidate, every environment)."""
    assert example_app.error is None, example_app.error
    return invoking_tasks(example_app.templates)
