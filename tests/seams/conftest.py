"""The seams' fixtures: every Task of the example app's gates that invokes a Lambda function, and the server metrics'
read as those gates build it (the helpers, shared by the test modules, are tests/fixtures/seams.py)."""

from __future__ import annotations

import pytest

from tests.conftest import CONFIG
from tests.fixtures.seams import InvokingTask, invoking_tasks, server_metrics_tasks


@pytest.fixture(scope="session")
def gate_tasks(example_app) -> list[InvokingTask]:
    """Every invoking Task of the example app's gates (every team with a candidate, every environment), and the server
    metrics' read as each of those gates builds it where the candidate's container publishes server series (which no
    example team's does: tests.fixtures.seams.server_metrics_tasks)."""
    assert example_app.error is None, example_app.error
    return invoking_tasks(example_app.templates) + server_metrics_tasks(CONFIG)
