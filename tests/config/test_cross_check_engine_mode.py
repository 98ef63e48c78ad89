"""SageMaker's managed benchmark and optigate's own send an async-mode container the same API: chat completions."""

from __future__ import annotations

import json

from optigate.bench.core.payloads import DEFAULT_SCHEMA, SCHEMAS
from optigate.deployment.cross_check import CrossCheck, workload_levels
from optigate.serving import images
from optigate.serving.engine_mode import engine_mode


def test_the_cross_checks_chat_workload_is_what_each_pinned_lmi_mode_is_measured_with():
    (level,) = workload_levels(CrossCheck("a/b", {}), "demo", "dev", [(4, 32)], 1024, 256)
    workload = json.loads(level.workload)
    assert workload["tooling"] == {"api_standard": "openai"} and workload["parameters"]["streaming"] is True
    for version in images.known_versions("lmi"):
        mode = engine_mode("lmi", version).name
        assert "messages" in SCHEMAS[mode]  # the container accepts the managed benchmark's chat requests
    newest = engine_mode("lmi", images.newest_version("lmi")).name
    assert DEFAULT_SCHEMA[newest] == "messages"  # and optigate's own benchmark sends it the same API
